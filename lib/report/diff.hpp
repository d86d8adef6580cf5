// Comparing two runs of one program (iscope-diff): what changed between a BEFORE and an AFTER analysis. The
// comparison is a pure function of the two analyze::Analysis; the writers only format it. docs/cli.md
// (iscope-diff) describes the report and docs/report-schema.md ("The comparison report") its JSON.
//
//   analyze::Analysis before = analyze::analyze_file("before.iscope", {});
//   analyze::Analysis after = analyze::analyze_file("after.iscope", {});
//   report::Comparison c = report::compare(before, after);
//   if (!c.related) { std::cerr << c.unrelated_reason; return 3; }
//   report::write_diff_markdown(c, std::cout);
#pragma once

#include "analyze/analysis.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace inferscope::report {

/// Version of the comparison's JSON schema; fields are only ever appended.
inline constexpr int kDiffSchemaVersion = 1;

/// One side's steady-state step statistics (analyze::StepStats).
struct StepSide {
  std::string name;
  uint64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0;
};

/// A bootstrap percentile interval of statistic(AFTER) - statistic(BEFORE) from the steady step durations (the
/// median's, the mean's or the p90's; the name is the median's, which came first).
struct MedianInterval {
  bool available = false;
  std::string note;      ///< why it is not available, or how it was computed
  double low_ms = 0, high_ms = 0;
  double level = 0.95;
  uint32_t resamples = 0;
  uint64_t seed = 0;
};

/// One statistic of the steady steps (p50, mean or p90), before and after, with its own interval and verdict.
struct StatisticChange {
  std::string statistic;  ///< "p50" | "mean" | "p90"
  double before_ms = 0, after_ms = 0, delta_ms = 0;
  double delta_pct = 0;  ///< of before; NaN when before is 0
  MedianInterval interval;
  std::string verdict;   ///< as LatencyChange::verdict, from this statistic's interval
};

struct LatencyChange {
  StepSide before, after;
  double delta_p50_ms = 0;   ///< after - before
  double delta_p50_pct = 0;  ///< of before's p50; NaN when before's p50 is 0
  MedianInterval interval;
  /// "faster" | "slower" (the interval excludes 0) | "no clear change" | "unknown" (no interval)
  std::string verdict;
  /// The host ran ahead of the GPU on a side (StepStats::host_ahead): both sides are compared by the GPU's
  /// pace (completion periods), not by their step ranges, which then measure the host only.
  bool paced = false;
  /// The statistic the headline compares, on the analysis report's basis (StepStats::basis): "mean" when the steps
  /// of either side are not alike (two modes, or a mean far from the median), where the median hides what the run
  /// costs; else "p50". delta_p50_*, interval and verdict above stay the median's.
  std::string headline = "p50";
  std::string headline_reason;  ///< why the mean, "" for p50: "the steps of BEFORE are not alike"
  /// p50, mean and p90 in that order, each with its interval (where the bootstrap applies) and verdict.
  std::vector<StatisticChange> statistics;
  /// The headline statistic's change (one of `statistics`).
  const StatisticChange& headline_change() const;
};

/// One part of the mean step (analyze::Breakdown), before and after.
struct BreakdownChange {
  std::string label, key;  ///< as the analysis report names it ("Sync wait", "sync_wait")
  double before_ms = 0, after_ms = 0, delta_ms = 0;
  double delta_pct = 0;  ///< of before_ms; NaN when before_ms is 0
};

/// A finding category seen on either side.
struct FindingChange {
  std::string category;
  std::string change;  ///< "appeared" | "disappeared" | "grew" | "shrank" | "unchanged"
  std::string title_before, title_after;  ///< empty on the side without it
  double impact_before_ms = 0, impact_after_ms = 0, delta_ms = 0;
  bool primary_before = false, primary_after = false;
};

/// A kernel or Python function matched by name between the two reports' tables.
struct NameChange {
  std::string name;     ///< the full name (kernel) or qualname (Python)
  std::string display;  ///< a kernel's short name (names.hpp); the qualname for Python
  uint64_t count_before = 0, count_after = 0;
  double total_before_ms = 0, total_after_ms = 0;
  double delta_ms() const { return total_after_ms - total_before_ms; }
  int64_t delta_count() const { return int64_t(count_after) - int64_t(count_before); }
};

struct Comparison {
  std::string before_source, after_source;
  std::string before_subject, after_subject;  ///< "program (file)" as the analysis report heads itself
  bool related = true;
  std::string unrelated_reason;  ///< set when !related: the two share no step name, kernel or Python function
  LatencyChange latency;
  std::vector<BreakdownChange> breakdown;
  std::vector<FindingChange> findings;  ///< by |delta_ms|, largest first
  /// The names that changed most (at most kTopChanges each, largest |change| first, unchanged left out).
  std::vector<NameChange> kernels_by_time, kernels_by_count, python_by_time, python_by_count;
  std::vector<std::string> notes;  ///< caveats: different step names, partial inputs, tables cut at 50 rows
};

inline constexpr size_t kTopChanges = 10;
inline constexpr uint32_t kBootstrapResamples = 2000;
inline constexpr uint64_t kBootstrapSeed = 16;
/// Fewer steady steps than this on either side: no interval.
inline constexpr size_t kMinStepsForInterval = 5;

/// The whole comparison. Deterministic: the bootstrap uses a fixed seed.
Comparison compare(const analyze::Analysis& before, const analyze::Analysis& after);

/// The interval of median(after) - median(before), by `resamples` bootstrap resamples of each side (with
/// replacement, seeded with `seed`), as the percentile interval at `level`.
MedianInterval median_difference_interval(const std::vector<double>& before, const std::vector<double>& after,
                                          uint32_t resamples = kBootstrapResamples, uint64_t seed = kBootstrapSeed,
                                          double level = 0.95);
/// The same for another statistic of the steps: "p50", "mean" or "p90".
MedianInterval difference_interval(const std::string& statistic, const std::vector<double>& before,
                                   const std::vector<double>& after, uint32_t resamples = kBootstrapResamples,
                                   uint64_t seed = kBootstrapSeed, double level = 0.95);

/// Parts of compare(), each on its own.
LatencyChange compare_latency(const analyze::StepStats& before, const analyze::StepStats& after);
std::vector<BreakdownChange> compare_breakdown(const analyze::Breakdown& before, const analyze::Breakdown& after);
std::vector<FindingChange> compare_findings(const std::vector<analyze::Finding>& before,
                                            const std::vector<analyze::Finding>& after);

/// Markdown: "# InferScope comparison", the latency headline with its interval, then the breakdown, the
/// findings and the kernels and Python functions that changed most.
void write_diff_markdown(const Comparison& c, std::ostream& out);
/// One self-contained HTML page with the same sections; every name from a trace is escaped.
void write_diff_html(const Comparison& c, std::ostream& out);
/// JSON (schema_version kDiffSchemaVersion, keys in a fixed order).
void write_diff_json(const Comparison& c, std::ostream& out);

}  // namespace inferscope::report
