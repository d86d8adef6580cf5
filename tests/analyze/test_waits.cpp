// Whom the step waits on (lib/analyze/waits/waits.hpp), stage by stage on hand-made inputs: the wait windows from a
// step thread's series, the attribution's rules (a waker, busy workers, the GIL, a lock's holder, its own sleep
// and I/O, a pipe's writer, the activity threshold), the pool names; then the whole chain end to end on a
// synthetic dump, a producer thread that tokenizes while the step waits in Queue.get.
#include "analyze/analyzer.hpp"
#include "analyze/waits/waits.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>
#include <inferscope/counter_names.hpp>
#include <inferscope/wait_points.hpp>

#include <filesystem>

namespace fs = std::filesystem;
using namespace inferscope;
using namespace inferscope::analyze::detail;
using Kind = WaitParty::Kind;

namespace {

constexpr int64_t us = 1'000, ms = 1'000'000;

// A cumulative series that grows at `rate` (0..1) on each [t_i, t_{i+1}).
CumulativeSeries series(std::initializer_list<std::pair<int64_t, double>> rate_from, int64_t end) {
  CumulativeSeries s;
  std::vector<std::pair<int64_t, double>> v(rate_from);
  double value = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    s.points.emplace_back(v[i].first, value);
    const int64_t next = i + 1 < v.size() ? v[i + 1].first : end;
    value += v[i].second * double(next - v[i].first);
  }
  s.points.emplace_back(end, value);
  return s;
}

Activity thread(uint32_t id, const std::string& name, CumulativeSeries run, bool python = true) {
  Activity a;
  a.kind = Activity::Kind::kThread;
  a.id = id;
  a.os_id = 1000 + id;
  a.name = name;
  a.python = python;
  a.run = std::move(run);
  a.exact = true;
  return a;
}

Activity child(uint32_t pid, const std::string& name, CumulativeSeries run) {
  Activity a;
  a.kind = Activity::Kind::kChild;
  a.id = a.os_id = pid;
  a.name = name;
  a.run = std::move(run);
  return a;
}

const WaitPoint* point(std::string_view module, std::string_view qualname) {
  const WaitPoint* p = find_wait_point(module, qualname);
  REQUIRE(p);
  return p;
}

// One typical step [0, 20 ms) with one piece [2, 12) ms in which the step thread was blocked throughout.
struct OnePiece {
  WaitWindows w;
  WaitFrames f;
  ActivitySet act;
  WaitNaming nm;
  OnePiece() {
    w.measured = true;
    w.pieces.push_back({2 * ms, 12 * ms, 0, 1.0f, false});
    f.piece_py = {0};
    f.piece_range = {0};
    act.step = thread(1, "MainThread", series({{0, 1.0}, {2 * ms, 0.0}, {12 * ms, 1.0}}, 20 * ms));
    act.thread_sample_ms = 1;
    nm.typical_steps = 1;
    nm.steady_steps = 1;
    nm.span_start = 0;
    nm.span_end = 20 * ms;
    nm.steps = {{0, 0, 20 * ms}};
    nm.code_name = [](uint32_t c) { return "code" + std::to_string(c); };
    nm.range_name = [](uint32_t r) { return "range" + std::to_string(r); };
    nm.wait_point = [](uint32_t) -> const WaitPoint* { return nullptr; };
  }
  WaitAttribution run() const { return attribute_waits(w, f, act, {}, nm); }
};

const WaitParty* party(const WaitAttribution& a, Kind k) {
  for (const auto& p : a.parties)
    if (p.kind == k) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("pool names: a trailing number and its separator become '*'; other names are their own") {
  CHECK(pool_name("featurize_3") == "featurize_*");
  CHECK(pool_name("ThreadPoolExecutor-0_12") == "ThreadPoolExecutor-0_*");
  CHECK(pool_name("preproc-1") == "preproc-*");
  CHECK(pool_name("producer") == "producer");
  CHECK(pool_name("worker2") == "worker2");  // no separator: a name, not a pool member
  CHECK(pool_name("7") == "7");
  CHECK(pool_name("") == "");
}

TEST_CASE("wait windows: blocked shares between samples, outside calls, while the GPU idles") {
  // Step [0, 10 ms). The thread runs until 2 ms, is blocked [2, 6), half blocked [6, 8), runs after.
  Activity st = thread(1, "main", series({{0, 1.0}, {2 * ms, 0.0}, {6 * ms, 0.5}, {8 * ms, 1.0}}, 10 * ms));
  const Intervals calls = {{3 * ms, 3 * ms + 50 * us}, {3 * ms + 80 * us, 3 * ms + 90 * us}};
  const Intervals gpu = {{4 * ms, 5 * ms}};
  const WaitWindows w = find_wait_windows({{0, 0, 10 * ms}}, st, calls, gpu, 0.05, 100 * us);
  REQUIRE(w.measured);
  double blocked = 0;
  for (const auto& p : w.pieces) blocked += p.blocked_ns();
  // [2,6) blocked less the calls (60 us) and the GPU's [4,5); [6,8) half blocked.
  CHECK(blocked == doctest::Approx(double(4 * ms - 60 * us - 1 * ms) + 0.5 * double(2 * ms)));
  for (const auto& p : w.pieces) {
    CHECK(p.step == 0);
    CHECK((p.end <= 4 * ms || p.start >= 5 * ms));                // never while the GPU ran
    CHECK((p.end <= 3 * ms || p.start >= 3 * ms + 90 * us ||       // never inside a call
           (p.start >= 3 * ms + 50 * us && p.end <= 3 * ms + 80 * us)));
  }
  // The 30 us between the two calls is a dispatch gap; the rest is not.
  bool gap = false;
  for (const auto& p : w.pieces)
    if (p.start == 3 * ms + 50 * us) gap = p.dispatch_gap && p.end == 3 * ms + 80 * us;
  CHECK(gap);
  // No samples around the step: nothing measured.
  CHECK_FALSE(find_wait_windows({{0, 50 * ms, 60 * ms}}, st, {}, {}).measured);
}

TEST_CASE("wait windows: blocked time lies outside short CUDA calls, not spread over launches") {
  // Step [0, 10 ms), the thread blocked 30 % of every millisecond; launches (short calls) fill 40 % of each.
  Activity st = thread(1, "main", series({{0, 0.7}}, 10 * ms));
  Intervals calls;
  for (int64_t t = 0; t < 10 * ms; t += 100 * us) calls.emplace_back(t, t + 40 * us);
  const WaitWindows w = find_wait_windows({{0, 0, 10 * ms}}, st, calls, {}, 0.05, 10 * us);
  double blocked = 0, outside = 0;
  for (const auto& p : w.pieces) {
    blocked += p.blocked_ns();
    outside += double(p.end - p.start);
    CHECK(p.blocked == doctest::Approx(0.5));  // 0.3 of the time over the 0.6 outside the launches
  }
  CHECK(outside == doctest::Approx(6 * ms));
  CHECK(blocked == doctest::Approx(3 * ms));  // all of the thread's blocked time, none lost inside launches
  // Long calls (a synchronization) may block: they keep their share, and the rest keeps the even spread.
  Intervals syncs;
  for (int64_t t = 0; t < 10 * ms; t += 1 * ms) syncs.emplace_back(t, t + 400 * us);
  const WaitWindows l = find_wait_windows({{0, 0, 10 * ms}}, st, syncs, {}, 0.05, 10 * us);
  for (const auto& p : l.pieces) CHECK(p.blocked == doctest::Approx(0.3));
}

TEST_CASE("attribution: the thread whose Queue.put ended the wait, busy or not, gets it") {
  OnePiece t;
  const WaitPoint* get = point("queue", "Queue.get");
  const WaitPoint* put = point("queue", "Queue.put");
  t.f.step_waits.push_back({1 * ms, 12 * ms + 100 * us, 1, 50, get});
  t.f.wakes.push_back({11 * ms, 12 * ms, 2, 51, put});  // the producer's put, ending just before the get
  // The producer was off a CPU (reading input) all the while; an unrelated busy thread ran a little.
  t.act.others.push_back(thread(2, "producer", series({{0, 0.0}}, 20 * ms)));
  t.act.others.push_back(thread(3, "logger", series({{0, 0.1}}, 20 * ms)));
  t.f.others[2].py_ns[60] = 9 * ms;  // what it ran (self time in the piece)
  const WaitAttribution a = t.run();
  REQUIRE_FALSE(a.parties.empty());
  const WaitParty& p = a.parties.front();
  CHECK(p.kind == Kind::kThreads);
  CHECK(p.name == "producer");
  CHECK(p.wakeups == 1);
  CHECK(p.site_is_wait_point);
  CHECK(p.site_kind == WaitKind::kQueue);
  CHECK(p.site == "code50");
  REQUIRE_FALSE(p.hot.empty());
  CHECK(p.hot.front().first == "code60");
  CHECK(p.blocked_ns > 0.85 * 10 * ms);  // all but the logger's tenth
  CHECK(a.blocked_ns == doctest::Approx(10 * ms));
}

TEST_CASE("attribution: busy worker processes in a DataLoader's __next__ are one party") {
  OnePiece t;
  t.f.step_waits.push_back({1 * ms, 13 * ms, 1, 50, point("torch.utils.data.dataloader", "_BaseDataLoaderIter.__next__")});
  t.act.children.push_back(child(4711, "pt_data_worker", series({{0, 1.0}}, 20 * ms)));
  t.act.children.push_back(child(4712, "pt_data_worker", series({{0, 1.0}}, 20 * ms)));
  t.act.others.push_back(thread(9, "iscope-system", series({{0, 0.5}}, 20 * ms)));  // the profiler's own: never
  const WaitAttribution a = t.run();
  REQUIRE(a.parties.size() == 1);
  const WaitParty& p = a.parties.front();
  CHECK(p.kind == Kind::kProcesses);
  CHECK(p.name == "pt_data_worker");
  CHECK(p.members.size() == 2);
  CHECK(p.busy_share() == doctest::Approx(1.0));
  CHECK(p.blocked_ns == doctest::Approx(10 * ms));
  CHECK(p.site_kind == WaitKind::kDataLoader);
  CHECK(p.cpu_per_step_ns == doctest::Approx(40 * ms));  // both, over the 20 ms steady span, one step
  REQUIRE(a.child_groups.count("pt_data_worker"));
  CHECK(a.child_groups.at("pt_data_worker").first == 2);
}

TEST_CASE("attribution: outside wait points a running Python thread holds the GIL; the steps' GIL part follows") {
  OnePiece t;
  t.act.step.python = true;
  t.act.others.push_back(thread(2, "metrics", series({{0, 0.9}}, 20 * ms)));
  const WaitAttribution a = t.run();
  const WaitParty* gil = party(a, Kind::kGil);
  REQUIRE(gil);
  CHECK(gil->name == "metrics");
  CHECK(gil->blocked_ns == doctest::Approx(10 * ms));  // active >= kActiveForAll: all of it
  REQUIRE(a.per_step.count(0));
  CHECK(a.per_step.at(0).gil == doctest::Approx(10 * ms));
  // A C++ step thread has no GIL: the same thread is then just a busy thread.
  t.act.step.python = false;
  const WaitAttribution c = t.run();
  CHECK_FALSE(party(c, Kind::kGil));
  CHECK(party(c, Kind::kThreads));
}

TEST_CASE("attribution: through a thread's long CUDA calls the step stayed blocked: a lock, not the GIL") {
  OnePiece t;
  t.act.step.python = true;
  t.act.others.push_back(thread(2, "worker-b", series({{0, 0.9}}, 20 * ms)));
  t.act.cuda_calls[2] = {{2 * ms, 3 * ms}, {5 * ms, 7 * ms}};  // 3 ms of synchronizations, all while blocked
  const WaitAttribution a = t.run();
  REQUIRE(party(a, Kind::kLock));
  CHECK(party(a, Kind::kLock)->name == "worker-b");
  CHECK_FALSE(party(a, Kind::kGil));
  // Launches only (microseconds): no evidence either way, so the GIL.
  t.act.cuda_calls[2] = {{2 * ms, 2 * ms + 5 * us}, {5 * ms, 5 * ms + 5 * us}};
  CHECK(party(t.run(), Kind::kGil));
}

TEST_CASE("attribution: blocked in an untimed futex the step waits for a lock; in a timed one, for the GIL") {
  OnePiece t;
  t.act.step.python = true;
  t.act.others.push_back(thread(2, "worker-b", series({{0, 0.9}}, 20 * ms)));
  // `with lock:` passes no timeout: the running Python thread holds a lock, not (only) the GIL.
  t.act.step.blocked_in.points = {{0, int64_t(BlockedIn::kRunning)}, {2 * ms, int64_t(BlockedIn::kLockUntimed)},
                                  {12 * ms, int64_t(BlockedIn::kRunning)}};
  const WaitAttribution a = t.run();
  REQUIRE(party(a, Kind::kLock));
  CHECK(party(a, Kind::kLock)->name == "worker-b");
  CHECK(party(a, Kind::kLock)->blocked_ns == doctest::Approx(10 * ms));
  CHECK_FALSE(party(a, Kind::kGil));
  CHECK(a.per_step.at(0).gil == 0);
  // CPython waits for the GIL a switch interval at a time: a timed futex.
  t.act.step.blocked_in.points[1].second = int64_t(BlockedIn::kLockTimed);
  const WaitAttribution g = t.run();
  REQUIRE(party(g, Kind::kGil));
  CHECK_FALSE(party(g, Kind::kLock));
  CHECK(g.per_step.at(0).gil == doctest::Approx(10 * ms));
  // Mostly timed, briefly untimed (the GIL taken back after a lock): the longer one decides.
  t.act.step.blocked_in.points = {{0, int64_t(BlockedIn::kRunning)}, {2 * ms, int64_t(BlockedIn::kLockUntimed)},
                                  {3 * ms, int64_t(BlockedIn::kLockTimed)}, {12 * ms, int64_t(BlockedIn::kRunning)}};
  CHECK(party(t.run(), Kind::kGil));
  // A futex seen with its timeout overrides the long-CUDA-call evidence, which older dumps still use.
  t.act.cuda_calls[2] = {{2 * ms, 3 * ms}, {5 * ms, 7 * ms}};
  CHECK(party(t.run(), Kind::kGil));
  t.act.step.blocked_in.points = {{0, int64_t(BlockedIn::kRunning)}, {2 * ms, int64_t(BlockedIn::kLock)}};
  CHECK(party(t.run(), Kind::kLock));
}

TEST_CASE("level series: the time a value held within an interval") {
  LevelSeries s;
  s.points = {{0, 0}, {2, 10}, {5, 11}, {6, 10}};
  CHECK(s.time_at_value(0, 10, 10) == doctest::Approx(3 + 4));  // [2,5) and [6,10)
  CHECK(s.time_at_value(3, 7, 10) == doctest::Approx(2 + 1));
  CHECK(s.time_at_value(3, 7, 11) == doctest::Approx(1));
  CHECK(s.time_at_value(7, 7, 10) == 0);
  CHECK(LevelSeries{}.time_at_value(0, 10, 10) == 0);
}

TEST_CASE("attribution: its own sleep; a read is its own unless the other end is busy") {
  OnePiece t;
  t.act.step.blocked_in.points = {{0, int64_t(BlockedIn::kRunning)}, {2 * ms, int64_t(BlockedIn::kSleep)}};
  t.f.piece_py = {70};
  t.act.children.push_back(child(99, "python3", series({{0, 1.0}}, 20 * ms)));
  const WaitAttribution sleep = t.run();
  REQUIRE(sleep.parties.size() == 1);
  CHECK(sleep.parties.front().kind == Kind::kOwnSleep);  // a sleep waits for nobody, busy children or not
  CHECK(sleep.parties.front().site == "code70");

  t.act.step.blocked_in.points.back().second = int64_t(BlockedIn::kRead);
  const WaitAttribution pipe = t.run();
  REQUIRE(party(pipe, Kind::kProcesses));  // the decoder child writing what the step reads
  CHECK_FALSE(party(pipe, Kind::kOwnIo));

  t.act.children.clear();
  const WaitAttribution io = t.run();
  REQUIRE(io.parties.size() == 1);
  CHECK(io.parties.front().kind == Kind::kOwnIo);
}

TEST_CASE("attribution: below kActiveForAll the candidates get only their active time; the rest is unknown") {
  OnePiece t;
  t.act.others.push_back(thread(2, "busy", series({{0, 0.2}}, 20 * ms), false));
  const WaitAttribution a = t.run();
  REQUIRE(party(a, Kind::kThreads));
  CHECK(party(a, Kind::kThreads)->blocked_ns == doctest::Approx(2 * ms));  // min(b, 0.2 x 10 ms)
  REQUIRE(party(a, Kind::kUnknown));
  CHECK(party(a, Kind::kUnknown)->blocked_ns == doctest::Approx(8 * ms));
  // At 0.3 the whole wait is theirs.
  t.act.others.back() = thread(2, "busy", series({{0, 0.3}}, 20 * ms), false);
  const WaitAttribution b = t.run();
  CHECK(party(b, Kind::kThreads)->blocked_ns == doctest::Approx(10 * ms));
  CHECK_FALSE(party(b, Kind::kUnknown));
}

TEST_CASE("attribution: a thread that waits in a wait point itself is idle, not whom the step waits on") {
  OnePiece t;
  t.f.step_waits.push_back({1 * ms, 13 * ms, 1, 50, point("queue", "Queue.get")});
  t.act.others.push_back(thread(2, "pin", series({{0, 1.0}}, 20 * ms)));
  t.f.other_waits.push_back({0, 20 * ms, 2, 52, point("queue", "Queue.get")});  // it waits for its own input
  const WaitAttribution a = t.run();
  CHECK_FALSE(party(a, Kind::kThreads));
  REQUIRE(party(a, Kind::kUnknown));
}

TEST_CASE("end to end: a producer thread tokenizing while the step waits in Queue.get is named with its function") {
  const fs::path p = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work" / "waits_producer.iscope";
  fs::create_directories(p.parent_path());
  {
    dump::DumpBuilder b(p.string());
    const uint32_t main = b.thread("MainThread", 100), prod = b.thread("producer", 101), gpu = b.channel("cupti");
    const uint32_t sys = b.channel("system");
    b.status("system", "on: every 10 ms; busy and known threads' schedstat every 1000 us");
    const uint32_t step = b.code("serve_step", "/app/serve.py", 10);
    const uint32_t get = b.code("Queue.get", "/usr/lib/python3.12/queue.py", 154);
    const uint32_t put = b.code("Queue.put", "/usr/lib/python3.12/queue.py", 122);
    const uint32_t tok = b.code("tokenize", "/app/serve.py", 40);
    uint32_t corr = 0;
    // 20 steps of 12 ms: the step waits 9 ms in Queue.get for the producer's 9 ms of tokenizing, then launches
    // 2 ms of GPU work and syncs.
    for (int i = 0; i < 20; ++i) {
      const int64_t s = 10 * ms + i * 12 * ms;
      b.pycall(prod, tok, 1, s, s + 9 * ms);
      b.pycall(prod, put, 1, s + 9 * ms, s + 9 * ms + 20 * us);
      b.pycall(main, get, 1, s, s + 9 * ms + 50 * us);
      b.api(main, "cudaLaunchKernel", ++corr, s + 9 * ms + 100 * us, s + 9 * ms + 110 * us);
      b.kernel(gpu, "gemm", corr, s + 9 * ms + 120 * us, s + 11 * ms);
      b.api(main, "cudaDeviceSynchronize", ++corr, s + 9 * ms + 120 * us, s + 11 * ms + 10 * us);
      b.pycall(main, step, 0, s, s + 12 * ms);
    }
    // The counters, every millisecond: main is blocked while it waits, on a CPU otherwise; the producer runs
    // while it tokenizes.
    double main_run = 0, prod_run = 0;
    for (int64_t t = 0; t <= 260 * ms; t += 1 * ms) {
      b.counter(sys, counter_names::kThreadSchedRunNs, CounterScope::kThread, main, t, int64_t(main_run));
      b.counter(sys, counter_names::kThreadSchedWaitNs, CounterScope::kThread, main, t, 0);
      b.counter(sys, counter_names::kThreadSchedRunNs, CounterScope::kThread, prod, t, int64_t(prod_run));
      b.counter(sys, counter_names::kThreadSchedWaitNs, CounterScope::kThread, prod, t, 0);
      const int64_t in_step = (t - 10 * ms) % (12 * ms);
      const bool waiting = t >= 10 * ms && in_step < 9 * ms;
      main_run += waiting ? 0.0 : double(ms);
      prod_run += waiting ? double(ms) : 0.0;
    }
  }
  const analyze::Analysis a = analyze::analyze_file(p.string(), {});
  CHECK(a.steps.name == "serve_step");
  const analyze::Finding* wait = nullptr;
  for (const auto& f : a.findings)
    if (f.category == "wait") wait = &f;
  REQUIRE(wait);
  CAPTURE(wait->title);
  CHECK(wait->primary);
  CHECK(wait->title.find("thread 'producer'") != std::string::npos);
  CHECK(wait->title.find("tokenize") != std::string::npos);
  bool processes = false;
  for (const auto& s : wait->suggestions) processes |= s.action.find("worker processes") != std::string::npos;
  CHECK(processes);  // a busy Python producer: processes, not "add a producer thread"
  for (const auto& s : wait->suggestions) CHECK(s.action.find("Fetch ahead") == std::string::npos);
  REQUIRE_FALSE(a.waits.parties.empty());
  CHECK(a.waits.parties.front().name == "producer");
  CHECK(a.waits.parties.front().wakeups >= 15);
}
