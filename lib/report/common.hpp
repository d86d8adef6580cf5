// What the Markdown and HTML reports share: the breakdown rows in display order and small formatting helpers.
#pragma once

#include "analyze/analysis.hpp"
#include "report/names.hpp"

#include <functional>
#include <string>
#include <vector>

namespace inferscope::report {

struct BreakdownRow {
  const char* label;     ///< as the report prints it
  const char* key;       ///< JSON key / CSS class suffix
  double ms;
};

/// The breakdown parts in the order the report prints them. When the analyzer's parts do not add up to the
/// step time (more than 1 us apart), an "unattributed" row takes the difference so the table always sums up.
/// Without GPU work (a CPU-only program) only the host's parts.
std::vector<BreakdownRow> breakdown_rows(const analyze::Breakdown& b, bool gpu_work = true);

/// The step by cause, in the findings' categories (gpu_bound, h2d_bound, d2h_bound, cpu_bound, cpu_contention, wait,
/// launch_bound, sync_bound, memory_alloc): the GPU's busy parts and each GPU-idle instant's one cause, so the
/// rows add up to the step and each names the finding that reports it. Without GPU work only the host's causes.
std::vector<BreakdownRow> cause_rows(const analyze::Breakdown& b, bool gpu_work = true);

/// ms as percent of the step ("0.0" when there is no step time).
double pct_of(double ms, double step_ms);

/// Bytes with a decimal unit, as the analyzer writes them: "512 B", "1.5 kB", "12.6 MB", "1.20 GB".
std::string fmt_bytes(uint64_t bytes);

/// A copy row's peak bandwidth cell: "25.2", "55.0 (assumed)" when no PCIe link was recorded, "unknown".
std::string fmt_peak(const analyze::CopyRow& r);

/// A thread's CPU cell: "48.700"; "under 10" for a tick-based figure below one clock tick (below resolution, not
/// zero); "n/a" when the thread has no CPU counters.
std::string fmt_thread_cpu(const analyze::ThreadRow& r);
/// The line under the thread table that says what a tick-based figure means; "" when no row is tick-based.
std::string thread_cpu_note(const std::vector<analyze::ThreadRow>& rows);

/// The "Dropped records: " line's text, each reason put through `code` (backticks, <code>; the rest needs no
/// escaping): "none." only for an input that ended with its END chunk; a dump without one (cut short, or stopped
/// with the disk still full) says its counts are lower bounds, never that nothing was dropped.
std::string drops_text(const analyze::Analysis& a, const std::function<std::string(const std::string&)>& code);

/// The short names of the report's kernels (text::report_kernel_names, which the SQLite export uses too).
KernelNames kernel_names(const analyze::Analysis& a);

/// What the report is about, for its title: the program ("serve.py", the script a Python interpreter ran, or
/// the executable) and the input file's name, "serve.py (gpt2.iscope)"; either alone when the other is unknown.
std::string report_subject(const analyze::Analysis& a);

/// The recorded program's command line ("" when the dump holds none).
std::string cmdline_of(const analyze::Analysis& a);

using analyze::try_command;

/// The process facts a person needs up front (command line, pid, host, GPU), in that order, as (key, value).
std::vector<std::pair<std::string, std::string>> headline_process(const analyze::Analysis& a);

/// A sampled run in one plain-text sentence, lower case after a heading: coverage in steps and time, windows kept
/// and dropped, slow steps ("full detail for 12 of 1530 steps of 'step' (0.8 %) and ...").
std::string sampling_sentence(const analyze::Sampling& s);

/// The step's runner-ups in a line, each as --step takes it: "'GPT2LMHeadModel.forward' (function, 192 calls,
/// 2.3 s), 'step' (range, 40, 1.1 s); pick one with --step NAME" ("" when there are none).
std::string step_runner_ups(const analyze::StepStats& s);
/// True when an adaptive run ended within its baseline (the default mode's short run): a full capture.
bool recorded_whole(const analyze::Sampling& s);
/// The first screen's short form: the whole-run sentence of a full capture, else how much of the run has full
/// detail and that the figures describe that part only (the windows and slow steps are in the report's appendix).
std::string sampling_headline(const analyze::Sampling& s);

/// StepStats::spread for a line that already says the steps are not alike: the analyzer's opening words of the
/// same meaning dropped ("their mean (327 ms) is 56 % above their median (144 ms)").
std::string spread_text(const analyze::StepStats& s);

/// How the steps divide, in counts that add up, as one sentence (plain text): "103 steps = 3 warm-up + 100 steady
/// (...); the 100 steady = 98 typical (...) + 2 slow outlier(s) left out. Warm-up: <reason>." Steady steps that
/// are not alike are all typical (their mean is the headline), so none is left out.
std::string step_counts_sentence(const analyze::StepStats& s);
/// The slow outliers in one sentence: how many are left out of the breakdown, or, for steps that are not alike,
/// how many lie above the bound yet stay in it; "" when none is above the bound.
std::string outliers_sentence(const analyze::StepStats& s);

/// Breakdown rows split into those with a time to show and those at 0 ms (under half a microsecond: "0.000"),
/// whose labels a line names instead of a table full of zero rows.
struct ZeroSplit {
  std::vector<BreakdownRow> shown, zero;
};
ZeroSplit split_zero_rows(std::vector<BreakdownRow> rows);
/// "2 parts at 0 ms not shown (H2D copies, D2H copies)." for `names` of rows and `noun` "part"; "" for none.
std::string zero_rows_note(const std::vector<std::string>& names, const std::string& noun = "part");
/// The labels of `rows` (the component table's names).
std::vector<std::string> labels_of(const std::vector<BreakdownRow>& rows);

}  // namespace inferscope::report
