// One cause for every instant the GPU is idle inside a step, from what the step thread was doing at that
// instant (docs/analysis.md, "One cause per idle instant"):
//
//   in a synchronizing call, or the idle time right after it, up to the time the host waited in it (had it
//     not waited, the host would have been that much further while the GPU still ran)  -> sync
//   in an allocation or free call, or after a cudaFree as after a sync (it synchronizes the device) -> memory
//   in a launch or any other CUDA call, or in a dispatch gap shorter than dispatch_gap_ns between two calls
//                                                                             -> launch
//   anything else: host code outside CUDA calls                              -> host (split later into running,
//                                                                                contention and waiting)
//
//   IdleCauses c = attribute_idle_gap(calls, cursor, gap_start, gap_end, 100'000);
#pragma once

#include "analyze/model.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferscope::analyze::detail {

struct IdleCauses {
  double launch = 0, sync = 0, memory = 0, host = 0;  ///< ns
  Span longest_host;  ///< the longest host piece (start/end; step left to the caller)
  double total() const { return launch + sync + memory + host; }
};

/// Splits the GPU-idle interval [ga, gb) by the step thread's CUDA calls. `calls` is that thread's calls
/// sorted by start and not overlapping (outermost kept); `first` is any index at or before the first call
/// that ends after ga. A host gap is "dispatch" when the host time between the calls around it is shorter
/// than `dispatch_gap_ns` (Python and framework overhead between launches).
IdleCauses attribute_idle_gap(const std::vector<const ApiOp*>& calls, size_t first, int64_t ga, int64_t gb,
                              int64_t dispatch_gap_ns);

}  // namespace inferscope::analyze::detail
