// Each analyzer stage alone (stages.hpp): one small dump whose every figure is known by construction, read by
// the stages in order, each one's typed result checked against what was planted. The end-to-end goldens check
// the whole; these say which stage broke.
//
// The program: a main thread with 12 steps of 10 ms (serve_step), each 3 ms of Python host work (prep), one
// 5 ms kernel, a 0.4 ms device-to-host copy from pageable memory and a device sync; before the steps a 4 ms
// cudaMalloc (the context's creation); a Python thread 'logger' busy 5 ms of each step; per-thread counters
// every millisecond; a PCIe Gen4 x16 link.
#include "analyze/stages.hpp"

#include "dump/builder.hpp"

#include <inferscope/counter_names.hpp>

#include <doctest/doctest.h>

#include <filesystem>

using namespace inferscope;
using namespace inferscope::analyze;
using namespace inferscope::analyze::detail;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kUs = 1000, kMs = 1000000;
constexpr int kSteps = 12;
constexpr int64_t kFirstStep = 10 * kMs, kStep = 10 * kMs;

std::string write_program(const std::string& name, bool pcie = true) {
  const fs::path p = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work" / (name + ".iscope");
  fs::create_directories(p.parent_path());
  dump::DumpBuilder b(p.string());
  b.process("pid", "4242");
  if (pcie) {
    b.process("gpu.0.pcie_gen", "4");
    b.process("gpu.0.pcie_width", "16");
  }
  const uint32_t main = b.thread("MainThread", 100), logger = b.thread("logger", 101);
  const uint32_t gpu = b.channel("cupti"), sys = b.channel("system");
  const uint32_t step = b.code("serve_step", "/app/serve.py", 10);
  const uint32_t prep = b.code("prep", "/app/serve.py", 20);
  const uint32_t log = b.code("log_line", "/app/serve.py", 30);
  uint32_t corr = 0;
  b.api(main, "cudaMalloc", ++corr, 1 * kMs, 5 * kMs);
  for (int i = 0; i < kSteps; ++i) {
    const int64_t s = kFirstStep + i * kStep;
    b.pycall(main, prep, 1, s, s + 3 * kMs);
    b.api(main, "cudaLaunchKernel", ++corr, s + 3 * kMs, s + 3 * kMs + 10 * kUs);
    b.kernel(gpu, "gemm", corr, s + 3 * kMs + 20 * kUs, s + 8 * kMs + 20 * kUs);
    b.api(main, "cudaMemcpy", ++corr, s + 8 * kMs + 30 * kUs, s + 8 * kMs + 500 * kUs);
    b.memcpy(gpu, CopyKind::kDtoH, 4'000'000, corr, s + 8 * kMs + 50 * kUs, s + 8 * kMs + 450 * kUs, MemoryKind::kPageable);
    b.api(main, "cudaDeviceSynchronize", ++corr, s + 8 * kMs + 500 * kUs, s + 8 * kMs + 600 * kUs);
    b.pycall(main, step, 0, s, s + kStep);
    b.pycall(logger, log, 0, s, s + 5 * kMs);
  }
  double main_run = 0, logger_run = 0;
  for (int64_t t = 0; t <= kFirstStep + kSteps * kStep + 5 * kMs; t += 1 * kMs) {
    b.counter(sys, counter_names::kThreadSchedRunNs, CounterScope::kThread, main, t, int64_t(main_run));
    b.counter(sys, counter_names::kThreadSchedWaitNs, CounterScope::kThread, main, t, 0);
    b.counter(sys, counter_names::kThreadSchedRunNs, CounterScope::kThread, logger, t, int64_t(logger_run));
    b.counter(sys, counter_names::kThreadSchedWaitNs, CounterScope::kThread, logger, t, 0);
    main_run += double(kMs);  // main always runs: no wait of its own, no contention
    const int64_t in_step = (t - kFirstStep) % kStep;
    logger_run += t >= kFirstStep && in_step < 5 * kMs ? double(kMs) : 0.0;
  }
  return p.string();
}

// The stages in analyze_dump's order, each result kept for the checks.
struct Run {
  dump::DumpReader r;
  AnalyzeOptions opt;
  Context cx;
  Ingested in;
  CoroutineActivity co;
  StepSet ss;
  explicit Run(const std::string& path) : r(path), opt(), cx(r, opt), in(ingest(cx)), co(collect_coroutines(cx, in)), ss(find_steps(cx, in, co)) {}
};

const std::string& program() {
  static const std::string p = write_program("stages_program");
  return p;
}

}  // namespace

TEST_CASE("ingest: every record once, the calls and GPU activities in arrays, the trace span") {
  Run run(program());
  CHECK(run.in.apis.size() == 1 + 3 * kSteps);
  CHECK(run.in.gpu.size() == 2 * kSteps);
  CHECK(run.in.facts.events > 0);
  CHECK(run.in.facts.warnings.empty());
  CHECK_FALSE(run.in.facts.partial);
  CHECK(run.in.facts.trace_ms >= double(kSteps * kStep) / 1e6);
}

TEST_CASE("find_steps: the step function's instances on the step thread, the selection and the headline") {
  Run run(program());
  const StepSet& ss = run.ss;
  CHECK(ss.steps.size() == kSteps);
  CHECK_FALSE(ss.whole);
  CHECK(ss.step_thread_name == "MainThread");
  CHECK(ss.found.stats.name == "serve_step");
  CHECK(ss.found.stats.alike);
  CHECK(ss.found.end_to_end_ms == doctest::Approx(10.0));
  CHECK(ss.selection.steady.size() == kSteps);
  CHECK(ss.found.stats.count == size_t(std::count(ss.selection.steady.begin(), ss.selection.steady.end(), true)));
  CHECK(ss.found.representative.duration_ms == doctest::Approx(10.0));
  CHECK(ss.steps_e - ss.steps_s <= kSteps * kStep);
}

TEST_CASE("describe_sampling: a dump recorded in full is not described as sampled") {
  Run run(program());
  const Sampling s = describe_sampling(run.cx, run.in, run.ss);
  CHECK_FALSE(s.sampled);
  CHECK(s.windows.empty());
}

TEST_CASE("index_launches and attribute: each kernel's launch call, its launcher and the clocks' alignment") {
  Run run(program());
  order_gpu(run.in.gpu, 1);
  const LaunchIndex li = index_launches(run.in.apis, run.in.cmin, run.in.cmax, 1);
  for (size_t i = 0; i < run.in.gpu.size(); ++i) {
    const ApiOp* call = li.launch_of(run.in.gpu[i].corr);
    REQUIRE(call);
    CHECK(call->start < run.in.gpu[i].start);
  }
  Launchers who(run.cx, run.ss.found.stats.name);
  const Attribution at = attribute(run.cx, run.in, li, who);
  CHECK(at.alignment.ok);
  CHECK(at.max_gpu_dur == 5 * kMs);
  CHECK(at.warning.empty());
}

TEST_CASE("measure_host: the step thread's host work by innermost frame, per steady step; other Python threads") {
  Run run(program());
  const HostWork hw = measure_host(run.cx, run.ss, run.in.py_agg.size(), run.ss.found.stats.count);
  CHECK(hw.frames.visible);
  REQUIRE_FALSE(hw.frames.hot.empty());
  CHECK(hw.frames.hot.front().label.find("prep") != std::string::npos);
  CHECK(hw.frames.hot.front().ns == doctest::Approx(3.0 * kMs));
  CHECK(hw.frames.hot.front().user);  // the program's own code, not a library's
  REQUIRE(hw.other_py_busy.size() == 1);
  CHECK(hw.other_py_busy.begin()->second > 0);
}

TEST_CASE("first_call: the step thread's first CUDA call, outside the steps") {
  Run run(program());
  const auto sapi = step_calls(run.in.apis, run.ss.step_thread, 1);
  CHECK(sapi.size() == 1 + 3 * kSteps);
  const FirstCall first = first_call(run.cx, run.ss, sapi);
  CHECK(first.name == "cudaMalloc");
  CHECK(first.ms == doctest::Approx(4.0));
  CHECK_FALSE(first.in_steps);
}

TEST_CASE("sweep: each step's breakdown adds up to it; the median kernel and the top launchers") {
  Run run(program());
  order_gpu(run.in.gpu, 1);
  const LaunchIndex li = index_launches(run.in.apis, run.in.cmin, run.in.cmax, 1);
  Launchers who(run.cx, run.ss.found.stats.name);
  const Attribution at = attribute(run.cx, run.in, li, who);
  const HostWork hw = measure_host(run.cx, run.ss, run.in.py_agg.size(), run.ss.found.stats.count);
  const auto sapi = step_calls(run.in.apis, run.ss.step_thread, 1);
  for (unsigned W : {1u, 3u}) {  // the same on any number of workers
    CAPTURE(W);
    std::vector<Sweep> sweeps = sweep_steps(run.ss, sapi, hw.cov, run.in.gpu, run.in.gpu_max_dur, hw.frames.visible, W);
    const SweptSteps swept = join_sweeps(run.cx, sweeps, who, at);
    REQUIRE(swept.steps.size() == kSteps);
    for (const StepMetrics& m : swept.steps) {
      CHECK(m.dur == kStep);
      CHECK(m.compute == doctest::Approx(5.0 * kMs));
      CHECK(m.d2h == doctest::Approx(0.4 * kMs));
      CHECK(m.kernels == 1);
      CHECK(m.copies_d2h == 1);
      CHECK(m.compute + m.h2d + m.d2h + m.sync_wait + m.framework + m.cpu + m.idle == doctest::Approx(double(m.dur)));
      CHECK(m.idle_host + m.idle_gaps + m.idle_sync + m.idle_memory ==
            doctest::Approx(double(m.dur) - m.compute - m.h2d - m.d2h));
      CHECK(m.cpu == doctest::Approx(3.0 * kMs).epsilon(0.01));  // prep, with the GPU idle
    }
    CHECK(swept.launchers.median_kernel_ns == doctest::Approx(5.0 * kMs));
    CHECK(swept.launchers.top_kernel_launcher.find("serve_step") != std::string::npos);
    CHECK(swept.launchers.top_sync_api == "cudaMemcpy");  // 0.47 ms of host time per step, the sync's 0.1 ms
    CHECK(swept.launchers.top_sync_caller.find("serve_step") != std::string::npos);
  }
}

TEST_CASE("pcie_peak: the link from the process info, else an assumed Gen5 x16") {
  const LinkPeak gen4 = pcie_peak({{"gpu.0.pcie_gen", "4"}, {"gpu.0.pcie_width", "16"}});
  CHECK_FALSE(gen4.peak_assumed);
  CHECK(gen4.peak_h2d_gbps == doctest::Approx(1.969 * 16 * 0.87));
  CHECK(gen4.pinned_gbps == gen4.peak_h2d_gbps);
  CHECK(gen4.peak_note.find("Gen4 x16") != std::string::npos);
  for (const ProcessInfo& bad : {ProcessInfo{}, ProcessInfo{{"gpu.0.pcie_gen", "9"}, {"gpu.0.pcie_width", "16"}},
                                 ProcessInfo{{"gpu.0.pcie_gen", "x"}, {"gpu.0.pcie_width", "16"}}}) {
    const LinkPeak assumed = pcie_peak(bad);
    CHECK(assumed.peak_assumed);
    CHECK(assumed.peak_h2d_gbps == doctest::Approx(55));
  }
}

TEST_CASE("read_counters and split_host_state: the other Python thread's share; the host time split adds up") {
  Run run(program());
  const HostWork hw = measure_host(run.cx, run.ss, run.in.py_agg.size(), run.ss.found.stats.count);
  const CounterEvidence ev = read_counters(run.cx, run.in, run.ss, hw, run.ss.found.stats.count);
  CHECK(ev.other_busy_python_threads == 1);  // logger: 5 ms of each 10 ms step
  CHECK(ev.other_python_busy_share == doctest::Approx(0.5).epsilon(0.1));
  CHECK(ev.step_thread_runqueue_share == 0);
  CHECK(ev.steps_span_ns == doctest::Approx(double(run.ss.steps_e - run.ss.steps_s)));
  // The split of a step whose GPU waited 3 ms on the host: the main thread ran throughout.
  StepMetrics m;
  m.start = run.ss.steps[4].start;
  m.dur = kStep;
  m.idle_host = 3.0 * kMs;
  m.host_out_api = 3.0 * kMs;
  const HostSplitSteps split = split_host_state(run.cx, run.in, run.ss, hw, {m});
  REQUIRE(split.steps.size() == 1);
  const StepMetrics& s = split.steps.front();
  CHECK(s.host_state_measured);
  CHECK(s.host_running + s.host_contention + s.host_wait == doctest::Approx(s.idle_host));
  CHECK(s.host_wait == doctest::Approx(0).epsilon(1e-6));
}

TEST_CASE("split_waits: the attribution's GIL share of blocked time, and blocked dispatch gaps moved to the host") {
  StepMetrics m;
  m.dur = 10 * kMs;
  m.idle_host = 4.0 * kMs;
  m.host_wait = 4.0 * kMs;
  m.idle_gaps = 1.0 * kMs;
  WaitAttribution w;
  w.per_step[0] = {.blocked = 4.0 * kMs, .gil = 1.0 * kMs, .gap_blocked = 0.5 * kMs, .gap_gil = 0.5 * kMs};
  w.per_step[7] = {.blocked = 1.0 * kMs};  // a step the steps do not hold: ignored
  const MeasuredSteps out = split_waits(HostSplitSteps{{m}}, w);
  REQUIRE(out.steps.size() == 1);
  const StepMetrics& s = out.steps.front();
  // 4 ms blocked, a quarter of it the GIL; then 0.5 ms of the gaps, all of it the GIL, moved to the host.
  CHECK(s.host_gil == doctest::Approx(1.5 * kMs));
  CHECK(s.host_wait == doctest::Approx(3.0 * kMs));
  CHECK(s.host_contention == doctest::Approx(1.5 * kMs));
  CHECK(s.idle_gaps == doctest::Approx(0.5 * kMs));
  CHECK(s.idle_host == doctest::Approx(4.5 * kMs));
  CHECK(s.host_running + s.host_contention + s.host_wait == doctest::Approx(s.idle_host));
}

TEST_CASE("build_tables: kernels, copies with the link's peak, syncs and threads") {
  Run run(program());
  order_gpu(run.in.gpu, 1);
  const LaunchIndex li = index_launches(run.in.apis, run.in.cmin, run.in.cmax, 1);
  Launchers who(run.cx, run.ss.found.stats.name);
  const Attribution at = attribute(run.cx, run.in, li, who);
  const LinkPeak link = pcie_peak({{"gpu.0.pcie_gen", "4"}, {"gpu.0.pcie_width", "16"}});
  const Tables t = build_tables(run.cx, run.in, at, who, link);
  REQUIRE(t.kernels.size() == 1);
  CHECK(t.kernels[0].name == "gemm");
  CHECK(t.kernels[0].count == kSteps);
  CHECK(t.kernels[0].total_ms == doctest::Approx(5.0 * kSteps));
  REQUIRE(t.copies.size() == 1);
  CHECK(t.copies[0].direction == "d2h");
  CHECK(t.copies[0].src_memory == "device");
  CHECK(t.copies[0].dst_memory == "pageable");
  CHECK(t.copies[0].bytes == 4'000'000ull * kSteps);
  CHECK(t.copies[0].bandwidth_gbps == doctest::Approx(10.0));
  CHECK(t.copies[0].peak_bandwidth_gbps == doctest::Approx(link.peak_h2d_gbps));
  CHECK_FALSE(t.copies[0].peak_assumed);
  bool device_sync = false;
  for (const SyncRow& s : t.syncs) device_sync |= s.count == kSteps && s.called_from.find("serve_step") != std::string::npos;
  CHECK(device_sync);
  std::set<std::string> threads;
  for (const ThreadRow& r : t.threads) threads.insert(r.name);
  CHECK(threads.count("MainThread"));
  CHECK(threads.count("logger"));
}

TEST_CASE("build_timeline: the representative step's lanes, threads before the GPU, inside the step") {
  Run run(program());
  order_gpu(run.in.gpu, 1);
  const LaunchIndex li = index_launches(run.in.apis, run.in.cmin, run.in.cmax, 1);
  Launchers who(run.cx, run.ss.found.stats.name);
  const Attribution at = attribute(run.cx, run.in, li, who);
  const HostWork hw = measure_host(run.cx, run.ss, run.in.py_agg.size(), run.ss.found.stats.count);
  const Timeline tl = build_timeline(run.cx, run.in, run.ss, hw, at.max_gpu_dur, /*token_function=*/"");
  CHECK(tl.warnings.empty());
  REQUIRE(tl.lanes.size() >= 2);
  CHECK_FALSE(tl.lanes.front().gpu);
  CHECK(tl.lanes.back().gpu);
  bool kernel = false;
  for (const TimelineLane& lane : tl.lanes)
    for (const TimelineSpan& s : lane.spans) {
      CHECK(s.end_ms >= s.start_ms);
      kernel |= s.category == "kernel" && s.label.find("gemm") != std::string::npos;
    }
  CHECK(kernel);
}

TEST_CASE("steps to rules: the typed results in analyze_dump's order give the findings the whole analysis gives") {
  const Analysis whole = analyze_file(program(), {});
  REQUIRE_FALSE(whole.findings.empty());
  CHECK(whole.steps.name == "serve_step");
  CHECK(whole.breakdown.step_ms == doctest::Approx(10.0));
  CHECK(whole.breakdown.gpu_compute_ms == doctest::Approx(5.0));
  // The tables moved into the Analysis are the tables stage's.
  REQUIRE(whole.kernels.size() == 1);
  CHECK(whole.kernels[0].count == kSteps);
}
