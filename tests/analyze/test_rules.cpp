// Every analyzer rule on hand-made inputs (docs/analysis.md, section 6): a RuleInput built field by field, one rule
// called directly. For each rule: it fires exactly at its thresholds (at the threshold and just under it, with the
// default rules::Thresholds, so a changed constant fails here), its impact and impact_pct, its confidence formula at
// one or two points, the key words of its title and evidence, and its suggestions with their priorities. A replayed
// suggestion gets a small StepGraph in graphs; every expected saving is computed by hand from replay.hpp's model
// in the comment beside it (times in ms from the step's start). registry::run_all's ranking comes last.
#include "rule_fixture.hpp"

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::analyze;
using replay::GpuWork;
using replay::HostOp;
using replay::OpKind;
using replay::StepGraph;

namespace {

constexpr double ms = 1e6;
constexpr int64_t ns(double v_ms) { return int64_t(v_ms * 1e6); }

// A typical step of 100 ms (so an impact in ms is also its share in %), GPU work seen, nothing else: no rule fires.
struct Input : testing::RuleFixture {
  Input() {
    breakdown.step_ms = 100;
    typical.steps = 20;
    typical.dur = 100 * ms;
  }
  rules::RuleInput in() const { return input(); }
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool any_evidence(const Finding& f, const std::string& part) {
  for (const auto& e : f.evidence)
    if (has(e, part)) return true;
  return false;
}

/// The first suggestion whose action holds `part`; nullptr: none.
const Suggestion* suggestion(const Finding& f, const std::string& part) {
  for (const auto& s : f.suggestions)
    if (has(s.action, part)) return &s;
  return nullptr;
}

std::vector<std::string> priorities(const Finding& f) {
  std::vector<std::string> v;
  for (const auto& s : f.suggestions) v.push_back(s.priority);
  return v;
}

/// What every finding's suggestions obey: at least three, a known priority, "not estimated" means no number and
/// no model, an estimate says which replay it is.
void check_suggestions(const Finding& f) {
  CAPTURE(f.category);
  CHECK(f.suggestions.size() >= 3);
  for (const auto& s : f.suggestions) {
    CAPTURE(s.action);
    CHECK((s.priority == "high" || s.priority == "medium" || s.priority == "low"));
    if (s.estimated) {
      // the what-if replay's, or the device model's (pipeline_bubble: the busiest GPU sets the pace)
      CHECK((has(s.model, "replay: ") || has(s.model, "devices: ")));
    } else {
      CHECK(s.impact_ms == 0);
      CHECK(s.model.empty());
    }
  }
}

void not_estimated(const Suggestion* s) {
  REQUIRE(s);
  CAPTURE(s->action);
  CHECK_FALSE(s->estimated);
  CHECK(s->impact_ms == 0);
}

void estimated(const Suggestion* s, double saving_ms, const char* priority) {
  REQUIRE(s);
  CAPTURE(s->action);
  CHECK(s->estimated);
  CHECK(s->impact_ms == doctest::Approx(saving_ms).epsilon(1e-9));
  CHECK(s->priority == priority);
}

// ---- step graphs (replay.hpp)

GpuWork kernel(double dur_ms) {
  GpuWork w;
  w.dur_ns = ns(dur_ms);
  return w;
}

GpuWork copy(double dur_ms, uint64_t bytes, bool pageable) {
  GpuWork w = kernel(dur_ms);
  w.copy = true;
  w.bytes = bytes;
  w.pageable = pageable;
  return w;
}

HostOp& call(StepGraph& g, OpKind kind, double gap_ms, double dur_ms, double wait_ms = 0,
             std::initializer_list<GpuWork> work = {}) {
  HostOp op;
  op.kind = kind;
  op.gap_before_ns = ns(gap_ms);
  op.dur_ns = ns(dur_ms);
  op.wait_ns = ns(wait_ms);
  for (const GpuWork& w : work) {
    op.work.push_back(uint32_t(g.gpu.size()));
    g.gpu.push_back(w);
  }
  g.host.push_back(op);
  return g.host.back();
}

void launch(StepGraph& g, double gap_ms, double cost_ms, double kernel_ms) {
  call(g, OpKind::kLaunch, gap_ms, cost_ms, 0, {kernel(kernel_ms)});
}

}  // namespace

// ================================================================================================ cpu_bound

// 60 ms of host work, then one launch of a 40 ms kernel and a sync: launch at 60, kernel 60-100, the sync returns
// at 100. Recorded 100 ms.
static StepGraph host_work_first() {
  StepGraph g;
  launch(g, 60, 0, 40);
  call(g, OpKind::kSync, 0, 40, 40);
  g.recorded_ns = ns(100);
  return g;
}

TEST_CASE("cpu_bound fires from min_impact_pct of the step on, with its confidence and title") {
  Input t;
  t.breakdown.gpu_utilization = 0.4;
  t.typical.idle_host = 5 * ms;
  t.typical.host_running = 5 * ms;  // exactly min_impact_pct (5 %) of the 100 ms step
  auto f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "cpu_bound");
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  t.typical.host_running = 4.99 * ms;  // just under
  CHECK_FALSE(rules::cpu_bound(t.in()));

  // Confidence 0.45 + 0.4·min(1, pct/50) + 0.1 when frames name the work.
  t.typical.idle_host = t.typical.host_running = 25 * ms;
  f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.65));  // 0.45 + 0.4·0.5
  CHECK_FALSE(f->uncertain);
  CHECK(f->title == "The GPU waits 25.0 ms per step for host work outside CUDA calls");
  CHECK(any_evidence(*f, "the GPU was idle 25.0 ms per step (25 % of the 100.0 ms step) while thread 'MainThread' ran host code"));
  CHECK(any_evidence(*f, "no Python frames or nested ranges inside the step"));
  CHECK(f->metrics.at("host_running_ms") == doctest::Approx(25));
  t.typical.idle_host = t.typical.host_running = 60 * ms;
  t.host.visible = true;
  t.host.hot = {{"tokenize", 40 * ms, true}, {"collate", 15 * ms, true}};
  f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.95));  // 0.45 + 0.4 (capped) + 0.1
  CHECK(any_evidence(*f, "host self time per step inside the step, less the time blocked there: tokenize 40.0 ms, collate 15.0 ms"));
  // A frame that sat blocked (a lock's acquire inside it) is host work only for the time it ran: 'detect' holds
  // 45 ms of self time per step, 40 of them blocked; 'tokenize' is the work to move.
  t.host.hot = {{"detect", 45 * ms, true}, {"tokenize", 40 * ms, true}, {"collate", 15 * ms, true}};
  t.typical.steps = 2;
  t.waits.sites = {{"detect", 80 * ms}};  // over the 2 typical steps
  f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "less the time blocked there: tokenize 40.0 ms, collate 15.0 ms, detect 5.00 ms"));
  CHECK(suggestion(*f, "Move tokenize off the step's critical path"));
  CHECK_FALSE(suggestion(*f, "Move detect"));
}

TEST_CASE("cpu_bound without counters: all the host time runs; the work moves to max_suggested_workers workers") {
  Input t;
  t.breakdown.gpu_utilization = 0.4;
  t.typical.idle_host = t.typical.host_running = 60 * ms;
  t.graphs = {host_work_first()};
  auto f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(60));
  check_suggestions(*f);
  // No hot frames: the step's own host work is what moves. No gap lies between two launches: no graph first.
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  // host_gap_scale = 1 - 60/60 = 0: the 60 ms gap (>= 100 us) goes, kernel 0-40, sync at 40; the 60 ms moved to
  // 4 workers deliver a step every 15 ms: max(40, 15) = 40. Saving 100 - 40 = 60 ms.
  const Suggestion* move = suggestion(*f, "Move the host work in 'step' off the step's critical path");
  estimated(move, 60, "high");
  CHECK(has(move->action, "4 worker processes"));  // a Python program without a DataLoader
  CHECK(has(move->model, "done by 4 workers"));
  CHECK(move->try_knob.empty());  // no knob makes worker processes appear
  // With a DataLoader: its workers, and the knob that measures them on the program itself (iscope-run --try).
  t.facts.holds["dataloader"] = "test";
  const auto with_loader = rules::cpu_bound(t.in());
  REQUIRE(with_loader);
  const Suggestion* loader = suggestion(*with_loader, "off the step's critical path");
  REQUIRE(loader);
  CHECK(has(loader->action, "4 DataLoader workers (num_workers=4"));
  CHECK(loader->try_knob == "num_workers=4");
  t.facts.holds.erase("dataloader");
  not_estimated(suggestion(*f, "Vectorise or port the host work in 'step'"));
  not_estimated(suggestion(*f, "Overlap: launch the GPU work first"));
  not_estimated(suggestion(*f, "Profile the host work in 'step'"));
  CHECK_FALSE(suggestion(*f, "CUDA graph"));

  // Two CPUs: one worker beside the step thread; it delivers every 60 ms: max(40, 60) = 60, saving 40 ms.
  t.process["cpus_allowed"] = "2";
  f = rules::cpu_bound(t.in());
  move = suggestion(*f, "off the step's critical path");
  estimated(move, 40, "high");
  CHECK(has(move->action, "1 worker processes"));
  // A cgroup quota of 2.5 CPUs on 16 allowed: 2 whole CPUs, again one worker.
  t.process["cpus_allowed"] = "16";
  t.process["cpu_quota"] = "2.5";
  CHECK(has(suggestion(*rules::cpu_bound(t.in()), "off the step's critical path")->action, "1 worker processes"));
  // One CPU: nobody to move the work to; more CPUs first, not estimated.
  t.process.erase("cpu_quota");
  t.process["cpus_allowed"] = "1";
  f = rules::cpu_bound(t.in());
  CHECK_FALSE(suggestion(*f, "off the step's critical path"));
  const Suggestion* more = suggestion(*f, "may run on one CPU only (its CPU affinity)");
  not_estimated(more);
  CHECK(has(more->action, "Give the process more CPUs"));
  CHECK(more->priority == "high");
}

// The host work between two launches (the code that issues them): kernel 0-10; 60 ms of host code; the second
// launch at 60, kernel 60-90; the sync returns at 90; a 10 ms tail: 100 ms.
static StepGraph host_work_between_launches(double between_ms = 60, double tail_ms = 10) {
  StepGraph g;
  launch(g, 0, 0, 10);
  launch(g, between_ms, 0, 30);
  call(g, OpKind::kSync, 0, 30, 30);
  g.tail_ns = ns(tail_ms);
  g.recorded_ns = ns(between_ms + 30 + tail_ms);
  return g;
}

TEST_CASE("cpu_bound: host work between the step's launches (between_launches_share) gets a CUDA graph first") {
  Input t;
  t.breakdown.gpu_utilization = 0.4;
  t.typical.idle_host = t.typical.host_running = 70 * ms;
  t.graphs = {host_work_between_launches()};
  auto f = rules::cpu_bound(t.in());
  REQUIRE(f);
  check_suggestions(*f);
  // 60 of the 70 ms of host gaps lie between two launches: 0.86 >= 0.5.
  CHECK(has(f->suggestions.front().action, "Capture the step in a CUDA graph"));
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "high", "medium", "low"});
  // collapse_launches, graph_launch_ns 10 us: the first launch costs 0.01, kernel 0.01-10.01; the 60 ms between
  // the launches is gone, the second kernel runs 10.01-40.01; the sync at 40.01, the tail 10: 50.01. Saving 49.99.
  estimated(&f->suggestions.front(), 49.99, "high");
  // The worker model keeps the code between the launches (keep_launching_code) and moves the 10 ms tail only:
  // 100 - 90 = 10 ms (4 workers deliver every 2.5 ms).
  estimated(suggestion(*f, "off the step's critical path"), 10, "high");

  // At the threshold: 30 ms between the launches, a 30 ms tail: exactly half. Just under: a 30.2 ms tail.
  t.graphs = {host_work_between_launches(30, 30)};
  CHECK(has(rules::cpu_bound(t.in())->suggestions.front().action, "CUDA graph"));
  t.graphs = {host_work_between_launches(30, 30.2)};
  f = rules::cpu_bound(t.in());
  CHECK(has(f->suggestions.front().action, "off the step's critical path"));
  CHECK_FALSE(suggestion(*f, "CUDA graph"));
}

TEST_CASE("cpu_bound: a model's forward is no worker's to run; a trace without GPU work gets the host form") {
  Input t;
  t.breakdown.gpu_utilization = 0.4;
  t.typical.idle_host = t.typical.host_running = 60 * ms;
  t.host.hot = {{"GPT2Block.forward", 50 * ms, false}, {"tokenize", 5 * ms, true}};  // own code < a fifth
  auto f = rules::cpu_bound(t.in());
  REQUIRE(f);
  check_suggestions(*f);
  CHECK_FALSE(suggestion(*f, "off the step's critical path"));
  CHECK_FALSE(suggestion(*f, "Vectorise"));
  not_estimated(suggestion(*f, "Capture the step in a CUDA graph"));  // no graphs: not estimated
  not_estimated(suggestion(*f, "Compile the model (torch.compile) so GPT2Block.forward runs as fused kernels"));
  CHECK(suggestion(*f, "Profile GPT2Block.forward"));

  Input h;
  h.gpu_work = false;
  h.typical.idle_host = h.typical.host_running = 30 * ms;
  f = rules::cpu_bound(h.in());
  REQUIRE(f);
  check_suggestions(*f);
  CHECK(f->title == "Host work fills the step: 30.0 ms per step, and no GPU work was recorded");
  CHECK(any_evidence(*f, "thread 'MainThread' ran host code 30.0 ms per step (30 %)"));
  CHECK(f->metrics.count("gpu_utilization") == 0);
  CHECK(suggestion(*f, "Move the host work in 'step' out of the step"));
  CHECK(suggestion(*f, "Vectorise the host work in 'step' (NumPy"));
  CHECK(suggestion(*f, "Spread independent items over worker processes"));
  CHECK_FALSE(suggestion(*f, "GPU"));
}

TEST_CASE("cpu_bound with counters: only the running share moves; waits and contention are other findings'") {
  Input t;
  t.breakdown.gpu_utilization = 0.4;
  t.breakdown.host_state_measured = true;
  t.breakdown.host_waiting_ms = 20;
  t.breakdown.host_contention_ms = 10;
  t.typical.host_state_measured = true;
  t.typical.idle_host = 60 * ms;
  t.typical.host_running = 30 * ms;
  t.graphs = {host_work_first()};
  const auto f = rules::cpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(30));
  CHECK(any_evidence(*f, "20.0 ms waiting, 10.0 ms contended"));
  // host_gap_scale = 1 - 30/60 = 0.5: the gap keeps 30, kernel 30-70, sync at 70 (4 workers: every 7.5 ms).
  estimated(suggestion(*f, "off the step's critical path"), 30, "high");
}

// ================================================================================================ launch_bound

// 20 launches of 3 ms with 2 ms dispatch gaps, 1 ms kernels: launch i returns at 5(i+1), its kernel ends 1 ms later:
// host end 100, GPU end 101. Recorded 101 ms.
static StepGraph many_launches() {
  StepGraph g;
  for (int i = 0; i < 20; ++i) launch(g, 2, 3, 1);
  g.recorded_ns = ns(101);
  return g;
}

TEST_CASE("launch_bound fires at min_impact_pct with at least launch_min_kernels kernels per step") {
  Input t;
  t.typical.idle_gaps = 5 * ms;
  t.typical.kernels = 10;  // exactly launch_min_kernels
  auto f = rules::launch_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "launch_bound");
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  t.typical.kernels = 9.9;  // just under launch_min_kernels
  CHECK_FALSE(rules::launch_bound(t.in()));
  t.typical.kernels = 10;
  t.typical.idle_gaps = 4.99 * ms;  // just under min_impact_pct
  CHECK_FALSE(rules::launch_bound(t.in()));
}

TEST_CASE("launch_bound: confidence, evidence and the CUDA graph replay") {
  Input t;
  t.typical.idle_gaps = 15 * ms;
  t.typical.kernels = 20;
  t.typical.launch_api_ns = 6 * ms;
  t.launchers.median_kernel_ns = 19'999;  // short: under launch_bound_max_kernel_us (20 us)
  t.launchers.top_kernel_launcher = "Model.forward (model.py:10)";
  KernelRow k;
  k.name = "elementwise_add";
  t.tables.kernels.push_back(k);
  t.graphs = {many_launches()};
  auto f = rules::launch_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.775));  // 0.45 + 0.25·(15/30) + 0.2
  CHECK(f->title == "20 kernels per step with short gaps: the host cannot launch them fast enough");
  CHECK(any_evidence(*f, "20 kernels per step, median kernel 20.0 us; the GPU sat idle while the host was launching 15.0 ms per step (15 % of the step)"));
  CHECK(any_evidence(*f, "host time in launch calls: 6.00 ms per step (300.0 us per kernel)"));
  CHECK(any_evidence(*f, "most kernels launched from Model.forward (model.py:10)"));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  // collapse_launches: the first gap (2) stays, one graph launch of 10 us, then the 20 kernels back to back from
  // 2.01: 22.01. Saving 101 - 22.01 = 78.99 ms, more than the 15 ms impact: the model says why.
  const Suggestion* graph = suggestion(*f, "Capture the step in a CUDA graph");
  estimated(graph, 78.99, "high");
  CHECK(has(graph->action, "so its 20 launches become one"));
  CHECK(has(graph->model, "more than this finding's 15.0 ms"));
  not_estimated(suggestion(*f, "Fuse the small kernels launched from Model.forward (model.py:10)"));
  CHECK(has(suggestion(*f, "Fuse")->action, "e.g. 'elementwise_add'"));
  not_estimated(suggestion(*f, "Batch more work per launch"));
  not_estimated(suggestion(*f, "Cut Python overhead"));

  // Kernels of 20 us are not short; a 30 % share is the most the share adds: 0.45 + 0.25.
  t.launchers.median_kernel_ns = 20'000;
  t.typical.idle_gaps = 80 * ms;
  f = rules::launch_bound(t.in());
  CHECK(f->confidence == doctest::Approx(0.70));
  // 78.99 ms is within 1.05 × the 80 ms impact: no remark in the model.
  CHECK_FALSE(has(suggestion(*f, "CUDA graph")->model, "more than"));
}

TEST_CASE("launch_bound on a generation loop: each token's forward in a graph, with a static KV cache") {
  Input t;
  t.typical.idle_gaps = 15 * ms;
  t.typical.kernels = 32 * 87;
  t.launchers.median_kernel_ns = 5'000;
  t.graphs = {many_launches()};
  t.generation.detected = true;
  t.generation.token_function = "GPT2LMHeadModel.forward";
  t.generation.tokens_per_step = 32;
  t.generation.decode.kernels = 87;       // 80 in the forward, 7 after it (argmax, the stop check)
  t.generation.decode.call_kernels = 80;
  t.generation.decode.launch_ms = 0.58;   // 6.67 us per launch
  t.generation.decode.d2d_copies = 24;
  t.generation.decode.syncs = 3;
  t.generation.prefill.gpu_ms = 3.0;      // a cached decode token: far less GPU time than the prompt pass
  t.generation.decode.gpu_ms = 0.5;
  auto f = rules::launch_bound(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "a generation loop: 32 tokens per step, 87 kernels and 0.58 ms in launch calls per decode token"));
  const Suggestion* graph = suggestion(*f, "Capture each token's forward (GPT2LMHeadModel.forward) in a CUDA graph");
  REQUIRE(graph);
  // The step's one-graph replay saves 78.99 ms (launch_bound's test above); a graph per token keeps 31 more graph
  // launches of 10 us and 7 launches per token outside the forward: 0.31 + 32 x 7 x 0.58 / 87 = 1.803 ms.
  estimated(graph, 78.99 - 0.31 - 32 * 7 * 0.58 / 87, "high");
  CHECK(has(graph->model, "one graph per token: the 31 further graph launches and 7 launches per token outside the forward stay"));
  CHECK(has(graph->action, "so its 80 launches per token become one"));
  CHECK(has(graph->action, "cache_implementation = \"static\""));
  CHECK(has(graph->action, "24 device-to-device copies per token: a cache grown by concatenation"));
  CHECK(has(graph->action, "the 3 blocking calls per token stay between the graphs"));
  CHECK_FALSE(has(graph->action, "Turn the KV cache on"));
  // Decode tokens as costly on the GPU as the prompt pass: the loop has no cache, which comes first.
  t.generation.decode.gpu_ms = 3.1;
  t.generation.decode.d2d_copies = 0;
  t.generation.decode.syncs = 0;
  f = rules::launch_bound(t.in());
  const Suggestion* nocache = suggestion(*f, "Turn the KV cache on first (use_cache=True");
  REQUIRE(nocache);
  CHECK(has(nocache->action, "(3.10 ms against 3.00 ms)"));
  CHECK(has(nocache->action, "Then capture each token's forward"));
  CHECK_FALSE(has(nocache->action, "device-to-device"));
  CHECK_FALSE(has(nocache->action, "blocking calls"));
}

// ================================================================================================ sync_bound

// Kernel 0-10, a device sync returns at 10, 5 ms of host work refilling, kernel 15-25, the step's last sync at 25.
static StepGraph sync_then_refill() {
  StepGraph g;
  launch(g, 0, 0, 10);
  call(g, OpKind::kSync, 0, 10, 10);
  launch(g, 5, 0, 10);
  call(g, OpKind::kSync, 0, 10, 10);
  g.recorded_ns = ns(25);
  return g;
}

TEST_CASE("sync_bound fires at min_impact_pct with at least sync_min_per_step syncs per step") {
  Input t;
  t.typical.idle_sync = 5 * ms;
  t.typical.syncs = 1;  // exactly sync_min_per_step
  auto f = rules::sync_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "sync_bound");
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  t.typical.syncs = 0.99;
  CHECK_FALSE(rules::sync_bound(t.in()));
  t.typical.syncs = 1;
  t.typical.idle_sync = 4.99 * ms;
  CHECK_FALSE(rules::sync_bound(t.in()));
}

TEST_CASE("sync_bound: confidence, evidence, and every sync but the last removed") {
  Input t;
  t.typical.idle_sync = 15 * ms;
  t.typical.syncs = 1;
  t.typical.sync_api_ns = 12 * ms;
  t.launchers.top_sync_api = "cudaStreamSynchronize";
  t.launchers.top_sync_caller = "Tensor.item (_tensor.py:1)";
  SyncRow r;
  r.kind = "stream";
  r.callers.push_back({"cudaStreamSynchronize", "decode (gen.py:7)", 600, 45.3});
  t.tables.syncs.push_back(r);
  t.graphs = {sync_then_refill()};
  auto f = rules::sync_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.625));  // 0.45 + 0.35·(15/30)
  t.typical.syncs = 2;
  t.typical.idle_sync = 30 * ms;
  f = rules::sync_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.95));  // 0.45 + 0.35 + 0.15 for 2 per step
  CHECK(f->title == "2 host-device synchronizations per step leave the GPU idle");
  CHECK(any_evidence(*f, "2.0 synchronizing calls per step (mostly cudaStreamSynchronize from Tensor.item (_tensor.py:1))"));
  CHECK(any_evidence(*f, "waited for the host to refill it: 30.0 ms per step (30 %)"));
  CHECK(any_evidence(*f, "host blocked in synchronizing calls: 12.0 ms per step"));
  CHECK(any_evidence(*f, "cudaStreamSynchronize from decode (gen.py:7) \u00d7600, 45.3 ms"));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  // remove_syncs: the first sync no longer waits; the refill gap runs at 0-5 while the first kernel runs, the second
  // kernel 10-20, the last sync (kept) returns at 20. Saving 25 - 20 = 5 ms.
  const Suggestion* remove = suggestion(*f, "Remove the synchronizations in Tensor.item (_tensor.py:1)");
  estimated(remove, 5, "high");
  CHECK(remove->model == "replay: every synchronization but the step's last no longer waits");
  estimated(suggestion(*f, "non_blocking=True"), 5, "high");
  not_estimated(suggestion(*f, "torch.where"));
  not_estimated(suggestion(*f, "set_sync_debug_mode"));
}

TEST_CASE("sync_bound on a generation loop that reads every token back: check the stop on the GPU every 16 tokens") {
  Input t;
  t.typical.idle_sync = 15 * ms;
  t.typical.syncs = 2;
  t.launchers.top_sync_caller = "Tensor.item (_tensor.py:1)";
  t.graphs = {sync_then_refill()};
  t.generation.detected = true;
  t.generation.decode.syncs = 2;
  t.generation.decode.call_syncs = 0;  // both between the model's calls: the loop's own reads
  t.generation.decode.sync_ms = 0.96;
  auto f = rules::sync_bound(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "2.0 blocking calls per generated token (0.960 ms blocked per token)"));
  const Suggestion* stop = suggestion(*f, "Stop reading every token back");
  estimated(stop, 5, "high");  // the same replay as the generic removal (sync_bound's test above)
  CHECK(has(stop->action, "finished |= next_token == eos"));
  CHECK(f->suggestions.front().action == stop->action);
  CHECK_FALSE(suggestion(*f, "Remove the synchronizations"));
  check_suggestions(*f);
  // Blocking calls inside the model's forward (routing, cache bookkeeping) are not the loop's to move: the caller is named.
  t.generation.decode.call_syncs = 2;
  f = rules::sync_bound(t.in());
  CHECK_FALSE(suggestion(*f, "Stop reading every token back"));
  CHECK(suggestion(*f, "Remove the synchronizations in Tensor.item (_tensor.py:1)"));
}

// ================================================================================================ copies

// A blocking pageable copy: 10 ms of staging on the host, then the 400 MB copy 10-40; a 20 ms kernel 40-60.
static StepGraph pageable_copy() {
  StepGraph g;
  call(g, OpKind::kCopySync, 0, 40, 30, {copy(30, 400'000'000, true)});
  launch(g, 0, 0, 20);
  g.recorded_ns = ns(60);
  return g;
}

static CopyRow copy_row(const char* dir, uint64_t bytes, double total_ms, const char* host_memory) {
  CopyRow r;
  r.direction = dir;
  r.bytes = bytes;
  r.total_ms = total_ms;
  r.count = 1;
  r.src_memory = std::string(dir) == "h2d" ? host_memory : "device";
  r.dst_memory = std::string(dir) == "h2d" ? "device" : host_memory;
  return r;
}

TEST_CASE("h2d_bound below saturated_share of the peak, pcie_saturation from it on") {
  Input t;
  t.link.peak_h2d_gbps = 20;
  t.link.peak_assumed = false;
  t.link.peak_note = "PCIe Gen4 x16 from the dump (practical peak 20.0 GB/s)";
  t.typical.h2d = 5 * ms;  // exactly min_impact_pct
  t.typical.h2d_bytes = 1.4e8;
  t.typical.copies_h2d = 1;
  t.tables.copies = {copy_row("h2d", 1'400'000'000, 100, "pinned")};  // 14 GB/s: exactly 0.70 of 20
  auto f = rules::h2d_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "pcie_saturation");
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  CHECK(f->title == "The PCIe link is saturated by host-to-device copies");
  CHECK(f->confidence == doctest::Approx(0.5));  // 0.5 + 0.4·0: at uncertain_below, not under it
  CHECK_FALSE(f->uncertain);
  CHECK(any_evidence(*f, "achieved 14.0 GB/s against PCIe Gen4 x16 from the dump (practical peak 20.0 GB/s) (70 % of peak)"));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  CHECK(suggestion(*f, "Copy fewer bytes: the input copies"));
  CHECK(suggestion(*f, "Keep data resident on the GPU"));
  CHECK(suggestion(*f, "Overlap the copies with compute"));
  CHECK(suggestion(*f, "nvidia-smi -q"));
  for (const auto& s : f->suggestions) CHECK_FALSE(s.estimated);
  // An assumed peak costs 0.1: now uncertain.
  t.link.peak_assumed = true;
  f = rules::h2d_bound(t.in());
  CHECK(f->confidence == doctest::Approx(0.4));
  CHECK(f->uncertain);
  // 17 GB/s (0.85 of the peak): 0.5 + 0.4·0.5 - 0.1; 20 GB/s: capped at 0.5 + 0.4 - 0.1.
  t.tables.copies = {copy_row("h2d", 1'700'000'000, 100, "pinned")};
  CHECK(rules::h2d_bound(t.in())->confidence == doctest::Approx(0.6));
  t.tables.copies = {copy_row("h2d", 2'000'000'000, 100, "pinned")};
  CHECK(rules::h2d_bound(t.in())->confidence == doctest::Approx(0.8));

  // Just under the saturated share: 13.99 GB/s is the way the copies are made, h2d_bound.
  t.tables.copies = {copy_row("h2d", 1'399'000'000, 100, "pinned")};
  f = rules::h2d_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "h2d_bound");
  CHECK(f->title == "host-to-device copies take 5.00 ms per step");
  // Just under min_impact_pct: nothing, saturated or not.
  t.typical.h2d = 4.99 * ms;
  CHECK_FALSE(rules::h2d_bound(t.in()));
  t.tables.copies = {copy_row("h2d", 1'400'000'000, 100, "pinned")};
  CHECK_FALSE(rules::h2d_bound(t.in()));
}

TEST_CASE("copies that carry data GPU to GPU through host memory: a peer copy first, not pinning") {
  Input t;
  t.link.peak_h2d_gbps = 20;
  t.link.pinned_gbps = 20;
  t.typical.h2d = 20 * ms;
  t.typical.h2d_bytes = 4e8;
  t.typical.h2d_pageable_bytes = 4e8;
  t.typical.copies_h2d = 2;
  t.tables.copies = {copy_row("h2d", 1'000'000'000, 100, "pageable")};
  t.graphs = {pageable_copy()};
  t.bounces.pairs = 10;
  t.bounces.bytes = 500'000'000;  // exactly half of the host-to-device bytes: kBouncedShare
  t.bounces.h2d_bytes = 1'000'000'000;
  t.bounces.from_device = 0;
  t.bounces.to_device = 1;
  auto f = rules::h2d_bound(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "50 % of the host-to-device bytes are one half of a copy from cuda:0 to cuda:1 through host memory"));
  const Suggestion* peer = suggestion(*f, "Copy GPU to GPU directly: x.to(\"cuda:1\", non_blocking=True) on a tensor on cuda:0");
  REQUIRE(peer);
  CHECK(peer->priority == "high");
  not_estimated(peer);
  CHECK_FALSE(suggestion(*f, "Pin the host buffers"));
  check_suggestions(*f);
  // Under half: the pageable copies are the story again.
  t.bounces.bytes = 499'999'999;
  f = rules::h2d_bound(t.in());
  CHECK(suggestion(*f, "Pin the host buffers"));
  CHECK_FALSE(suggestion(*f, "Copy GPU to GPU directly"));
}

TEST_CASE("h2d_bound from pageable memory: confidence, evidence and the pinned-copy replay") {
  Input t;
  t.link.peak_h2d_gbps = 20;
  t.link.peak_assumed = false;
  t.link.pinned_gbps = 20;
  t.link.peak_note = "the peak";
  t.typical.h2d = 20 * ms;
  t.typical.h2d_bytes = 4e8;
  t.typical.h2d_pageable_bytes = 4e8;
  t.typical.copies_h2d = 2;
  t.launchers.top_copies = {{"D2H 1.0 MB pinned", "postprocess"}, {"H2D 200.0 MB pageable", "load_batch (data.py:3)"}};
  t.tables.copies = {copy_row("h2d", 1'000'000'000, 100, "pageable"),   // 10 GB/s: 0.5 of the peak
                copy_row("d2h", 1'000'000'000, 1, "pageable")};    // the other direction: not counted
  t.graphs = {pageable_copy()};
  auto f = rules::h2d_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "h2d_bound");
  CHECK(f->confidence == doctest::Approx(0.8));  // 0.5 + 0.3·(20/40) + 0.15 (most bytes pageable)
  CHECK(any_evidence(*f, "400.0 MB per step in 2 copies; the GPU did nothing else for 20.0 ms per step (20 % of the step)"));
  CHECK(any_evidence(*f, "achieved 10.0 GB/s against the peak (50 % of peak)"));
  CHECK(any_evidence(*f, "1.00 GB of the 1.00 GB were copied from pageable memory"));
  CHECK(any_evidence(*f, "largest: H2D 200.0 MB pageable from load_batch (data.py:3)"));
  CHECK(f->metrics.at("bandwidth_gbps") == doctest::Approx(10));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  // pin_copies at 20 GB/s: the call loses its 10 ms of staging, the copy takes 4e8 B / 20 B/ns = 20 ms (0-20), the
  // kernel 20-40: 40. Saving 60 - 40 = 20 ms.
  const Suggestion* pin = suggestion(*f, "Pin the host buffers: H2D 200.0 MB pageable from load_batch (data.py:3) comes from pageable memory");
  estimated(pin, 20, "high");
  CHECK(pin->model == "replay: pageable copies at the link's practical peak");
  not_estimated(suggestion(*f, "Overlap the input copies with compute"));
  not_estimated(suggestion(*f, "Move fewer bytes: preprocess on the GPU"));
  not_estimated(suggestion(*f, "Keep reused data resident"));
  // Four copies per step: batch them instead of "keep resident".
  t.typical.copies_h2d = 4;
  f = rules::h2d_bound(t.in());
  CHECK(suggestion(*f, "Batch the 4 copies per step into fewer, larger ones"));
  CHECK_FALSE(suggestion(*f, "Keep reused data resident"));
  // Pinned memory: 0.5 + 0.3 (pct 40 and over) and no pin suggestion.
  t.tables.copies = {copy_row("h2d", 1'000'000'000, 100, "pinned")};
  t.typical.h2d = 50 * ms;
  f = rules::h2d_bound(t.in());
  CHECK(f->confidence == doctest::Approx(0.8));
  CHECK_FALSE(suggestion(*f, "Pin the host buffers"));
  check_suggestions(*f);
}

TEST_CASE("d2h_bound and its pcie_saturation form read the device-to-host copies only") {
  Input t;
  t.link.peak_h2d_gbps = 20;  // the same peak for both directions
  t.link.peak_assumed = false;
  t.link.peak_note = "the peak";
  t.typical.d2h = 10 * ms;
  t.typical.d2h_bytes = 1e7;
  t.typical.copies_d2h = 1;
  t.launchers.top_copies = {{"H2D 1.0 MB pageable", "load"}, {"D2H 10.0 MB pageable", "to_list (post.py:9)"}};
  t.tables.copies = {copy_row("d2h", 500'000'000, 100, "pageable"),      // 5 GB/s: 0.25
                copy_row("h2d", 2'000'000'000, 100, "pinned")};     // a saturated other direction: not counted
  auto f = rules::d2h_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "d2h_bound");
  CHECK(f->title == "device-to-host copies take 10.0 ms per step");
  CHECK(f->confidence == doctest::Approx(0.725));  // 0.5 + 0.3·(10/40) + 0.15
  CHECK(any_evidence(*f, "largest: D2H 10.0 MB pageable from to_list (post.py:9)"));
  check_suggestions(*f);
  // No graphs: the pin suggestion is not estimated.
  not_estimated(suggestion(*f, "Pin the host buffers: D2H 10.0 MB pageable from to_list (post.py:9)"));
  CHECK(suggestion(*f, "Overlap the output copies"));
  CHECK(suggestion(*f, "reduce on the GPU (argmax/top-k)"));
  // Pageable memory is the destination's: the same bytes into pinned memory are not pageable.
  t.tables.copies = {copy_row("d2h", 500'000'000, 100, "pinned")};
  f = rules::d2h_bound(t.in());
  CHECK(f->confidence == doctest::Approx(0.575));
  CHECK_FALSE(suggestion(*f, "Pin the host buffers"));
  check_suggestions(*f);
  // Saturated at 0.70.
  t.tables.copies = {copy_row("d2h", 1'400'000'000, 100, "pinned")};
  f = rules::d2h_bound(t.in());
  CHECK(f->category == "pcie_saturation");
  CHECK(f->title == "The PCIe link is saturated by device-to-host copies");
  t.tables.copies = {copy_row("d2h", 1'399'000'000, 100, "pinned")};
  CHECK(rules::d2h_bound(t.in())->category == "d2h_bound");
  t.typical.d2h = 4.99 * ms;
  CHECK_FALSE(rules::d2h_bound(t.in()));
}

// ================================================================================================ memory_alloc

// Kernel 0-10; a cudaFree waits for it (to 10) and unmaps for 5 (to 15); a cudaMalloc of 5 (to 20); kernel 20-30.
static StepGraph free_and_malloc() {
  StepGraph g;
  launch(g, 0, 0, 10);
  call(g, OpKind::kFree, 0, 15, 10);
  call(g, OpKind::kAlloc, 0, 5);
  launch(g, 0, 0, 10);
  g.recorded_ns = ns(30);
  return g;
}

TEST_CASE("memory_alloc on the device fires at min_impact_pct; host pressure above its faults or RSS thresholds") {
  Input t;
  t.typical.idle_memory = 5 * ms;
  t.typical.allocs = 4;
  auto f = rules::memory_alloc(t.in());
  REQUIRE(f);
  CHECK(f->category == "memory_alloc");
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  CHECK(f->title == "4 device allocations/frees per step cost 5.00 ms");
  t.typical.idle_memory = 4.99 * ms;
  CHECK_FALSE(rules::memory_alloc(t.in()));

  // Host pressure: more than host_pressure_faults page faults per step, or more than host_pressure_rss of growth.
  t.counters.faults_per_step = 1000;
  CHECK_FALSE(rules::memory_alloc(t.in()));
  t.counters.faults_per_step = 1001;
  f = rules::memory_alloc(t.in());
  REQUIRE(f);
  CHECK(f->title == "Host memory pressure during the steps");
  CHECK(f->confidence == doctest::Approx(0.35));
  CHECK(f->uncertain);
  CHECK(f->impact_ms == doctest::Approx(4.99));  // the device idle, under the reporting share, stays the impact
  CHECK(any_evidence(*f, "1001 page faults per step"));
  check_suggestions(*f);
  t.counters.faults_per_step = 0;
  t.counters.rss_growth_bytes = 256e6;
  CHECK_FALSE(rules::memory_alloc(t.in()));
  t.counters.rss_growth_bytes = 256e6 + 1e6;
  f = rules::memory_alloc(t.in());
  REQUIRE(f);
  CHECK(f->title == "Host memory pressure during the steps");
  CHECK(any_evidence(*f, "process RSS grew by 257.0 MB over the steps"));
}

TEST_CASE("memory_alloc: confidence, evidence, examples and the allocation cache replay") {
  Input t;
  t.typical.idle_memory = 10 * ms;
  t.typical.allocs = 2;
  t.typical.alloc_api_ns = 8 * ms;
  t.launchers.top_alloc_api = "cudaFree";
  t.launchers.top_alloc_caller = "empty_cache (memory.py:5)";
  AllocRow r;
  r.op = "free";
  r.memory = "device";
  r.count = 40;
  r.bytes = 80'000'000;
  r.api_ms = 120;
  r.callers.push_back({"cudaFree", "empty_cache (memory.py:5)", 40, 120});
  t.tables.allocations.push_back(r);
  // Four typical steps: the examples are the three longest allocation calls, longest first.
  const double worst[] = {1, 3, 2, 0.5};
  for (uint32_t i = 0; i < 4; ++i) {
    detail::StepMetrics s;
    s.start = int64_t(i) * ns(100);
    s.dur = ns(100);
    s.worst_alloc = {s.start + ns(10), s.start + ns(10 + worst[i]), i};
    t.steps.push_back(s);
    t.selection.steady.push_back(true);
  }
  t.graphs = {free_and_malloc()};
  auto f = rules::memory_alloc(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.7));  // 0.5 + 0.4·(10/20)
  CHECK(any_evidence(*f, "2.0 allocation/free calls per step (mostly cudaFree from empty_cache (memory.py:5)), 8.00 ms of host time per step; the GPU was idle 10.0 ms per step"));
  CHECK(any_evidence(*f, "free device: 40 events, 80.0 MB, 120.0 ms in API calls over the trace"));
  CHECK(any_evidence(*f, "cudaFree from empty_cache (memory.py:5) \u00d740, 120.0 ms"));
  REQUIRE(f->examples.size() == 3);
  CHECK(f->examples[0].what == "step 1: host in cudaFree for 3.00 ms");
  CHECK(f->examples[0].start_ms == doctest::Approx(110));
  CHECK(f->examples[1].what == "step 2: host in cudaFree for 2.00 ms");
  CHECK(f->examples[2].what == "step 0: host in cudaFree for 1.00 ms");
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low"});
  // remove_allocs: the free neither waits nor costs, nor does the malloc: the second kernel queues at 0 and runs
  // after the first, 10-20. Saving 30 - 20 = 10 ms.
  estimated(suggestion(*f, "Keep PyTorch's caching allocator on"), 10, "high");
  const Suggestion* reuse = suggestion(*f, "Allocate once and reuse: preallocate the buffers empty_cache (memory.py:5) creates");
  estimated(reuse, 10, "high");
  CHECK(reuse->model == "replay: allocations and frees served from a cache (no call, no synchronization)");
  not_estimated(suggestion(*f, "cudaMallocAsync"));
  not_estimated(suggestion(*f, "Keep shapes static"));
  CHECK_FALSE(suggestion(*f, "Warm up before measuring"));
  // 20 % of the step and over: 0.9.
  t.typical.idle_memory = 25 * ms;
  CHECK(rules::memory_alloc(t.in())->confidence == doctest::Approx(0.9));
}

TEST_CASE("memory_alloc: a first CUDA call of 20 ms or more inside steps without warm-up is context creation") {
  Input t;
  t.typical.idle_memory = 10 * ms;
  t.typical.steps = 4;  // the finding's total over the typical steps: 40 ms; half of it: 20 ms
  t.typical.allocs = 1;
  t.first_call.in_steps = true;
  t.first_call.name = "cudaMalloc";
  t.first_call.ms = 20;
  auto f = rules::memory_alloc(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.4));  // 0.5 + 0.4·(10/20) - 0.3
  CHECK(f->uncertain);
  CHECK(any_evidence(*f, "the step thread's first CUDA call, cudaMalloc (20.0 ms), lies inside the analysed steps: most of it is creating the CUDA context"));
  check_suggestions(*f);
  not_estimated(suggestion(*f, "Warm up before measuring"));
  // The warm-up suggestion is high but comes last, after the low one.
  CHECK(priorities(*f) == std::vector<std::string>{"high", "high", "medium", "low", "high"});

  auto init = [&] { return any_evidence(*rules::memory_alloc(t.in()), "creating the CUDA context"); };
  t.typical.steps = 5;  // half the total is 25 ms: the first call is not most of it
  CHECK_FALSE(init());
  t.typical.steps = 1;
  t.first_call.ms = 19.99;  // under 20 ms
  CHECK_FALSE(init());
  t.first_call.ms = 20;
  CHECK(init());
  t.selection.warmup = 1;  // with a warm-up it never applies
  CHECK_FALSE(init());
  t.selection.warmup = 0;
  t.first_call.in_steps = false;
  CHECK_FALSE(init());
}

// ================================================================================================ gpu_bound

TEST_CASE("launch_bound's kernel to fuse is a short one launched often, not the kernel with the most time") {
  Input t;
  t.typical.idle_gaps = 15 * ms;
  t.typical.kernels = 200;
  t.launchers.short_kernel_ns = 20'000;
  KernelRow big, small_rare, small_often;
  big.name = "cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x3_nn_align1";
  big.count = 10, big.mean_us = 3000;
  small_rare.name = "fill_kernel", small_rare.count = 5, small_rare.mean_us = 2;
  small_often.name = "vectorized_elementwise_kernel", small_often.count = 180, small_often.mean_us = 4.5;
  t.tables.kernels = {big, small_rare, small_often};
  auto f = rules::launch_bound(t.in());
  REQUIRE(f);
  CHECK(suggestion(*f, "e.g. 'vectorized_elementwise_kernel' (4.5 us x 180)"));
  CHECK_FALSE(suggestion(*f, "cutlass_75"));
  t.tables.kernels = {big};  // no short kernel: no example
  f = rules::launch_bound(t.in());
  CHECK(suggestion(*f, "Fuse the small kernels launched from the step (torch.compile, fused optimizers/ops, a custom kernel)"));
  CHECK_FALSE(suggestion(*f, "e.g."));
}

TEST_CASE("gpu_bound: chains of elementwise kernels are named, and fusing them is priced") {
  Input t;
  t.breakdown.gpu_utilization = 0.95;
  t.breakdown.gpu_compute_ms = 90;
  t.typical.kernel_ns = 90 * ms;
  t.chains.chains_per_step = 12;
  t.chains.kernels_per_step = 48;            // 4 kernels per chain
  t.chains.ns_per_step = 20 * ms;            // 22 % of the kernel time
  t.chains.longest = 6;
  t.chains.most_frequent = "mul -> tanh -> add -> mul";
  t.chains.most_frequent_per_step = 8;
  auto f = rules::gpu_bound(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "12 chains of elementwise kernels per step (48 kernels, 20.0 ms of kernel time; the longest 6 "
                         "kernels); most frequent: mul -> tanh -> add -> mul (8 per step)"));
  // Fused, each chain takes one kernel's mean time: 20 x (1 - 12/48) = 15 ms.
  estimated(suggestion(*f, "Fuse the chains of elementwise kernels (mul -> tanh -> add -> mul, ...)"), 15, "high");
  // Under 5 % of the kernel time: not worth a line.
  t.chains.ns_per_step = 4.4 * ms;
  f = rules::gpu_bound(t.in());
  CHECK_FALSE(suggestion(*f, "Fuse the chains"));
}

TEST_CASE("gemm_fallback: a 1-element-aligned or pre-Ampere GEMM on an H100, named with its launcher and the padding") {
  Input t;
  t.process["gpu.0.compute_capability"] = "9.0";
  t.typical.kernel_ns = 50 * ms;
  KernelRow head, ok;
  head.name = "cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x3_nn_align1";
  head.count = 40, head.mean_us = 3370, head.share = 0.44, head.launched_by = "GPT2LMHeadModel.forward / layer lm_head";
  ok.name = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel";
  ok.count = 400, ok.share = 0.5;
  t.tables.kernels = {head, ok};
  auto f = rules::gemm_fallback(t.in());
  REQUIRE(f);
  CHECK(f->category == "gemm_fallback");
  CHECK(f->impact_ms == doctest::Approx(16.5));  // 22 ms in the kernel (44 % of 50), two causes: 4x, 3/4 of it lost
  CHECK(f->confidence == doctest::Approx(0.9));  // 0.6 + 0.3·min(1, 0.44/0.3)
  CHECK(f->title == "GEMMs on a fallback kernel take 44 % of GPU time: align1");
  CHECK(any_evidence(*f, "the fallback kernels take 22.0 ms of the 50.0 ms of kernel time per step; an aligned shape lets "
                         "the library pick its fast kernels, at least 2x faster per cause: 16.5 ms per step"));
  CHECK(any_evidence(*f, "align1: its operands are aligned to 1 element, so one of M, N, K (or a leading dimension) is not a "
                         "multiple of 8; built for sm75 on a GPU of compute capability 9.0, without the newer tensor-core paths"));
  const Suggestion* pad = suggestion(*f, "Pad the vocabulary to a multiple of 64");
  REQUIRE(pad);
  CHECK(pad->priority == "high");
  not_estimated(pad);  // the step is not GPU-paced here (utilization 0)
  check_suggestions(*f);
  t.breakdown.gpu_utilization = 0.9;  // GPU-paced: the kernels' time saved is the step's
  f = rules::gemm_fallback(t.in());
  estimated(suggestion(*f, "Pad the vocabulary to a multiple of 64"), 16.5, "high");
  t.breakdown.gpu_utilization = 0;
  // Launched by something else: pad "the dimension", not the vocabulary.
  t.tables.kernels[0].launched_by = "MLP.forward (model.py:40)";
  f = rules::gemm_fallback(t.in());
  CHECK(suggestion(*f, "Pad the dimension of the GEMMs launched by MLP.forward (model.py:40) that is not a multiple of 8"));
  // ... unless the program runs a causal language model: nn.Linear's frame names no layer, the model class does.
  PythonRow model;
  model.qualname = "GPT2LMHeadModel.forward";
  t.tables.python = {model};
  t.tables.kernels[0].launched_by = "Linear.forward (linear.py:130)";
  f = rules::gemm_fallback(t.in());
  CHECK(suggestion(*f, "Pad the vocabulary to a multiple of 64 so the LM head's GEMM is aligned (launched by Linear.forward"));
  t.tables.python.clear();
  // Under min_impact_pct of the step: nothing.
  t.tables.kernels[0].share = 0.1326;  // 3/4 of 6.63 ms: 4.97 ms of the 100 ms step
  CHECK_FALSE(rules::gemm_fallback(t.in()));
  // An sm80 kernel on a Hopper is cuBLAS's ordinary choice; align8 of fp16 is aligned; an older GPU: no fallback.
  t.tables.kernels[0] = head;
  t.tables.kernels[0].name = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_align8";
  CHECK_FALSE(rules::gemm_fallback(t.in()));
  t.tables.kernels[0].name = "cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x3_nn_align8";
  t.process["gpu.0.compute_capability"] = "7.5";
  CHECK_FALSE(rules::gemm_fallback(t.in()));
  // fp32 SIMT kernels have no faster path to lose: align1 is not a fallback there (a torch.profiler trace of an fp32
  // decoder on the H100 runs Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>).
  t.process["gpu.0.compute_capability"] = "9.0";
  t.tables.kernels[0].name = "Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>";
  CHECK_FALSE(rules::gemm_fallback(t.in()));
  t.tables.kernels[0].name = "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align2";
  CHECK(rules::gemm_fallback(t.in()));
}

TEST_CASE("gpu_bound fires from gpu_bound_util busy with gpu_bound_compute of the step in kernels") {
  Input t;
  t.breakdown.gpu_utilization = 0.80;  // exactly gpu_bound_util
  t.breakdown.gpu_compute_ms = 50;     // exactly gpu_bound_compute of the 100 ms step
  auto f = rules::gpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->category == "gpu_bound");
  CHECK_FALSE(f->informational);
  CHECK(f->impact_ms == doctest::Approx(50));
  CHECK(f->impact_pct == doctest::Approx(50));
  CHECK(f->confidence == doctest::Approx(0.80));  // min(0.95, utilization)
  CHECK(f->title == "The GPU is busy 80 % of the step (healthy; the kernels themselves set the pace)");
  t.breakdown.gpu_utilization = 0.7999;
  CHECK_FALSE(rules::gpu_bound(t.in()));
  t.breakdown.gpu_utilization = 0.80;
  t.breakdown.gpu_compute_ms = 49.99;
  CHECK_FALSE(rules::gpu_bound(t.in()));
  // Busy with copies (utilization counts them), little compute: not gpu_bound.
  t.breakdown.gpu_utilization = 0.99;
  t.breakdown.gpu_compute_ms = 10;
  CHECK_FALSE(rules::gpu_bound(t.in()));
}

TEST_CASE("gpu_bound names the kernels; its suggestions are not estimated") {
  Input t;
  t.breakdown.gpu_utilization = 0.99;
  t.breakdown.gpu_compute_ms = 90;
  KernelRow k;
  k.name = "sm90_gemm";
  k.count = 200;
  k.share = 0.6;
  k.mean_us = 250;
  k.launched_by = "Linear.forward";
  t.tables.kernels = {k};
  auto f = rules::gpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->confidence == doctest::Approx(0.95));  // capped
  CHECK(any_evidence(*f, "kernel 'sm90_gemm': 60 % of GPU time, 250.0 us mean x 200, launched by Linear.forward"));
  CHECK(any_evidence(*f, "GPU compute 90.0 ms of the 100.0 ms step"));
  check_suggestions(*f);
  // The program facts hold no fp32_matmul: no lower-precision advice.
  CHECK(priorities(*f) == std::vector<std::string>{"medium", "medium", "low"});
  CHECK_FALSE(suggestion(*f, "Speed up 'sm90_gemm'"));
  not_estimated(suggestion(*f, "Fuse memory-bound kernels around 'sm90_gemm'"));
  not_estimated(suggestion(*f, "Raise the batch size"));
  not_estimated(suggestion(*f, "Nsight Compute"));
  // Matrix kernels off tensor cores (the fact holds): TF32 first, not estimated on a GPU the dump does not name.
  t.facts.holds["fp32_matmul"] = "test";
  f = rules::gpu_bound(t.in());
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "medium", "medium", "low"});
  not_estimated(suggestion(*f, "Speed up 'sm90_gemm'"));
  CHECK(has(suggestion(*f, "Speed up 'sm90_gemm'")->action, "allow_tf32 = True"));
  CHECK(suggestion(*f, "Speed up 'sm90_gemm'")->try_knob == "allow_tf32=true");  // measurable: iscope-run --try
  // On an H200 (sm_90): the off-tensor-core matrix time at 495/67, the datasheet's TF32-to-FP32 ratio.
  t.process["gpu.0.compute_capability"] = "9.0";
  t.tables.kernels.front().total_ms = 120;  // all of the kernel time: the step's 90 ms of kernels
  t.typical.kernel_ns = 90 * ms;
  f = rules::gpu_bound(t.in());
  const Suggestion* tf32 = suggestion(*f, "Speed up 'sm90_gemm'");
  REQUIRE(tf32);
  CHECK(tf32->estimated);
  CHECK(tf32->impact_ms == doctest::Approx(90 * (1 - 67.0 / 495.0)).epsilon(0.001));
  CHECK(tf32->try_knob == "allow_tf32=true");
  t.process.erase("gpu.0.compute_capability");
  t.facts.holds.erase("fp32_matmul");
  // The same GEMM on tensor cores: the work itself is what to cut.
  t.tables.kernels.front().name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1";
  f = rules::gpu_bound(t.in());
  CHECK_FALSE(suggestion(*f, "Speed up"));
  not_estimated(suggestion(*f, "The matrix kernels already run on tensor cores"));
  // A whole CUDA graph at the top: first, how to see its kernels.
  t.tables.kernels.front().name = "CUDA graph 3";
  t.tables.kernels.front().whole_graph = true;
  f = rules::gpu_bound(t.in());
  CHECK(any_evidence(*f, "'CUDA graph 3' is a whole CUDA graph launch, recorded as one unit"));
  CHECK(has(f->suggestions.front().action, "graph_nodes=true"));
  CHECK(priorities(*f) == std::vector<std::string>{"high", "medium", "medium", "low"});
}

// ================================================================================================ warmup

TEST_CASE("warmup: informational, when leading steps were left out and steady ones remain") {
  Input t;
  detail::StepMetrics s0;
  s0.start = 0;
  s0.dur = ns(325);
  s0.compute = 20 * ms;
  s0.host_out_api = 15 * ms;
  t.steps.push_back(s0);
  for (int i = 1; i < 4; ++i) {
    detail::StepMetrics s;
    s.start = ns(325) + (i - 1) * ns(10);
    s.dur = ns(10);
    t.steps.push_back(s);
  }
  CHECK_FALSE(rules::warmup(t.in()));  // no warm-up
  t.selection.warmup = 1;
  t.selection.steady_median_ns = 10 * ms;
  t.selection.reason = "step 0 took 32x the steady median";
  t.first_call.in_steps = true;
  t.first_call.name = "cudaGetDevice";
  t.first_call.ms = 290;
  auto f = rules::warmup(t.in());
  REQUIRE(f);
  CHECK(f->category == "warmup");
  CHECK(f->informational);
  CHECK(f->impact_ms == 0);
  CHECK(f->impact_pct == 0);
  CHECK(f->confidence == doctest::Approx(0.9));
  CHECK(f->title == "Warm-up: the first 1 step(s) took 325.0 ms (a steady step: 10.0 ms); left out of every number above");
  CHECK(any_evidence(*f, "step 0 took 32x the steady median"));
  CHECK(any_evidence(*f, "step 0 325.0 ms: 310.0 ms in CUDA calls, 20.0 ms GPU compute, 15.0 ms host outside CUDA calls"));
  CHECK(any_evidence(*f, "cudaGetDevice (290.0 ms), lies in a step"));
  REQUIRE(f->examples.size() == 1);
  CHECK(f->examples[0].end_ms == doctest::Approx(325));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"medium", "medium", "low"});
  CHECK(suggestion(*f, "Warm up at start-up"));
  CHECK(suggestion(*f, "CUDA_MODULE_LOADING=EAGER"));
  CHECK(suggestion(*f, "--skip-steps N"));
  // A Python program (the fixture's facts) is told of PyTorch's switches, a native one of cuDNN's and cuBLASLt's.
  CHECK(has(suggestion(*f, "CUDA_MODULE_LOADING=EAGER")->action, "torch.compile"));
  t.facts.holds.erase("python");
  f = rules::warmup(t.in());
  REQUIRE(f);
  CHECK_FALSE(has(suggestion(*f, "CUDA_MODULE_LOADING=EAGER")->action, "torch"));
  CHECK(has(suggestion(*f, "CUDA_MODULE_LOADING=EAGER")->action, "cuDNN's Find"));
  t.facts.holds["python"] = "test";
  // Every step warm-up: nothing steady to compare with, no finding.
  t.selection.warmup = 4;
  CHECK_FALSE(rules::warmup(t.in()));
}

TEST_CASE("warmup without GPU work: the durations only, and two suggestions") {
  Input t;
  t.gpu_work = false;
  for (int i = 0; i < 3; ++i) {
    detail::StepMetrics s;
    s.start = i * ns(50);
    s.dur = ns(i == 0 ? 50 : 5);
    t.steps.push_back(s);
  }
  t.selection.warmup = 1;
  t.selection.steady_median_ns = 5 * ms;
  const auto f = rules::warmup(t.in());
  REQUIRE(f);
  CHECK(any_evidence(*f, "step 0 50.0 ms"));
  CHECK_FALSE(any_evidence(*f, "CUDA calls"));
  // Code as it runs: two suggestions, not the three docs/analysis.md promises for every finding.
  CHECK(priorities(*f) == std::vector<std::string>{"medium", "low"});
  CHECK(has(f->suggestions.front().action, "imports, lazy initialization"));
}

// ================================================================================================ slow_steps

TEST_CASE("slow_steps: informational, names what grew in the slowest outliers") {
  Input t;
  t.typical.host_wait = 5 * ms;
  t.typical.compute = 60 * ms;
  for (int i = 0; i < 6; ++i) {
    detail::StepMetrics s;
    s.start = i * ns(200);
    s.dur = ns(100);
    s.compute = 60 * ms;
    s.host_wait = 5 * ms;
    t.steps.push_back(s);
  }
  CHECK_FALSE(rules::slow_steps(t.in()));  // no outlier
  t.steps[2].dur = ns(180);
  t.steps[2].host_wait = 30 * ms;  // +25 ms waiting
  t.steps[4].dur = ns(160);
  t.steps[4].compute = 100 * ms;   // +40 ms GPU compute
  t.selection.outliers = {2, 4};
  t.selection.outlier_bound_ns = 150 * ms;
  t.selection.steady_median_ns = 100 * ms;
  t.sampling.run_step = {10, 11, 12, 13, 14, 15};
  const auto f = rules::slow_steps(t.in());
  REQUIRE(f);
  CHECK(f->category == "slow_steps");
  CHECK(f->informational);
  CHECK(f->impact_ms == 0);
  CHECK(f->confidence == doctest::Approx(0.8));
  CHECK(f->title == "2 steady step(s) slower than 150.0 ms (the median is 100.0 ms)");
  REQUIRE(f->evidence.size() == 2);  // the slowest first
  CHECK(f->evidence[0] == "step 2 (step 12 of the run): 180.0 ms; most of the difference: waiting (sleep, I/O, a queue) "
                          "(+25.0 ms against the typical step)");
  CHECK(f->evidence[1] == "step 4 (step 14 of the run): 160.0 ms; most of the difference: GPU compute (+40.0 ms against "
                          "the typical step)");
  REQUIRE(f->examples.size() == 2);
  CHECK(f->examples[0].what == "slow step 2");
  CHECK(f->examples[0].start_ms == doctest::Approx(400));
  CHECK(f->metrics.at("slow_steps") == 2);
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"medium", "medium", "low"});
  CHECK(suggestion(*f, "Open the slowest step in the timeline"));
  CHECK(suggestion(*f, "gc.freeze()"));
  CHECK(suggestion(*f, "GPU clocks"));
}

// ================================================================================================ cpu_contention

// 40 ms of host time, a launch of a 20 ms kernel (40-60), a 40 ms tail: 80 ms.
static StepGraph contended_host() {
  StepGraph g;
  launch(g, 40, 0, 20);
  g.tail_ns = ns(40);
  g.recorded_ns = ns(80);
  return g;
}

static Input run_queue_input() {
  Input t;
  t.typical.host_state_measured = true;
  t.typical.idle_host = 80 * ms;
  t.typical.host_out_api = 80 * ms;
  t.typical.host_running = 60 * ms;
  t.typical.host_contention = 20 * ms;  // all run queue
  t.counters.step_thread_runqueue_share = 0.2;
  t.graphs = {contended_host()};
  return t;
}

TEST_CASE("cpu_contention in the run queue: other threads take the step thread's CPU") {
  Input t = run_queue_input();
  auto f = rules::cpu_contention(t.in());
  REQUIRE(f);
  CHECK(f->category == "cpu_contention");
  CHECK(f->impact_ms == doctest::Approx(20));
  CHECK(f->impact_pct == doctest::Approx(20));
  CHECK(f->title == "Thread 'MainThread' is delayed by other threads taking its CPU");
  CHECK(f->confidence == doctest::Approx(0.675));  // 0.55 + 0.25·((20/80)/0.5)
  CHECK(any_evidence(*f, "while the GPU waited on it, thread 'MainThread' was runnable but off a CPU 20.0 ms per step"));
  CHECK(any_evidence(*f, "waited in the run queue for a CPU 20 % of the time (schedstat)"));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "medium", "low"});
  // host_gap_scale = 1 - 20/80 = 0.75: the gap 30, kernel 30-50, the tail 30: 60. Saving 80 - 60 = 20 ms.
  const Suggestion* pin = suggestion(*f, "Give the inference thread a CPU of its own");
  estimated(pin, 20, "high");
  CHECK(pin->model == "replay: the contended share of the host time removed");
  not_estimated(suggestion(*f, "Reduce intra-op thread pools"));
  not_estimated(suggestion(*f, "Stop or throttle background threads and processes"));
  CHECK_FALSE(suggestion(*f, "CPU limit"));

  // More involuntary switches than one per step add 0.1; contention of half the host time gives the full 0.25.
  t.counters.involuntary_per_step = 2;
  t.typical.host_out_api = 40 * ms;
  f = rules::cpu_contention(t.in());
  CHECK(f->confidence == doctest::Approx(0.9));
  CHECK(any_evidence(*f, "2.0 involuntary context switches of the step thread per step"));
  // The GIL is "most of it" only above half: at exactly half it is still the run queue.
  t.typical.host_gil = 10 * ms;
  CHECK(rules::cpu_contention(t.in())->title == "Thread 'MainThread' is delayed by other threads taking its CPU");
  t.typical.host_gil = 10.01 * ms;
  CHECK(has(rules::cpu_contention(t.in())->title, "holding the GIL"));
}

TEST_CASE("cpu_contention fires from min_impact_pct, and without counters only with a busy Python thread") {
  Input t = run_queue_input();
  t.typical.host_contention = 5 * ms;
  auto f = rules::cpu_contention(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(5));
  t.typical.host_contention = 4.99 * ms;
  CHECK_FALSE(rules::cpu_contention(t.in()));
  // Without counters: nothing, unless another Python thread was busy (then min(0.5, its share) of the host idle).
  t.typical.host_state_measured = false;
  t.typical.host_contention = 0;
  CHECK_FALSE(rules::cpu_contention(t.in()));
  t.counters.other_busy_python_threads = 1;
  t.counters.other_python_busy_share = 0.8;
  f = rules::cpu_contention(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(40));  // 80 ms × 0.5
  CHECK(f->confidence == doctest::Approx(0.35));
  CHECK(f->uncertain);
  CHECK(any_evidence(*f, "no per-thread CPU counters in this trace"));
}

TEST_CASE("cpu_contention held back by the cgroup's CPU quota (quota_share_of_runqueue)") {
  Input t = run_queue_input();
  t.process["cpu_quota"] = "0.5";
  t.counters.steps_span_ns = 1e9;
  t.counters.cgroup_periods = 10;
  t.counters.cgroup_throttled_periods = 5;
  // The wall time held back must reach half the step thread's run-queue wait: 0.5 × 0.2 of the 1 s span = 100 ms.
  t.counters.cgroup_throttled_ns = 100 * ms;
  auto f = rules::cpu_contention(t.in());
  REQUIRE(f);
  CHECK(f->title == "Thread 'MainThread' is held back by its cgroup's CPU quota (0.50 CPUs)");
  CHECK(f->impact_ms == doctest::Approx(20));
  CHECK(f->confidence == doctest::Approx(0.675));  // the same formula as the run queue's
  CHECK(any_evidence(*f, "the process's cgroup ran out of its CPU quota (0.50 CPUs) in 5 of 10 scheduling periods during "
                         "the steps; its threads were held back 100.0 ms in all"));
  CHECK(f->metrics.at("cpu_quota_cpus") == doctest::Approx(0.5));
  check_suggestions(*f);
  CHECK(priorities(*f) == std::vector<std::string>{"high", "medium", "low"});
  const Suggestion* raise = suggestion(*f, "Raise the CPU limit of the container or cgroup (now 0.50 CPUs");
  estimated(raise, 20, "high");  // the same change as the run queue's: 80 - 60
  not_estimated(suggestion(*f, "Size the thread pools to the quota, not the machine: torch.set_num_threads(1)"));
  not_estimated(suggestion(*f, "Move CPU work that is not on the step's path"));
  CHECK_FALSE(suggestion(*f, "Give the inference thread a CPU of its own"));

  auto quota = [&] { return has(rules::cpu_contention(t.in())->title, "CPU quota"); };
  t.counters.cgroup_throttled_ns = 99 * ms;  // just under half the run-queue wait: other threads
  CHECK_FALSE(quota());
  t.counters.cgroup_throttled_ns = 800 * ms;  // summed over 8 CPUs, but one period of 100 ms can hold back 100 ms at most
  t.counters.cgroup_throttled_periods = 1;
  CHECK(quota());
  t.counters.cgroup_throttled_periods = 0.9;  // 90 ms at most
  CHECK_FALSE(quota());
  t.process["cpu_quota_period_us"] = "200000";  // a 200 ms period: 180 ms at most
  CHECK(quota());
  t.counters.cgroup_throttled_periods = 0;  // no throttled period: never the quota
  CHECK_FALSE(quota());
  t.counters.cgroup_throttled_periods = 5;
  t.process.erase("cpu_quota");  // no quota recorded: never the quota
  CHECK_FALSE(quota());
}

// ================================================================================================ run_all

namespace {

// Steps 0..4, the first a warm-up, step 4 a slow outlier; the typical step as the brief gives it.
void add_steps(Input& t) {
  for (uint32_t i = 0; i < 5; ++i) {
    detail::StepMetrics s;
    s.start = int64_t(1'000'000'000) + int64_t(i) * ns(100);
    s.dur = ns(i == 4 ? 300 : 100);
    t.steps.push_back(s);
    t.selection.steady.push_back(i > 0);
  }
  t.selection.warmup = 1;
  t.selection.outliers = {4};
  t.selection.outlier_bound_ns = 150 * ms;
  t.selection.steady_median_ns = 100 * ms;
}

std::vector<std::string> categories(const std::vector<Finding>& v) {
  std::vector<std::string> c;
  for (const auto& f : v) c.push_back(f.category);
  return c;
}

}  // namespace

TEST_CASE("run_all ranks by impact, equal impacts in registry order, informational last; the first is primary") {
  Input t;
  add_steps(t);
  t.typical.host_state_measured = true;
  t.typical.idle_host = 60 * ms;
  t.typical.host_out_api = 60 * ms;
  t.typical.host_running = 30 * ms;     // cpu_bound 30
  t.typical.host_contention = 30 * ms;  // cpu_contention 30 (run queue)
  t.typical.idle_sync = 30 * ms;        // sync_bound 30
  t.typical.syncs = 2;
  t.typical.idle_gaps = 40 * ms;        // launch_bound 40
  t.typical.kernels = 50;
  t.breakdown.gpu_utilization = 0.1;
  // The trace's origin: the representative step (1) starts 5 ms into the trace.
  t.representative.index = 1;
  t.representative.start_ms = 5;
  const auto v = rules::run_all(t.in());
  // Registry order for the three 30 ms findings: cpu_contention, cpu_bound, sync_bound (not kCategories' order,
  // which puts cpu_bound first).
  CHECK(categories(v) == std::vector<std::string>{"launch_bound", "cpu_contention", "cpu_bound", "sync_bound", "warmup",
                                                  "slow_steps"});
  REQUIRE(v.size() == 6);
  CHECK(v[0].primary);
  for (size_t i = 1; i < v.size(); ++i) CHECK_FALSE(v[i].primary);
  CHECK(v[4].informational);
  CHECK(v[5].informational);
  // The impacts are per typical step of 100 ms (m.typical.dur), and the examples on the trace's clock.
  CHECK(v[0].impact_pct == doctest::Approx(40));
  REQUIRE_FALSE(v[4].examples.empty());
  CHECK(v[4].examples[0].start_ms == doctest::Approx(-95));  // step 0 starts 100 ms before step 1 (at 5 ms)
  CHECK(v[5].examples[0].start_ms == doctest::Approx(305));  // step 4: 5 + 300

  // A larger informational finding never outranks: informational stays last whatever the impacts.
  t.typical.idle_gaps = 0;
  t.typical.host_running = t.typical.host_contention = t.typical.idle_sync = 0;
  const auto info = rules::run_all(t.in());
  CHECK(categories(info) == std::vector<std::string>{"warmup", "slow_steps"});
  for (const auto& f : info) CHECK_FALSE(f.primary);  // informational first: no primary
}

TEST_CASE("run_all: a healthy GPU-bound step makes gpu_bound primary; nothing runs without a typical step") {
  Input t;
  add_steps(t);
  t.breakdown.gpu_utilization = 0.95;
  t.breakdown.gpu_compute_ms = 90;
  t.typical.idle_sync = 5 * ms;
  t.typical.syncs = 1;
  auto v = rules::run_all(t.in());
  CHECK(categories(v) == std::vector<std::string>{"gpu_bound", "sync_bound", "warmup", "slow_steps"});
  CHECK(v.front().primary);

  Input none = t;  // no typical step: no finding, not even the informational ones
  none.typical.steps = 0;
  CHECK(rules::run_all(none.in()).empty());
  none = t;
  none.typical.dur = 0;
  CHECK(rules::run_all(none.in()).empty());
  none = t;
  none.steps.clear();
  CHECK(rules::run_all(none.in()).empty());
}

TEST_CASE("communication: a rank's collectives alone on the GPU, at 5 % of the step; no saving claimed") {
  Input t;
  t.breakdown.gpu_comm_ms = 4.99;
  CHECK_FALSE(rules::communication(t.in()));
  t.breakdown.gpu_comm_ms = 5;
  t.tables.kernels.push_back(KernelRow{});
  t.tables.kernels.back().name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  t.tables.kernels.back().count = 40;
  auto f = rules::communication(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(5));
  CHECK(f->impact_pct == doctest::Approx(5));
  CHECK(any_evidence(*f, "ncclDevKernel_AllReduce"));
  check_suggestions(*f);
  for (const auto& s : f->suggestions) {
    CHECK_FALSE(s.estimated);
    CHECK(s.priority != "high");  // nothing here is estimated: no high suggestion
  }
  CHECK(suggestion(*f, "ranks together"));
  CHECK(any_evidence(*f, "only the ranks together show"));
  // Analysed with its run (AnalyzeOptions::with_its_run): the report holds the split, so it points there instead.
  t.with_its_run = true;
  f = rules::communication(t.in());
  REQUIRE(f);
  CHECK_FALSE(suggestion(*f, "ranks together"));
  CHECK(any_evidence(*f, "the section on the run across ranks"));
  CHECK(f->suggestions.size() == 2);  // overlap the collectives; send fewer bytes
}

TEST_CASE("gpu_bound: time inside NCCL collectives is not busy computing") {
  Input t;
  // 60 ms compute + 35 ms collectives: 95 % busy, but computing only 60 %.
  t.breakdown.gpu_compute_ms = 60;
  t.breakdown.gpu_comm_ms = 35;
  t.breakdown.gpu_utilization = 0.95;
  CHECK_FALSE(rules::gpu_bound(t.in()));
  t.breakdown.gpu_comm_ms = 10;  // 85 % computing or copying
  auto f = rules::gpu_bound(t.in());
  REQUIRE(f);
  CHECK(f->metrics.at("gpu_utilization") == doctest::Approx(0.85));
}

TEST_CASE("pipeline_bubble: two GPUs taking turns; the saving is their busy union less the busiest one's") {
  Input t;
  // 90 ms of GPU work in the 100 ms step: cuda:0 works 40 ms, then cuda:1 50 ms, never together.
  t.typical.compute = 90 * ms;
  t.typical.device_busy_max = 50 * ms;
  t.typical.device_busy_sum = 90 * ms;
  t.typical.devices = 1;  // one GPU: nothing to pipeline
  CHECK_FALSE(rules::pipeline_bubble(t.in()));
  t.typical.devices = 2;
  detail::StepMetrics m;
  m.busiest_device = 1;
  t.steps.assign(3, m);
  auto f = rules::pipeline_bubble(t.in());
  REQUIRE(f);
  CHECK(f->impact_ms == doctest::Approx(40));  // 90 - 50
  CHECK(f->title.find("cuda:1") != std::string::npos);
  CHECK(f->metrics.at("gpus_at_once") == doctest::Approx(1));
  check_suggestions(*f);
  REQUIRE(f->suggestions.front().estimated);
  CHECK(f->suggestions.front().priority == "high");
  CHECK(f->suggestions.front().impact_ms == doctest::Approx(40));
  CHECK(suggestion(*f, "micro-batch"));
  CHECK_FALSE(suggestion(*f, "peer copy"));  // no data crosses the host
  t.typical.h2d_bytes = t.typical.d2h_bytes = 16e6;
  CHECK(suggestion(*rules::pipeline_bubble(t.in()), "peer copy"));
  // Working together most of the time: 90 ms of work on each GPU over 95 ms leaves 5 % (the floor) at most.
  t.typical.device_busy_max = 85.01 * ms;
  CHECK_FALSE(rules::pipeline_bubble(t.in()));
}

TEST_CASE("gpu_bound: with several GPUs, the busiest one's share, not their union") {
  Input t;
  t.breakdown.gpu_compute_ms = 90;
  t.breakdown.gpu_utilization = 0.9;
  t.typical.devices = 2;
  t.typical.device_busy_max = 50 * ms;  // each GPU idles half the step
  CHECK_FALSE(rules::gpu_bound(t.in()));
  t.typical.device_busy_max = 85 * ms;
  CHECK(rules::gpu_bound(t.in()));
}

TEST_CASE("the registry lists every rule once, in the documented order") {
  std::vector<std::string> names;
  for (const auto& e : rules::registry()) names.push_back(rules::rule_name(e));
  CHECK(names == std::vector<std::string>{"cpu_contention", "wait", "cpu_bound", "launch_bound", "sync_bound",
                                          "h2d_bound", "d2h_bound", "memory_alloc", "gpu_bound", "communication",
                                          "pipeline_bubble", "gemm_fallback", "warmup", "slow_steps", "loop_blocked",
                                          "batch_wait"});
}
