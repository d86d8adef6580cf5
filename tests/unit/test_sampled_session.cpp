// Sampled mode in a real session (no GPU: the windows hold the always-on ranges): windows count whole steps and
// hold only their own time, slow steps are kept with their neighbours, the ring is bounded and says what it
// dropped, and flush_ring()/SIGUSR2 write the ring now while the program's own SIGUSR2 handler still runs.
#include <doctest/doctest.h>

#include "sampled_window_wait.hpp"
#include "test_util.hpp"

#include <inferscope/scope.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

using namespace inferscope;
using testutil::count_named;
using testutil::read_all;

namespace {

Config sampled(const std::string& file) {
  Config c;
  c.output = testutil::temp_path(file);
  c.cupti = c.system = c.python = false;
  c.mode = CaptureMode::kSampled;
  c.slow_step_factor = 0;  // only the fixed threshold, where a test sets one: its steps' times are its own
  return c;
}

void pause_us(int us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

// One step: a range "step" holding a range "inner"; `ms` of sleep inside it. Between steps a pause, so the
// writer switches windows between steps as it would between real ones: 1.5 ms, because under a sanitizer on a
// loaded 2-core machine the writer took longer than three 0.6 ms steps to open a window (CI, 2026-11-23).
void step(double ms = 0.5) {
  {
    ISCOPE_RANGE("step");
    ISCOPE_RANGE("inner");
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(ms * 1000)));
  }
  pause_us(1500);
}

// Waits (up to 20 s) until a window of full detail is open (`open`) or wholly closed.
void wait_window(bool open) { REQUIRE(testutil::wait_sampled_window(open ? "open" : "off")); }

// `n` steps; before each step in `window_starts` a window is open (it falls due at the step before), before each
// in `window_ends` none is (the window before has counted its steps).
void steps_with_windows(int n, std::initializer_list<int> window_starts, std::initializer_list<int> window_ends = {}) {
  auto has = [](std::initializer_list<int> l, int i) { return std::find(l.begin(), l.end(), i) != l.end(); };
  for (int i = 0; i < n; ++i) {
    if (has(window_starts, i)) wait_window(true);
    if (has(window_ends, i)) wait_window(false);
    step();
  }
}

const dump::SamplingData& sampling_of(const dump::DumpReader& r) {
  REQUIRE(r.is_sampled());
  return *r.sampling();
}

// The "step" ranges wholly inside window `w`.
size_t steps_inside(const testutil::DumpContents& c, const dump::WindowEntry& w) {
  size_t n = 0;
  for (auto& x : c.ranges) n += x.name == "step" && x.start >= w.begin_ticks && x.end <= w.end_ticks;
  return n;
}

}  // namespace

TEST_CASE("sampled: windows of W whole steps every N steps; nothing outside them is written") {
  Config c = sampled("sampled-windows.iscope");
  c.window_steps = 3;
  c.window_every_steps = 10;
  REQUIRE(start(c));
  // Windows after steps 9, 19, 29 and 39, each counting three: steps 10-12, 20-22, 30-32, 40-42, each closed
  // before the next step begins (records go to a window by when they end: a late close would take more).
  steps_with_windows(48, {10, 20, 30, 40}, {13, 23, 33, 43});
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  CHECK(r.complete());
  CHECK(r.is_ring_snapshot());
  const auto& s = sampling_of(r);
  CHECK(s.summary.steps_seen == 48);
  CHECK(s.summary.windows_opened == 4);
  CHECK(s.summary.steps_in_windows == 12);
  CHECK(s.summary.flags == 1u);
  CHECK(s.summary.records_outside > 0);
  CHECK(r.string_at(s.summary.step_name) == "step");
  REQUIRE(s.windows.size() == 4);
  auto content = read_all(r);
  for (auto& w : s.windows) {
    CAPTURE(w.index);
    CHECK(w.reason == uint8_t(dump::WindowReason::kPeriodic));
    CHECK((w.flags & dump::kWindowFull) != 0);
    CHECK(w.steps == 3);
    CHECK(w.first_step % 10 == 0);
    CHECK(steps_inside(content, w) >= 3);  // the step ending while detail went off may be whole too
  }
  // Every range written lies in a window: what ran between windows was sampled out.
  for (auto& x : content.ranges) {
    bool inside = false;
    for (auto& w : s.windows) inside |= x.end >= w.begin_ticks && x.end <= w.end_ticks;
    CHECK(inside);
  }
  CHECK(count_named(content.ranges, "step") == 12);  // the windows' steps, and no other
  CHECK(testutil::process_value(r, "mode") == "sampled");
  CHECK(testutil::process_value(r, "sampled.window_steps") == "3");
  // What the END chunk says matches the file: sampled-out records are not counted as written.
  CHECK(r.end()->records_written == r.record_count());
}

TEST_CASE("sampled: a slow step outside windows is kept with its neighbours' ranges, and a window follows it") {
  Config c = sampled("sampled-slow.iscope");
  c.window_steps = 3;
  c.window_every_steps = 1000;  // no periodic window in this run
  c.slow_step_ms = 100;  // far above an ordinary step even when a sanitizer on a loaded machine oversleeps it
  c.slow_step_neighbours = 1;
  REQUIRE(start(c));
  for (int i = 0; i < 30; ++i) {
    if (i == 16) wait_window(true);  // the window the slow step asked for is open for the steps after it
    step(i == 15 ? 150 : 0.5);
  }
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  const auto& s = sampling_of(r);
  CHECK(s.summary.slow_steps_seen == 1);
  REQUIRE(s.slow_steps.size() == 1);
  const auto& slow = s.slow_steps[0];
  CHECK(slow.step == 15);
  CHECK(slow.bound_us == 100000);
  CHECK((slow.flags & 1u) == 0);  // its ranges only: no window was open
  REQUIRE(slow.window != 0);
  const dump::WindowEntry* light = nullptr;
  const dump::WindowEntry* after = nullptr;
  for (auto& w : s.windows) {
    if (w.index == slow.window) light = &w;
    if (w.reason == uint8_t(dump::WindowReason::kSlowStep)) after = &w;
  }
  REQUIRE(light != nullptr);
  CHECK(light->reason == uint8_t(dump::WindowReason::kNeighbours));
  CHECK((light->flags & dump::kWindowPinned) != 0);
  CHECK(light->first_step == 14);
  CHECK(light->steps == 3);
  CHECK(light->slow_steps == 1);
  auto content = read_all(r);
  CHECK(steps_inside(content, *light) == 3);  // steps 14, 15 and 16, with their inner ranges
  REQUIRE(after != nullptr);
  CHECK((after->flags & dump::kWindowFull) != 0);
  CHECK(after->first_step >= 16);
  CHECK(s.summary.windows_opened == 1);
}

TEST_CASE("sampled: a slow step in a window keeps the window open for its neighbours, and the window is pinned") {
  Config c = sampled("sampled-slow-in.iscope");
  c.window_steps = 2;
  c.window_every_steps = 10;
  c.slow_step_ms = 100;  // as above: an ordinary step must not cross it under load
  c.slow_step_neighbours = 2;
  c.windows_kept = 2;  // room for one closed window besides the open one: the pinned one stays
  REQUIRE(start(c));
  int slow_at = -1;
  for (int i = 0; i < 40; ++i) {
    // Step 11 is slow, inside the first window (due after step 9, and open before step 11 begins: waited on).
    const bool slow = slow_at < 0 && i == 11;
    if (slow) slow_at = i;
    if (i == 11 || i == 20 || i == 30) wait_window(true);  // the windows due after steps 9, 19 and 29 are open
    step(slow ? 150 : 0.5);
  }
  wait_window(true);  // the window due after step 39 is open before the session stops
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  const auto& s = sampling_of(r);
  REQUIRE(s.slow_steps.size() == 1);
  CHECK(s.summary.windows_opened == 4);  // after steps 9, 19, 29 and 39 (the last still open at stop)
  CHECK(s.summary.windows_dropped == 2);
  REQUIRE(s.windows.size() == 2);
  // Window 1 held the slow step: the ring dropped the two later, unpinned ones instead.
  CHECK(s.windows[0].index == 1);
  CHECK(s.windows[1].index == 4);
  CHECK((s.windows[1].flags & dump::kWindowOpen) != 0);
  CHECK((s.windows[0].flags & dump::kWindowPinned) != 0);
  CHECK(s.slow_steps[0].window == 1);
  CHECK((s.slow_steps[0].flags & 1u) == 1u);
  CHECK(s.windows[0].slow_steps == 1);
  CHECK(s.windows[0].steps >= 3);  // two neighbours follow the slow step in full detail
  bool dropped_counted = false;
  for (auto& d : r.drops()) dropped_counted |= d.reason == "sample_window_dropped" && d.records > 0;
  CHECK(dropped_counted);
}

TEST_CASE("sampled: with no step range, timed windows of window_ms every window_every_ms") {
  Config c = sampled("sampled-timed.iscope");
  c.window_ms = 20;
  c.window_every_ms = 100;
  c.flush_period_ms = 5;
  REQUIRE(start(c));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(450);
  while (std::chrono::steady_clock::now() < until) {
    ISCOPE_RANGE("work");
    pause_us(200);
  }
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  const auto& s = sampling_of(r);
  CHECK(s.summary.flags == 0u);
  CHECK(s.summary.steps_seen == 0);
  CHECK(s.summary.windows_opened >= 3);
  CHECK(s.summary.windows_opened <= 4);
  for (auto& w : s.windows) CHECK(w.reason == uint8_t(dump::WindowReason::kTimed));
  // The windows cover about a fifth of the run.
  const double share = double(s.summary.window_ticks) / double(s.summary.end_ticks - s.summary.begin_ticks);
  CHECK(share > 0.1);
  CHECK(share < 0.35);
  CHECK(count_named(read_all(r).ranges, "work") > 0);
}

TEST_CASE("adaptive: every step from the start in full until baseline_steps, kept; then windows as in sampled mode") {
  Config c = sampled("adaptive.iscope");
  c.mode = CaptureMode::kAdaptive;
  c.baseline_steps = 5;
  c.window_steps = 3;
  c.window_every_steps = 10;
  c.windows_kept = 2;  // the periodic windows then push each other out; the baseline stays, not counted among them
  REQUIRE(start(c));
  // The baseline closed before step 5 begins (the first periodic window falls due 10 steps after it closes).
  steps_with_windows(48, {15, 25, 35, 45}, {5});
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  CHECK(r.complete());
  const auto& s = sampling_of(r);
  CHECK(s.summary.steps_seen == 48);
  CHECK(s.summary.windows_opened == 5);  // the baseline, then windows after steps 14, 24, 34 and 44
  REQUIRE(s.windows.size() == 3);
  const dump::WindowEntry& base = s.windows[0];
  CHECK(base.reason == uint8_t(dump::WindowReason::kBaseline));
  CHECK((base.flags & dump::kWindowFull) != 0);
  CHECK((base.flags & dump::kWindowKept) != 0);
  CHECK((base.flags & dump::kWindowOpen) == 0);
  CHECK(base.first_step == 0);
  CHECK(base.steps == 5);
  CHECK(base.begin_ticks == s.summary.begin_ticks);  // from the session's start
  auto content = read_all(r);
  CHECK(steps_inside(content, base) >= 5);  // steps 0-4, and the step ending while detail went off
  CHECK(s.windows[1].reason == uint8_t(dump::WindowReason::kPeriodic));
  CHECK(s.windows[1].first_step >= 15);
  CHECK(s.summary.windows_dropped >= 1);  // a periodic window, never the baseline
  CHECK(testutil::process_value(r, "mode") == "adaptive");
  CHECK(testutil::process_value(r, "sampled.baseline_steps") == "5");
}

TEST_CASE("adaptive: a run shorter than the baseline is recorded whole, its window still open at stop") {
  Config c = sampled("adaptive-short.iscope");
  c.mode = CaptureMode::kAdaptive;
  REQUIRE(c.baseline_steps == 100);  // the default
  REQUIRE(start(c));
  for (int i = 0; i < 12; ++i) step();
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  const auto& s = sampling_of(r);
  REQUIRE(s.windows.size() == 1);
  CHECK(s.windows[0].reason == uint8_t(dump::WindowReason::kBaseline));
  CHECK((s.windows[0].flags & dump::kWindowOpen) != 0);
  CHECK(s.windows[0].steps >= 11);  // counted so far (the last may still be ending as the writer stops)
  CHECK(count_named(read_all(r).ranges, "step") == 12);
  CHECK(count_named(read_all(r).ranges, "inner") == 12);
  CHECK(s.summary.records_outside == 0);
}

TEST_CASE("adaptive: the baseline ends once it holds half of trace_size_mb, whatever its steps") {
  Config c = sampled("adaptive-full.iscope");
  c.mode = CaptureMode::kAdaptive;
  c.trace_size_mb = 1;  // the baseline's share: 512 KiB
  c.baseline_steps = 1000;
  c.window_steps = 2;
  c.window_every_steps = 5;
  c.flush_period_ms = 5;
  REQUIRE(start(c));
  for (int i = 0; i < 3; ++i) {
    ISCOPE_RANGE("step");
    for (int k = 0; k < 12000; ++k) { ISCOPE_RANGE("tiny"); }  // 36k ranges of 24 bytes: 1.6 x the baseline's share
  }
  // The writer drains, finds the baseline full and closes it at the cycle after. Two snapshots are two whole
  // writer cycles, waited for: a fixed pause was not enough under ThreadSanitizer (CI, 2026-11-27).
  REQUIRE_FALSE(flush_ring().empty());
  REQUIRE_FALSE(flush_ring().empty());
  for (int i = 0; i < 20; ++i) step();
  REQUIRE_FALSE(flush_ring().empty());  // the windows those steps asked for are opened
  pause_us(50000);
  REQUIRE(stop());
  dump::DumpReader r(c.output);
  const auto& s = sampling_of(r);
  REQUIRE(!s.windows.empty());
  const dump::WindowEntry& base = s.windows[0];
  CHECK(base.reason == uint8_t(dump::WindowReason::kBaseline));
  CHECK((base.flags & dump::kWindowOpen) == 0);
  CHECK(base.steps < 1000);
  // Held to its half of the ring: full to within a record, never past it (the rest was refused and counted).
  size_t in_base = 0;
  for (auto& x : read_all(r).ranges) in_base += x.end <= base.end_ticks;
  CHECK(in_base * sizeof(RangeRecord) > (512u << 10) - 64 * sizeof(RangeRecord));
  CHECK(in_base * sizeof(RangeRecord) <= (512u << 10));
  CHECK(s.summary.windows_opened >= 2);  // periodic windows after it
  REQUIRE(s.windows.size() >= 2);
  uint64_t after = 0;  // the half left to the windows took their records
  for (size_t i = 1; i < s.windows.size(); ++i) after += s.windows[i].records;
  CHECK(after > 0);
  bool refused = false;
  for (auto& d : r.drops()) refused |= d.reason == "sample_window_full";
  CHECK(refused);
}

TEST_CASE("sampled: flush_ring() writes the ring now and recording goes on") {
  Config c = sampled("sampled-flush.iscope");
  c.window_steps = 2;
  c.window_every_steps = 5;
  REQUIRE(start(c));
  for (int i = 0; i < 12; ++i) step();
  const std::string path = flush_ring();
  REQUIRE_FALSE(path.empty());
  CHECK(path == testutil::temp_path("sampled-flush.flush1.iscope"));
  for (int i = 0; i < 12; ++i) step();
  REQUIRE(stop());
  dump::DumpReader early(path);
  CHECK(early.complete());
  CHECK(sampling_of(early).summary.steps_seen == 12);
  dump::DumpReader last(c.output);
  CHECK(sampling_of(last).summary.steps_seen == 24);
}

namespace {
std::atomic<int> g_program_handler_ran{0};
void program_usr2(int) { g_program_handler_ran.fetch_add(1); }
}  // namespace

TEST_CASE("sampled: SIGUSR2 writes the ring now; the program's own SIGUSR2 handler still runs") {
  struct sigaction mine{}, before{};
  mine.sa_handler = program_usr2;
  sigemptyset(&mine.sa_mask);
  REQUIRE(::sigaction(SIGUSR2, &mine, &before) == 0);
  Config c = sampled("sampled-usr2.iscope");
  c.window_steps = 2;
  c.window_every_steps = 5;
  REQUIRE(start(c));  // installs ours over the program's, chained to it
  for (int i = 0; i < 12; ++i) step();
  ::kill(::getpid(), SIGUSR2);
  const std::string snap = testutil::temp_path("sampled-usr2.flush1.iscope");
  for (int i = 0; i < 200 && !std::filesystem::exists(snap); ++i) step();
  CHECK(g_program_handler_ran.load() == 1);
  REQUIRE(std::filesystem::exists(snap));
  REQUIRE(stop());
  dump::DumpReader r(snap);
  CHECK(r.complete());
  CHECK(sampling_of(r).summary.steps_seen >= 12);
  ::sigaction(SIGUSR2, &before, nullptr);
}
