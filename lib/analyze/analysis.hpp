// The result of analysing one trace: what every report (Markdown, HTML, JSON) prints. The analyzer
// (lib/analyze) fills it; the writers (lib/report) only format it. docs/report-schema.md documents each
// field as it appears in the JSON report; field names here match the JSON keys.
//
// Times are milliseconds relative to the trace's first event unless a name says otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace inferscope::analyze {

/// Bottleneck categories, as the reports name them (docs/report-schema.md; the JSON uses these strings).
/// `wait` (the step thread blocked by its own choice: sleep, I/O, a queue), `warmup` and `slow_steps`
/// (informational: never primary) come after them.
inline constexpr const char* kCategories[] = {"cpu_bound", "launch_bound", "sync_bound", "h2d_bound", "d2h_bound",
                                              "gpu_bound", "memory_alloc", "cpu_contention", "pcie_saturation",
                                              "wait", "communication", "pipeline_bubble", "gemm_fallback",
                                              "warmup", "slow_steps", "loop_blocked"};

/// An example interval from this trace that supports a finding.
struct TimeSpan {
  double start_ms = 0;
  double end_ms = 0;
  std::string what;  ///< e.g. "step 17: GPU idle 4.2 ms while thread 'main' ran tokenize"
};

/// What the trace shows about the program (program_facts.hpp): the facts that hold, each with why. A suggestion is
/// offered only where every fact it needs holds.
struct ProgramFacts {
  std::map<std::string, std::string> holds;  ///< fact name -> the sentence that says why
  bool has(const std::string& fact) const { return holds.count(fact) > 0; }
};

/// What `iscope-run --try` measured for a suggestion on the program itself (docs/try.md), read from the result
/// file beside the dump.
struct TryMeasurement {
  std::string command;      ///< the --try command that measured it
  std::string knobs;        ///< "num_workers=8 persistent_workers=true", as tried
  size_t pairs = 0;
  double saving_pct = 0;    ///< median over the pairs of 1 - tried/baseline, percent of the step
  double low_pct = 0, high_pct = 0;  ///< the pairs' smallest and largest saving
  bool measurable = false;  ///< the interval excludes zero
};

struct Suggestion {
  std::string action;    ///< concrete: "Move the tokenizer out of the step into a prefetch thread"
  std::string priority;  ///< "high" | "medium" | "low"
  double impact_ms = 0;  ///< estimated saving per step (what-if replay); 0 when not estimated
  bool estimated = false;  ///< impact_ms comes from a model of the step; false: "not estimated"
  std::string model;     ///< how it was estimated, e.g. "replay: syncs removed" (empty when not estimated)
  std::vector<std::string> needs;  ///< the program facts it needs (ProgramFacts; program_facts.hpp names them)
  /// The `iscope-run --try` knob that applies this suggestion without editing the program ("num_workers=4",
  /// "allow_tf32=true"; docs/try.md), "" when none does: the report then offers the command that measures it.
  std::string try_knob;
  /// Measured by `iscope-run --try` with the same knob (any value), when its result file lies beside the dump.
  std::optional<TryMeasurement> measured;
};

/// The command that measures `s` on the recorded program itself (docs/try.md): `iscope-run --try KNOB -- <the
/// recorded command line>`; "" when no knob applies it or there is no command line. The reports and the SQLite
/// export write it.
inline std::string try_command(const std::string& cmdline, const Suggestion& s) {
  if (s.try_knob.empty() || cmdline.empty()) return "";
  return "iscope-run --try " + s.try_knob + " -- " + cmdline;
}

struct Finding {
  /// One of kCategories; a rule file's finding: "custom:<its rule's name>".
  std::string category;
  /// The rule that made it: a built-in rule's name (registry: h2d_bound also makes pcie_saturation findings), the
  /// name a rule file disables it by; or the rule file's rule.
  std::string rule;
  std::string title;      ///< one line
  double confidence = 0;  ///< [0, 1]
  bool uncertain = false; ///< confidence below the threshold: shown, marked, never hidden
  bool primary = false;   ///< the finding with the largest impact
  bool informational = false;  ///< describes the run (warm-up, slow steps), never ranked as primary
  double impact_ms = 0;   ///< estimated time per step this bottleneck costs
  double impact_pct = 0;  ///< impact_ms / mean step time * 100 (of the mean request, when per is "request")
  /// What impact_ms and the savings are per: "step", or "request" (an asyncio service's requests, whose latency is
  /// not the step's: a callback holding the event loop delays requests, not the batch step).
  std::string per = "step";
  bool impact_estimated = true;  ///< false: a rule file's rule that gives no impact (impact_ms is then 0)
  std::vector<std::string> evidence;       ///< sentences with numbers from this trace
  std::map<std::string, double> metrics;   ///< the numbers behind the evidence (name -> value)
  std::vector<TimeSpan> examples;          ///< example spans from this trace
  std::vector<Suggestion> suggestions;     ///< at least three, by priority
};

/// Where the time of the (mean) step goes; the parts add up to step_ms. docs/report-schema.md defines each.
struct Breakdown {
  double step_ms = 0;
  double cpu_preprocessing_ms = 0;  ///< host work outside CUDA calls before the GPU is fed
  double h2d_ms = 0;                ///< host-to-device copies on the critical path
  double gpu_compute_ms = 0;        ///< kernels (and memsets) on the critical path
  double gpu_comm_ms = 0;           ///< NCCL collectives with no compute beside them (0 without collectives)
  double d2h_ms = 0;
  double sync_wait_ms = 0;          ///< host blocked in synchronizing calls beyond GPU work
  double framework_overhead_ms = 0; ///< host time inside CUDA API calls (launch overhead)
  double idle_ms = 0;               ///< neither side did attributable work
  double gpu_utilization = 0;       ///< fraction of the step with at least one kernel/copy running
  double gpu_idle_waiting_on_host_ms = 0;
  double gpu_idle_gaps_between_kernels_ms = 0;
  double gpu_idle_waiting_on_sync_ms = 0;
  double gpu_idle_in_memory_ms = 0;   ///< in allocation/free calls and the refill after a cudaFree
  /// gpu_idle_waiting_on_host_ms split by the step thread's state (system counters); they add up to it.
  double host_running_ms = 0, host_contention_ms = 0, host_waiting_ms = 0;
  bool host_state_measured = false;   ///< the split comes from counters (false: all of it counts as running)
};

struct StepInstance {
  uint32_t index = 0;
  double start_ms = 0;
  double duration_ms = 0;
};

/// Another repeated range or function the step could have been (StepStats::candidates): `--step NAME` picks it.
struct StepCandidate {
  std::string name;    ///< what --step takes: a range's name or a Python function's qualified name
  std::string kind;    ///< "range" | "nvtx range" | "function"
  uint64_t count = 0;  ///< its instances (calls) on its thread
  double total_ms = 0; ///< the time they cover
  bool launches = false;  ///< at least half of them hold a CUDA call
};

struct StepStats {
  std::string name;       ///< the step range or scope
  bool detected = false;  ///< found automatically (no --step)
  /// How the step was found, in a line ("the calls of GenerationMixin.generate, each holding 32 calls of
  /// GPT2LMHeadModel.forward"); empty when asked for with --step.
  std::string chosen_because;
  /// The other repeated ranges and functions, by time covered (at most 5, the step itself left out).
  std::vector<StepCandidate> candidates;
  uint64_t count = 0;     ///< steady steps: what the statistics below cover
  uint64_t total = 0;     ///< every step found, warm-up included
  uint64_t warmup = 0;    ///< leading steps left out as warm-up
  bool warmup_user = false;  ///< the warm-up count came from --skip-steps / skip_steps
  std::string warmup_reason;
  uint64_t typical = 0;   ///< steady steps that are not slow outliers: what the breakdown and impacts describe
  double outlier_bound_ms = 0;
  std::vector<StepInstance> outliers;  ///< steady steps slower than outlier_bound_ms, in time order (at most 20)
  /// Every slow outlier's index, in time order (`outliers` keeps the first 20 with their times). The Perfetto
  /// trace marks these steps "slow" and no others, so it counts what the report counts. Not in the JSON report.
  std::vector<uint32_t> outlier_indexes;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, min_ms = 0;
  /// The steady steps are alike: their mean is within 15 % of their median and they do not fall into two modes.
  /// When not, end_to_end_ms is their mean (what the run costs per step; every finding's "per step" is of that
  /// mean too) and `spread` says how they differ, e.g. "the steps alternate between 3.3 ms (20 steps) and 63.1 ms
  /// (18 steps)".
  bool alike = true;
  std::string basis = "median";  ///< what end_to_end_ms is: "median" or "mean" of the steady steps
  std::string spread;            ///< empty when alike
  double fast_mode_ms = 0, slow_mode_ms = 0;  ///< the two modes' medians (0: one mode)
  uint64_t fast_mode_steps = 0, slow_mode_steps = 0;
  std::vector<StepInstance> slowest;  ///< slowest first, at most 5
  /// Every steady step's duration, in time order (outliers included): the spread behind the statistics above,
  /// for comparisons of two runs (iscope-diff's bootstrap interval). Not written to the JSON report.
  std::vector<double> steady_durations_ms;
  /// Every step, warm-up included, in time order (index = StepInstance::index): its window on the dump's
  /// session clock, [start_ns, end_ns), and the dump's thread id. A step may be a range or a Python call, or a
  /// window no single record covers (loop iterations from one call to the next; a C++ loop's iterations ending
  /// at its sync): this is the one place that says which. For the SQLite export; not written to the JSON report.
  struct Span {
    int64_t start_ns = 0, end_ns = 0;
    uint32_t thread = 0;
  };
  std::vector<Span> spans;
  /// The host ran ahead of the GPU: the steady steps' work completed over a step after their ranges ended, so
  /// the ranges understate a step's cost. gpu_paced_ms is the cost from the GPU's pace (the steady steps' span
  /// to the completion of the last one's work, per step), completion_periods_ms its per-step spread (each
  /// step's completion minus the previous one's; for iscope-diff, like steady_durations_ms, and not written to
  /// the JSON report). Both are filled whenever there are steps, ahead or not.
  bool host_ahead = false;
  double gpu_paced_ms = 0;
  std::vector<double> completion_periods_ms;
};

struct KernelRow {
  std::string name;
  uint64_t count = 0;
  double total_ms = 0, mean_us = 0, share = 0;  ///< share of GPU kernel time in [0, 1]
  std::string launched_by;  ///< innermost Python function, ISCOPE range or layer that launched most of them
  bool whole_graph = false; ///< a CUDA graph's launches traced at graph level ("CUDA graph N"), not one kernel
};

/// Kernel time of one family (kernel_traits.hpp): GEMM, attention, elementwise, reduction, copy, NCCL, other.
struct KernelFamilyRow {
  std::string family;
  uint64_t kernels = 0;          ///< launches
  double total_ms = 0;
  double share = 0;              ///< of all kernel time, [0, 1]
  double tensor_core_share = 0;  ///< of this family's time, in tensor-core kernels, [0, 1]
};

/// One phase of a generation loop (GenerationLoop), per token: the prompt pass (prefill: the first call of each
/// step) or the decode tokens after it. Token times are medians; the rest are means per token.
struct GenerationPhase {
  uint64_t tokens = 0;          ///< tokens measured in this phase, over the steps measured
  double token_ms = 0;          ///< median time per token: prefill, the step's start to its first token; decode, token to token
  double token_ms_p90 = 0;
  double gpu_ms = 0;            ///< GPU time of the work the token launched (kernels, copies, memsets)
  double kernels = 0;           ///< kernels launched (in the call and after it: sampling, the stop check)
  double call_kernels = 0;      ///< of those, launched inside the per-token call (what a graph of it would hold)
  double launch_ms = 0;         ///< host time in kernel launch calls
  double syncs = 0;             ///< blocking calls: synchronizations and synchronous copies (.item(), .cpu())
  double call_syncs = 0;        ///< of those, inside the per-token call (not the loop's own reads between calls)
  double sync_ms = 0;           ///< host time blocked in them
  double d2d_copies = 0;        ///< device-to-device copies (a cache that grows by concatenation copies itself)
  double host_ms = 0;           ///< the step thread outside CUDA calls
};

/// A generation loop (generation.hpp): each step calls the model once per token. Found from the trace, on dumps
/// and torch.profiler traces alike. Token i is done when the work it launched has finished on the GPU (or its
/// call returned, if later), so TTFT and TPOT hold for loops that wait for every token and for loops that run ahead.
struct GenerationLoop {
  bool detected = false;
  std::string token_function;   ///< the call made once per token (qualified name)
  std::string marker;           ///< what says the loop generates tokens (a model class, the step's name)
  uint64_t steps = 0;           ///< steps measured (typical steps, at most generation.hpp's kMaxGenerationSteps)
  double tokens_per_step = 0;   ///< median
  double ttft_ms = 0, ttft_ms_p90 = 0;   ///< time to first token: the step's start to its first token's end
  double tpot_ms = 0, tpot_ms_p90 = 0;   ///< time per output token after the first
  double tokens_per_s = 0;      ///< per sequence: a step's tokens over its start to its last token's end (median)
  GenerationPhase prefill, decode;
  std::vector<std::string> notes;  ///< what limits the figures (calls cut, steps left out)
};

/// Where a request's time went (requests.hpp), in ms per request (means over the requests measured). The parts add
/// up to the request's latency: its own runs on the loop, then each suspension split by what the step did meanwhile.
struct RequestSplit {
  double running_ms = 0;     ///< its own code running on the loop (parsing, queueing itself, the response)
  double queued_ms = 0;      ///< suspended while batch steps that did not serve it ran (queued behind earlier batches)
  double batch_wait_ms = 0;  ///< suspended while no step ran, before the step that served it (the batching window)
  double in_batch_ms = 0;    ///< in the step that served it (the one that ended last before it resumed)
  double delayed_ms = 0;     ///< its step had ended, but the loop ran other callbacks before resuming it
  double other_ms = 0;       ///< suspended awaiting something a step did not end (I/O, a sleep, a lock, a client)
};

/// A callback of the event loop: a top-level run on its thread (a task's step, or a function the loop called).
struct LoopCallbackRow {
  std::string name;           ///< qualified name of the function or coroutine
  uint64_t runs = 0;
  uint64_t slow = 0;          ///< runs longer than Requests::slow_callback_ms
  double total_ms = 0, max_ms = 0;
  double share = 0;           ///< of the time the requests span, [0, 1]
  double delay_ms = 0;        ///< per request: time a ready request waited while this ran (RequestSplit::delayed_ms), or
                              ///< with Requests::delay_modeled, the arrival model's delay from its runs over the bound
};

/// Steps that served batches of one size range (engine_batches.hpp).
struct BatchSizeRow {
  std::string batch;          ///< "1", "2", "3-4", "5-8", ...: requests the step resumed
  uint64_t steps = 0;
  double mean_batch = 0;      ///< requests per step in this row
  double mean_ms = 0, p50_ms = 0;
};

/// A batching engine's step time against its batch, and streamed requests' first token and later tokens
/// (engine_batches.hpp). Steps here are the batch callbacks that served requests.
struct EngineBatches {
  std::vector<BatchSizeRow> by_batch;  ///< by batch size, rows of kMinStepsPerBatchRow steps or more; empty: one size
  /// Least squares over the serving steps: step ms = fixed_ms + per_request_ms x batch; fit_r2 how much of the steps'
  /// variance the batch explains. Set with by_batch.
  double fixed_ms = 0, per_request_ms = 0, fit_r2 = 0;
  bool streamed = false;      ///< most requests were served by several steps: continuous batching
  uint64_t streamed_requests = 0;  ///< requests served by two steps or more (the TTFT and TPOT below are theirs)
  double steps_per_request = 0;    ///< mean serving steps per streamed request (tokens or chunks of its output)
  double ttft_p50_ms = 0, ttft_p90_ms = 0;  ///< the request's start to the end of its first serving step
  double tpot_p50_ms = 0, tpot_p90_ms = 0;  ///< (its last serving step's end - its first's) / (serving steps - 1)
};

/// Requests of an asyncio service (requests.hpp): the lives of the coroutine the loop runs once per request (an
/// HTTP handler, a client task), from their first run to their last, across the loop's other callbacks.
struct Requests {
  bool detected = false;
  std::string name;               ///< the coroutine each request runs (qualified name)
  std::string loop_thread;        ///< the event loop's thread
  uint64_t count = 0;             ///< requests measured (begun and ended inside the trace)
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  double per_s = 0;               ///< requests completed per second over their span
  bool batched = false;           ///< the analysis's steps served them (a batch step): the split has batch parts
  double requests_per_step = 0;   ///< requests served per step, when batched
  uint64_t max_per_step = 0;      ///< the most requests one step served
  double full_share = 0;          ///< of the steps that served requests, those that served max_per_step, [0, 1]
  double batch_gap_ms = 0;        ///< median time from a batch's first request waiting to its batch callback's start
  double batch_ms = 0;            ///< median duration of the batch callbacks that served requests (the step before its window)
  /// The mean delay per request that callbacks holding the loop cause under random arrivals: a request arriving while
  /// one of d ms runs waits d/2 on average, so sum(d^2) / (2 * span). What a handler that never awaits cannot show
  /// in its own life (its request waited in the socket before the handler ran).
  double modeled_delay_ms = 0;
  /// The requests never waited in their own lives (handlers that never await): the callbacks' delay_ms are the arrival
  /// model's (modeled_delay_ms split by callback), not measured.
  bool delay_modeled = false;
  RequestSplit split;
  EngineBatches engine;           ///< when batched: step time by batch size; streamed requests' TTFT and TPOT
  double loop_busy_share = 0;     ///< of the requests' span, the loop thread ran traced callbacks, [0, 1]
  double slow_callback_ms = 0;    ///< a callback longer than this holds the loop (requests.hpp says why)
  std::vector<LoopCallbackRow> callbacks;  ///< by total time, at most 8
  std::vector<std::string> notes;
};

struct PythonRow {
  std::string qualname, file;
  uint32_t line = 0;
  uint64_t count = 0;
  double total_ms = 0, self_ms = 0;
};

struct RangeRow {
  std::string name;
  uint64_t count = 0;
  double total_ms = 0, self_ms = 0, mean_us = 0, p50_us = 0, p99_us = 0, max_us = 0;
};

struct CopyRow {
  std::string direction;  ///< "h2d" | "d2h" | "d2d" | "peer" | ...
  std::string src_memory, dst_memory;  ///< "pageable" | "pinned" | "device" | "managed" | ...
  uint64_t count = 0, bytes = 0;
  double total_ms = 0;
  double bandwidth_gbps = 0;       ///< achieved, bytes / busy time
  double peak_bandwidth_gbps = 0;  ///< the link's peak this was compared with (0 = unknown)
  bool peak_assumed = false;       ///< the peak is the Gen5 x16 assumption: the dump has no PCIe link (no NVML)
};

/// Who issued some of a table row's API calls: the launcher label of kernels ("Model.generate (model.py:42) /
/// range decode / layer model.h.3"), with how many calls and how much host time in them.
struct CallerRow {
  std::string api;          ///< the API called, e.g. cudaStreamSynchronize
  std::string called_from;  ///< innermost Python function (file:line), ISCOPE range and layer at the call; "-" = none
  uint64_t count = 0;
  double total_ms = 0;      ///< host time in these calls
};

struct SyncRow {
  std::string kind;  ///< "device" | "stream" | "event" | "stream_wait_event" | API name
  uint64_t count = 0;
  double total_ms = 0, max_ms = 0;
  std::string called_from;  ///< innermost Python function or range
  std::vector<CallerRow> callers;  ///< by host time, at most 3
};

struct AllocRow {
  std::string op;  ///< "alloc" | "free"
  std::string memory;
  uint64_t count = 0, bytes = 0;
  double api_ms = 0;  ///< host time in the allocation calls
  std::string called_from;         ///< the caller of most of the allocation/free calls ("-" = none seen)
  std::vector<CallerRow> callers;  ///< by host time, at most 3
};

/// CUDA graph launches (cudaGraphLaunch / cuGraphLaunch calls) by API name.
struct GraphLaunchRow {
  std::string api;
  uint64_t count = 0;
  double api_ms = 0;               ///< host time in the launch calls
  std::string called_from;         ///< the caller of most launches
  std::vector<CallerRow> callers;  ///< by host time, at most 3
};

struct LayerRow {
  std::string path;  ///< model layer path, e.g. transformer.h.3.attn
  uint64_t count = 0;
  double cpu_ms = 0, gpu_ms = 0;
  uint64_t kernels = 0;
};

struct ThreadRow {
  uint32_t id = 0, os_tid = 0;
  std::string name;
  double busy_ms = 0;  ///< time inside top-level ranges or Python frames
  double cpu_ms = 0;   ///< CPU time from the system collector, when present
  uint64_t involuntary_switches = 0;
  /// Where cpu_ms comes from: "schedstat" (time on a CPU, ns resolution), "ticks" (user + system time in clock
  /// ticks of kCpuTickMs: a figure below that is below resolution) or "" (no per-thread counters).
  std::string cpu_source;
};
/// The resolution of tick-based per-thread CPU time (/proc's USER_HZ is 100 on Linux).
inline constexpr double kCpuTickMs = 10.0;

/// CPU/GPU clock alignment measured on this trace.
struct Alignment {
  uint64_t kernels_checked = 0;
  double max_violation_us = 0;     ///< worst "kernel started before its launch call began"
  uint64_t violations_over_1us = 0;
  double violation_pct = 0;        ///< violations / kernels_checked * 100
  bool ok = true;                  ///< no violation over 1 us and under 1 %
  std::string note;
};

/// A lane of the representative-step timeline (the HTML report's SVG).
struct TimelineSpan {
  double start_ms = 0, end_ms = 0;  ///< relative to the representative step's start
  std::string label;
  std::string category;  ///< "range" | "python" | "api" | "sync" | "kernel" | "h2d" | "d2h" | "memset" | ...
  uint32_t depth = 0;
  /// The CUPTI correlation id joining a CUDA call with the GPU work it launched, set on both only where both
  /// are in the step's timeline (0: none, or the other side is not drawn).
  uint32_t correlation = 0;
};
/// A thread's scheduler state from the system collector's samples (dump/thread_states.hpp), clipped to the step.
struct TimelineState {
  double start_ms = 0, end_ms = 0;  ///< relative to the representative step's start
  int64_t code = 0;                 ///< the state letter's ASCII code ('R' = 82)
};
struct TimelineLane {
  std::string name;  ///< "thread main (1234)" or "GPU 0 stream 7"
  bool gpu = false;
  std::vector<TimelineSpan> spans;
  std::vector<TimelineState> states;  ///< a thread lane's, in time order; empty where the dump has no samples
};
struct RepresentativeStep {
  StepInstance step;
  std::vector<TimelineLane> lanes;
};

/// A child process recorded beside this dump (follow_children), analysed on its own (children.hpp).
struct ChildProcess {
  std::string path;
  uint64_t pid = 0;
  std::string cmdline;
  bool complete = false;   ///< its dump ended with an END chunk
  uint64_t events = 0, steps = 0;
  double step_ms = 0;      ///< its steady median step (or trace time without steps)
  std::string primary;     ///< its primary finding's category ("" = none)
  std::string error;       ///< set when it could not be read; the rest is then empty
  /// Its analysis's steps and the one its reports draw: a run's Perfetto trace gives each rank its Steps track.
  /// Not written to the reports.
  StepStats step_stats;
  uint32_t representative_step = 0;
};

/// A window of a sampled run (mode: sampled): a stretch recorded in full detail, or (light) the always-on ranges of
/// a slow step and its neighbours.
struct SampledWindow {
  uint32_t index = 0;          ///< window number in the run, from 1
  std::string reason;          ///< "periodic" | "timed" | "slow_step" | "neighbours" | "baseline"
  bool full = true;            ///< full detail; false: ranges and marks only
  bool open = false;           ///< still open when the dump was written
  bool pinned = false;         ///< holds a slow step
  double start_ms = 0, end_ms = 0;
  uint64_t first_step = 0;     ///< its first step's number in the run (from 0)
  uint32_t steps = 0;          ///< steps the runtime counted in it
  uint32_t slow_steps = 0;
  uint32_t steps_analyzed = 0; ///< steps of this analysis inside it
  uint64_t records = 0;
};

/// A slow step the runtime caught while sampling.
struct SlowStepSeen {
  uint64_t step = 0;           ///< its number in the run (from 0)
  double start_ms = 0, duration_ms = 0;
  double bound_ms = 0;         ///< the threshold it exceeded
  std::string detail;          ///< "full" (in a full window) | "ranges" (its ranges and its neighbours') | "none"
  uint32_t window = 0;         ///< the window holding it (0: none kept)
  std::string grew;            ///< ranges only: the range inside it that grew most against its neighbours ("" = none)
  double grew_ms = 0;          ///< by how much
};

/// How a sampled run was recorded and how much of it the analysis covers (docs/sampled-mode.md).
struct Sampling {
  bool sampled = false;
  std::string mode = "sampled";  ///< "sampled" | "adaptive" (full detail for the first steps, then windows)
  std::string step_name;       ///< the range the runtime counted as a step
  bool by_steps = true;        ///< windows counted steps; false: timed windows (no step range was seen)
  uint64_t steps_seen = 0, steps_in_windows = 0;
  double step_coverage_pct = 0;  ///< steps_in_windows / steps_seen
  double run_ms = 0, window_ms = 0;
  double time_coverage_pct = 0;  ///< time with full detail on / the run
  uint32_t windows_opened = 0, windows_kept = 0, windows_dropped = 0;
  uint64_t records_dropped = 0;  ///< in windows the ring dropped, or refused for want of room
  uint64_t records_outside = 0;  ///< sampled out: outside every kept window
  uint32_t slow_steps_seen = 0;
  std::vector<SampledWindow> windows;    ///< kept, oldest first
  std::vector<SlowStepSeen> slow_steps;  ///< newest 1024, in the order caught
  /// Per analysed step: its number in the run (-1: unknown). For wording only; not written to the JSON report.
  std::vector<int64_t> run_step;
};

/// One party the step thread waited on (docs/analysis.md, "Whom the step waits on"): a thread or pool of threads of
/// this process, the GIL's holder, child processes, or the step thread's own sleep or I/O.
struct WaitPartyRow {
  std::string kind;          ///< "threads" | "gil" | "processes" | "own_sleep" | "own_io" | "unknown"
  std::string name;          ///< "producer", "featurize_*", "pt_data_worker"; "" for own and unknown
  std::vector<std::string> members;  ///< "name (tid 4711)" / "name (pid 4712)"
  bool python = false;       ///< threads that run Python (they hold the GIL while they run)
  double ms_per_step = 0;    ///< of the typical step's wait (breakdown: host_waiting_ms, or host_contention_ms for gil)
  double share = 0;          ///< of the step thread's blocked time in the typical steps, [0, 1]
  double busy_share = 0;     ///< its members' CPU share during those waits, per member (1: one CPU all the time)
  double cpu_ms_per_step = 0;  ///< its members' CPU time per steady step
  uint64_t wakeups = 0;      ///< times one of them ended the step thread's wait (a Queue.put, notify, set)
  std::string off_cpu_in;    ///< what its members were mostly blocked in while off a CPU ("sleep", "read", ...; "")
  std::string site;          ///< the step thread's frame while it waited on them
  std::vector<std::pair<std::string, double>> hot;  ///< what they ran meanwhile: (function or range, ms per step)
};

struct Waits {
  bool measured = false;        ///< per-thread CPU counters covered the typical steps
  double thread_sample_ms = 0;  ///< how often the known threads' CPU time was read (0: every round only)
  double blocked_ms = 0;        ///< the step thread's blocked time per typical step, GPU idle, outside CUDA calls
  std::vector<WaitPartyRow> parties;  ///< by share, descending
  std::vector<std::pair<std::string, double>> sites;  ///< the step thread's frames while blocked: (name, ms per step)
  /// Child processes by name: how many, and their CPU time per steady step.
  struct ChildGroup {
    std::string name;
    uint64_t processes = 0;
    double cpu_ms_per_step = 0;
  };
  std::vector<ChildGroup> children;
};

// ---- the ranks of one multi-process run (ranks.hpp, docs/multi-gpu.md)

/// One rank in the run's table; times are means per matched step, in ms.
struct RankRow {
  int rank = -1;
  uint64_t pid = 0;
  std::string path, hostname, devices;  ///< devices: "0" or "0,1"
  std::string primary;                  ///< its own analysis's primary finding ("" = none)
  double step_ms = 0;
  double compute_ms = 0, comm_ms = 0, overlap_ms = 0;
  double wait_ms = 0;      ///< in collectives, waiting for a later rank to arrive
  double transfer_ms = 0;  ///< in collectives, the rest: moving data once every rank had arrived
  double late_ms = 0;      ///< how much it delayed collectives by arriving last
};

/// One kind of collective across the run.
struct CollectiveRow {
  std::string op;
  double per_step = 0;     ///< how many in a step
  double transfer_ms = 0;  ///< per step, once all ranks arrived (the median rank's)
  double wait_ms = 0;      ///< per step, summed over the ranks that waited, divided by the ranks
  int last_rank = -1;      ///< the rank that arrived last most often, of those where one arrived late
  double last_share = 0;   ///< how often it did, of those, [0, 1]
  double waited_share = 0; ///< collectives where one rank arrived late (over 20 us after the others), [0, 1]
};

/// One host's clock in a run whose ranks ran on several hosts (docs/multi-gpu.md, "Clock"). The ranks of one host
/// share its CLOCK_MONOTONIC; another host's is offset from the reference host's (the lowest rank's) by an amount
/// estimated from the trace: the median, over collectives matched between a rank of each, of (end on this host -
/// end on the reference host), as a collective's kernels end on every rank within microseconds of each other.
struct HostClock {
  std::string hostname;
  std::string ranks;              ///< its ranks: "0,1"
  bool reference = false;         ///< the lowest rank's host: the run's clock (offset 0 by definition)
  bool estimated = false;         ///< the offset is known (the reference host, or enough collectives matched)
  double offset_ms = 0;           ///< this host's clock minus the reference host's
  double precision_us = 0;        ///< the larger of the differences' spread and the causal bound (host_clocks.hpp)
  uint64_t collectives_used = 0;  ///< collectives matched to estimate it
};

/// Finding categories of the run (RunAnalysis::findings), next to analysis.hpp's kCategories of one process.
inline constexpr const char* kRunCategories[] = {"collective_wait", "communication"};

struct RunAnalysis {
  std::vector<RankRow> ranks;             ///< by rank
  std::vector<CollectiveRow> collectives; ///< by transfer + wait, descending
  uint64_t steps_matched = 0;             ///< steps every rank has (matched by their index)
  uint64_t hosts = 1;
  /// With ranks on several hosts: each host's clock against the reference host's, the reference first (empty on one
  /// host). Every time of the run (matching, waits, the timeline) is on the reference host's clock.
  std::vector<HostClock> host_clocks;
  double step_ms = 0;          ///< the run's step: the slowest rank's mean matched step
  /// That rank's matched steps, ms, in step order: what iscope-diff compares for a launcher, whose report heads with
  /// the run's step (not written to the reports).
  std::vector<double> step_durations_ms;
  int step_rank = -1;          ///< the rank whose matched steps those are (-1: no steps matched)
  double imbalance_pct = 0;    ///< (slowest rank's compute - mean compute) / mean compute * 100
  int straggler = -1;          ///< the rank the others wait for most (-1: none worth naming)
  std::string straggler_did;   ///< what it did while the others waited ("" when not found)
  std::vector<Finding> findings;  ///< categories from kRunCategories, by impact, primary first
  std::vector<std::string> warnings;
  /// One matched step across the ranks (the median one by the slowest rank's time): per rank a lane "rank R"
  /// (its step) and "rank R GPU" (compute; each collective as "collective_wait" for the last rank to arrive,
  /// then "collective"); ms from the earliest rank's start of that step. step.index: the step's index.
  RepresentativeStep timeline;
};

struct Analysis {
  std::string source;                            ///< input path
  std::string source_format;                     ///< "dump" | "json"
  std::map<std::string, std::string> process;    ///< pid, cmdline, hostname, gpu.* ...
  double trace_ms = 0;                           ///< first to last event
  double end_to_end_ms = 0;                      ///< median steady step (trace time when there are no steps)
  StepStats steps;
  Breakdown breakdown;
  std::vector<Finding> findings;                 ///< ranked by impact, primary first
  std::vector<KernelRow> kernels;
  std::vector<KernelFamilyRow> kernel_families;  ///< kernel time by family, largest first (kernel_traits.hpp)
  double tensor_core_share = 0;  ///< of all kernel time, in tensor-core kernels, [0, 1]
  GenerationLoop generation;     ///< the step's token loop, when it is one (not detected: detected = false)
  Requests requests;             ///< an asyncio service's requests and its event loop (not detected: detected = false)
  ProgramFacts program;          ///< what the trace shows of the program, which suggestions may need
  std::vector<PythonRow> python;
  std::vector<RangeRow> ranges;
  std::vector<CopyRow> copies;
  std::vector<SyncRow> syncs;
  std::vector<AllocRow> allocations;
  std::vector<GraphLaunchRow> graph_launches;
  std::vector<LayerRow> layers;
  std::vector<ThreadRow> threads;
  Alignment alignment;
  RepresentativeStep representative;
  std::map<std::string, uint64_t> drops;         ///< reason -> records dropped
  std::vector<std::string> warnings;             ///< damage, drops, alignment, unknown event types ...
  /// The rule file the analysis used, in a line: "team.yaml (named by --rules): 2 rules; built-in rules disabled:
  /// warmup" ("" = none; docs/rules.md).
  std::string rule_file;
  uint64_t events = 0;
  bool partial = false;  ///< added by the analyzer: corrupt input, only the data before the damage were read
  /// The dump ended with its END chunk (always true for JSON and torch.profiler traces). False for a dump cut
  /// short or whose process did not stop cleanly (a crash, a kill, a disk still full when it stopped): what was
  /// lost after the last drop table in the file is counted nowhere, so `drops` are lower bounds.
  bool complete = true;
  /// Any kernel, memset or copy in the trace. Without, the reports and findings say nothing about a GPU (no
  /// utilization, no GPU idle, no GPU advice): a CPU-only program is described as host time.
  bool gpu_work_recorded = false;
  std::vector<ChildProcess> children;  ///< child dumps beside this one (iscope-analyze fills it; children.hpp)
  Sampling sampling;                   ///< a sampled run: its windows and coverage (sampling.sampled false otherwise)
  Waits waits;                         ///< whom the step thread waited on (empty without per-thread CPU counters)
  /// The run across ranks: this dump's children that are ranks, or the dumps named together on the command line
  /// (ranks empty otherwise).
  RunAnalysis run;
  /// This process launched the ranks and did no GPU work itself (torchrun, mpirun, a Python parent): its own
  /// findings describe its idle loop, so the analyzer leaves them out and the report points to the ranks.
  bool launcher = false;
};

}  // namespace inferscope::analyze
