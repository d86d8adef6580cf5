// The metric table of rule files (metrics.hpp). Every value is read from the rules' input, the same typed results
// the built-in rules read: the typical step (the breakdown and per-step counts), the step statistics, and the
// kernel, Python and range tables (whole trace).
#include "analyze/rules/metrics.hpp"

#include "analyze/kernel_traits.hpp"

#include "text/edit_distance.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

namespace inferscope::analyze::rules {
namespace {

using U = MetricUnit;

double share_of_step(const RuleInput& in, double part_ms) {
  return in.breakdown.step_ms > 0 ? part_ms / in.breakdown.step_ms : 0;
}
double per_step(const RuleInput& in, double whole_trace) {
  return in.stats.total > 0 ? whole_trace / double(in.stats.total) : 0;
}
// The largest value of a per-step field over the steady steps.
template <class F>
double max_over_steady(const RuleInput& in, F field) {
  double best = 0;
  for (size_t i = 0; i < in.steps.size(); ++i)
    if (i < in.selection.steady.size() && in.selection.steady[i]) best = std::max(best, double(field(in.steps[i])));
  return best;
}

// A part of the breakdown, in ms and as a share of the step (the JSON report's breakdown keys).
#define ISCOPE_PART(key, field, meaning)                                                                         \
  Metric{key "_ms", U::kMs, meaning " per step", [](const RuleInput& in) { return in.breakdown.field; }},      \
      Metric{key "_share", U::kShare, meaning ", as a share of step_ms",                                        \
             [](const RuleInput& in) { return share_of_step(in, in.breakdown.field); }}

constexpr Metric kMetrics[] = {
    // The step.
    {"step_ms", U::kMs, "the typical step: the mean of the steady steps less slow outliers (all steady steps when "
     "they are not alike); what the breakdown's parts add up to and impacts are shares of",
     [](const RuleInput& in) { return in.breakdown.step_ms; }},
    {"total_time", U::kMs, "the same as step_ms (the name of the design documents' example)",
     [](const RuleInput& in) { return in.breakdown.step_ms; }},
    {"step_mean_ms", U::kMs, "mean of the steady steps, outliers included", [](const RuleInput& in) { return in.stats.mean_ms; }},
    {"step_p50_ms", U::kMs, "median steady step", [](const RuleInput& in) { return in.stats.p50_ms; }},
    {"step_p90_ms", U::kMs, "90th percentile of the steady steps", [](const RuleInput& in) { return in.stats.p90_ms; }},
    {"step_p99_ms", U::kMs, "99th percentile of the steady steps", [](const RuleInput& in) { return in.stats.p99_ms; }},
    {"step_max_ms", U::kMs, "slowest steady step", [](const RuleInput& in) { return in.stats.max_ms; }},
    {"step_min_ms", U::kMs, "fastest steady step", [](const RuleInput& in) { return in.stats.min_ms; }},
    {"steps", U::kCount, "steady steps (the statistics' steps)", [](const RuleInput& in) { return double(in.stats.count); }},
    {"steps_total", U::kCount, "every step found, warm-up included", [](const RuleInput& in) { return double(in.stats.total); }},
    {"warmup_steps", U::kCount, "leading steps left out as warm-up", [](const RuleInput& in) { return double(in.stats.warmup); }},
    {"outlier_steps", U::kCount, "steady steps slower than the outlier bound",
     [](const RuleInput& in) { return double(in.selection.outliers.size()); }},
    {"steps_alike", U::kFlag, "1 when the steady steps are alike (one mode, mean within 15 % of the median)",
     [](const RuleInput& in) { return in.stats.alike ? 1.0 : 0.0; }},
    {"gpu_paced_ms", U::kMs, "the step's cost at the GPU's pace (from the completion of each step's GPU work)",
     [](const RuleInput& in) { return in.stats.gpu_paced_ms; }},
    // The breakdown of the typical step (docs/report-schema.md, "breakdown").
    ISCOPE_PART("cpu_preprocessing", cpu_preprocessing_ms, "host work outside CUDA calls before the GPU is fed"),
    ISCOPE_PART("h2d", h2d_ms, "host-to-device copies on the critical path"),
    {"h2d_time", U::kMs, "the same as h2d_ms (the name of the design documents' example)",
     [](const RuleInput& in) { return in.breakdown.h2d_ms; }},
    ISCOPE_PART("gpu_compute", gpu_compute_ms, "kernels and memsets on the critical path"),
    ISCOPE_PART("gpu_comm", gpu_comm_ms, "NCCL collectives with no compute beside them"),
    ISCOPE_PART("d2h", d2h_ms, "device-to-host copies on the critical path"),
    ISCOPE_PART("sync_wait", sync_wait_ms, "host blocked in synchronizing calls beyond GPU work"),
    ISCOPE_PART("framework_overhead", framework_overhead_ms, "host time inside CUDA API calls"),
    ISCOPE_PART("idle", idle_ms, "neither side did attributable work"),
    ISCOPE_PART("gpu_idle_waiting_on_host", gpu_idle_waiting_on_host_ms, "GPU idle while the host ran its own code"),
    ISCOPE_PART("gpu_idle_gaps_between_kernels", gpu_idle_gaps_between_kernels_ms,
                "GPU idle in launch calls and the short gaps between them"),
    ISCOPE_PART("gpu_idle_waiting_on_sync", gpu_idle_waiting_on_sync_ms, "GPU idle in and after synchronizing calls"),
    ISCOPE_PART("gpu_idle_in_memory", gpu_idle_in_memory_ms, "GPU idle in allocation and free calls"),
    ISCOPE_PART("host_running", host_running_ms, "of gpu_idle_waiting_on_host, the step thread on a CPU"),
    ISCOPE_PART("host_contention", host_contention_ms,
                "of gpu_idle_waiting_on_host, the step thread ready but not running (other threads, the GIL)"),
    ISCOPE_PART("host_waiting", host_waiting_ms, "of gpu_idle_waiting_on_host, the step thread blocked (sleep, I/O, "
                "a queue, a lock)"),
    {"gpu_utilization", U::kShare, "share of the step with at least one kernel or copy running",
     [](const RuleInput& in) { return in.breakdown.gpu_utilization; }},
    {"gil_wait_ms", U::kMs, "of host_contention_ms, the step thread waiting for the GIL",
     [](const RuleInput& in) { return in.t.host_gil / 1e6; }},
    // Per typical step: counts, bytes and host time in CUDA calls.
    {"kernels_per_step", U::kCount, "kernels launched", [](const RuleInput& in) { return in.t.kernels; }},
    {"all_kernels_ms_per_step", U::kMs, "kernel time (summed over kernels, overlapping ones too)",
     [](const RuleInput& in) { return in.t.kernel_ns / 1e6; }},
    {"median_kernel_us", U::kUs, "the median kernel's duration", [](const RuleInput& in) { return in.launchers.median_kernel_ns / 1e3; }},
    {"launch_api_ms_per_step", U::kMs, "host time in kernel launch calls", [](const RuleInput& in) { return in.t.launch_api_ns / 1e6; }},
    {"syncs_per_step", U::kCount, "synchronizing calls", [](const RuleInput& in) { return in.t.syncs; }},
    {"sync_api_ms_per_step", U::kMs, "host time in synchronizing calls", [](const RuleInput& in) { return in.t.sync_api_ns / 1e6; }},
    {"allocs_per_step", U::kCount, "device allocation and free calls", [](const RuleInput& in) { return in.t.allocs; }},
    {"alloc_api_ms_per_step", U::kMs, "host time in allocation and free calls", [](const RuleInput& in) { return in.t.alloc_api_ns / 1e6; }},
    {"h2d_copies_per_step", U::kCount, "host-to-device copies", [](const RuleInput& in) { return in.t.copies_h2d; }},
    {"d2h_copies_per_step", U::kCount, "device-to-host copies", [](const RuleInput& in) { return in.t.copies_d2h; }},
    {"h2d_bytes_per_step", U::kBytes, "bytes copied host to device", [](const RuleInput& in) { return in.t.h2d_bytes; }},
    {"d2h_bytes_per_step", U::kBytes, "bytes copied device to host", [](const RuleInput& in) { return in.t.d2h_bytes; }},
    {"h2d_pageable_bytes_per_step", U::kBytes, "of h2d_bytes_per_step, from pageable (not pinned) memory",
     [](const RuleInput& in) { return in.t.h2d_pageable_bytes; }},
    {"d2h_pageable_bytes_per_step", U::kBytes, "of d2h_bytes_per_step, into pageable (not pinned) memory",
     [](const RuleInput& in) { return in.t.d2h_pageable_bytes; }},
    {"max_step_h2d_bytes", U::kBytes, "the most bytes one steady step copied host to device",
     [](const RuleInput& in) { return max_over_steady(in, [](const detail::StepMetrics& s) { return s.h2d_bytes; }); }},
    {"max_step_d2h_bytes", U::kBytes, "the most bytes one steady step copied device to host",
     [](const RuleInput& in) { return max_over_steady(in, [](const detail::StepMetrics& s) { return s.d2h_bytes; }); }},
    {"max_step_syncs", U::kCount, "the most synchronizing calls in one steady step",
     [](const RuleInput& in) { return max_over_steady(in, [](const detail::StepMetrics& s) { return s.syncs; }); }},
    {"gpu_work", U::kFlag, "1 when the trace holds any kernel, memset or copy", [](const RuleInput& in) { return in.gpu_work ? 1.0 : 0.0; }},
    // A generation loop (docs/analysis.md, "Generation loops"); 0 when the step is not one.
    {"generation", U::kFlag, "1 when the step is a generation loop (one model call per token)",
     [](const RuleInput& in) { return in.generation.detected ? 1.0 : 0.0; }},
    {"tokens_per_step", U::kCount, "tokens a step generates (median)", [](const RuleInput& in) { return in.generation.tokens_per_step; }},
    {"ttft_ms", U::kMs, "time to first token: the step's start to its first token's end (median)",
     [](const RuleInput& in) { return in.generation.ttft_ms; }},
    {"ttft_p90_ms", U::kMs, "time to first token, 90th percentile", [](const RuleInput& in) { return in.generation.ttft_ms_p90; }},
    {"tpot_ms", U::kMs, "time per output token after the first (median)", [](const RuleInput& in) { return in.generation.tpot_ms; }},
    {"tpot_p90_ms", U::kMs, "time per output token, 90th percentile", [](const RuleInput& in) { return in.generation.tpot_ms_p90; }},
    {"tokens_per_s", U::kPerSecond, "tokens per second per sequence (median over steps)",
     [](const RuleInput& in) { return in.generation.tokens_per_s; }},
    {"kernels_per_token", U::kCount, "kernels launched per decode token", [](const RuleInput& in) { return in.generation.decode.kernels; }},
    {"syncs_per_token", U::kCount, "blocking calls (synchronizations, synchronous copies) per decode token",
     [](const RuleInput& in) { return in.generation.decode.syncs; }},
};
#undef ISCOPE_PART

// ---- names of the trace

// Ranges: by exact name.
template <class Read>
NamedValue range_value(const RuleInput& in, std::string_view key, Read read) {
  for (const RangeRow& r : in.tables.ranges)
    if (r.name == key) return {read(in, r), true};
  return {};
}
// Functions: by qualified name, or by its last part ("tokenize" for "Tokenizer.tokenize"); summed over matches.
bool function_matches(const PythonRow& r, std::string_view key) {
  const std::string_view q = r.qualname;
  return q == key || (q.size() > key.size() && q.ends_with(key) && q[q.size() - key.size() - 1] == '.');
}
struct Summed {
  uint64_t count = 0;
  double total_ms = 0, self_ms = 0, share = 0;
  bool found = false;
};
Summed functions_named(const RuleInput& in, std::string_view key) {
  Summed s;
  for (const PythonRow& r : in.tables.python)
    if (function_matches(r, key)) s.count += r.count, s.total_ms += r.total_ms, s.self_ms += r.self_ms, s.found = true;
  return s;
}
std::string lowered(std::string_view v) {
  std::string out(v);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
// Kernels: every kernel whose name holds the key, in any case (kernel names are long: "gemm", "flash_fwd"); summed.
Summed kernels_named(const RuleInput& in, std::string_view key) {
  Summed s;
  if (key.empty()) return s;
  const std::string k = lowered(key);
  for (const KernelRow& r : in.tables.kernels)
    if (lowered(r.name).find(k) != std::string::npos)
      s.count += r.count, s.total_ms += r.total_ms, s.share += r.share, s.found = true;
  return s;
}
// The part of a name a typed one is compared with: a function's last part, a kernel's name before its arguments.
std::string_view comparable(std::string_view kind, std::string_view name) {
  if (kind == "function") {
    const size_t dot = name.rfind('.');
    return dot == std::string_view::npos ? name : name.substr(dot + 1);
  }
  return kind == "kernel" ? kernel_base_name(name) : name;
}
double mean_ms(const Summed& s) { return s.count ? s.total_ms / double(s.count) : 0; }

constexpr NamedMetric kNamedMetrics[] = {
    {"range_count", U::kCount, "calls of the range over the trace", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return double(r.count); }); }},
    {"range_mean_ms", U::kMs, "mean duration of one call", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return r.mean_us / 1e3; }); }},
    {"range_p50_ms", U::kMs, "median duration of one call", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return r.p50_us / 1e3; }); }},
    {"range_p99_ms", U::kMs, "99th percentile of one call's duration", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return r.p99_us / 1e3; }); }},
    {"range_max_ms", U::kMs, "longest call", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return r.max_us / 1e3; }); }},
    {"range_total_ms", U::kMs, "total time in the range over the trace", "range",
     [](const RuleInput& in, std::string_view k) { return range_value(in, k, [](auto&, const RangeRow& r) { return r.total_ms; }); }},
    {"range_ms_per_step", U::kMs, "range_total_ms divided by every step found (warm-up included)", "range",
     [](const RuleInput& in, std::string_view k) {
       return range_value(in, k, [](const RuleInput& i, const RangeRow& r) { return per_step(i, r.total_ms); });
     }},
    {"function_count", U::kCount, "calls of the Python function over the trace", "function",
     [](const RuleInput& in, std::string_view k) { auto s = functions_named(in, k); return NamedValue{double(s.count), s.found}; }},
    {"function_mean_ms", U::kMs, "mean duration of one call, callees included", "function",
     [](const RuleInput& in, std::string_view k) { auto s = functions_named(in, k); return NamedValue{mean_ms(s), s.found}; }},
    {"function_total_ms", U::kMs, "total time in the function over the trace, callees included", "function",
     [](const RuleInput& in, std::string_view k) { auto s = functions_named(in, k); return NamedValue{s.total_ms, s.found}; }},
    {"function_self_ms", U::kMs, "total time in the function's own code over the trace", "function",
     [](const RuleInput& in, std::string_view k) { auto s = functions_named(in, k); return NamedValue{s.self_ms, s.found}; }},
    {"function_ms_per_step", U::kMs, "function_total_ms divided by every step found (warm-up included)", "function",
     [](const RuleInput& in, std::string_view k) { auto s = functions_named(in, k); return NamedValue{per_step(in, s.total_ms), s.found}; }},
    {"kernel_count", U::kCount, "launches of the kernels over the trace", "kernel",
     [](const RuleInput& in, std::string_view k) { auto s = kernels_named(in, k); return NamedValue{double(s.count), s.found}; }},
    {"kernel_mean_us", U::kUs, "mean duration of one kernel", "kernel",
     [](const RuleInput& in, std::string_view k) { auto s = kernels_named(in, k); return NamedValue{mean_ms(s) * 1e3, s.found}; }},
    {"kernel_total_ms", U::kMs, "total kernel time over the trace", "kernel",
     [](const RuleInput& in, std::string_view k) { auto s = kernels_named(in, k); return NamedValue{s.total_ms, s.found}; }},
    {"kernel_share", U::kShare, "share of all kernel time", "kernel",
     [](const RuleInput& in, std::string_view k) { auto s = kernels_named(in, k); return NamedValue{s.share, s.found}; }},
    {"kernel_ms_per_step", U::kMs, "kernel_total_ms divided by every step found (warm-up included)", "kernel",
     [](const RuleInput& in, std::string_view k) { auto s = kernels_named(in, k); return NamedValue{per_step(in, s.total_ms), s.found}; }},
};

}  // namespace

const char* unit_name(MetricUnit unit) {
  switch (unit) {
    case U::kMs: return "ms";
    case U::kUs: return "us";
    case U::kShare: return "share (0..1)";
    case U::kCount: return "count";
    case U::kBytes: return "bytes";
    case U::kFlag: return "0 or 1";
    case U::kPerSecond: return "per second";
  }
  return "";
}

std::span<const Metric> metrics() { return kMetrics; }
std::span<const NamedMetric> named_metrics() { return kNamedMetrics; }

const Metric* find_metric(std::string_view name) {
  for (const Metric& m : kMetrics)
    if (name == m.name) return &m;
  return nullptr;
}
const NamedMetric* find_named_metric(std::string_view name) {
  for (const NamedMetric& m : kNamedMetrics)
    if (name == m.name) return &m;
  return nullptr;
}

std::vector<std::string> closest_metric_names(std::string_view unknown, size_t n) {
  std::vector<std::string_view> names;
  for (const Metric& m : kMetrics) names.emplace_back(m.name);
  for (const NamedMetric& m : kNamedMetrics) names.emplace_back(m.name);
  return text::closest_names(unknown, names, n);
}

std::vector<std::string> closest_trace_names(const RuleInput& in, std::string_view kind, std::string_view key, size_t n) {
  std::vector<std::string_view> full;
  if (kind == "range")
    for (const RangeRow& r : in.tables.ranges) full.emplace_back(r.name);
  if (kind == "function")
    for (const PythonRow& r : in.tables.python) full.emplace_back(r.qualname);
  if (kind == "kernel")
    for (const KernelRow& r : in.tables.kernels) full.emplace_back(r.name);
  // Compared by their comparable part in lower case ("clasify" with Classifier.classify, "GEMM" with sm90_gemm),
  // shown whole.
  std::vector<std::string> parts;
  for (std::string_view f : full) parts.push_back(lowered(comparable(kind, f)));
  std::vector<std::string_view> views(parts.begin(), parts.end());
  std::vector<std::string> out;
  for (const std::string& c : text::closest_names(lowered(key), views, n))
    for (size_t i = 0; i < parts.size(); ++i)
      if (parts[i] == c && std::find(out.begin(), out.end(), std::string(comparable(kind, full[i]))) == out.end()) {
        out.emplace_back(kind == "range" ? full[i] : comparable(kind, full[i]));
        break;
      }
  return out;
}

std::string metrics_markdown() {
  std::string out = "| metric | unit | meaning |\n| --- | --- | --- |\n";
  for (const Metric& m : kMetrics) out += "| `" + std::string(m.name) + "` | " + unit_name(m.unit) + " | " + m.meaning + " |\n";
  out += "\nA function, range or kernel by name: `range_mean_ms(\"tokenize\")`. Ranges match their name exactly, Python "
         "functions their qualified name or its last part (`\"tokenize\"` matches `Tokenizer.tokenize`; every function "
         "so named is summed, nested calls of one function too), kernels every kernel whose name contains the text in "
         "any case (summed). A name that matches nothing in the trace reads 0, with a warning naming the closest names "
         "the trace has. Whole-trace figures, warm-up included; range percentiles come from the duration histogram "
         "(within 0.8 %), so `range_p50_ms(\"step\")` can differ from `step_p50_ms` in the last digits.\n\n";
  out += "| function | unit | names a | meaning |\n| --- | --- | --- | --- |\n";
  for (const NamedMetric& m : kNamedMetrics)
    out += "| `" + std::string(m.name) + "(\"name\")` | " + unit_name(m.unit) + " | " + m.kind + " | " + m.meaning + " |\n";
  return out;
}

}  // namespace inferscope::analyze::rules
