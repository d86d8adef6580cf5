// Number and time formatting shared by the live renderers (render.cpp, render_gpu.cpp, render_serving.cpp), and
// the histograms they write.
#pragma once

#include "live/tap.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
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

/// A Prometheus histogram in the text format: HELP, TYPE, the cumulative buckets over `bounds` (upper bounds;
/// `counts` non-cumulative, one per bound), +Inf (adding `over`), _sum and _count.
inline std::string histogram_text(const std::string& name, const std::string& help, std::span<const double> bounds,
                                  std::span<const uint64_t> counts, uint64_t over, double sum, uint64_t count) {
  std::string o = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size() && i < counts.size(); ++i) {
    cumulative += counts[i];
    o += name + "_bucket{le=\"" + num(bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  o += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative + over) + "\n";
  o += name + "_sum " + num(sum) + "\n";
  return o + name + "_count " + std::to_string(count) + "\n";
}

}  // namespace inferscope::live
