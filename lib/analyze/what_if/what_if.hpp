// The bridge between a trace and the what-if replay (replay.hpp): builds one StepGraph per sampled steady
// step from the analyzer's compact arrays, and estimates a change's saving as the median over those steps.
//
//   auto graphs = build_step_graphs(input, sample);   // after the sweep
//   SavingEstimate s = estimate_saving(graphs, change);
//   if (s.estimated) suggestion.impact_ms = s.ms;
#pragma once

#include "analyze/model.hpp"
#include "analyze/what_if/replay.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace inferscope::analyze::detail {

/// What building a step's graph reads: the step thread's calls (sorted by start, outermost only), every GPU
/// activity (sorted by start) and the launch lookup by correlation id.
struct GraphSource {
  const std::vector<const ApiOp*>* calls = nullptr;
  const GpuOp* gpu = nullptr;
  size_t gpu_count = 0;
  int64_t gpu_max_dur = 0;
  std::function<const ApiOp*(uint32_t corr)> launch_of;
};

/// The graph of the step [start, end): its calls in order with the GPU work each queued.
replay::StepGraph build_step_graph(const GraphSource& src, int64_t start, int64_t end);

/// Up to `max_steps` of `which` (indexes into `steps`), evenly spread, as graphs.
std::vector<replay::StepGraph> build_step_graphs(const GraphSource& src, const std::vector<StepMetrics>& steps,
                                                 const std::vector<size_t>& which, size_t max_steps);

struct SavingEstimate {
  double ms = 0;
  bool estimated = false;  ///< false: no graph to replay (no CUDA calls on the step thread)
};

/// Median saving of `c` per step over the graphs, in ms of the recorded steps; with `mean`, their mean (steps that
/// are not alike: a slow mode's saving is what a run of them saves per step, and the median hides it).
SavingEstimate estimate_saving(const std::vector<replay::StepGraph>& graphs, const replay::Change& c, bool mean = false);

/// Of the host gaps at least `min_gap_ns` long (the steps' host work outside CUDA calls, their tails included),
/// the share that sits between two launches a CUDA graph would capture (replay::gap_inside_graph): 0 when there are none.
double share_of_host_work_between_launches(const std::vector<replay::StepGraph>& graphs, int64_t min_gap_ns);


}  // namespace inferscope::analyze::detail
