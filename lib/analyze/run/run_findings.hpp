// The run's findings as a report states them (stage "run findings" of the run analysis): collective_wait and
// communication, their titles, evidence and suggestions, each suggestion with the model of its saving. ranks.cpp
// measures; this file words what it measured (docs/multi-gpu.md, "Findings of the run").
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/run/collective_runs.hpp"
#include "analyze/run/gather_select.hpp"
#include "analyze/run/rank_work.hpp"

#include <cstdio>
#include <string>

namespace inferscope::analyze {

/// A cause under this share of the run's step is not reported: the same floor the rules of one process use
/// (rules::Thresholds::min_impact_pct), so a run finding and a rank's finding are held to one bar.
inline constexpr double kMinImpactShare = 0.05;
/// A suggestion is "high" when it saves at least this share of the step (again the floor of a reported cause).
inline constexpr double kHighShare = 0.05;

namespace run_text {
inline std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
inline std::string ms2(double v) { return fmt("%.2f", v); }
inline std::string pct0(double v) { return fmt("%.0f", v); }
inline std::string rank_name(int rank) { return "rank " + std::to_string(rank); }
}  // namespace run_text

/// The others wait for `straggler` (late_share: its part of all the delay); `did`: what it did instead.
Finding collective_wait(const RunAnalysis& run, const RankRow& straggler, double late_share, const Excess& did,
                        const std::string& straggler_primary);

/// Communication on the `typical` rank: `exposed_ms` of transfer beside no compute, whether the kernels reduce
/// fp32, collectives per step, NCCL's SM share (-1: unknown), and the two stages' savings.
Finding communication(const RunAnalysis& run, const RankRow& typical, double exposed_ms, bool f32, double per_step,
                      double sm_share, const CollectiveRuns& runs, const GatherSelect& select);

}  // namespace inferscope::analyze
