// The run across ranks (lib/analyze/run/ranks.hpp) on two-rank dumps written by hand, on one clock: each rank's
// steps hold its compute kernel and then one NCCL all_reduce per layer, which ends for every rank a fixed
// transfer time after the last rank's kernel started, as NCCL's do. The expected waits, transfers and delays
// follow from the construction (the comments give them).
#include "analyze/analyzer.hpp"
#include "analyze/children.hpp"
#include "analyze/run/ranks.hpp"
#include "dump/builder.hpp"
#include "dump/reader.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::analyze;

namespace {

constexpr int64_t kMs = 1'000'000;

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("iscope_ranks_" + std::to_string(::getpid()) + "_" + name)).string();
}

// One rank's program: per step, host work (plus `extra_ms` in a Python function `postprocess_shard` on the
// straggler, or with `extra_on_gpu` a kernel `sgemm_fp32_logprobs` of `extra_ms` that `postprocess_shard` launches),
// then per layer a compute kernel of `compute_ms` and an all_reduce. `ready` receives, per step and
// layer, the time this rank's all_reduce kernel started; `end_of` gives its end (from every rank's start).
struct RankPlan {
  int rank = 0;
  double extra_ms = 0;
};

struct TwoRanks {
  std::vector<std::string> paths;
  // start of every all_reduce kernel: [rank][step * layers + layer]
  std::vector<std::vector<int64_t>> starts;
};

// Writes two ranks' dumps of `steps` steps with `layers` all_reduces each, lock-stepped the way NCCL makes them:
// a collective ends `transfer_ms` after the later rank's kernel started.
TwoRanks write_two_ranks(const std::string& tag, double extra_ms_rank1, double compute_ms, double transfer_ms,
                         const char* kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL", int steps = 12, int layers = 4,
                         bool with_rank = true, bool extra_on_gpu = false, bool by_turns = false) {
  TwoRanks out;
  out.starts.assign(2, {});
  // Simulate both ranks' clocks together.
  struct Clock {
    int64_t host = 10 * kMs;   // host time
    int64_t gpu = 10 * kMs;    // the stream is free from
  } clk[2];
  struct Step {
    int64_t s = 0, e = 0;
  };
  std::vector<std::vector<Step>> step_spans(2);
  struct K {
    int64_t s, e;
    bool nccl;
    const char* name = nullptr;  // a compute kernel's name other than the default
  };
  std::vector<std::vector<K>> kernels(2);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> extra(2);
  for (int st = 0; st < steps; ++st) {
    int64_t step_start[2];
    for (int r = 0; r < 2; ++r) {
      step_start[r] = clk[r].host;
      clk[r].host += kMs / 2;  // 0.5 ms of host work
      // by_turns: the extra work falls on rank 1 in odd steps, two thirds of it on rank 0 in even ones
      const int late_rank = by_turns ? st % 2 : 1;
      const double extra_ms = late_rank == 0 ? extra_ms_rank1 * 2 / 3 : extra_ms_rank1;
      if (r == late_rank && extra_ms > 0 && extra_on_gpu) {  // a 50 us Python call launching a long kernel
        const int64_t ks = std::max(clk[r].gpu, clk[r].host + 5'000);
        kernels[r].push_back({ks, ks + int64_t(extra_ms * kMs), false, "sgemm_fp32_logprobs"});
        clk[r].gpu = ks + int64_t(extra_ms * kMs);
        extra[r].emplace_back(clk[r].host - 10'000, clk[r].host + 50'000);
        clk[r].host += 50'000;
      } else if (r == late_rank && extra_ms > 0) {
        extra[r].emplace_back(clk[r].host, clk[r].host + int64_t(extra_ms * kMs));
        clk[r].host += int64_t(extra_ms * kMs);
      }
    }
    for (int l = 0; l < layers; ++l) {
      int64_t start[2];
      for (int r = 0; r < 2; ++r) {
        const int64_t ks = std::max(clk[r].gpu, clk[r].host + 5'000);
        kernels[r].push_back({ks, ks + int64_t(compute_ms * kMs), false});
        clk[r].gpu = ks + int64_t(compute_ms * kMs);
        clk[r].host += 10'000;
        start[r] = std::max(clk[r].gpu, clk[r].host + 5'000);
        clk[r].host += 10'000;
      }
      const int64_t end = std::max(start[0], start[1]) + int64_t(transfer_ms * kMs);
      for (int r = 0; r < 2; ++r) {
        kernels[r].push_back({start[r], end, true});
        out.starts[r].push_back(start[r]);
        clk[r].gpu = end;
      }
    }
    for (int r = 0; r < 2; ++r) {  // the step ends with a synchronize
      clk[r].host = std::max(clk[r].host, clk[r].gpu) + 5'000;
      step_spans[r].push_back({step_start[r], clk[r].host});
    }
  }
  for (int r = 0; r < 2; ++r) {
    const std::string path = temp(tag + "_rank" + std::to_string(r) + ".iscope");
    dump::DumpBuilder b(path);
    b.process("pid", std::to_string(5000 + r));
    b.process("hostname", "node0");
    if (with_rank) b.process("rank", std::to_string(r));
    const uint32_t t = b.thread("MainThread", 5000 + r);
    const uint32_t ch = b.channel("cupti activity");
    const uint32_t code = b.code("postprocess_shard", "tp.py", 40);
    // The thread's records in the order the recorder writes them: each at its end.
    std::vector<std::pair<int64_t, std::function<void()>>> on_thread;
    for (const auto& [s, e] : extra[r]) on_thread.emplace_back(e, [&b, t, code, s, e] { b.pycall(t, code, 1, s, e); });
    uint32_t corr = 0;
    for (const K& k : kernels[r]) {
      ++corr;
      on_thread.emplace_back(k.s - 3'000, [&b, t, corr, k] { b.api(t, "cudaLaunchKernel", corr, k.s - 8'000, k.s - 3'000); });
      b.kernel(ch, k.nccl ? kernel : k.name ? k.name : "gemm_bf16_tn", corr, k.s, k.e, 7, uint32_t(r));
    }
    for (const Step& st : step_spans[r]) on_thread.emplace_back(st.e, [&b, t, st] { b.range(t, "step", 0, st.s, st.e); });
    std::stable_sort(on_thread.begin(), on_thread.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (auto& [end, write] : on_thread) write();
    b.finish();
    out.paths.push_back(path);
  }
  return out;
}

RunAnalysis run_of(const TwoRanks& t, std::vector<ChildProcess>* summaries = nullptr) {
  RunAnalysis run;
  auto s = analyze_rank_dumps(t.paths, AnalyzeOptions{}, run);
  if (summaries) *summaries = s;
  return run;
}

const Finding* finding(const RunAnalysis& run, const std::string& category) {
  for (const auto& f : run.findings)
    if (f.category == category) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("collective kernels are told apart by name, and their operation read from it") {
  CHECK(is_collective_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  CHECK(is_collective_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t"));
  CHECK_FALSE(is_collective_kernel("ampere_bf16_s16816gemm_bf16_128x64"));
  CHECK(collective_op("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "AllReduce");
  CHECK(collective_op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "ReduceScatter");
  CHECK(collective_op("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "AllGather");
  CHECK(collective_op("ncclDevKernel_SendRecv") == "SendRecv");
  CHECK(collective_op("ncclDevKernel_Broadcast_RING_LL") == "Broadcast");
  CHECK(collective_op("ncclDevKernel_Generic") == "collective");
}

TEST_CASE("overlap saves the smaller of compute and transfer, less what NCCL's SMs take from the compute") {
  CHECK(overlap_saving(4, 2, -1) == doctest::Approx(2));    // unknown share: ideal
  CHECK(overlap_saving(1, 8, -1) == doctest::Approx(1));
  // 24 of 132 SMs taken while the 2.4 ms transfer runs: the compute gets through 2.4 * (1 - 24/132) ms of its
  // work in that time, and that much is hidden.
  CHECK(overlap_saving(4.5, 2.4, 24.0 / 132) == doctest::Approx(2.4 * (1 - 24.0 / 132)));
  CHECK(overlap_saving(1, 8, 0.2) == doctest::Approx(1));       // the transfer is longer anyway: all the compute hides
  CHECK(overlap_saving(4, 0.5, 0.5) == doctest::Approx(0.25));  // half the SMs: half the transfer's time is hidden
  CHECK(known_sm_count("NVIDIA H100 80GB HBM3") == 132);
  CHECK(known_sm_count("NVIDIA H100 PCIe") == 114);
  CHECK(known_sm_count("NVIDIA A100-SXM4-80GB") == 108);
  CHECK(known_sm_count("Tesla T4") == 0);
}

TEST_CASE("a rank with extra host work is named as the straggler, with what it did and the saving") {
  // Rank 1 runs postprocess_shard for 3 ms before its first layer; every layer computes 1 ms and then reduces
  // (0.2 ms of transfer). Rank 0 reaches its first all_reduce 3 ms before rank 1 and waits there; later layers
  // start together. So per step: rank 0 waits 3 ms, rank 1 delayed the run by 3 ms, rank 1 waits ~0.
  const TwoRanks t = write_two_ranks("straggler", 3.0, 1.0, 0.2);
  std::vector<ChildProcess> summaries;
  const RunAnalysis run = run_of(t, &summaries);
  REQUIRE(run.ranks.size() == 2);
  CHECK(summaries.size() == 2);
  CHECK(run.steps_matched >= 8);
  CHECK(run.ranks[0].rank == 0);
  CHECK(run.ranks[1].rank == 1);
  CHECK(run.ranks[0].wait_ms == doctest::Approx(3.0).epsilon(0.02));
  CHECK(run.ranks[1].wait_ms < 0.05);
  CHECK(run.ranks[1].late_ms == doctest::Approx(3.0).epsilon(0.02));
  CHECK(run.ranks[0].late_ms < 0.05);
  CHECK(run.ranks[0].transfer_ms == doctest::Approx(0.8).epsilon(0.02));  // 4 layers x 0.2 ms
  CHECK(run.straggler == 1);
  CHECK(run.straggler_did.find("postprocess_shard") != std::string::npos);
  REQUIRE(run.collectives.size() == 1);
  CHECK(run.collectives[0].op == "AllReduce");
  CHECK(run.collectives[0].per_step == doctest::Approx(4));
  CHECK(run.collectives[0].last_rank == 1);

  const Finding* f = finding(run, "collective_wait");
  REQUIRE(f);
  CHECK(f->primary);
  CHECK(f->impact_ms == doctest::Approx(3.0).epsilon(0.02));
  CHECK(f->title.find("rank 1") != std::string::npos);
  REQUIRE(f->suggestions.size() >= 3);
  const Suggestion& top = f->suggestions.front();
  CHECK(top.priority == "high");
  CHECK(top.estimated);
  CHECK(top.impact_ms == doctest::Approx(3.0).epsilon(0.02));
  CHECK(top.action.find("postprocess_shard") != std::string::npos);
  CHECK(top.action.find("rank 1") != std::string::npos);
  for (const auto& s : f->suggestions)
    if (!s.estimated) CHECK(s.priority != "high");  // never a high suggestion without a saving
  // 0.8 ms of transfer in a ~8.3 ms step, none overlapped: communication is reported too, below the wait.
  const Finding* c = finding(run, "communication");
  REQUIRE(c);
  CHECK_FALSE(c->primary);
}

TEST_CASE("a straggler whose extra work is a kernel: named with the code that launched it") {
  // Rank 1's postprocess_shard launches a 3 ms kernel before the first layer: rank 1's first all_reduce starts
  // 3 ms late on the GPU, and its host does no extra work to speak of (a 50 us call).
  const TwoRanks t = write_two_ranks("straggler_kernel", 3.0, 1.0, 0.2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 12, 4,
                                     true, /*extra_on_gpu=*/true);
  const RunAnalysis run = run_of(t);
  REQUIRE(run.ranks.size() == 2);
  CHECK(run.straggler == 1);
  CHECK(run.ranks[1].late_ms == doctest::Approx(3.0).epsilon(0.05));
  CHECK_MESSAGE(run.straggler_did.starts_with("kernel sgemm_fp32_logprobs (launched by postprocess_shard"), run.straggler_did);
  const Finding* f = finding(run, "collective_wait");
  REQUIRE(f);
  CHECK(f->primary);
  const Suggestion& top = f->suggestions.front();
  CHECK(top.priority == "high");
  CHECK(top.estimated);
  CHECK_MESSAGE(top.action.find("sgemm_fp32_logprobs (launched by postprocess_shard") != std::string::npos, top.action);
}

TEST_CASE("ranks late by turns: no straggler to name, though each waits for the other") {
  // 3 ms of extra host work on rank 1 in odd steps, 2 ms on rank 0 in even ones: rank 1 holds 60 % of the delay,
  // not twice rank 0's, so neither is "the" straggler that one fix would remove.
  const TwoRanks t = write_two_ranks("by_turns", 3.0, 1.0, 0.2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 12, 4, true, false,
                                     /*by_turns=*/true);
  const RunAnalysis run = run_of(t);
  REQUIRE(run.ranks.size() == 2);
  CHECK(run.ranks[0].late_ms == doctest::Approx(1.0).epsilon(0.05));  // 2 ms in half the steps
  CHECK(run.ranks[1].late_ms == doctest::Approx(1.5).epsilon(0.05));  // 3 ms in the other half
  CHECK(run.straggler == -1);
  CHECK(finding(run, "collective_wait") == nullptr);
}

TEST_CASE("a run that mostly moves data is communication-bound; the savings follow the bytes and the compute") {
  // Each layer: 0.25 ms of compute, then an fp32 all_reduce moving data for 2 ms, no rank late. Per step 4 layers:
  // 8 ms exposed transfer, 1 ms compute not overlapped.
  const TwoRanks t = write_two_ranks("comm", 0, 0.25, 2.0);
  const RunAnalysis run = run_of(t);
  CHECK(run.straggler == -1);
  CHECK(finding(run, "collective_wait") == nullptr);
  const Finding* f = finding(run, "communication");
  REQUIRE(f);
  CHECK(f->primary);
  CHECK(f->impact_ms == doctest::Approx(8.0).epsilon(0.03));
  const Suggestion* bf16 = nullptr;
  const Suggestion* overlap = nullptr;
  for (const auto& s : f->suggestions) {
    if (s.action.find("bfloat16") != std::string::npos) bf16 = &s;
    if (s.action.find("async_op=True") != std::string::npos) overlap = &s;
  }
  REQUIRE(bf16);
  CHECK(bf16->priority == "high");
  CHECK(bf16->impact_ms == doctest::Approx(4.0).epsilon(0.03));  // half of the 8 ms
  REQUIRE(overlap);
  CHECK(overlap->impact_ms == doctest::Approx(1.0).epsilon(0.05));  // only 1 ms of compute to hide it behind
  CHECK(f->suggestions.front().action.find("bfloat16") != std::string::npos);  // the larger saving first

  // Already in bf16: no halving is promised.
  const RunAnalysis bf = run_of(write_two_ranks("comm_bf16", 0, 0.25, 2.0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  const Finding* g = finding(bf, "communication");
  REQUIRE(g);
  for (const auto& s : g->suggestions) CHECK(s.action.find("bfloat16") == std::string::npos);
}

TEST_CASE("compute-heavy ranks in step: no run finding") {
  // 4 ms of compute and 0.05 ms of transfer per layer: communication is 1 % of the step.
  const RunAnalysis run = run_of(write_two_ranks("healthy", 0, 4.0, 0.05));
  CHECK(run.steps_matched >= 8);
  CHECK(run.findings.empty());
  CHECK(run.imbalance_pct < 1);
}

TEST_CASE("dumps without a rank are ranks by their order; one rank alone is no run") {
  const TwoRanks t = write_two_ranks("norank", 3.0, 1.0, 0.2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 12, 4, false);
  RunAnalysis run = run_of(t);
  REQUIRE(run.ranks.size() == 2);
  CHECK(run.ranks[1].rank == 1);
  CHECK(run.straggler == 1);

  RunAnalysis one;
  analyze_rank_dumps({t.paths[0]}, AnalyzeOptions{}, one);
  CHECK(one.ranks.size() == 1);  // listed, nothing to match
  CHECK(one.steps_matched == 0);
  CHECK(one.findings.empty());
}

TEST_CASE("a launcher with rank children: its own findings are left out") {
  Analysis a;
  a.findings.push_back(Finding{});
  a.findings.back().category = "cpu_bound";
  mark_launcher(a);  // no run: nothing changes
  CHECK_FALSE(a.launcher);
  CHECK(a.findings.size() == 1);
  a.run.ranks.resize(2);
  a.gpu_work_recorded = true;  // a rank itself, not a launcher
  mark_launcher(a);
  CHECK_FALSE(a.launcher);
  a.gpu_work_recorded = false;
  mark_launcher(a);
  CHECK(a.launcher);
  CHECK(a.findings.empty());
}

TEST_CASE("a rank analysed with its run: its communication finding points to the run, not to running it") {
  const std::string r0 = (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "mg_comm_bound.1769.iscope").string();
  const std::string r1 = (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "mg_comm_bound.1770.iscope").string();
  Analysis a = analyze_file(r0, {});
  auto comm = [](const Analysis& x) -> const Finding* {
    for (const Finding& f : x.findings)
      if (f.category == "communication") return &f;
    return nullptr;
  };
  REQUIRE(comm(a));
  auto asks_for_run = [](const Finding& f) {
    for (const Suggestion& s : f.suggestions)
      if (s.action.find("Analyse the ranks together") != std::string::npos) return true;
    return false;
  };
  CHECK(asks_for_run(*comm(a)));  // alone, it says how to get the split
  AnalyzeOptions with_run;
  with_run.with_its_run = true;  // as analyze_inputs (tools/common) sets it for ranks named together
  a = analyze_file(r0, with_run);
  a.children = analyze_rank_dumps({r0, r1}, with_run, a.run);
  mark_launcher(a);
  REQUIRE(comm(a));
  CHECK_FALSE(asks_for_run(*comm(a)));
  bool points = false;
  for (const std::string& e : comm(a)->evidence) points |= e.find("the section on the run across ranks") != std::string::npos;
  CHECK(points);
  CHECK_FALSE(a.launcher);
}

// ---- real recordings: samples/multigpu under iscope-run --follow-children on 2 H100s (torchrun, NCCL), 40 steps
// each; the launcher's dump is tests/fixtures/mg_NAME.iscope and its ranks' are mg_NAME.<pid>.iscope beside it.

namespace {

Analysis launcher_of(const std::string& name) {
  const std::string path = (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / (name + ".iscope")).string();
  Analysis a = analyze_file(path, {});
  a.children = find_children(path, a, {}, &a.run);
  mark_launcher(a);
  return a;
}

const Suggestion* high_with(const Finding& f, const std::string& word) {
  for (const auto& s : f.suggestions)
    if (s.priority == "high" && s.action.find(word) != std::string::npos) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("H100 x2: the launcher of a straggler run points to rank 1 and what it ran") {
  const Analysis a = launcher_of("mg_straggler_rank");
  CHECK(a.launcher);
  CHECK(a.findings.empty());  // torchrun's own idle loop is not diagnosed
  REQUIRE(a.run.ranks.size() == 2);
  CHECK(a.run.ranks[0].rank == 0);
  CHECK(a.run.ranks[1].rank == 1);
  CHECK(a.run.steps_matched >= 20);
  CHECK(a.run.straggler == 1);
  CHECK(a.run.straggler_did.find("postprocess_batch") != std::string::npos);
  REQUIRE_FALSE(a.run.findings.empty());
  const Finding& f = a.run.findings.front();
  CHECK(f.category == "collective_wait");
  CHECK(f.primary);
  CHECK(a.run.ranks[0].wait_ms > 0.25 * a.run.step_ms);  // rank 0 waits about 4.8 of 13 ms
  CHECK(a.run.ranks[1].wait_ms < 0.05 * a.run.step_ms);
  const Suggestion* s = high_with(f, "postprocess_batch");
  REQUIRE(s);
  CHECK(s->estimated);
  CHECK(s->impact_ms == doctest::Approx(a.run.ranks[1].late_ms));
  // rank 0's own report no longer calls its NCCL wait GPU compute
  CHECK(a.run.ranks[0].primary != "gpu_bound");
}

TEST_CASE("the run's timeline: the median step, a lane per rank and its GPU, each collective split at the last arrival") {
  // Three matched steps of two ranks; the slowest rank takes 10, 30 and 20 ms: the 20 ms step is drawn.
  std::vector<RankStep> r0(3), r1(3);
  const int64_t ms = 1'000'000;
  for (int k = 0; k < 3; ++k) {
    const int64_t t0 = k * 100 * ms, len = (k == 0 ? 10 : k == 1 ? 30 : 20) * ms;
    r0[k].index = r1[k].index = uint64_t(k + 3);
    r0[k].start_ns = t0, r0[k].end_ns = t0 + len;
    r1[k].start_ns = t0 + 1 * ms, r1[k].end_ns = t0 + len;
    r0[k].compute = {{t0, t0 + 2 * ms}};
    // rank 0 arrives at 2 ms, rank 1 at 6 ms; both finish at 8 ms.
    r0[k].collectives = {{"AllReduce", false, t0 + 2 * ms, t0 + 8 * ms, 0, 4}};
    r1[k].collectives = {{"AllReduce", false, t0 + 6 * ms, t0 + 8 * ms, 1, 4}};
  }
  std::vector<std::vector<const RankStep*>> matched = {{&r0[0], &r1[0]}, {&r0[1], &r1[1]}, {&r0[2], &r1[2]}};
  std::vector<RankRow> rows(2);
  rows[0].rank = 0, rows[1].rank = 1;
  const RepresentativeStep t = run_timeline(matched, rows);
  CHECK(t.step.index == 5);  // the third step: 20 ms, the median of 10, 30, 20
  CHECK(t.step.duration_ms == doctest::Approx(20));
  REQUIRE(t.lanes.size() == 4);
  CHECK(t.lanes[0].name == "rank 0");
  CHECK_FALSE(t.lanes[0].gpu);
  CHECK(t.lanes[1].name == "rank 0 GPU");
  CHECK(t.lanes[1].gpu);
  CHECK(t.lanes[2].name == "rank 1");
  REQUIRE(t.lanes[2].spans.size() == 1);
  CHECK(t.lanes[2].spans[0].start_ms == doctest::Approx(1));  // from the earliest rank's start
  CHECK(t.lanes[2].spans[0].label == "step 5");
  const auto& g0 = t.lanes[1].spans;
  REQUIRE(g0.size() == 3);  // compute, the wait, the transfer
  CHECK(g0[0].category == "kernel");
  CHECK(g0[1].category == "collective_wait");
  CHECK(g0[1].start_ms == doctest::Approx(2));
  CHECK(g0[1].end_ms == doctest::Approx(6));
  CHECK(g0[1].label == "AllReduce: waiting 4.000 ms for rank 1");
  CHECK(g0[2].category == "collective");
  CHECK(g0[2].start_ms == doctest::Approx(6));
  CHECK(g0[2].end_ms == doctest::Approx(8));
  const auto& g1 = t.lanes[3].spans;  // rank 1 arrived last: no wait, all transfer
  REQUIRE(g1.size() == 1);
  CHECK(g1[0].category == "collective");
  CHECK(run_timeline({}, rows).lanes.empty());
}

TEST_CASE("H100 x2: the straggler run's timeline shows rank 0 waiting for rank 1 at the all_reduce") {
  const Analysis a = launcher_of("mg_straggler_rank");
  const RepresentativeStep& t = a.run.timeline;
  REQUIRE(t.lanes.size() == 4);
  double waited0 = 0, waited1 = 0;
  for (const auto& s : t.lanes[1].spans)
    if (s.category == "collective_wait") waited0 += s.end_ms - s.start_ms;
  for (const auto& s : t.lanes[3].spans)
    if (s.category == "collective_wait") waited1 += s.end_ms - s.start_ms;
  CHECK(waited0 > 3.0);   // about 4.8 ms of the 13 ms step
  CHECK(waited1 < 0.5);
}

TEST_CASE("H100 x2: fp32 all_reduces that dominate the step are communication; bf16 halves them") {
  const Analysis a = launcher_of("mg_comm_bound");
  CHECK(a.launcher);
  CHECK(a.run.straggler == -1);
  REQUIRE_FALSE(a.run.findings.empty());
  const Finding& f = a.run.findings.front();
  CHECK(f.category == "communication");
  CHECK(f.impact_pct > 30);
  const Suggestion* bf16 = high_with(f, "bfloat16");
  REQUIRE(bf16);
  CHECK(bf16->impact_ms == doctest::Approx(f.impact_ms / 2));
}

TEST_CASE("H100 x2: blocking all_reduces beside independent compute: overlap, less NCCL's SMs") {
  const Analysis a = launcher_of("mg_no_overlap");
  REQUIRE_FALSE(a.run.findings.empty());
  const Finding& f = a.run.findings.front();
  CHECK(f.category == "communication");
  const Suggestion* overlap = high_with(f, "async_op=True");
  REQUIRE(overlap);
  // NCCL's 24 blocks of the H100's 132 SMs slow the compute beside it: less than the ideal min(compute, transfer)
  CHECK(overlap->impact_ms < f.impact_ms);
  CHECK(overlap->model.find("% of SMs") != std::string::npos);
  for (const auto& s : f.suggestions) CHECK(s.action.find("bfloat16") == std::string::npos);  // already bf16
}

TEST_CASE("H100 x2: two pipeline stages in one process take turns; pipelining saves the busy union less the busiest") {
  const std::string path =
      (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "mg_pipeline_two_gpus.iscope").string();
  const Analysis a = analyze_file(path, {});
  REQUIRE_FALSE(a.findings.empty());
  const Finding& f = a.findings.front();
  CHECK(f.category == "pipeline_bubble");  // not gpu_bound: each GPU idles about half the step
  CHECK(f.primary);
  CHECK(f.metrics.at("gpus_at_once") < 1.2);
  CHECK(f.impact_pct > 30);
  const Suggestion* s = high_with(f, "micro-batch");
  REQUIRE(s);
  CHECK(s->impact_ms == doctest::Approx(f.impact_ms));
  bool peer = false;
  for (const auto& x : f.suggestions) peer |= x.action.find("peer copy") != std::string::npos;
  CHECK(peer);  // the activations cross the host
  for (const auto& x : a.findings) CHECK(x.category != "gpu_bound");
  // the timeline has a lane per GPU
  int gpu_lanes = 0;
  for (const auto& l : a.representative.lanes) gpu_lanes += l.gpu && l.name.rfind("GPU 0 ", 0) == 0 ? 1 : l.gpu && l.name.rfind("GPU 1 ", 0) == 0 ? 1 : 0;
  CHECK(gpu_lanes >= 2);
  // h.cpu().to("cuda:1"): its copies are a GPU-to-GPU copy through host memory; a peer copy, not pinning, comes first
  for (const auto& x : a.findings) {
    if (x.category != "h2d_bound" && x.category != "d2h_bound") continue;
    CHECK(x.metrics.at("bounced_share") > 0.9);
    CHECK(x.suggestions.front().action.rfind("Copy GPU to GPU directly: x.to(\"cuda:1\"", 0) == 0);
    for (const auto& sg : x.suggestions) CHECK(sg.action.find("Pin the host buffers") == std::string::npos);
  }
}

TEST_CASE("dumps that are not one run's ranks are not matched, and one process named twice counts once") {
  const auto fixture = [](const std::string& name) {
    return (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / (name + ".iscope")).string();
  };
  // rank 0 of one run and rank 1 of another, on the same host: their step 7s are minutes apart
  RunAnalysis mixed;
  analyze_rank_dumps({fixture("mg_straggler_rank.1334"), fixture("mg_comm_bound.1770")}, {}, mixed);
  REQUIRE(mixed.ranks.size() == 2);
  CHECK(mixed.steps_matched == 0);
  CHECK(mixed.findings.empty());
  bool said = false;
  for (const auto& w : mixed.warnings) said |= w.find("not matched") != std::string::npos;
  CHECK(said);

  RunAnalysis twice;
  analyze_rank_dumps({fixture("mg_straggler_rank.1334"), fixture("mg_straggler_rank.1334")}, {}, twice);
  CHECK(twice.ranks.size() == 1);
  said = false;
  for (const auto& w : twice.warnings) said |= w.find("same process") != std::string::npos;
  CHECK(said);
  // and the run's world size says a rank is missing
  said = false;
  for (const auto& w : twice.warnings) said |= w.find("only 1 of the run's 2 ranks") != std::string::npos;
  CHECK(said);
}

namespace {
// Two ranks, 12 steps of 2 ms: 0.4 ms of compute, an AllGather (rank 0 at 0.5 ms, rank 1 at 0.6 ms, both end at
// 1.4 ms: 0.8 ms moving data), then from 1.4 ms `between` (a copy of the gathered tensor, or a GEMM: a layer reading
// it), then the argmax.
std::vector<std::string> gather_then_argmax(const std::string& tag, const char* between) {
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) {
    const std::string path = temp(tag + "_rank" + std::to_string(r) + ".iscope");
    dump::DumpBuilder b(path);
    b.process("pid", std::to_string(6000 + r));
    b.process("hostname", "node0");
    b.process("rank", std::to_string(r));
    const uint32_t t = b.thread("MainThread", 6000 + r);
    const uint32_t ch = b.channel("cupti activity");
    uint32_t corr = 0;
    for (int st = 0; st < 12; ++st) {
      const int64_t s0 = 10 * kMs + st * 2 * kMs;
      auto launch = [&](const char* name, int64_t s, int64_t e) {
        ++corr;
        b.api(t, "cudaLaunchKernel", corr, s - 8'000, s - 3'000);
        b.kernel(ch, name, corr, s, e, 7, uint32_t(r));
      };
      launch("gemm_bf16_tn", s0 + kMs / 10, s0 + kMs / 2);
      launch("ncclDevKernel_AllGather_RING_LL", s0 + kMs / 2 + (r ? kMs / 10 : 0), s0 + 14 * kMs / 10);
      launch(between, s0 + 14 * kMs / 10, s0 + 15 * kMs / 10);
      launch("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>",
             s0 + 15 * kMs / 10, s0 + 16 * kMs / 10);
      b.range(t, "step", 0, s0, s0 + 2 * kMs);
    }
    b.finish();
    paths.push_back(path);
  }
  return paths;
}
}  // namespace

TEST_CASE("an AllGather whose result only an argmax reads: 'select before gathering', its transfer and copies saved") {
  RunAnalysis run;
  analyze_rank_dumps(gather_then_argmax("gather_copy", "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>"),
                     AnalyzeOptions{}, run);
  REQUIRE(run.ranks.size() == 2);
  const Finding* c = finding(run, "communication");
  REQUIRE(c);
  CHECK(c->primary);
  REQUIRE_FALSE(c->suggestions.empty());
  const Suggestion& top = c->suggestions.front();
  CHECK_MESSAGE(top.action.starts_with("Select before gathering"), top.action);
  CHECK(top.priority == "high");
  CHECK(top.estimated);
  CHECK(top.impact_ms == doctest::Approx(0.9).epsilon(0.03));  // 0.8 ms of transfer + the 0.1 ms copy
}

TEST_CASE("an AllGather a matrix multiply reads before the argmax: not 'select before gathering'") {
  RunAnalysis run;
  analyze_rank_dumps(gather_then_argmax("gather_gemm", "sm90_xmma_gemm_bf16bf16_bf16f32"), AnalyzeOptions{}, run);
  REQUIRE(run.ranks.size() == 2);
  const Finding* c = finding(run, "communication");
  REQUIRE(c);  // 0.8 ms of transfer beside no compute is still communication
  for (const Suggestion& s : c->suggestions) CHECK_FALSE(s.action.starts_with("Select before gathering"));
}
