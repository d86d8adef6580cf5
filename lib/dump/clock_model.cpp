#include "dump/clock_model.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::dump {

ClockModel::ClockModel(const std::vector<CalibrationPoint>& pts) {
  points_ = pts.size();
  if (pts.empty()) return;
  auto first = std::min_element(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.ticks < b.ticks; });
  ticks0_ = first->ticks;
  mono0_ = static_cast<int64_t>(first->monotonic_ns);
  realtime_offset_ = static_cast<int64_t>(first->realtime_ns) - static_cast<int64_t>(first->monotonic_ns);
  for (const auto& p : pts) max_uncertainty_ns_ = std::max<double>(max_uncertainty_ns_, p.uncertainty_ns);
  if (pts.size() < 2) return;

  // Least squares through the points, relative to the first one so doubles keep their precision.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  uint64_t tmax = ticks0_;
  for (const auto& p : pts) {
    double x = static_cast<double>(static_cast<int64_t>(p.ticks - ticks0_));
    double y = static_cast<double>(static_cast<int64_t>(p.monotonic_ns) - mono0_);
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
  if (!(slope > 0) || !std::isfinite(slope)) return;
  ns_per_tick_ = slope;
  mono0_ += static_cast<int64_t>(std::llround(icpt));
  for (const auto& p : pts) {
    double pred = static_cast<double>(to_ns(p.ticks));
    max_residual_ns_ = std::max(max_residual_ns_, std::fabs(pred - static_cast<double>(p.monotonic_ns)));
  }
  span_s_ = static_cast<double>(tmax - ticks0_) * ns_per_tick_ / 1e9;
}

}  // namespace inferscope::dump
