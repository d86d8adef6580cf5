// The bottleneck rules (docs/analysis.md, section 6). Each rule is one file with one function
// over the shared attribution (the typical step, detail::TypicalStep, and the model's evidence); no rule reads
// another rule's result, and the order they run in changes nothing but the order of equal-impact findings.
// Impacts come from the attribution (every idle instant has one cause, so impacts never add up past the step);
// savings come from the what-if replay (what_if.hpp) or are marked "not estimated".
//
//   std::vector<Finding> f = rules::run_all(analysis, model);   // ranked, primary first
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"
#include "analyze/replay.hpp"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace inferscope::analyze::rules {

enum class Category {
  kCpuBound, kLaunchBound, kSyncBound, kH2dBound, kD2hBound, kGpuBound, kMemoryAlloc, kCpuContention,
  kPcieSaturation, kWait, kWarmup, kSlowSteps
};
/// The JSON name (analysis.hpp's kCategories).
const char* category_name(Category c);

/// Every threshold a rule uses, in one place; docs/analysis.md gives each one's reason.
struct Thresholds {
  double min_impact_pct = 5.0;        ///< a cause under this share of the step is not reported
  double uncertain_below = 0.5;       ///< confidence under this is marked uncertain
  double gpu_bound_util = 0.80;       ///< GPU busy share from which the step is GPU-bound
  double gpu_bound_compute = 0.50;    ///< ... with compute at least this share of the step
  double saturated_share = 0.70;      ///< achieved / peak PCIe bandwidth from which the link is the limit
  double launch_min_kernels = 10;     ///< kernels per step below which launch overhead is not the story
  double sync_min_per_step = 1;       ///< synchronizing calls per step for sync_bound
  int64_t dispatch_gap_ns = detail::kDispatchGapNs;  ///< the same as the idle attribution's (model.hpp)
  int64_t graph_launch_ns = 10'000;   ///< host cost of one CUDA graph launch (what-if of a graph capture)
  int max_suggested_workers = 4;      ///< worker processes cpu_bound suggests (fewer on a host with fewer CPUs)
  double between_launches_share = 0.5;///< share of cpu_bound's host work between launches from which a CUDA graph
                                      ///< is its first fix (that work issues the launches), not moving it off
  double host_pressure_faults = 1000; ///< page faults per step that mean host memory pressure
  double host_pressure_rss = 256e6;   ///< RSS growth over the steps that means host memory pressure
  double quota_share_of_runqueue = 0.5;  ///< cgroup throttled time / the step thread's run-queue wait from which
                                         ///< the CPU quota, not other threads, is what held the step thread back
};

struct RuleInput {
  const Analysis& a;
  const detail::Model& m;
  const detail::TypicalStep& t;  ///< the typical step (ns, counts per step)
  const Thresholds& th;
  double step_ms;                ///< the typical step in ms (what impact_pct divides by)
  double trace_t0_ns;            ///< the trace's time origin, for example spans
};

using Rule = std::optional<Finding> (*)(const RuleInput&);

struct RuleEntry {
  Category category;
  Rule rule;
};
/// Every rule, in the order their findings are listed on equal impact.
std::span<const RuleEntry> registry();

/// Runs every rule, ranks the findings by impact (informational ones last) and marks the primary.
std::vector<Finding> run_all(const Analysis& a, const detail::Model& m, const Thresholds& th = {});

// ---- one function per rule (rules/<name>.cpp)
std::optional<Finding> cpu_bound(const RuleInput& in);
std::optional<Finding> cpu_contention(const RuleInput& in);
std::optional<Finding> host_wait(const RuleInput& in);
std::optional<Finding> launch_bound(const RuleInput& in);
std::optional<Finding> sync_bound(const RuleInput& in);
std::optional<Finding> h2d_bound(const RuleInput& in);  ///< h2d_bound or pcie_saturation
std::optional<Finding> d2h_bound(const RuleInput& in);  ///< d2h_bound or pcie_saturation
std::optional<Finding> memory_alloc(const RuleInput& in);
std::optional<Finding> gpu_bound(const RuleInput& in);
std::optional<Finding> warmup(const RuleInput& in);
std::optional<Finding> slow_steps(const RuleInput& in);

// ---- shared pieces (rules/common.cpp)
std::string fmt(const char* f, double v);
std::string fms(double ms);
std::string fpct(double pct);
std::string fmb(double bytes);
Finding make_finding(const RuleInput& in, Category c, std::string title, double impact_ms, double confidence);
/// A suggestion whose saving comes from replaying the typical steps with `change`.
void suggest_replayed(Finding& f, const RuleInput& in, const char* priority, std::string action,
                      const replay::Change& change, const char* model);
/// A suggestion with no model behind it: "not estimated".
void suggest(Finding& f, const char* priority, std::string action);
/// Up to three example spans: the steps where `which` was longest.
void add_examples(Finding& f, const RuleInput& in, detail::Span detail::StepMetrics::*which, const std::string& what);
/// "cudaStreamSynchronize from Tensor.item (_tensor.py:1) ×600, 45.3 ms; ..." from a table's callers.
std::string callers_evidence(const std::vector<SyncRow>& rows);
std::string callers_evidence(const std::vector<AllocRow>& rows);
bool reported(const RuleInput& in, double impact_ms);  ///< impact at least min_impact_pct of the step
/// The trace holds GPU work. Without, a finding says nothing about a GPU: "while the GPU waited" becomes "in
/// the step", and no GPU advice is given.
bool gpu_seen(const RuleInput& in);
/// "while the GPU waited on it" / "in the step": where a host-side cost happened, worded for the trace.
std::string while_idle(const RuleInput& in, const char* gpu_wording);
/// The CPU quota of the recording process's cgroup in CPUs (process info `cpu_quota`); 0 when none or unknown.
double cpu_quota_cpus(const Analysis& a);
/// Its enforcement period (`cpu_quota_period_us`; dumps without it: the kernel's default, 100 ms), in ns.
double cpu_quota_period_ns(const Analysis& a);
/// "0.50", "2.00"; four decimals under 0.01 CPUs.
std::string fcpus(double cpus);

}  // namespace inferscope::analyze::rules
