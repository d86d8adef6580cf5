// What the step could have been: the repeated top-level ranges (the program's own and NVTX ones) and the repeated
// shallow Python functions of the launching threads, by the time they cover. The report's step line names the
// runner-ups and how to pick one; `--step NAME` that matches nothing is refused with the same list
// (analyzer.hpp's UnknownStep), because analysing the whole trace as one step answers a question nobody asked.
//
//   std::vector<StepCandidate> c = step_candidates(cx, in, chosen_name);   // at most kStepCandidates
#pragma once

#include "analyze/analysis.hpp"

#include <string>
#include <vector>

namespace inferscope::analyze::detail {

struct Context;
struct Ingested;

/// Candidates listed, at most: enough to show the choice, short enough for one line of a report.
inline constexpr size_t kStepCandidates = 5;

/// The candidates by time covered, leaving out `except` (the step chosen; "" for none). Wait points (Queue.get...)
/// and coroutines' runs are not candidates, as in the step detection.
std::vector<StepCandidate> step_candidates(const Context& cx, const Ingested& in, const std::string& except = "");

/// "FILE: --step 'X' names no range, scope or Python function in it; candidates: ..." for UnknownStep.
std::string unknown_step_message(const std::string& path, const std::string& step, const std::vector<StepCandidate>& candidates);

}  // namespace inferscope::analyze::detail
