// The GPU part of what the live server sends (docs/live.md, "GPU busy share and bottleneck"): pure functions of
// the snapshot, used by render.cpp. Each says "no GPU activity" by leaving its part out, never by zeros.
#pragma once

#include "live/tap.hpp"

#include <string>
#include <vector>

namespace inferscope::live {

/// The window's settled steps whose records were all there (newest kWindowSteps settled steps, complete only).
std::vector<SettledStep> gpu_window(const Snapshot& s);

/// /data's "gpu": null when no GPU activity was recorded; else the busy share (p50 and ratio of sums over the
/// window), the time per category, the current bottleneck estimate and the settling counts.
std::string gpu_json(const Snapshot& s);

/// The timeline's GPU activities: [{"device","stream","kind","start_ms","dur_ms"}, ...].
std::string gpu_timeline_json(const Snapshot& s);

/// The GPU metrics (none when no GPU activity was recorded): inferscope_gpu_records_total,
/// inferscope_gpu_busy_seconds_total, inferscope_gpu_busy_ratio, inferscope_step_time_seconds_total{category}.
std::string gpu_metrics(const Snapshot& s);

}  // namespace inferscope::live
