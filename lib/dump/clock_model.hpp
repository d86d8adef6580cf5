// Converts session ticks to nanoseconds with the dump's calibration pairs: a least
// squares line through (ticks, CLOCK_MONOTONIC ns), and how well the points sit on it.
#pragma once

#include "dump/format.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace inferscope::dump {

class ClockModel {
 public:
  ClockModel() = default;
  /// Fits the calibration points; with none, ticks are taken as nanoseconds (1:1).
  explicit ClockModel(const std::vector<CalibrationPoint>& points);

  /// CLOCK_MONOTONIC nanoseconds for a tick count.
  int64_t to_ns(uint64_t ticks) const {
    const double ns = static_cast<double>(static_cast<int64_t>(ticks - ticks0_)) * ns_per_tick_;
    // Clamped (to +-73 years) so that a corrupt tick count gives a far-off time, not undefined behaviour.
    return mono0_ + static_cast<int64_t>(std::clamp(ns, -kLimitNs, kLimitNs));
  }
  /// A duration in ticks, in nanoseconds.
  double duration_ns(uint64_t ticks) const { return static_cast<double>(ticks) * ns_per_tick_; }
  /// CLOCK_REALTIME nanoseconds for a tick count (wall clock, for display).
  int64_t to_realtime_ns(uint64_t ticks) const { return to_ns(ticks) + realtime_offset_; }

  double ns_per_tick() const { return ns_per_tick_; }
  double ticks_per_second() const { return ns_per_tick_ > 0 ? 1e9 / ns_per_tick_ : 0; }
  size_t points() const { return points_; }
  /// Largest distance of a calibration point from the fitted line, in ns.
  double max_residual_ns() const { return max_residual_ns_; }
  /// Largest reading uncertainty among the points, in ns.
  double max_uncertainty_ns() const { return max_uncertainty_ns_; }
  /// Seconds between the first and the last point.
  double span_s() const { return span_s_; }

 private:
  // Bound on |times| and offsets: the sums in to_ns / to_realtime_ns cannot overflow int64 whatever the dump
  // holds (a real CLOCK_REALTIME reading is ~1.7e18 ns, below it).
  static constexpr double kLimitNs = 2305843009213693952.0;  // 2^61
  uint64_t ticks0_ = 0;
  int64_t mono0_ = 0;
  int64_t realtime_offset_ = 0;
  double ns_per_tick_ = 1.0;
  size_t points_ = 0;
  double max_residual_ns_ = 0;
  double max_uncertainty_ns_ = 0;
  double span_s_ = 0;
};

}  // namespace inferscope::dump
