// Steps of a program with neither ranges nor Python (a plain C++ CUDA loop): the loop's iterations, found from
// the launching thread's blocking CUDA calls. Such a loop reads its result back or synchronizes once (or a fixed
// number of times) per iteration, so the sequence of blocking calls repeats with a short period; every p-th one
// ends an iteration (docs/analysis.md, "Steps").
//
//   std::vector<CallView> calls = ...;  // one thread's CUDA calls, by start
//   SyncIterations it = sync_iterations(calls);
//   if (!it.spans.empty()) ... it.boundary_name ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferscope::analyze::detail {

struct CallView {
  int64_t start = 0, end = 0;
  uint32_t name = 0;  ///< string id: calls of the same API share it
  uint8_t kind = 0;   ///< ApiKind
};

struct SyncIterations {
  struct Span { int64_t start, end; };
  std::vector<Span> spans;     ///< the iterations in time order; empty: no repeating pattern
  uint32_t boundary_name = 0;  ///< the blocking call that ends each iteration
  size_t period = 0;           ///< blocking calls per iteration
};

/// The iterations of the loop on one thread, or none. The rules, each for a reason:
/// - period p (1..8 blocking calls per iteration): the smallest for which at least 90 % of the blocking calls
///   have the same API as the one p later — a loop repeats its calls; a tenth is left for an occasional
///   extra read-back (logging every N iterations);
/// - at least 4 iterations: one may be the warm-up and the statistics need 3;
/// - the phase (which of the p calls ends an iteration): the one followed by the longest host time before the
///   next CUDA call on average — the loop's own work (reading input, writing output) sits between iterations;
/// - at least 90 % of the iterations launch GPU work: a loop of copies or polls alone is not the inference step.
/// The first iteration runs from the thread's first call to the first boundary; each other from one boundary's
/// end to the next.
SyncIterations sync_iterations(const std::vector<CallView>& calls);

}  // namespace inferscope::analyze::detail
