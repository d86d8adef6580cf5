#include "runtime/sampling/slow_steps.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::runtime::sampling {

SlowStepDetector::SlowStepDetector(const SlowStepOptions& options) : o_(options) {
  o_.history = std::max<size_t>(o_.history, 1);
  o_.refresh = std::max<size_t>(o_.refresh, 1);
  ring_.assign(o_.history, 0.0);
}

size_t SlowStepDetector::min_history() const {
  const double tail = std::max(1e-9, 1.0 - o_.percentile / 100.0);
  const auto needed = static_cast<size_t>(std::ceil(2.0 / tail));
  return std::clamp<size_t>(needed, 16, o_.history);
}

double SlowStepDetector::bound() const {
  double b = o_.threshold_ns > 0 ? o_.threshold_ns : 0;
  if (o_.factor > 0 && running_ > 0) {
    const double by_factor = o_.factor * running_;
    b = b > 0 ? std::min(b, by_factor) : by_factor;
  }
  return b;
}

// Nearest-rank percentile of the history.
void SlowStepDetector::recompute() {
  scratch_.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(filled_));
  const auto rank = static_cast<size_t>(std::ceil(o_.percentile / 100.0 * double(filled_)));
  const size_t k = std::min(filled_ - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(k), scratch_.end());
  running_ = scratch_[k];
}

bool SlowStepDetector::observe(double dur_ns) {
  last_bound_ = bound();
  const bool slow = last_bound_ > 0 && dur_ns > last_bound_;
  ring_[next_] = dur_ns;
  next_ = (next_ + 1) % ring_.size();
  filled_ = std::min(filled_ + 1, ring_.size());
  if (o_.factor > 0 && filled_ >= min_history() && (running_ == 0 || ++since_refresh_ >= o_.refresh)) {
    since_refresh_ = 0;
    recompute();
  }
  return slow;
}

}  // namespace inferscope::runtime::sampling
