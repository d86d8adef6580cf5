// In-process sessions: what is recorded comes back from the dump exactly, in both buffer modes.
#include <doctest/doctest.h>

#include "dump/clock_model.hpp"
#include "dump/files.hpp"
#include "runtime/runtime.hpp"
#include "test_util.hpp"

#include <inferscope/scope.hpp>

#include <pthread.h>
#include <sys/syscall.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

using namespace inferscope;
using testutil::count_named;
using testutil::read_all;

namespace {

// Full capture: these cases are about streams and rings (the default, adaptive, has its own case below).
Config config_for(const std::string& file, BufferMode mode = BufferMode::kStream) {
  Config c;
  c.mode = CaptureMode::kFull;
  c.output = testutil::temp_path(file);
  c.buffer_mode = mode;
  c.cupti = false;
  c.system = false;
  c.python = false;
  return c;
}

// Ring mode with a 1 MB budget and each thread's ring (4 MB) larger than it, started with one range recorded first.
Config start_ring(const std::string& file, uint32_t flush_period_ms) {
  Config cfg = config_for(file, BufferMode::kRing);
  cfg.trace_size_mb = 1;
  cfg.flush_period_ms = flush_period_ms;
  cfg.thread_buffer_kb = 4096;
  REQUIRE(start(cfg));
  { ISCOPE_RANGE("first_one"); }
  return cfg;
}

// The dump of a start_ring session that then recorded `n` ranges and "last_one": at most trace_size_mb of records
// (beside them only metadata: process info, strings, threads, calibration, drops, END, a few kB), the newest kept,
// every range kept or counted.
void check_ring_kept_newest(const Config& cfg, uint64_t n, bool buffer_full_allowed) {
  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  const auto c = read_all(r);
  const uint64_t budget = cfg.trace_size_mb << 20;
  CHECK(c.ranges.size() * sizeof(RangeRecord) <= budget);
  CHECK(r.file_size() <= budget + (64u << 10));
  uint64_t overwritten = 0, full = 0;
  for (auto& d : r.drops()) (d.reason == "ring_overwritten" ? overwritten : full) += d.records;
  CHECK(overwritten > 0);
  if (!buffer_full_allowed) CHECK(full == 0);
  CHECK(c.ranges.size() + overwritten + full == n + 2);
  // What is kept is the newest: the last range is there, the first was overwritten.
  CHECK(count_named(c.ranges, "last_one") == 1);
  CHECK(count_named(c.ranges, "first_one") == 0);
}

void nested(int depth) {
  ISCOPE_FUNC();
  if (depth > 0) nested(depth - 1);
}

}  // namespace

TEST_CASE("ranges, attributes, marks, async spans and thread names round-trip through the dump") {
  for (BufferMode mode : {BufferMode::kStream, BufferMode::kRing}) {
    CAPTURE(static_cast<int>(mode));
    Config cfg = config_for(mode == BufferMode::kStream ? "roundtrip-stream.iscope" : "roundtrip-ring.iscope", mode);
    REQUIRE(start(cfg));
    CHECK(is_active());
    CHECK_FALSE(start(cfg));  // one session at a time
    set_thread_name("test-main");
    {
      ISCOPE_RANGE("outer");
      {
        ISCOPE_RANGE_ATTRS("inner", {"batch", 32}, {"model", "gpt2"}, {"ratio", 0.5}, {"warm", true});
      }
      nested(2);
    }
    mark_event("batch_full", {{"size", 8}});
    AsyncRange req("request");
    std::thread other([r = std::move(req)]() mutable {
      set_thread_name("finisher");
      r.end();
    });
    other.join();
    REQUIRE(stop());
    CHECK_FALSE(is_active());
    CHECK_FALSE(stop());

    dump::DumpReader r(cfg.output);
    CHECK(r.complete());
    CHECK_FALSE(r.damage());
    CHECK(r.is_ring_snapshot() == (mode == BufferMode::kRing));
    CHECK(r.calibration().size() >= 3);  // two at start, one at stop
    CHECK(r.process_value("pid") == std::to_string(::getpid()));
    CHECK(r.total_dropped_records() == 0);
    auto c = read_all(r);
    REQUIRE(c.ranges.size() == 5);
    // Complete records are written at their end: children first.
    CHECK(c.ranges[0].name == "inner");
    CHECK(c.ranges[0].depth == 1);
    CHECK(c.ranges[4].name == "outer");
    CHECK(c.ranges[4].depth == 0);
    CHECK(c.ranges[0].start >= c.ranges[4].start);
    CHECK(c.ranges[0].end <= c.ranges[4].end);
    CHECK(count_named(c.ranges, "{anonymous}::nested") == 3);
    std::set<uint32_t> depths;
    for (auto& x : c.ranges)
      if (x.name == "{anonymous}::nested") depths.insert(x.depth);
    CHECK(depths == std::set<uint32_t>{1, 2, 3});
    REQUIRE(c.ranges[0].attrs.size() == 4);
    CHECK(c.ranges[0].attrs[0].key == "batch");
    CHECK(c.ranges[0].attrs[0].i == 32);
    CHECK(c.ranges[0].attrs[1].s == "gpt2");
    CHECK(c.ranges[0].attrs[2].d == doctest::Approx(0.5));
    CHECK(c.ranges[0].attrs[3].type == AttrType::kBool);
    REQUIRE(c.marks.size() == 1);
    CHECK(c.marks[0].name == "batch_full");
    REQUIRE(c.marks[0].attrs.size() == 1);
    CHECK(c.marks[0].attrs[0].i == 8);
    REQUIRE(c.async.size() == 1);
    CHECK(c.async[0].begin_thread != c.async[0].end_thread);
    CHECK(r.string_at(c.async[0].name) == "request");
    std::set<std::string> names;
    for (auto& [id, t] : r.threads()) names.insert(t.name);
    CHECK(names.count("test-main") == 1);
    CHECK(names.count("finisher") == 1);
  }
}

// The default mode: adaptive. Its baseline streams to the output while it is open (what a run killed by SIGKILL
// leaves, as full capture would), and stop() replaces that with the whole dump, flagged as a sampled snapshot.
TEST_CASE("the default mode, adaptive: a short run is recorded whole, its baseline streamed to the output meanwhile") {
  Config cfg;
  cfg.output = testutil::temp_path("default-adaptive.iscope");
  cfg.cupti = cfg.system = cfg.python = false;
  cfg.baseline_steps = 3;
  cfg.window_steps = 1;
  cfg.window_every_steps = 1000;
  REQUIRE(start(cfg));
  for (int i = 0; i < 2; ++i) {
    ISCOPE_RANGE("step");
    ISCOPE_RANGE("work");
  }
  // The writer streams within a few flush periods: the file at the output is a stream dump (no END yet).
  bool streamed = false;
  for (int i = 0; i < 200 && !streamed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      dump::DumpReader live(cfg.output);
      streamed = !live.is_ring_snapshot() && !live.complete() && count_named(read_all(live).ranges, "work") == 2;
    } catch (const std::exception&) {
    }
  }
  CHECK(streamed);
  {
    ISCOPE_RANGE("step");  // the third: the baseline closes once the writer comes
    ISCOPE_RANGE("work");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 20; ++i) {  // past the baseline: between windows the ranges are sampled out
    ISCOPE_RANGE("step");
    ISCOPE_RANGE("later");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {  // What a SIGKILL would leave now: the baseline alone, and it says it is an adaptive run's.
    dump::DumpReader streamed(cfg.output);
    CHECK_FALSE(streamed.is_ring_snapshot());
    CHECK(streamed.process_value("mode") == "adaptive");
    const auto sc = read_all(streamed);
    CHECK(count_named(sc.ranges, "work") == 3);
    CHECK(count_named(sc.ranges, "later") == 0);
  }
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  CHECK(r.is_ring_snapshot());
  REQUIRE(r.is_sampled());
  REQUIRE_FALSE(r.sampling()->windows.empty());
  CHECK(r.sampling()->windows[0].reason == static_cast<uint32_t>(dump::WindowReason::kBaseline));
  CHECK(r.process_value("mode") == "adaptive");
  const auto c = read_all(r);
  CHECK(count_named(c.ranges, "work") == 3);
  CHECK(count_named(c.ranges, "later") == 0);
  CHECK(r.sampling()->summary.steps_seen == 23);
}

// Over an earlier dump the baseline streams to a temporary beside it; stop() renames the whole dump over the
// earlier one and removes that temporary.
TEST_CASE("the default mode over an earlier dump: replaced by the whole new dump, no temporary left beside it") {
  Config cfg;
  cfg.output = testutil::temp_path("default-over-earlier.iscope");
  cfg.cupti = cfg.system = cfg.python = false;
  { std::FILE* f = std::fopen(cfg.output.c_str(), "w"); std::fputs("earlier", f); std::fclose(f); }
  REQUIRE(start(cfg));
  for (int i = 0; i < 5; ++i) {
    ISCOPE_RANGE("step");
  }
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  CHECK(count_named(read_all(r).ranges, "step") == 5);
  CHECK(dump::temporaries_beside(cfg.output).empty());
}

TEST_CASE("a stopped session records nothing and a new session starts clean") {
  Config cfg = config_for("second.iscope");
  { ISCOPE_RANGE("before_any_session"); }
  REQUIRE(start(cfg));
  { ISCOPE_RANGE("in_session"); }
  REQUIRE(stop());
  { ISCOPE_RANGE("after_stop"); }
  dump::DumpReader r(cfg.output);
  auto c = read_all(r);
  CHECK(count_named(c.ranges, "in_session") == 1);
  CHECK(count_named(c.ranges, "before_any_session") == 0);
  CHECK(count_named(c.ranges, "after_stop") == 0);
  CHECK(c.ranges.size() == 1);
}

TEST_CASE("a range open across stop is not written into the next session") {
  Config a = config_for("across-a.iscope"), b = config_for("across-b.iscope");
  REQUIRE(start(a));
  {
    ISCOPE_RANGE("spans_two_sessions");
    REQUIRE(stop());
    REQUIRE(start(b));
    { ISCOPE_RANGE("second_only"); }
  }
  REQUIRE(stop());
  auto ca = read_all(dump::DumpReader(a.output));
  auto cb = read_all(dump::DumpReader(b.output));
  CHECK(count_named(ca.ranges, "spans_two_sessions") == 0);
  CHECK(count_named(cb.ranges, "spans_two_sessions") == 0);
  REQUIRE(count_named(cb.ranges, "second_only") == 1);
  CHECK(cb.ranges[0].depth == 1);  // nested inside the still-open range of the first session
}

TEST_CASE("exact drop accounting when a producer outruns the writer") {
  Config cfg = config_for("drops.iscope");
  cfg.thread_buffer_kb = 64;
  cfg.flush_period_ms = 10000;  // the writer only drains at stop
  REQUIRE(start(cfg));
  constexpr int kN = 10000;  // 240 KB of ranges into a 64 KiB ring
  for (int i = 0; i < kN; ++i) {
    ISCOPE_RANGE("flood");
  }
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  auto c = read_all(r);
  const uint64_t kept = count_named(c.ranges, "flood");
  CHECK(kept == 65536 / sizeof(RangeRecord));  // the ring holds exactly this many whole records
  CHECK(kept + r.total_dropped_records() == kN);
  auto drops = r.drops();
  REQUIRE(drops.size() == 1);
  CHECK(drops[0].reason == "buffer_full");
  CHECK(drops[0].bytes == (kN - kept) * sizeof(RangeRecord));
}

TEST_CASE("ring mode keeps the newest data within its budget and counts what it overwrote") {
  const Config cfg = start_ring("ring-budget.iscope", 1);
  constexpr int kN = 200000;  // 4.8 MB of ranges through a 1 MB window
  for (int i = 0; i < kN; ++i) {
    ISCOPE_RANGE("ring_fill");
    if (i % 5000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  { ISCOPE_RANGE("last_one"); }
  std::string snap = flush_ring();
  REQUIRE(stop());
  check_ring_kept_newest(cfg, kN, true);
  REQUIRE_FALSE(snap.empty());
  dump::DumpReader s(snap);
  CHECK(s.complete());
  CHECK(s.is_ring_snapshot());
}

TEST_CASE("ring mode: one drain larger than the whole budget keeps its newest records within it") {
  // The writer drains only at stop, so the thread's 2.9 MB of ranges arrive in one chunk from its 4 MB ring: what a
  // writer that falls behind on a loaded machine sees (test_session under TSan once kept a 2.37 MB window for a
  // 1 MB budget). The window keeps the newest records that fit and counts the rest as overwritten.
  const Config cfg = start_ring("ring-one-drain.iscope", 10000);
  constexpr int kN = 120000;  // 24 bytes each: 2.9 MB, within the thread's ring (no buffer_full drops)
  for (int i = 0; i < kN; ++i) {
    ISCOPE_RANGE("one_drain");
  }
  { ISCOPE_RANGE("last_one"); }
  REQUIRE(stop());
  check_ring_kept_newest(cfg, kN, false);
}

TEST_CASE("10,000 thread lifetimes: nothing recorded is lost and rings are freed") {
  Config cfg = config_for("threads.iscope");
  cfg.thread_buffer_kb = 64;
  cfg.flush_period_ms = 2;
  REQUIRE(start(cfg));
  constexpr int kRounds = 100, kPerRound = 100;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> ts;
    for (int i = 0; i < kPerRound; ++i)
      ts.emplace_back([] {
        ISCOPE_RANGE("thread_body");
        { ISCOPE_RANGE("thread_inner"); }
        mark_event("thread_mark");
      });
    for (auto& t : ts) t.join();
  }
  // Exited threads' rings go once drained; only the main thread's (and none of the 10,000) remain. Up to 10 s: the
  // writer frees them a cycle at a time, and under ThreadSanitizer on a loaded 2-core machine 1 s was not always
  // enough (the loop ends as soon as they are gone).
  for (int i = 0; i < 2000 && runtime::live_ring_count() > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(runtime::live_ring_count() <= 1);
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  auto c = read_all(r);
  CHECK(count_named(c.ranges, "thread_body") == kRounds * kPerRound);
  CHECK(count_named(c.ranges, "thread_inner") == kRounds * kPerRound);
  CHECK(c.marks.size() == kRounds * kPerRound);
  CHECK(r.total_dropped_records() == 0);
  size_t exited = 0;
  for (auto& [id, t] : r.threads()) exited += (t.flags & dump::kThreadExited) != 0;
  CHECK(exited == kRounds * kPerRound);
  CHECK(c.kinds[std::to_string(int(RecordKind::kThreadEnd))] == kRounds * kPerRound);
}

TEST_CASE("ticks convert to nanoseconds through the calibration") {
  Config cfg = config_for("clock.iscope");
  cfg.calibration_period_ms = 20;
  REQUIRE(start(cfg));
  {
    ISCOPE_RANGE("sleep_50ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  dump::ClockModel m(r.calibration());
  CHECK(m.points() >= 5);
  CHECK(m.max_residual_ns() < 5000);
  auto c = read_all(r);
  REQUIRE(c.ranges.size() == 1);
  // A sleep lasts at least what was asked; the conversion must not shrink it or inflate it wildly.
  double ms = m.duration_ns(c.ranges[0].end - c.ranges[0].start) / 1e6;
  CHECK(ms >= 49.9);
  CHECK(ms < 1000);
}

TEST_CASE("the output cannot be opened: start fails with a message and nothing records") {
  Config cfg = config_for("x");
  cfg.output = "/nonexistent-dir/for/sure/x.iscope";
  CHECK_FALSE(start(cfg));
  CHECK_FALSE(is_active());
}

TEST_CASE("function names are reduced to their qualified name") {
  CHECK(runtime::function_name_from_pretty("void ns::Server::handle(Request&) const") == "ns::Server::handle");
  CHECK(runtime::function_name_from_pretty("int main()") == "main");
  CHECK(runtime::function_name_from_pretty("std::vector<int> {anonymous}::tokenize(const std::string&)") ==
        "{anonymous}::tokenize");
  CHECK(runtime::function_name_from_pretty("void Foo::operator()(int)") == "Foo::operator()");
  CHECK(runtime::function_name_from_pretty("static T A<T>::make(int) [with T = int]") == "A<T>::make");
}

TEST_CASE("a thread known only from a collector's records gets one thread-table entry, kept when it records") {
  CHECK(runtime::thread_for_os_tid(static_cast<uint32_t>(::syscall(SYS_gettid))) == 0);  // no session
  Config cfg = config_for("thread-for-os-tid.iscope");
  REQUIRE(start(cfg));
  // A CUDA worker that has not recorded anything: alive, named, waiting until the test lets it record.
  std::mutex mu;
  std::condition_variable cv;
  uint32_t worker_tid = 0;
  bool go = false;
  uint32_t id_inside = 0;
  std::thread worker([&] {
    ::pthread_setname_np(::pthread_self(), "cuda-worker");
    std::unique_lock lk(mu);
    worker_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    cv.notify_all();
    cv.wait(lk, [&] { return go; });
    lk.unlock();
    { ISCOPE_RANGE("worker-step"); }
    id_inside = runtime::current_thread_id();
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return worker_tid != 0; });
  }
  const uint64_t gen = runtime::session_threads_generation();
  const uint32_t id = runtime::thread_for_os_tid(worker_tid);
  CHECK(id != 0);
  CHECK(runtime::thread_for_os_tid(worker_tid) == id);  // the same entry, not a second one
  CHECK(runtime::session_threads_generation() != gen);
  auto threads = runtime::session_threads();
  CHECK(std::count(threads.begin(), threads.end(), std::make_pair(worker_tid, id)) == 1);
  // A thread that recorded already: its own entry.
  { ISCOPE_RANGE("main-step"); }
  const uint32_t main_id = runtime::current_thread_id();
  CHECK(runtime::thread_for_os_tid(static_cast<uint32_t>(::syscall(SYS_gettid))) == main_id);
  {
    std::lock_guard lk(mu);
    go = true;
  }
  cv.notify_all();
  worker.join();
  CHECK(id_inside == id);  // the worker bound to the entry made for it
  // CUPTI delivers calls late, also after their thread exited (its entry is flagged at exit): still that
  // thread's entry, no new one.
  CHECK(runtime::thread_for_os_tid(worker_tid) == id);
  REQUIRE(stop());
  CHECK(runtime::thread_for_os_tid(worker_tid) == 0);

  dump::DumpReader r(cfg.output);
  int entries = 0;
  for (auto& [tid, t] : r.threads())
    if (t.os_tid == worker_tid) {
      ++entries;
      CHECK(tid == id);
      CHECK(t.name == "cuda-worker");
    }
  CHECK(entries == 1);
  auto c = read_all(r);
  CHECK(count_named(c.ranges, "worker-step") == 1);
  for (auto& rv : c.ranges)
    if (rv.name == "worker-step") CHECK(rv.thread == id);
}

namespace {

// A thread that names itself (kernel name, and optionally set_thread_name), reports its OS thread id, then
// waits for go() before it records one range and exits.
class ParkedThread {
 public:
  ParkedThread(const char* kernel_name, const char* own_name = nullptr) {
    thread_ = std::thread([this, kernel_name, own_name] {
      ::pthread_setname_np(::pthread_self(), kernel_name);
      if (own_name) set_thread_name(own_name);
      std::unique_lock lk(mu_);
      tid_ = static_cast<uint32_t>(::syscall(SYS_gettid));
      cv_.notify_all();
      cv_.wait(lk, [this] { return go_; });
      lk.unlock();
      ISCOPE_RANGE("parked-step");
    });
    std::unique_lock lk(mu_);
    cv_.wait(lk, [this] { return tid_ != 0; });
  }
  uint32_t tid() const { return tid_; }
  void go_and_join() {
    {
      std::lock_guard lk(mu_);
      go_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t tid_ = 0;
  bool go_ = false;
  std::thread thread_;
};

std::string name_of_os_thread(const dump::DumpReader& r, uint32_t os_tid) {
  for (auto& [id, t] : r.threads())
    if (t.os_tid == os_tid && !t.is_channel()) return t.name;
  return "<no entry>";
}

}  // namespace

TEST_CASE("a name given to an OS thread from outside: used when the thread records, never over its own") {
  runtime::name_os_thread(static_cast<uint32_t>(::syscall(SYS_gettid)), "ignored");  // no session: nothing
  ParkedThread own("kern-own", "own-name");     // named itself before the session
  Config cfg = config_for("name-os-thread.iscope");
  REQUIRE(start(cfg));
  ParkedThread waiting("kern-waiting");         // not recorded yet when named
  ParkedThread forgotten("kern-forgotten");     // its name is dropped before it records
  ParkedThread collected("kern-collected");     // a collector made its entry (CUPTI), then it was named
  runtime::name_os_thread(waiting.tid(), "py-waiting");
  runtime::name_os_thread(own.tid(), "py-own");
  runtime::name_os_thread(forgotten.tid(), "py-forgotten");
  runtime::forget_os_thread_name(forgotten.tid());
  runtime::name_os_thread(collected.tid(), "py-collected");
  const uint32_t collected_id = runtime::thread_for_os_tid(collected.tid());
  for (ParkedThread* t : {&own, &waiting, &forgotten, &collected}) t->go_and_join();
  { ISCOPE_RANGE("main-step"); }
  const uint32_t main_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  runtime::name_os_thread(main_tid, "py-main");  // a live, bound entry: renamed at once
  REQUIRE(stop());

  dump::DumpReader r(cfg.output);
  CHECK(name_of_os_thread(r, waiting.tid()) == "py-waiting");
  CHECK(name_of_os_thread(r, own.tid()) == "own-name");
  CHECK(name_of_os_thread(r, forgotten.tid()) == "kern-forgotten");
  CHECK(name_of_os_thread(r, collected.tid()) == "py-collected");
  CHECK(r.threads().at(collected_id).os_tid == collected.tid());
  CHECK(name_of_os_thread(r, main_tid) == "py-main");
}

TEST_CASE("renaming a thread that recorded renames its entry; an exited thread's entry keeps its name") {
  Config cfg = config_for("rename-os-thread.iscope");
  REQUIRE(start(cfg));
  ParkedThread live("kern-live");
  live.go_and_join();  // recorded and exited
  runtime::name_os_thread(live.tid(), "too-late");  // no live entry: the name waits for a thread that never comes
  std::mutex mu;
  std::condition_variable cv;
  bool recorded = false, named = false;
  uint32_t tid = 0;
  std::thread t([&] {
    { ISCOPE_RANGE("before-rename"); }
    std::unique_lock lk(mu);
    tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    recorded = true;
    cv.notify_all();
    cv.wait(lk, [&] { return named; });
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return recorded; });
    runtime::name_os_thread(tid, "renamed-later");
    named = true;
  }
  cv.notify_all();
  t.join();
  REQUIRE(stop());
  dump::DumpReader r(cfg.output);
  CHECK(name_of_os_thread(r, live.tid()) == "kern-live");
  CHECK(name_of_os_thread(r, tid) == "renamed-later");
}
