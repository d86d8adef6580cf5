// Does the host run ahead of the GPU? A step range measures the host: a loop that queues its GPU work without
// waiting for it (non_blocking copies, no .item()) ends each range long before the GPU has done that step's
// work, and the range durations then understate what a step costs (a 2.6 ms step measured as 0.12 ms). The
// GPU's pace tells the cost instead: when each step's work completed (docs/analysis.md, "Steps").
//
//   GpuPacing p = gpu_pacing(steady_windows, step_thread_launches, gpu_ends);
//   if (p.host_ahead) ... p.paced_ns (per step) ... p.periods_ns (one per step) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferscope::analyze::detail {

struct StepWindow { int64_t start, end; };  ///< a steady step, in time order, not overlapping
struct LaunchAt { int64_t at; uint32_t corr; };  ///< a call of the step thread that may have queued GPU work
struct GpuEnd { uint32_t corr; int64_t end; };   ///< a piece of GPU work and when it ended

struct GpuPacing {
  bool host_ahead = false;          ///< the GPU finished the steps' work over a step later than the host's ranges
  double paced_ns = 0;              ///< the steps' span to the completion of the last one's work, per step
  double median_lag_ns = 0;         ///< how long after its range ended a step's work completed (median)
  std::vector<double> periods_ns;   ///< per step: its completion minus the previous step's (the first: minus its start)
};

/// A step completes when its range has ended and the GPU work its calls queued has ended. The host runs ahead
/// when, in the median step, that completion comes more than one median step length after the range ended
/// (the host was then already a whole step further); then the steps' cost is their pace, not their ranges.
GpuPacing gpu_pacing(const std::vector<StepWindow>& steps, std::vector<LaunchAt> launches, const std::vector<GpuEnd>& gpu);

}  // namespace inferscope::analyze::detail
