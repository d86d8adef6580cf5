// Number and time formatting shared by the live renderers (render.cpp, render_gpu.cpp).
#pragma once

#include "live/tap.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace inferscope::live {

/// Ticks as milliseconds.
inline double ms(const Snapshot& s, uint64_t ticks) { return double(ticks) / s.ticks_per_ns * 1e-6; }
/// A session clock reading as milliseconds since the session began.
inline double at_ms(const Snapshot& s, uint64_t ticks) {
  return ticks > s.origin_ticks ? ms(s, ticks - s.origin_ticks) : 0.0;
}
/// Ticks as seconds.
inline double seconds(const Snapshot& s, uint64_t ticks) { return double(ticks) / s.ticks_per_ns * 1e-9; }

/// A number for JSON and the Prometheus text format (6 significant digits; 0 for NaN or infinity).
inline std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

}  // namespace inferscope::live
