// The bottleneck rules (docs/analysis.md, section 6). Each rule is one file with one function over RuleInput,
// the stages' typed results (the typical step, detail::TypicalStep, and the evidence); no rule reads another
// rule's result, and the order they run in changes nothing but the order of equal-impact findings.
// Impacts come from the attribution (every idle instant has one cause, so impacts never add up past the step);
// savings come from the what-if replay (what_if.hpp) or are marked "not estimated".
//
//   std::vector<Finding> f = rules::run_all(RuleInput{process, stats, ...});   // ranked, primary first
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/host_bounce.hpp"
#include "analyze/kernel_chains.hpp"
#include "analyze/model.hpp"
#include "analyze/what_if/replay.hpp"
#include "analyze/stage_results.hpp"
#include "analyze/step_policy.hpp"
#include "analyze/waits/waits.hpp"

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace inferscope::analyze::rules {

enum class Category {
  kCpuBound, kLaunchBound, kSyncBound, kH2dBound, kD2hBound, kGpuBound, kMemoryAlloc, kCpuContention,
  kPcieSaturation, kWait, kCommunication, kPipelineBubble, kGemmFallback, kWarmup, kSlowSteps, kLoopBlocked
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

/// What every rule receives: the typed results of the stages (stage_results.hpp), each named by the stage that
/// returns it, never the Analysis the reports read. A rule test builds one from its own small results.
struct RuleInput {
  const detail::ProcessInfo& process;            ///< the dump's process info (pid, cpus_allowed, cpu_quota, gpu.*)
  const StepStats& stats;                        ///< steps: the step's name, statistics, whether steps are alike
  const StepSelection& selection;                ///< steps: warm-up, steady and outlier steps
  const std::string& step_thread_name;           ///< steps
  const Sampling& sampling;                      ///< sampling: a sampled run's windows, each step's number in the run
  bool gpu_work;                                 ///< ingest: any kernel, memset or copy was recorded
  const detail::HostFrames& host;                ///< pass 2: the step thread's host work by innermost frame
  const detail::FirstCall& first_call;           ///< sweep: the step thread's first CUDA call
  const detail::LaunchSummary& launchers;        ///< sweep: the median kernel, the top launchers and callers
  const detail::LinkPeak& link;                  ///< counters: the PCIe peak
  const detail::CounterEvidence& counters;       ///< counters: contention, memory and quota evidence
  const detail::WaitAttribution& waits;          ///< waits: whom the step thread waited on (waits.hpp)
  const std::vector<detail::StepMetrics>& steps; ///< every step, measured to the end (MeasuredSteps)
  const detail::TypicalStep& t;                  ///< the typical step (ns, counts per step)
  const Breakdown& breakdown;                    ///< the typical step in ms, by part and by cause
  const std::vector<replay::StepGraph>& graphs;  ///< typical steps as replayable graphs (what_if.hpp)
  const detail::Tables& tables;                  ///< tables: kernels, copies, syncs, allocations (for names)
  const detail::HostBounces& bounces;            ///< host bounces: GPU-to-GPU copies made through host memory
  const detail::KernelChains& chains;            ///< kernel chains: runs of elementwise kernels in the typical steps
  const GenerationLoop& generation;              ///< generation: the step's token loop (detected = false: none)
  const Requests& requests;                      ///< requests: an asyncio service's requests (detected = false: none)
  const ProgramFacts& facts;                     ///< program facts: what a suggestion may need (program_facts.hpp)
  double trace_t0_ns = 0;                        ///< the trace's time origin, for example spans
  bool with_its_run = false;                     ///< AnalyzeOptions::with_its_run: the run across ranks is in the report
  Thresholds th = {};
  /// The typical step in ms (what impact_pct divides by).
  double step_ms() const { return t.dur / 1e6; }
};

/// The trace's time origin in ns: the representative step's start minus its offset from the origin.
double trace_origin_ns(const std::vector<detail::StepMetrics>& steps, const StepInstance& representative);

using Rule = std::optional<Finding> (*)(const RuleInput&);

struct RuleEntry {
  Category category;
  Rule rule;
  const char* name = nullptr;  ///< the rule's name (what a rule file disables it by); nullptr: its category's
};
/// A built-in rule's name: its own, else its category's.
const char* rule_name(const RuleEntry& e);
/// Every rule, in the order their findings are listed on equal impact.
std::span<const RuleEntry> registry();

/// Runs every rule, ranks the findings by impact (informational ones last) and marks the primary. No steps, or
/// a typical step of no length: no findings.
std::vector<Finding> run_all(const RuleInput& in);

// ---- one function per rule (rules/<name>.cpp)
std::optional<Finding> cpu_bound(const RuleInput& in);
std::optional<Finding> cpu_contention(const RuleInput& in);
std::optional<Finding> host_wait(const RuleInput& in);
std::optional<Finding> launch_bound(const RuleInput& in);
std::optional<Finding> sync_bound(const RuleInput& in);
std::optional<Finding> h2d_bound(const RuleInput& in);  ///< h2d_bound or pcie_saturation
std::optional<Finding> d2h_bound(const RuleInput& in);  ///< d2h_bound or pcie_saturation
std::optional<Finding> memory_alloc(const RuleInput& in);
std::optional<Finding> communication(const RuleInput& in);
std::optional<Finding> pipeline_bubble(const RuleInput& in);
std::optional<Finding> gpu_bound(const RuleInput& in);
std::optional<Finding> gemm_fallback(const RuleInput& in);
std::optional<Finding> warmup(const RuleInput& in);
std::optional<Finding> slow_steps(const RuleInput& in);
std::optional<Finding> loop_blocked(const RuleInput& in);
std::optional<Finding> batch_wait(const RuleInput& in);  ///< category wait, per request

// ---- shared pieces (rules/common.cpp)
std::string fmt(const char* f, double v);
std::string fms(double ms);
std::string fpct(double pct);
std::string fmb(double bytes);
Finding make_finding(const RuleInput& in, Category c, std::string title, double impact_ms, double confidence);
/// A replayed saving under this share of the step makes a suggestion low priority, whatever its rule asked:
/// below the step-to-step spread of one process (±1-2 % in-process on the GPU hosts here), nobody would see it.
inline constexpr double kWorthwhileShare = 0.01;
/// A suggestion whose saving comes from replaying the typical steps with `change` (their mean when the steps are
/// not alike, else their median). Lowered to "low" under kWorthwhileShare of the step; one saving more than the
/// finding's impact says why in its model.
/// "Capture the step in a CUDA graph (...) " + step_tail; for a generation loop, each token's forward with a static
/// KV cache, and what stands in the way (a cache grown by concatenation, blocking calls per token).
std::string graph_advice(const RuleInput& in, const std::string& step_tail);
/// A high suggestion `action` (built with graph_advice) priced by the replay of one graph launch per step; for a
/// generation loop, less what a graph per token keeps (the other graph launches, the launches outside the forward).
void suggest_graph(Finding& f, const RuleInput& in, const std::string& action);
void suggest_replayed(Finding& f, const RuleInput& in, const char* priority, std::string action,
                      const replay::Change& change, const char* model);
/// A suggestion with no model behind it: "not estimated".
void suggest(Finding& f, const char* priority, std::string action);

// ---- advice needs evidence (program_facts.hpp): a suggestion that names a language, a DataLoader, prefetching, a
// precision or a static shape declares it, and is offered only where the trace shows it.
using Needs = std::initializer_list<const char*>;
/// Every fact in `needs` holds for this program.
bool fits(const RuleInput& in, Needs needs);
/// suggest, offered only where `needs` hold; the suggestion records them (Suggestion::needs).
void suggest(Finding& f, const RuleInput& in, const char* priority, std::string action, Needs needs);
/// suggest_replayed, offered only where `needs` hold.
void suggest_replayed(Finding& f, const RuleInput& in, const char* priority, std::string action,
                      const replay::Change& change, const char* model, Needs needs);
/// The program is Python (its advice names torch, NumPy, py-spy); otherwise native (CUDA C++, perf, ranges).
bool python_program(const RuleInput& in);
/// Suggestions whose needs do not hold are dropped (a rule's slip, never shown), a finding that costs nothing keeps
/// none (it is evidence only), and no saving is larger than the step.
void keep_fitting_advice(Finding& f, const RuleInput& in);
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
double cpu_quota_cpus(const detail::ProcessInfo& process);
/// Its enforcement period (`cpu_quota_period_us`; dumps without it: the kernel's default, 100 ms), in ns.
double cpu_quota_period_ns(const detail::ProcessInfo& process);
/// "0.50", "2.00"; four decimals under 0.01 CPUs.
std::string fcpus(double cpus);
/// The CPUs the recording process may use: its affinity (`cpus_allowed`), no more than the whole CPUs of its
/// cgroup's quota (`cpu_quota`). 0: unknown.
int usable_cpus(const RuleInput& in);

// ---- whom the step waited on (rules/wait_parties.cpp), shared by wait and cpu_contention
/// A party of the wait attribution and its share of the blocked time of its kind (the GIL's, or the rest).
struct PartyShare {
  const detail::WaitParty* party;
  double share;
};
/// The GIL's holders (`gil`), or every other party, by blocked time, with their shares of it.
std::vector<PartyShare> parties_of(const RuleInput& in, bool gil);
/// "thread 'producer'", "the 8 threads 'featurize_*'", "the DataLoader's 2 worker processes (pt_data_worker)".
std::string describe_party(const detail::WaitParty& p);
/// Evidence lines for one party: its share, where the step thread sat, wake-ups, its CPU, what it ran.
void add_party_evidence(Finding& f, const RuleInput& in, const PartyShare& p, double party_ms);
/// The suggestions that fit the party (more DataLoader workers, processes for a GIL-bound producer, a QueueHandler
/// for a logging lock, an event instead of polling, ...), each priced by the replay or "not estimated".
void suggest_for_party(Finding& f, const RuleInput& in, const PartyShare& p, double party_ms);

}  // namespace inferscope::analyze::rules
