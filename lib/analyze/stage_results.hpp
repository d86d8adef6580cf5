// The typed results of the analyzer's stages (docs/analysis.md, "Analyzer stages"): each stage returns one of
// these and reads the ones of the stages before it, so a stage cannot run before what it needs exists.
// analyze_dump alone assembles the Analysis from them; the rules read them through RuleInput (rules/rule.hpp),
// never the Analysis. Not a public interface.
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::analyze::detail {

/// The process info the dump carries (pid, cmdline, gpu.*, cpu_quota, ...); later values win.
using ProcessInfo = std::map<std::string, std::string>;

/// What pass 1 saw of the dump as a whole (stage "ingest").
struct IngestFacts {
  uint64_t events = 0;
  double trace_ms = 0;  ///< first to last event
  bool partial = false;  ///< a chunk could not be read: only the data before it were analysed
  std::vector<std::string> warnings;
};

/// What the steps stage reports (stage "steps"): the step statistics, the headline and the representative step.
struct StepsFound {
  StepStats stats;
  double end_to_end_ms = 0;  ///< the steady median, or the mean when the steps are not alike
  StepInstance representative;
  std::vector<std::string> warnings;
};

/// Host work on the step thread inside the steady steps (stage "pass 2").
struct HotFrame {
  std::string label;
  double ns = 0;  ///< self time per steady step
  /// The program's own code: a range, or a Python function that is neither a model's forward nor in an
  /// installed package or the standard library. Only such code can be moved to workers or vectorised by the user.
  bool user = true;
};
struct HostFrames {
  bool visible = false;       ///< the step thread has nested ranges or Python frames (host work is visible)
  std::vector<HotFrame> hot;  ///< by innermost frame, descending, at most 10; wait points (Queue.get, ...) left out
};

/// The step thread's first CUDA call: it pays for creating the context (stage "sweep").
struct FirstCall {
  std::string name;
  double ms = 0;
  bool in_steps = false;  ///< a step holds it (or the whole trace is the step)
};

/// Who launched what in the steps (stage "sweep", after the attribution's launcher labels).
struct LaunchSummary {
  double median_kernel_ns = 0;
  double short_kernel_ns = 20000;  ///< AnalyzeOptions::launch_bound_max_kernel_us
  std::string top_kernel_launcher;  ///< most frequent launcher of kernels in steps
  std::vector<std::pair<std::string, std::string>> top_copies;  ///< (description, launcher), at most 3
  std::vector<uint64_t> top_copy_counts;  ///< how many such copies the trace holds, for each of top_copies
  std::vector<uint64_t> top_copy_bytes;   ///< their bytes in all, for each of top_copies
  std::string top_sync_api, top_sync_caller;
  std::string top_alloc_api, top_alloc_caller;
};

/// The host-device link (stage "counters"): the practical PCIe peak and what a pinned copy reaches.
struct LinkPeak {
  double peak_h2d_gbps = 0;
  bool peak_assumed = true;
  std::string peak_note;
  double pinned_gbps = 0;
};

/// The system counters over the steady steps (stage "counters"): the evidence of contention and memory.
struct CounterEvidence {
  double step_thread_runqueue_share = 0;  ///< share of the steps the step thread was runnable but off-CPU
  double involuntary_per_step = 0;
  int other_busy_python_threads = 0;
  double other_python_busy_share = 0;  ///< busiest other Python thread's frame time / steps span
  double rss_growth_bytes = 0, faults_per_step = 0;
  // The cgroup CPU quota's throttling over the steady steps' span (counter_names.hpp, cgroup.cpu.*)
  double cgroup_periods = 0, cgroup_throttled_periods = 0;
  double cgroup_throttled_ns = 0;  ///< summed over the CPUs the group was throttled on
  double steps_span_ns = 0;        ///< the steady steps' span they cover
};

/// Every step's measurements, at three points of their refinement; each stage takes the one before by value,
/// so the order (sweep, host-state split, wait correction) is the only one that compiles.
/// After the sweep: the breakdown and the GPU-idle causes.
struct SweptSteps {
  std::vector<StepMetrics> steps;
  LaunchSummary launchers;
};
/// After the host-state split of the GPU idle waiting on the host (running, contention, a wait of its own).
struct HostSplitSteps {
  std::vector<StepMetrics> steps;
};
/// After the wait attribution's correction (the GIL's part, blocked dispatch gaps): what the rules read.
struct MeasuredSteps {
  std::vector<StepMetrics> steps;
};

/// Rows of the kernel, Python and range tables the reports show (the largest first); the rules read every row.
inline constexpr size_t kTableRows = 50;

/// The tables stage's result: what the reports list, and the rules quote. The kernel, Python and range tables hold every row, largest first (custom rules look names up
/// in them); the Analysis keeps the first kTableRows.
struct Tables {
  std::vector<KernelRow> kernels;
  std::vector<PythonRow> python;
  std::vector<RangeRow> ranges;
  std::vector<CopyRow> copies;
  std::vector<SyncRow> syncs;
  std::vector<AllocRow> allocations;
  std::vector<GraphLaunchRow> graph_launches;
  std::vector<LayerRow> layers;
  std::vector<ThreadRow> threads;
};

/// The representative step's spans (stage "timeline").
struct Timeline {
  std::vector<TimelineLane> lanes;
  std::vector<std::string> warnings;
};

}  // namespace inferscope::analyze::detail
