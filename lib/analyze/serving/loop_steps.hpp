// The step of an asyncio service: the event loop's callback that runs the batch. A batcher coroutine collects
// requests, awaits, then runs the model for the batch; the repeated call found as the step (the model's forward, a
// run_batch helper) is one part of that callback. The step the user means is the whole callback, from the
// batcher's resumption to its next await: building the batch, the forward, reading the result back and setting
// the requests' futures, all of which hold the loop and delay every request. Not the iteration from one call to the
// next: between batches the batcher awaits requests, and that wait is the requests', not the step's.
//
//   std::vector<LoopStep> s = enclosing_coroutine_runs(instances, runs);   // empty: the instances stay the step
#pragma once

#include "analyze/serving/coroutines.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace inferscope::analyze::detail {

/// A step instance mapped to the coroutine run that holds it.
struct LoopStep {
  int64_t start = 0, end = 0;
  uint32_t code = 0;  ///< the run's coroutine (0: the instance stayed as it was, not inside a run)
};

/// Each instance (by start) replaced by the innermost coroutine run (by start, properly nested) that holds it.
/// Empty unless at least half the instances are inside runs and no run holds two of them (then the runs are not
/// one batch each, and the instances stay the steps).
std::vector<LoopStep> enclosing_coroutine_runs(std::span<const std::pair<int64_t, int64_t>> instances,
                                               std::span<const CoroutineRun> runs);

}  // namespace inferscope::analyze::detail
