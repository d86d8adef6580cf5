// Analyzer v2 units and their effect end to end: the step policy (warm-up and slow steps), one cause per GPU-idle
// instant, the host state from counters (running, contention, wait) and the aggregation of the typical step.
#include "analyze/aggregate.hpp"
#include "analyze/analyzer.hpp"
#include "analyze/host_state.hpp"
#include "analyze/idle_attribution.hpp"
#include "analyze/step_policy.hpp"
#include "analyze/what_if/what_if.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>
#include <inferscope/counter_names.hpp>

#include <filesystem>
#include <functional>
#include <limits>

namespace fs = std::filesystem;
using namespace inferscope;
using analyze::Analysis;
using analyze::detail::ApiOp;

namespace {

constexpr int64_t us = 1'000, ms = 1'000'000;

fs::path work_file(const std::string& name) {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work";
  fs::create_directories(d);
  return d / name;
}

const analyze::Finding* find(const Analysis& a, const std::string& category) {
  for (const auto& f : a.findings)
    if (f.category == category) return &f;
  return nullptr;
}

ApiOp call(int64_t s, int64_t d, uint8_t kind) {
  ApiOp x{};
  x.start = s;
  x.dur = uint32_t(d);
  x.kind = kind;
  return x;
}

// The step thread's schedstat counters, sampled every `period`: on a CPU for `on_cpu(t)` of each period and
// runnable-but-waiting for `runq(t)`.
template <class OnCpu, class Runq>
void sched_counters(dump::DumpBuilder& b, uint32_t sys, uint32_t thread, int64_t t0, int64_t t1, int64_t period,
                    OnCpu on_cpu, Runq runq, CounterScope scope = CounterScope::kThread) {
  double run = 0, wait = 0;
  for (int64_t t = t0; t <= t1; t += period) {
    b.counter(sys, "thread.sched.run_ns", scope, thread, t, int64_t(run));
    b.counter(sys, "thread.sched.wait_ns", scope, thread, t, int64_t(wait));
    run += on_cpu(t) * double(period);
    wait += runq(t) * double(period);
  }
}

}  // namespace

TEST_CASE("step policy: a slow first step is warm-up; steady steps keep their spread") {
  using analyze::select_steps;
  std::vector<double> d = {325e6, 9.7e6, 9.5e6, 9.6e6, 10.1e6, 9.4e6, 9.6e6, 9.9e6};
  auto s = select_steps({d, {}}, {});
  CHECK(s.warmup == 1);
  CHECK_FALSE(s.steady[0]);
  CHECK(s.steady[1]);
  CHECK(s.steady_median_ns == doctest::Approx(9.6e6));
  CHECK(s.outliers.empty());

  SUBCASE("two slow leading steps (context, then autotuning) are both warm-up") {
    d[1] = 60e6;
    CHECK(select_steps({d, {}}, {}).warmup == 2);
  }
  SUBCASE("the user's count wins, also 0") {
    CHECK(select_steps({d, {}}, {3}).warmup == 3);
    auto none = select_steps({d, {}}, {0});
    CHECK(none.warmup == 0);
    CHECK(none.user_skipped);
    CHECK(none.outliers == std::vector<size_t>{0});  // then the slow first step is a steady outlier
  }
  SUBCASE("near-identical steps: a step a few % slower is neither warm-up nor outlier") {
    std::vector<double> flat = {10.3e6, 10.0e6, 10.0e6, 10.01e6, 9.99e6, 10.0e6};
    auto f = select_steps({flat, {}}, {});
    CHECK(f.warmup == 0);
    CHECK(f.outliers.empty());
  }
  SUBCASE("a slow step in the middle is an outlier, not warm-up") {
    d[4] = 40e6;
    auto o = select_steps({d, {}}, {});
    CHECK(o.warmup == 1);
    CHECK(o.outliers == std::vector<size_t>{4});
    // One 40 ms step among six of 10 ms moves the mean 43 % above the median: the mean is the headline, and the
    // typical step keeps the outlier so that the findings share that base.
    REQUIRE(o.not_alike);
    CHECK(analyze::detail::typical_indexes(o).size() == d.size() - 1);
    // Among many steps the same outlier leaves the steps alike: it is left out of the typical step.
    std::vector<double> many(40, 10e6);
    many[0] = 90e6;
    many[20] = 40e6;
    auto m = select_steps({many, {}}, {});
    REQUIRE_FALSE(m.not_alike);
    CHECK(m.outliers == std::vector<size_t>{20});
    auto typical = analyze::detail::typical_indexes(m);
    CHECK(std::find(typical.begin(), typical.end(), size_t(20)) == typical.end());
    CHECK(typical.size() == many.size() - 2);
  }
  SUBCASE("the first CUDA call makes its step warm-up only when that step is slower than the median") {
    std::vector<double> mild = {11e6, 10e6, 10e6, 10e6, 10e6};
    CHECK(select_steps({mild, {true, false, false, false, false}}, {}).warmup == 1);
    std::vector<double> same = {10e6, 10e6, 10e6, 10e6, 10e6};
    CHECK(select_steps({same, {true, false, false, false, false}}, {}).warmup == 0);
  }
  SUBCASE("never more than half the steps, never every step") {
    std::vector<double> rising = {90e6, 80e6, 70e6, 10e6, 10e6, 10e6};
    CHECK(select_steps({rising, {}}, {}).warmup <= 3);
    CHECK(select_steps({{5e6}, {true}}, {}).warmup == 0);
    CHECK(select_steps({{5e6, 6e6}, {}}, {7}).warmup == 1);
  }
}

TEST_CASE("idle attribution: each idle instant gets the cause of what the step thread did then") {
  using namespace analyze::detail;
  const int64_t dispatch = 100 * us;
  SUBCASE("launches and short dispatch gaps: launch; a long host gap: host") {
    std::vector<ApiOp> c = {call(0, 10 * us, kLaunch), call(30 * us, 10 * us, kLaunch), call(1040 * us, 10 * us, kLaunch)};
    std::vector<const ApiOp*> p = {&c[0], &c[1], &c[2]};
    IdleCauses x = attribute_idle_gap(p, 0, 0, 1050 * us, dispatch);
    CHECK(x.launch == doctest::Approx(10 * us + 20 * us + 10 * us + 10 * us));
    CHECK(x.host == doctest::Approx(1000 * us));
    CHECK(x.total() == doctest::Approx(1050 * us));
    CHECK(x.longest_host.start == 40 * us);
  }
  SUBCASE("after a sync: the sync and the refill that follows are the sync's, until the host does real work") {
    std::vector<ApiOp> c = {call(0, 50 * us, kSync), call(60 * us, 10 * us, kLaunch), call(570 * us, 10 * us, kLaunch)};
    std::vector<const ApiOp*> p = {&c[0], &c[1], &c[2]};
    IdleCauses x = attribute_idle_gap(p, 0, 20 * us, 580 * us, dispatch);
    CHECK(x.sync == doctest::Approx(30 * us + 10 * us + 10 * us));  // in the sync, the dispatch gap, the launch
    CHECK(x.host == doctest::Approx(500 * us));
    CHECK(x.launch == doctest::Approx(10 * us));  // the launch after real host work is plain launch overhead
  }
  SUBCASE("allocation calls and the refill after a cudaFree: memory") {
    std::vector<ApiOp> c = {call(0, 200 * us, kFree), call(210 * us, 300 * us, kAlloc), call(520 * us, 10 * us, kLaunch)};
    std::vector<const ApiOp*> p = {&c[0], &c[1], &c[2]};
    IdleCauses x = attribute_idle_gap(p, 0, 100 * us, 530 * us, dispatch);
    CHECK(x.memory == doctest::Approx(530 * us - 100 * us));
    CHECK(x.launch == 0);
  }
}

TEST_CASE("host state: counters split host time into running, contention (run queue, GIL) and waiting") {
  using namespace analyze::detail;
  ThreadCounters st;
  st.on_cpu.push_back({{{0, 0}, {10 * ms, 4 * ms}}});  // on a CPU 40 % of [0, 10 ms)
  st.runnable = {{{0, 0}, {10 * ms, 1 * ms}}};         // runnable but waiting 10 %
  CHECK(st.on_cpu_delta(0, 5 * ms) == doctest::Approx(2 * ms));
  SUBCASE("no other Python thread: the blocked time is a wait of its own") {
    HostShares h = host_shares(0, 10 * ms, 8 * ms, st, {}, true);
    REQUIRE(h.measured);
    CHECK(h.runnable == doctest::Approx(1.0 / 8));
    CHECK(h.blocked == doctest::Approx(5.0 / 8));
    CHECK(h.gil == 0);
    CHECK(h.running + h.runnable + h.gil + h.blocked == doctest::Approx(1));
  }
  SUBCASE("another Python thread on a CPU all the time: the blocked time is GIL waiting") {
    ThreadCounters other;
    other.python = true;
    other.on_cpu.push_back({{{0, 0}, {10 * ms, 10 * ms}}});
    HostShares h = host_shares(0, 10 * ms, 8 * ms, st, {other}, true);
    CHECK(h.gil == doctest::Approx(5.0 / 8));
    CHECK(h.blocked == doctest::Approx(0));
    SUBCASE("...but not in a thread that runs no Python (a C++ program has no GIL)") {
      CHECK(host_shares(0, 10 * ms, 8 * ms, st, {other}, false).gil == 0);
    }
  }
  SUBCASE("counters covering only part of the step: the shares come from that part") {
    // Samples end at 10 ms; the step runs to 15 ms. Flat extrapolation past the last sample read the thread's
    // last 5 ms as off-CPU, so a thread on a CPU all the time came out half "waiting".
    ThreadCounters busy;
    busy.on_cpu.push_back({{{0, 0}, {10 * ms, 10 * ms}}});
    HostShares h = host_shares(5 * ms, 15 * ms, 8 * ms, busy, {}, true);
    REQUIRE(h.measured);
    CHECK(h.blocked == doctest::Approx(0));
    CHECK(h.running == doctest::Approx(1));
    // The other thread's share of the step the same way: on a CPU all the time it covers.
    ThreadCounters idle_st;
    idle_st.on_cpu.push_back({{{0, 0}, {20 * ms, 0}}});
    ThreadCounters other;
    other.python = true;
    other.on_cpu.push_back({{{0, 0}, {10 * ms, 10 * ms}}});
    HostShares g = host_shares(5 * ms, 15 * ms, 10 * ms, idle_st, {other}, true);
    CHECK(g.gil == doctest::Approx(1));
  }
  SUBCASE("no counters over the step: not measured, all of it counts as running") {
    HostShares h = host_shares(20 * ms, 30 * ms, 8 * ms, st, {}, true);
    CHECK_FALSE(h.measured);
    CHECK(h.running == 1);
  }
}


namespace {
// A thread's schedstat counters sampled every 10 ms from 0 to 110 ms as the kernel shows them: on a CPU for
// [0, 20 ms), off it for [20, 105 ms), on it again from 105 ms. Off the CPU it is runnable (its cgroup throttled:
// the 85 ms wait is credited only when it gets the CPU back, at 105 ms) or asleep (nothing is credited).
analyze::detail::ThreadCounters run_then_off(bool runnable) {
  analyze::detail::ThreadCounters st;
  st.on_cpu_exact = true;
  analyze::detail::CumulativeSeries run;
  for (int64_t t = 0; t <= 110 * ms; t += 10 * ms) {
    run.points.emplace_back(t, double(std::min(t, 20 * ms) + (t > 105 * ms ? t - 105 * ms : 0)));
    st.runnable.points.emplace_back(t, runnable && t > 105 * ms ? double(85 * ms) : 0.0);
  }
  st.on_cpu.push_back(std::move(run));
  return st;
}
}  // namespace

TEST_CASE("host state: a run-queue wait that schedstat credits only when it ends is counted where it happened") {
  using namespace analyze::detail;
  // The step [0, 100 ms): 100 ms outside CUDA calls, 20 on a CPU, 80 off it.
  SUBCASE("throttled: the 80 ms off a CPU are run-queue wait, not a wait of the thread's own") {
    ThreadCounters st = run_then_off(true);
    const HostShares before = host_shares(0, 100 * ms, 100 * ms, st, {}, false);
    CHECK(before.blocked == doctest::Approx(0.8));  // as the raw counters read: the wait shows up after the step
    credit_pending_waits(st);
    const HostShares h = host_shares(0, 100 * ms, 100 * ms, st, {}, false);
    CHECK(h.runnable == doctest::Approx(0.8));
    CHECK(h.blocked == doctest::Approx(0).epsilon(0.001));
    CHECK(h.running == doctest::Approx(0.2));
    // Nothing is created or lost: the totals at the last sample are the kernel's.
    CHECK(st.runnable.points.back().second == doctest::Approx(85 * ms));
    CHECK(st.on_cpu_delta(0, 110 * ms) == doctest::Approx(25 * ms));
  }
  SUBCASE("asleep: the same 80 ms stay the thread's own wait") {
    ThreadCounters st = run_then_off(false);
    credit_pending_waits(st);
    const HostShares h = host_shares(0, 100 * ms, 100 * ms, st, {}, false);
    CHECK(h.blocked == doctest::Approx(0.8));
    CHECK(h.runnable == 0);
  }
  SUBCASE("on-CPU time credited a tick late goes back as on-CPU time, not as a wait") {
    ThreadCounters st;
    st.on_cpu_exact = true;
    // On a CPU throughout; the 10 ms sample reads 4 ms behind, the 20 ms one catches up.
    st.on_cpu.push_back({{{0, 0}, {10 * ms, 6 * ms}, {20 * ms, 20 * ms}, {30 * ms, 30 * ms}}});
    st.runnable = {{{0, 0}, {10 * ms, 0}, {20 * ms, 0}, {30 * ms, 0}}};
    credit_pending_waits(st);
    const HostShares h = host_shares(0, 10 * ms, 10 * ms, st, {}, false);
    CHECK(h.running == doctest::Approx(1));
    CHECK(h.runnable == 0);
    CHECK(h.blocked == doctest::Approx(0).epsilon(0.001));
  }
  SUBCASE("no further back than the credited time's own length") {
    // On a CPU [0, 20) and [92, 100) ms, off it [20, 92) and [100, 105), on it from 105: the sample at 110 ms credits
    // 5 ms on a CPU and 15 ms of wait, 10 ms more than its interval. Those 20 ms happened after 90 ms, where only
    // 2 ms are unaccounted: they are moved, and the time before 90 ms stays the thread's own.
    ThreadCounters st;
    st.on_cpu_exact = true;
    CumulativeSeries run;
    for (int64_t t = 0; t <= 110 * ms; t += 10 * ms) {
      const int64_t on_cpu = std::min(t, 20 * ms) + (t >= 100 * ms ? 8 * ms : 0) + (t > 105 * ms ? t - 105 * ms : 0);
      run.points.emplace_back(t, double(on_cpu));
      st.runnable.points.emplace_back(t, t > 105 * ms ? double(15 * ms) : 0.0);
    }
    st.on_cpu.push_back(std::move(run));
    credit_pending_waits(st);
    CHECK(st.runnable.delta(0, 90 * ms) == 0);
    CHECK(st.runnable.delta(90 * ms, 100 * ms) == doctest::Approx(2 * ms));
    CHECK(st.runnable.points.back().second == doctest::Approx(15 * ms));
  }
  SUBCASE("hostile values: infinite ones leave the series as they are; huge ones are bounded by the samples") {
    ThreadCounters inf = run_then_off(true);
    inf.runnable.points[3].second = std::numeric_limits<double>::infinity();
    const auto copy = inf.runnable.points;
    credit_pending_waits(inf);
    CHECK(inf.runnable.points == copy);
    ThreadCounters huge = run_then_off(true);
    huge.runnable.points.back().second = 9.2e18;  // an int64 counter near its limit: no overflow, all back to t=0
    credit_pending_waits(huge);
    CHECK(huge.runnable.delta(0, 100 * ms) == doctest::Approx(80 * ms));
    CHECK(huge.runnable.points.back().second == doctest::Approx(9.2e18));
  }
  SUBCASE("no unaccounted time anywhere and a huge credit every other sample: the look-back skips empty intervals") {
    // 200,000 samples 1 ms apart of a thread always on a CPU; every other sample also credits 10^6 s of wait (a
    // hostile dump). Each credit looks back to the start and finds nothing to take: a look-back that visited every
    // empty interval again would take ~10^10 steps (past the test's timeout).
    ThreadCounters st;
    st.on_cpu_exact = true;
    CumulativeSeries run;
    for (int64_t i = 0; i <= 200'000; ++i) {
      run.points.emplace_back(i * ms, double(i * ms));
      st.runnable.points.emplace_back(i * ms, double((i + 1) / 2) * 1e15);
    }
    st.on_cpu.push_back(std::move(run));
    credit_pending_waits(st);
    CHECK(st.on_cpu_delta(0, 200'000 * ms) == doctest::Approx(200'000 * ms));
    CHECK(st.runnable.points.back().second == doctest::Approx(100'000 * 1e15));
  }
  SUBCASE("without schedstat (clock-tick CPU times) nothing is moved") {
    ThreadCounters st = run_then_off(true);
    st.on_cpu_exact = false;
    const auto copy = st.runnable.points;
    credit_pending_waits(st);
    CHECK(st.runnable.points == copy);
  }
}

TEST_CASE("end to end: a warm-up step stays out of the headline, the breakdown and the impacts") {
  fs::path p = work_file("warmup.iscope");
  {
    dump::DumpBuilder b(p.string());
    testsupport::Sim sim(b);
    for (int i = 0; i < 12; ++i)
      sim.range("step", [&] {
        if (i == 0) sim.malloc(1 << 20, 300 * ms);  // the first CUDA call: context creation
        for (int k = 0; k < 4; ++k) sim.launch("gemm", 2 * ms);
        sim.sync();
      });
    b.finish();
  }
  Analysis a = analyze::analyze_file(p.string(), {});
  CHECK(a.steps.total == 12);
  CHECK(a.steps.warmup == 1);
  CHECK(a.steps.count == 11);
  CHECK(a.end_to_end_ms == doctest::Approx(8.0).epsilon(0.02));
  CHECK(a.breakdown.step_ms == doctest::Approx(8.0).epsilon(0.02));
  REQUIRE_FALSE(a.findings.empty());
  CHECK(a.findings.front().category == "gpu_bound");
  CHECK(find(a, "memory_alloc") == nullptr);  // the context creation is not a per-step cost
  const auto* w = find(a, "warmup");
  REQUIRE(w != nullptr);
  CHECK(w->informational);
  CHECK_FALSE(w->primary);
  CHECK(w->metrics.at("warmup_ms") > 300);
  CHECK(w->suggestions.size() >= 3);

  analyze::AnalyzeOptions all;
  all.skip_steps = 0;
  Analysis b = analyze::analyze_file(p.string(), all);
  CHECK(b.steps.warmup == 0);
  CHECK(b.steps.count == 12);
  CHECK(b.steps.outliers.size() == 1);  // kept, the first step is then a slow steady step
  CHECK(find(b, "slow_steps") != nullptr);
}

namespace {
// Steps of 1 ms of GPU work followed by `idle` host time outside CUDA calls, with schedstat counters saying
// the thread was on a CPU `on_cpu` and runnable `runq` of the time; optionally a busy Python thread beside it.
// `extra` adds records (counters, process info) on the system channel over the steps' span [t0, t1].
using ExtraRecords = std::function<void(dump::DumpBuilder&, uint32_t sys, int64_t t0, int64_t t1)>;
fs::path host_gap_trace(const std::string& name, double on_cpu, double runq, bool busy_python_thread, bool python,
                        bool worker_counters = true, bool worker_by_os_tid = false, const ExtraRecords& extra = {}) {
  fs::path p = work_file(name);
  dump::DumpBuilder b(p.string());
  testsupport::Sim sim(b);
  const uint32_t sys = b.channel("system");
  const int64_t t0 = sim.now();
  auto body = [&] {
    sim.launch("gemm", 1 * ms);
    sim.sync();
    sim.host(5 * ms);  // time.sleep(0.005), a GIL wait, a run-queue wait or real work: the counters tell
  };
  for (int i = 0; i < 20; ++i)
    sim.range("step", [&] { python ? sim.py("serve_one", body, "serve.py", 3) : body(); });
  const int64_t t1 = sim.now();
  // Per 1 ms period: the GPU part of a step (first ms) is on a CPU (spinning in the sync); the host part at
  // the given shares.
  auto step_phase = [&](int64_t t) { return ((t - t0) % (6 * ms + 5 * us)) < 1 * ms; };
  sched_counters(b, sys, sim.thread(), t0, t1 + 1 * ms, 1 * ms,
                 [&](int64_t t) { return step_phase(t) ? 1.0 : on_cpu; }, [&](int64_t t) { return step_phase(t) ? 0.0 : runq; });
  if (busy_python_thread) {
    const uint32_t worker = b.thread("metrics", 4250);
    const uint32_t code = b.code("busy_loop", "worker.py", 3);
    for (int64_t t = t0; t + 10 * ms <= t1; t += 10 * ms) b.pycall(worker, code, 0, t, t + 10 * ms);
    if (worker_counters)  // by OS thread id: how the sampler names a thread it has not matched to the session yet
      sched_counters(b, sys, worker_by_os_tid ? 4250u : worker, t0, t1 + 1 * ms, 1 * ms, [](int64_t) { return 1.0; },
                     [](int64_t) { return 0.0; }, worker_by_os_tid ? CounterScope::kOsThread : CounterScope::kThread);
  }
  if (extra) extra(b, sys, t0, t1);
  b.finish();
  return p;
}
}  // namespace

TEST_CASE("end to end: a thread that sleeps is waiting, not contended, in Python and in C++") {
  for (bool python : {true, false}) {
    CAPTURE(python);
    Analysis a = analyze::analyze_file(host_gap_trace("sleep.iscope", 0.02, 0.0, false, python).string(), {});
    REQUIRE_FALSE(a.findings.empty());
    CHECK(a.findings.front().category == "wait");
    CHECK(find(a, "cpu_contention") == nullptr);
    CHECK(a.breakdown.host_state_measured);
    // 5 ms off-CPU per step: the first ~1 ms is the sync's (the time the host waited in it, which the sleep
    // would have overlapped), the rest the thread's own wait.
    CHECK(a.breakdown.host_waiting_ms > 3.5);
    CHECK(a.breakdown.gpu_idle_waiting_on_sync_ms == doctest::Approx(1.0).epsilon(0.1));
    const auto& s = a.findings.front().suggestions.front();
    CHECK(s.estimated);
    CHECK(s.impact_ms == doctest::Approx(5.0).epsilon(0.1));  // without the sleep the step is its 1 ms of GPU work
  }
}

TEST_CASE("end to end: a Python thread whose CPU time is unknown is not taken to hold the GIL") {
  // Its frames cover the whole run, as a producer thread's loop does while it sleeps in time.sleep: frame
  // coverage cannot tell running from blocking, so the step thread's off-CPU time stays its own wait.
  Analysis a = analyze::analyze_file(host_gap_trace("producer.iscope", 0.02, 0.0, true, true, false).string(), {});
  REQUIRE_FALSE(a.findings.empty());
  CHECK(a.findings.front().category == "wait");
  CHECK(find(a, "cpu_contention") == nullptr);
}

TEST_CASE("end to end: GIL held by another Python thread, and a run-queue wait, are contention") {
  Analysis gil = analyze::analyze_file(host_gap_trace("gil.iscope", 0.1, 0.0, true, true).string(), {});
  REQUIRE_FALSE(gil.findings.empty());
  CHECK(gil.findings.front().category == "cpu_contention");
  CHECK(gil.findings.front().title.find("GIL") != std::string::npos);
  CHECK(find(gil, "wait") == nullptr);
  Analysis by_os_tid = analyze::analyze_file(host_gap_trace("gil_os.iscope", 0.1, 0.0, true, true, true, true).string(), {});
  REQUIRE_FALSE(by_os_tid.findings.empty());
  CHECK(by_os_tid.findings.front().category == "cpu_contention");

  Analysis runq = analyze::analyze_file(host_gap_trace("runq.iscope", 0.2, 0.8, false, true).string(), {});
  REQUIRE_FALSE(runq.findings.empty());
  CHECK(runq.findings.front().category == "cpu_contention");
  CHECK(runq.findings.front().title.find("CPU") != std::string::npos);

  Analysis busy = analyze::analyze_file(host_gap_trace("busy.iscope", 1.0, 0.0, false, true).string(), {});
  REQUIRE_FALSE(busy.findings.empty());
  CHECK(busy.findings.front().category == "cpu_bound");
  CHECK(find(busy, "cpu_contention") == nullptr);
  CHECK(find(busy, "wait") == nullptr);
}

namespace {
// A cgroup with a quota of `quota` CPUs and 100 ms periods (process info as the runtime writes it), throttled in
// one period of every `throttled_every` and with a throttled time (cpu.stat's, summed over CPUs) of `held_share`
// of the elapsed time (cgroup.cpu.* counters sampled every 10 ms).
ExtraRecords cgroup_quota(const char* quota, double held_share, int throttled_every = 1) {
  return [=](dump::DumpBuilder& b, uint32_t sys, int64_t t0, int64_t t1) {
    namespace names = counter_names;
    b.process("cpu_quota", quota);
    b.process("cpu_quota_period_us", "100000");
    const auto P = CounterScope::kProcess;
    for (int64_t t = t0, k = 0; t <= t1 + 100 * ms; t += 10 * ms, ++k) {
      b.counter(sys, names::kCgroupCpuPeriods, P, 0, t, k / 10);
      b.counter(sys, names::kCgroupCpuThrottledPeriods, P, 0, t, held_share > 0 ? k / 10 / throttled_every : 0);
      b.counter(sys, names::kCgroupCpuThrottledNs, P, 0, t, int64_t(held_share * double(t - t0)));
    }
  };
}
}  // namespace

TEST_CASE("end to end: a run-queue wait while the cgroup's CPU quota throttled the process names the quota") {
  // The step thread is runnable 80 % of its 5 ms host gap (two thirds of the span): throttled 60 % of the span
  // covers it, and the fix is the quota, not pinning a thread to a core.
  Analysis q = analyze::analyze_file(
      host_gap_trace("quota.iscope", 0.2, 0.8, false, true, true, false, cgroup_quota("0.50", 0.6)).string(), {});
  REQUIRE_FALSE(q.findings.empty());
  const auto& f = q.findings.front();
  CHECK(f.category == "cpu_contention");
  CHECK(f.title.find("held back by its cgroup's CPU quota (0.50 CPUs)") != std::string::npos);
  CHECK(f.metrics.at("cpu_quota_cpus") == doctest::Approx(0.5));
  CHECK(f.metrics.at("cgroup_throttled_periods") >= 1);
  bool periods = false;
  for (const auto& e : f.evidence) periods |= e.find("ran out of its CPU quota (0.50 CPUs) in ") != std::string::npos;
  CHECK(periods);
  REQUIRE(f.suggestions.size() == 3);
  CHECK(f.suggestions[0].action.find("Raise the CPU limit") != std::string::npos);
  CHECK(f.suggestions[0].estimated);
  CHECK(f.suggestions[1].action.find("torch.set_num_threads(1)") != std::string::npos);
  for (const auto& s : f.suggestions) CHECK(s.action.find("Pin") == std::string::npos);

  // Throttled briefly (2 % of the span): the run-queue wait is other threads'; the throttling stays evidence.
  Analysis burst = analyze::analyze_file(
      host_gap_trace("quota_burst.iscope", 0.2, 0.8, false, true, true, false, cgroup_quota("0.50", 0.02)).string(), {});
  REQUIRE_FALSE(burst.findings.empty());
  CHECK(burst.findings.front().category == "cpu_contention");
  CHECK(burst.findings.front().title.find("other threads taking its CPU") != std::string::npos);
  bool noted = false;
  for (const auto& e : burst.findings.front().evidence) noted |= e.find("CPU quota") != std::string::npos;
  CHECK(noted);

  // A group of many busy threads: its throttled time, summed over 8 CPUs, is 8 times the span, but it was throttled
  // in one period in ten, so it held its threads back at most a tenth of the time: the run-queue wait (two thirds of
  // the span) is mostly other threads'.
  Analysis wide = analyze::analyze_file(
      host_gap_trace("quota_wide.iscope", 0.2, 0.8, false, true, true, false, cgroup_quota("8.00", 8.0, 10)).string(),
      {});
  REQUIRE_FALSE(wide.findings.empty());
  CHECK(wide.findings.front().title.find("other threads taking its CPU") != std::string::npos);

  // A quota that never bit: nothing about it.
  Analysis idle = analyze::analyze_file(
      host_gap_trace("quota_unused.iscope", 0.2, 0.8, false, true, true, false, cgroup_quota("4.00", 0.0)).string(), {});
  REQUIRE_FALSE(idle.findings.empty());
  CHECK(idle.findings.front().title.find("other threads taking its CPU") != std::string::npos);
  for (const auto& e : idle.findings.front().evidence) CHECK(e.find("CPU quota") == std::string::npos);
}

TEST_CASE("end to end: cpu_bound moves the running share of the host time to workers, not the waits beside it") {
  // 5 ms outside CUDA calls per step, on a CPU half of it and off-CPU (waiting) the other half: the workers
  // take over about 2.5 ms of work (its wait is the wait finding's to remove), so the saving is about
  // cpu_bound's own impact, never the whole 5 ms gap.
  Analysis a = analyze::analyze_file(host_gap_trace("half_running.iscope", 0.5, 0.0, false, true).string(), {});
  const auto* f = find(a, "cpu_bound");
  REQUIRE(f != nullptr);
  CHECK(f->impact_ms > 1.5);  // about half the gap (the counters' 1 ms periods blur its edges)
  CHECK(f->impact_ms < 3.0);
  const auto& s = f->suggestions.front();
  CAPTURE(s.action);
  REQUIRE(s.estimated);
  CHECK(s.action.find("4 worker processes") != std::string::npos);  // no DataLoader in this program
  CHECK(s.impact_ms == doctest::Approx(f->impact_ms).epsilon(0.15));
  CHECK(s.impact_ms < 3.0);
}

TEST_CASE("end to end: savings come from the replay and never exceed the step") {
  fs::path p = work_file("decode.iscope");
  {
    dump::DumpBuilder b(p.string());
    testsupport::Sim sim(b);
    for (int i = 0; i < 20; ++i)
      sim.range("step", [&] {
        for (int tok = 0; tok < 16; ++tok) {
          for (int k = 0; k < 6; ++k) sim.launch("decode_kernel", 30 * us, 6 * us);
          sim.copy(CopyKind::kDtoH, 4, 1.0, MemoryKind::kPageable);  // .item()
          sim.host(20 * us);
        }
      });
    b.finish();
  }
  Analysis a = analyze::analyze_file(p.string(), {});
  const auto* f = find(a, "sync_bound");
  REQUIRE(f != nullptr);
  const auto& s = f->suggestions.front();
  REQUIRE(s.estimated);
  CHECK(s.model.find("replay") == 0);
  CHECK(s.impact_ms > 0);
  CHECK(s.impact_ms < a.breakdown.step_ms);
  // GPU-bound per token (6 x 30 us of kernels against 6 x 6 us of launches): removing the syncs saves the
  // refill per token, not the whole time in the syncs.
  CHECK(s.impact_ms < f->impact_ms + a.breakdown.sync_wait_ms);
  for (const auto& g : a.findings)
    for (const auto& x : g.suggestions) {
      CHECK(x.impact_ms <= a.breakdown.step_ms);
      if (!x.estimated) CHECK(x.impact_ms == 0);
    }
}

TEST_CASE("what-if graph: work queued far ahead is linked by correlation id, work of nested calls to the outer call") {
  using namespace analyze::detail;
  // One 1 ms step [0, 1 ms): two launches whose kernels run 5 ms later (the host ran ahead of a busy GPU), and
  // a library call holding a nested driver launch.
  std::vector<ApiOp> all = {call(0, 10 * us, kLaunch), call(20 * us, 10 * us, kLaunch), call(100 * us, 300 * us, kOtherApi),
                            call(150 * us, 20 * us, kLaunch)};
  all[0].corr = 1; all[1].corr = 2; all[2].corr = 3; all[3].corr = 4;
  for (auto& x : all) x.thread = 1;
  std::vector<const ApiOp*> outer = {&all[0], &all[1], &all[2]};  // the nested launch is not an outermost call
  std::vector<GpuOp> gpu = {{5 * ms, 100'000, 1, 0, kKernel, 0, 7}, {5 * ms + 200 * us, 100'000, 2, 0, kKernel, 0, 7},
                            {300 * us, 50'000, 4, 0, kKernel, 0, 7}};
  std::sort(gpu.begin(), gpu.end(), [](const GpuOp& x, const GpuOp& y) { return x.start < y.start; });
  GraphSource src{&outer, gpu.data(), gpu.size(), 100'000, [&](uint32_t corr) -> const ApiOp* {
                    for (auto& x : all)
                      if (x.corr == corr) return &x;
                    return nullptr;
                  }};
  auto g = build_step_graph(src, 0, 1 * ms);
  REQUIRE(g.host.size() == 3);
  CHECK(g.host[0].work.size() == 1);
  CHECK(g.host[1].work.size() == 1);
  CHECK(g.host[2].work.size() == 1);  // the nested launch's kernel belongs to the library call around it
  CHECK(g.gpu.size() == 3);
}

TEST_CASE("steps of an unmodified program: the repeated function that launches GPU work, not a busier one that does not") {
  // for batch in loader: model(batch) -- the loop body is no function; the DataLoader's __next__ and the
  // Dataset's __getitem__ cover the most time but launch nothing.
  fs::path p = work_file("loader.iscope");
  {
    dump::DumpBuilder b(p.string());
    testsupport::Sim sim(b);
    for (int i = 0; i < 20; ++i) {
      sim.py("_DataLoaderIter.__next__", [&] {
        for (int k = 0; k < 8; ++k) sim.py("Dataset.__getitem__", [&] { sim.host(1 * ms); }, "data.py", 20);
      }, "dataloader.py", 600);
      sim.py("Model.forward", [&] {
        for (int k = 0; k < 4; ++k) sim.launch("gemm", 200 * us);
        sim.sync();
      }, "model.py", 40);
    }
    b.finish();
  }
  Analysis a = analyze::analyze_file(p.string(), {});
  CHECK(a.steps.name.find("Model.forward") == 0);
  // The loop spends most of its time outside forward: each step is an iteration, from one forward to the next
  // (19 of them), so the data loading is inside the steps and is what the verdict names.
  CHECK(a.steps.total == 19);
  CHECK(a.breakdown.step_ms == doctest::Approx(9.0).epsilon(0.05));
  REQUIRE_FALSE(a.findings.empty());
  CHECK(a.findings.front().category == "cpu_bound");
}

TEST_CASE("thread table: CPU time from schedstat when the dump has it, whole lives, and the source named") {
  fs::path p = work_file("thread_cpu.iscope");
  {
    dump::DumpBuilder b(p.string());
    testsupport::Sim sim(b);
    sim.range("step", [&] { sim.launch("gemm", 1 * ms); sim.sync(); sim.host(200 * ms); });
    const uint32_t sys = b.channel("system");
    const auto T = CounterScope::kThread, OS = CounterScope::kOsThread;
    // bg-hog ran 48.7 ms; its tick counters never moved (less than a 10 ms tick was added between readings).
    const uint32_t hog = b.thread("bg-hog", 5001);
    b.counter(sys, "thread.sched.run_ns", T, hog, 10 * ms, 1 * ms);
    b.counter(sys, "thread.sched.run_ns", T, hog, 190 * ms, 1 * ms + 48'700 * us);
    b.counter(sys, "thread.cpu.user_ns", T, hog, 10 * ms, 0);
    b.counter(sys, "thread.cpu.user_ns", T, hog, 190 * ms, 0);
    // Sampled under its OS thread id until it recorded, under its dump id after: one series.
    const uint32_t late = b.thread("late-binder", 5002);
    b.counter(sys, "thread.sched.run_ns", OS, 5002, 10 * ms, 0);
    b.counter(sys, "thread.sched.run_ns", OS, 5002, 50 * ms, 5 * ms);
    b.counter(sys, "thread.sched.run_ns", T, late, 190 * ms, 25 * ms);
    // Born after the last round and gone before the next: its one reading is the one taken at its exit.
    const uint32_t brief = b.thread("brief", 5003);
    b.thread_lifetime(brief, 100 * ms, 104 * ms);
    b.counter(sys, "thread.sched.run_ns", T, brief, 104 * ms, 3'500 * us);
    // A kernel without schedstat: user + system time in 10 ms ticks, 0 of them.
    const uint32_t ticks = b.thread("ticks-only", 5004);
    b.counter(sys, "thread.cpu.user_ns", T, ticks, 10 * ms, 20 * ms);
    b.counter(sys, "thread.cpu.user_ns", T, ticks, 190 * ms, 20 * ms);
    b.thread("no-counters", 5005);
    b.finish();
  }
  Analysis a = analyze::analyze_file(p.string(), {});
  std::map<std::string, const analyze::ThreadRow*> rows;
  for (const auto& t : a.threads) rows[t.name] = &t;
  REQUIRE(rows.count("bg-hog"));
  CHECK(rows["bg-hog"]->cpu_ms == doctest::Approx(48.7));
  CHECK(rows["bg-hog"]->cpu_source == "schedstat");
  CHECK(rows["late-binder"]->cpu_ms == doctest::Approx(25.0));
  CHECK(rows["brief"]->cpu_ms == doctest::Approx(3.5));
  CHECK(rows["ticks-only"]->cpu_ms == 0);
  CHECK(rows["ticks-only"]->cpu_source == "ticks");
  CHECK(rows["no-counters"]->cpu_source.empty());
}

TEST_CASE("host state reads the sampler's counters by their one name (include/inferscope/counter_names.hpp)") {
  namespace names = inferscope::counter_names;
  bool schedstat = false;
  CHECK(analyze::detail::is_on_cpu_counter(std::string(names::kThreadSchedRunNs), schedstat));
  CHECK(schedstat);
  CHECK(analyze::detail::is_on_cpu_counter(std::string(names::kThreadCpuUserNs), schedstat));
  CHECK_FALSE(schedstat);
  CHECK(analyze::detail::is_on_cpu_counter(std::string(names::kThreadCpuSystemNs), schedstat));
  CHECK(analyze::detail::is_runnable_counter(std::string(names::kThreadSchedWaitNs)));
  // Names that merely look alike are not on-CPU time: the process's totals, a rate, the wait.
  CHECK_FALSE(analyze::detail::is_on_cpu_counter(std::string(names::kCpuUserNs), schedstat));
  CHECK_FALSE(analyze::detail::is_on_cpu_counter(std::string(names::kMachineBusyPct), schedstat));
  CHECK_FALSE(analyze::detail::is_on_cpu_counter(std::string(names::kThreadSchedWaitNs), schedstat));
  CHECK_FALSE(analyze::detail::is_runnable_counter(std::string(names::kThreadSchedRunNs)));
}

TEST_CASE("the steps' counter evidence takes its series by exact name and scope") {
  namespace names = inferscope::counter_names;
  using analyze::detail::EvidenceSeries;
  using analyze::detail::evidence_series;
  auto series = [](std::string_view n, CounterScope scope, uint32_t target = 0) {
    return evidence_series(std::string(n), scope, target, /*step_thread=*/3);
  };
  CHECK(series(names::kThreadSchedWaitNs, CounterScope::kThread, 3) == EvidenceSeries::kRunQueueWait);
  CHECK(series(names::kThreadCtxInvoluntary, CounterScope::kThread, 3) == EvidenceSeries::kInvoluntarySwitches);
  CHECK(series(names::kMemRssBytes, CounterScope::kProcess) == EvidenceSeries::kRss);
  CHECK(series(names::kMemMinorFaults, CounterScope::kProcess) == EvidenceSeries::kPageFaults);
  CHECK(series(names::kMemMajorFaults, CounterScope::kProcess) == EvidenceSeries::kPageFaults);
  // Another thread's, the process's totals where a thread's are meant, and names that only contain the words.
  CHECK(series(names::kThreadCtxInvoluntary, CounterScope::kThread, 4) == EvidenceSeries::kNone);
  CHECK(series(names::kCtxInvoluntary, CounterScope::kProcess) == EvidenceSeries::kNone);
  CHECK(series(names::kCtxInvoluntary, CounterScope::kThread, 3) == EvidenceSeries::kNone);
  CHECK(series(names::kThreadCtxVoluntary, CounterScope::kThread, 3) == EvidenceSeries::kNone);
  CHECK(series(names::kMemHwmBytes, CounterScope::kProcess) == EvidenceSeries::kNone);
  CHECK(series(names::kMemRssBytes, CounterScope::kThread, 3) == EvidenceSeries::kNone);
  CHECK(series("mem.rss_bytes.total", CounterScope::kProcess) == EvidenceSeries::kNone);
  CHECK(series("gpu.page_faults", CounterScope::kProcess) == EvidenceSeries::kNone);
}

TEST_CASE("steps that are not alike: two modes split at a real gap, typical all; one slow step stays an outlier") {
  using analyze::find_modes;
  using analyze::select_steps;
  // A DataLoader that cannot keep up: 12 steps of ~3 ms, 10 of ~63 ms, after a warm-up.
  std::vector<double> d = {900e6};
  for (int i = 0; i < 22; ++i) d.push_back(i % 2 ? 63e6 + i * 1e5 : 2.8e6 + i * 1e4);
  d.push_back(3.0e6);
  d.push_back(2.9e6);
  auto s = select_steps({d, {}}, {});
  CHECK(s.warmup == 1);
  REQUIRE(s.modes.two);
  CHECK(s.modes.fast == 13);
  CHECK(s.modes.slow == 11);
  CHECK(s.modes.slow_median_ns == doctest::Approx(64.1e6).epsilon(0.01));  // 63.1 .. 65.1 ms
  CHECK(s.not_alike);
  CHECK(s.outliers.empty());  // a mode is not an outlier
  CHECK(analyze::detail::typical_indexes(s).size() == d.size() - 1);
  {  // steps not alike without two modes: the headline is the mean, so the slow outliers stay in the typical step
    std::vector<double> v = {50e6};
    for (int i = 0; i < 24; ++i) v.push_back(7e6 + i * 3e5);  // 7 .. 13.9 ms: no empty stretch up to 19 ms
    for (double slow : {27e6, 19e6, 37e6, 25e6, 31e6, 19e6}) v.push_back(slow);  // launch_bound, H100
    auto u = select_steps({v, {}}, {});
    REQUIRE(u.not_alike);
    REQUIRE_FALSE(u.modes.two);
    CHECK(u.outliers.size() >= 4);                                          // still listed (slow_steps)
    CHECK(analyze::detail::typical_indexes(u).size() == v.size() - u.warmup);  // and still counted
  }
  analyze::StepStats st;
  std::vector<double> starts(d.size(), 0);
  analyze::detail::fill_step_stats(st, d, s, starts);
  CHECK_FALSE(st.alike);
  CHECK(st.basis == "mean");
  CHECK(st.spread.find("alternate between") != std::string::npos);
  CHECK(st.slow_mode_steps == 11);

  // One slow step among equal ones: no gap of 1.5x between groups of two or more, so one mode and an outlier.
  std::vector<double> one = {9.7e6, 9.5e6, 9.6e6, 40e6, 9.4e6, 9.6e6, 9.9e6};
  CHECK_FALSE(find_modes(one).two);
  // Two groups, but too close (1.4x): one mode.
  std::vector<double> close = {10e6, 10e6, 10e6, 14e6, 14e6, 14e6};
  CHECK_FALSE(find_modes(close).two);
  // Alike steps: median basis, no spread.
  std::vector<double> flat = {10e6, 10.2e6, 9.9e6, 10.1e6, 10e6};
  auto f = select_steps({flat, {}}, {0});
  CHECK_FALSE(f.not_alike);
  analyze::StepStats fs_;
  analyze::detail::fill_step_stats(fs_, flat, f, std::vector<double>(flat.size(), 0));
  CHECK(fs_.alike);
  CHECK(fs_.basis == "median");
  CHECK(fs_.spread.empty());
  // Mean far from the median without two modes (a long tail): not alike either.
  std::vector<double> tail = {10e6, 10e6, 10e6, 10e6, 10e6, 10e6, 10e6, 30e6, 31e6};
  auto t = select_steps({tail, {}}, {0});
  CHECK(t.not_alike);
}

TEST_CASE("typical step: every averaged number is the mean of its steps, from the first of the list to the last") {
  analyze::detail::StepMetrics a, b;
  a.dur = 10'000'000, b.dur = 30'000'000;                                   // first of kAveragedStepFields
  a.devices = 1, b.devices = 2;                                             // an unsigned count
  a.host_out_api = 4e6, b.host_out_api = 0;                                 // the middle
  a.d2h_pageable_bytes = 1000, b.d2h_pageable_bytes = 3000;                 // last of the list
  a.start = 5, b.start = 7;                                                 // not averaged: no such TypicalStep field
  const analyze::detail::TypicalStep t = analyze::detail::typical_step({a, b, a}, {0, 1});
  CHECK(t.steps == 2);
  CHECK(t.dur == doctest::Approx(20e6));
  CHECK(t.devices == doctest::Approx(1.5));
  CHECK(t.host_out_api == doctest::Approx(2e6));
  CHECK(t.d2h_pageable_bytes == doctest::Approx(2000));
  CHECK(t.compute == 0);  // unset in both
}
