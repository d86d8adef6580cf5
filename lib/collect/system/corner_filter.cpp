#include "collect/system/corner_filter.hpp"

#include <algorithm>

namespace inferscope::sys {

// The door opens at the pending sample: the slopes from the anchor that pass within the tolerance of it.
void CornerFilter::start_door(const CounterPoint& p) {
  const double dt = double(p.ts - anchor_.ts);
  lo_ = (double(p.v - anchor_.v) - tol_) / dt;
  hi_ = (double(p.v - anchor_.v) + tol_) / dt;
  pending_ = p;
  has_pending_ = true;
}

std::optional<CounterPoint> CornerFilter::observe(uint64_t ts, int64_t v) {
  const CounterPoint p{ts, v};
  if (!has_anchor_ || ts <= anchor_.ts || v < anchor_.v || (has_pending_ && (ts <= pending_.ts || v < pending_.v))) {
    // First sample, or one that does not continue the series: write it and start again from it.
    anchor_ = p;
    has_anchor_ = true;
    has_pending_ = false;
    return p;
  }
  if (!has_pending_) {
    start_door(p);
    return std::nullopt;
  }
  const double dt = double(ts - anchor_.ts);
  const double lo = std::max(lo_, (double(v - anchor_.v) - tol_) / dt);
  const double hi = std::min(hi_, (double(v - anchor_.v) + tol_) / dt);
  if (lo <= hi) {  // one line still fits every sample since the anchor
    lo_ = lo;
    hi_ = hi;
    pending_ = p;
    return std::nullopt;
  }
  // The corner: the last sample that still fitted is written, and the door reopens from it.
  const CounterPoint corner = pending_;
  anchor_ = corner;
  start_door(p);
  return corner;
}

std::optional<CounterPoint> CornerFilter::flush() {
  if (!has_pending_) return std::nullopt;
  anchor_ = pending_;
  has_pending_ = false;
  return anchor_;
}

}  // namespace inferscope::sys
