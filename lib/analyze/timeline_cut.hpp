// The representative timeline's cut (docs/analysis.md section 8): when a step has more spans than the reports
// draw (AnalyzeOptions::max_timeline_spans), which ones stay. A pure function of the lanes, unit-tested on its own
// (tests/analyze/test_timeline_cut.cpp).
#pragma once

#include "analyze/analysis.hpp"

#include <cstddef>
#include <map>
#include <string>

namespace inferscope::analyze::detail {

/// What the cut kept, for the warning that says so.
struct TimelineCut {
  size_t before = 0;  ///< spans in the lanes before the cut
  size_t kept = 0;    ///< spans left (at most the budget)
};

/// Keeps at most `max_spans` spans of `lanes` (by lane name), in tiers, each longest first, so that a cut timeline
/// still shows what it is drawn for: the GPU's work and the calls that launched it, not the host's deepest frames.
///   0. the step's structure: ranges, and the per-token calls of a generation loop (`token_function`, "" for
///      none), whose starts the reports mark as token boundaries; at most a quarter of the budget;
///   1. GPU work together with the CUDA call that launched it (one correlation id, drawn as a pair);
///   2. other CUDA calls (synchronizations among them) and GPU work whose call is not in the step;
///   3. everything else (Python frames); last, tier 0's spans past its quarter.
/// A launch-bound LLM loop's step of 7,937 kernels, cut at 5,000 by width alone, kept its Python frames and 32
/// kernels. Spans keep their order within a lane; nothing is cut when the lanes hold `max_spans` or fewer.
TimelineCut cut_timeline(std::map<std::string, TimelineLane>& lanes, size_t max_spans, const std::string& token_function);

}  // namespace inferscope::analyze::detail
