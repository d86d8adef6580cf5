#include "dump/clock_model.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::dump {

ClockModel::ClockModel(const std::vector<CalibrationPoint>& pts) {
  points_ = pts.size();
  if (pts.empty()) return;
  auto first = std::min_element(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.ticks < b.ticks; });
  // Corrupt calibration must not overflow anything below: readings are capped at 2^61 ns (see kLimitNs);
  // real ones (CLOCK_REALTIME ~1.7e18 ns) stay exact.
  constexpr uint64_t kCap = uint64_t(1) << 61;
  const int64_t mono = static_cast<int64_t>(std::min(first->monotonic_ns, kCap));
  const int64_t real = static_cast<int64_t>(std::min(first->realtime_ns, kCap));
  ticks0_ = first->ticks;
  mono0_ = mono;
  realtime_offset_ = real - mono;
  for (const auto& p : pts) max_uncertainty_ns_ = std::max<double>(max_uncertainty_ns_, p.uncertainty_ns);
  if (pts.size() < 2) return;

  // Least squares through the points, relative to the first one so doubles keep their precision.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  uint64_t tmax = ticks0_;
  for (const auto& p : pts) {
    double x = static_cast<double>(static_cast<int64_t>(p.ticks - ticks0_));
    double y = static_cast<double>(static_cast<int64_t>(p.monotonic_ns - static_cast<uint64_t>(mono0_)));
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    tmax = std::max(tmax, p.ticks);
  }
  double den = n * sxx - sx * sx;
  if (den <= 0) return;
  double slope = (n * sxy - sx * sy) / den;
  double icpt = (sy - slope * sx) / n;
  if (!(slope > 0) || !std::isfinite(slope) || !std::isfinite(icpt) || std::fabs(icpt) > kLimitNs / 2) return;
  ns_per_tick_ = slope;
  mono0_ += static_cast<int64_t>(std::llround(icpt));
  for (const auto& p : pts) {
    double pred = static_cast<double>(to_ns(p.ticks));
    max_residual_ns_ = std::max(max_residual_ns_, std::fabs(pred - static_cast<double>(p.monotonic_ns)));
  }
  span_s_ = static_cast<double>(tmax - ticks0_) * ns_per_tick_ / 1e9;
}

}  // namespace inferscope::dump
