// Sampled mode's logic on its own (lib/runtime/sampling): which steps and times fall inside windows, the slow-step
// test (fixed threshold and running percentile), and the ring of windows (routing by time, bounded, drops counted).
#include <doctest/doctest.h>

#include "dump/reader.hpp"
#include "runtime/sampling/slow_steps.hpp"
#include "runtime/sampling/window_scheduler.hpp"
#include "runtime/sampling/window_store.hpp"
#include "test_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

using namespace inferscope;
using namespace inferscope::runtime::sampling;
using dump::WindowReason;

namespace {

// Drives a scheduler the way the runtime does: step i runs [100 i, 100 i + 90]; the writer carries out each
// switch right after the step that asked for it ended (at 100 i + 95). Returns the steps each window counted.
struct Run {
  WindowScheduler s;
  std::vector<Request> seen;
  std::vector<std::vector<uint64_t>> windows;  // steps wholly inside each window, by the scheduler's count
  explicit Run(ScheduleOptions o) : s(o, 0) {}

  void step(uint64_t i, bool slow = false) {
    const auto state_before = s.state();
    const uint64_t in_before = s.steps_in_windows();
    s.step_ended(100 * i, 100 * i + 90, slow, slow ? 1000 : 0);
    if (s.steps_in_windows() > in_before) windows.back().push_back(i);
    (void)state_before;
    writer(100 * i + 95);
  }
  void writer(uint64_t now) {
    for (const Request& r : s.take()) {
      seen.push_back(r);
      if (r.kind == Request::kOpen) {
        s.opened(now);
        windows.emplace_back();
      } else if (r.kind == Request::kClose) {
        s.closed(now);
      }
    }
  }
  size_t count(Request::Kind k) const {
    size_t n = 0;
    for (auto& r : seen) n += r.kind == k;
    return n;
  }
  const Request& last(Request::Kind k) const {
    for (auto it = seen.rbegin(); it != seen.rend(); ++it)
      if (it->kind == k) return *it;
    FAIL("no such request");
    return seen.front();
  }
};

}  // namespace

TEST_CASE("scheduler: a window of W steps every N steps, each counting only steps that began with detail on") {
  Run run({.window_steps = 3, .every_steps = 10});
  for (uint64_t i = 0; i < 45; ++i) run.step(i);
  // Step 9 is the tenth: the window is asked for after it and switched on before step 10 begins.
  REQUIRE(run.windows.size() == 4);
  CHECK(run.windows[0] == std::vector<uint64_t>{10, 11, 12});
  CHECK(run.windows[1] == std::vector<uint64_t>{20, 21, 22});
  CHECK(run.windows[3] == std::vector<uint64_t>{40, 41, 42});
  CHECK(run.s.steps_seen() == 45);
  CHECK(run.s.steps_in_windows() == 12);
  CHECK(run.seen.front().kind == Request::kOpen);
  CHECK(run.seen.front().reason == WindowReason::kPeriodic);
  CHECK(run.seen.front().step == 10);
  const Request& close = run.last(Request::kClose);
  CHECK(close.steps == 3);
  CHECK(close.slow_steps == 0);
  CHECK(run.s.state() == WindowScheduler::State::kOff);
}

TEST_CASE("scheduler: a step that began before detail was on is not counted, and the window waits for W whole steps") {
  WindowScheduler s({.window_steps = 2, .every_steps = 4}, 0);
  for (uint64_t i = 0; i < 4; ++i) s.step_ended(100 * i, 100 * i + 90, false, 0);
  REQUIRE(s.take().size() == 1);
  s.step_ended(400, 490, false, 0);  // the writer had not switched on yet: step 4 does not count
  s.opened(450);
  s.step_ended(500, 590, false, 0);  // began after 450: counts
  CHECK(s.counted() == 1);
  CHECK(s.take().empty());
  s.step_ended(600, 690, false, 0);
  auto r = s.take();
  REQUIRE(r.size() == 1);
  CHECK(r[0].kind == Request::kClose);
  CHECK(r[0].steps == 2);
  CHECK(s.switch_pending() == false);
}

TEST_CASE("scheduler: a slow step in a window keeps the window open for its neighbours after it") {
  Run run({.window_steps = 3, .every_steps = 10, .neighbours = 2});
  for (uint64_t i = 0; i < 12; ++i) run.step(i);
  run.step(12, /*slow=*/true);  // the window's last step: two more follow it in full detail
  for (uint64_t i = 13; i < 19; ++i) run.step(i);
  REQUIRE(run.windows.size() == 1);
  CHECK(run.windows[0] == std::vector<uint64_t>{10, 11, 12, 13, 14});
  const Request& slow = run.last(Request::kSlowStep);
  CHECK(slow.step == 12);
  CHECK(slow.in_window);
  CHECK(slow.begin == 1200);
  CHECK(slow.bound_ns == 1000);
  CHECK(run.last(Request::kClose).slow_steps == 1);
  CHECK(run.count(Request::kNeighboursBegin) == 0);  // its neighbours are in the window already
}

TEST_CASE("scheduler: a slow step outside windows keeps its neighbours' always-on records and opens one window") {
  Run run({.window_steps = 3, .every_steps = 50, .neighbours = 2});
  for (uint64_t i = 0; i < 20; ++i) run.step(i);
  run.step(20, true);
  for (uint64_t i = 21; i < 30; ++i) run.step(i);
  run.step(30, true);  // a second slow step in the same period: neighbours kept, no second window
  for (uint64_t i = 31; i < 40; ++i) run.step(i);
  CHECK(run.count(Request::kSlowStep) == 2);
  CHECK_FALSE(run.last(Request::kSlowStep).in_window);
  REQUIRE(run.count(Request::kNeighboursBegin) == 2);
  const Request& first_begin = run.seen[1];
  REQUIRE(first_begin.kind == Request::kNeighboursBegin);
  CHECK(first_begin.step == 18);
  CHECK(first_begin.begin == 1800);  // the start of step 18, two before the slow one
  // The window opened for the steps after step 20; the light capture ends after step 22.
  REQUIRE(run.windows.size() == 1);
  CHECK(run.windows[0] == std::vector<uint64_t>{21, 22, 23});
  std::vector<Request> ends;
  for (auto& r : run.seen)
    if (r.kind == Request::kNeighboursEnd) ends.push_back(r);
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].end == 2290);
  CHECK(ends[0].steps == 5);
  CHECK(ends[1].step == 28);
  size_t slow_windows = 0;
  for (auto& r : run.seen) slow_windows += r.kind == Request::kOpen && r.reason == WindowReason::kSlowStep;
  CHECK(slow_windows == 1);
}

TEST_CASE("scheduler: no neighbours asked: the light capture is the slow step alone") {
  Run run({.window_steps = 2, .every_steps = 100, .neighbours = 0});
  for (uint64_t i = 0; i < 5; ++i) run.step(i);
  run.step(5, true);
  CHECK(run.last(Request::kNeighboursBegin).begin == 500);
  CHECK(run.last(Request::kNeighboursEnd).end == 590);
  CHECK(run.last(Request::kNeighboursEnd).steps == 1);
}

TEST_CASE("scheduler: a periodic window due while a slow-step window is open is that window") {
  Run run({.window_steps = 5, .every_steps = 10, .neighbours = 1});
  for (uint64_t i = 0; i < 8; ++i) run.step(i);
  run.step(8, true);  // opens a slow-step window over steps 9..13, across the period boundary at 10
  for (uint64_t i = 9; i < 22; ++i) run.step(i);
  REQUIRE(run.windows.size() == 2);
  CHECK(run.windows[0] == std::vector<uint64_t>{9, 10, 11, 12, 13});
  CHECK(run.windows[1].front() == 20);
}

TEST_CASE("scheduler: timed windows while no step range is seen; a step window is closed after a whole period") {
  WindowScheduler s({.window_steps = 2, .every_steps = 10, .window_ticks = 50, .every_ticks = 1000}, 0);
  s.tick(999);
  CHECK(s.take().empty());
  s.tick(1000);
  auto r = s.take();
  REQUIRE(r.size() == 1);
  CHECK(r[0].kind == Request::kOpen);
  CHECK(r[0].reason == WindowReason::kTimed);
  s.opened(1001);
  s.tick(1040);
  CHECK(s.take().empty());
  s.tick(1051);
  r = s.take();
  REQUIRE(r.size() == 1);
  CHECK(r[0].kind == Request::kClose);
  s.closed(1052);
  // Steps appear: windows count steps from now on, and no timed window opens again.
  for (uint64_t i = 0; i < 10; ++i) s.step_ended(2000 + i, 2000 + i, false, 0);
  r = s.take();
  REQUIRE(r.size() == 1);
  CHECK(r[0].reason == WindowReason::kPeriodic);
  s.opened(2100);
  s.tick(3000);  // open 900 ticks, under a period
  CHECK(s.take().empty());
  s.tick(3100);  // a whole period with the program idle: the window closes rather than stay on
  r = s.take();
  REQUIRE(r.size() == 1);
  CHECK(r[0].kind == Request::kClose);
  CHECK(r[0].steps == 0);
  s.closed(3101);
  s.tick(5000);
  CHECK(s.take().empty());
}

TEST_CASE("scheduler, adaptive: the baseline is open from the start, counts its steps, then periodic windows follow") {
  Run run({.window_steps = 3, .every_steps = 10, .baseline_steps = 5});
  CHECK(run.s.state() == WindowScheduler::State::kOpen);  // no request: the collectors start in full detail
  CHECK(run.s.reason() == WindowReason::kBaseline);
  run.windows.emplace_back();  // the baseline's steps, as the other windows' below
  for (uint64_t i = 0; i < 30; ++i) run.step(i);
  REQUIRE(run.windows.size() == 3);
  CHECK(run.windows[0] == std::vector<uint64_t>{0, 1, 2, 3, 4});  // step 0 too: it began after the session started
  REQUIRE(run.seen.front().kind == Request::kClose);
  CHECK(run.seen.front().reason == WindowReason::kBaseline);
  CHECK(run.seen.front().steps == 5);
  // The periodic windows are due every_steps after the baseline closed (after step 4), not at step 10.
  CHECK(run.windows[1] == std::vector<uint64_t>{15, 16, 17});
  CHECK(run.windows[2] == std::vector<uint64_t>{25, 26, 27});
  CHECK(run.s.steps_in_windows() == 11);
}

TEST_CASE("scheduler, adaptive: a slow step in the baseline does not stretch it; the clock never closes it") {
  Run run({.window_steps = 3, .every_steps = 10, .every_ticks = 50, .baseline_steps = 4});
  run.windows.emplace_back();
  run.step(0);
  run.step(1, /*slow=*/true);
  run.s.tick(1'000'000);  // far past every_ticks: a step window would close, the baseline does not
  CHECK(run.s.state() == WindowScheduler::State::kOpen);
  run.step(2);
  run.step(3);
  CHECK(run.windows[0] == std::vector<uint64_t>{0, 1, 2, 3});
  CHECK(run.last(Request::kSlowStep).in_window);
  CHECK(run.s.state() == WindowScheduler::State::kOff);
}

TEST_CASE("scheduler, adaptive: end_baseline closes the baseline at once (its share of the ring is full), and only it") {
  Run run({.window_steps = 2, .every_steps = 4, .baseline_steps = 100});
  run.windows.emplace_back();
  run.step(0);
  run.s.end_baseline();
  run.writer(150);
  CHECK(run.last(Request::kClose).reason == WindowReason::kBaseline);
  CHECK(run.last(Request::kClose).steps == 1);
  for (uint64_t i = 1; i < 8; ++i) run.step(i);
  REQUIRE(run.windows.size() == 2);
  CHECK(run.windows[1] == std::vector<uint64_t>{5, 6});  // due 4 steps after the baseline's one
  const size_t closes = run.count(Request::kClose);
  run.s.end_baseline();  // a periodic window is no baseline: nothing happens
  run.writer(2000);
  CHECK(run.count(Request::kClose) == closes);
}

TEST_CASE("scheduler, adaptive: without step ranges the baseline stays open, and timed windows follow once it closes") {
  Run run({.window_steps = 3, .every_steps = 10, .window_ticks = 100, .every_ticks = 1000, .baseline_steps = 50});
  run.s.tick(5000);
  CHECK(run.s.state() == WindowScheduler::State::kOpen);  // no timed window opens while the baseline is open
  run.writer(5000);
  CHECK(run.seen.empty());
  run.s.end_baseline();
  run.writer(5100);
  run.s.tick(5500);
  run.writer(5500);
  CHECK(run.count(Request::kOpen) == 0);  // the next timed window is due every_ticks after the baseline ended
  run.s.tick(6200);
  run.writer(6200);
  REQUIRE(run.count(Request::kOpen) == 1);
  CHECK(run.last(Request::kOpen).reason == WindowReason::kTimed);
}

TEST_CASE("scheduler: the pre-roll horizon reaches back to the start of the step `neighbours` before the newest") {
  WindowScheduler s({.window_steps = 2, .every_steps = 100, .neighbours = 2}, 0);
  CHECK(s.preroll_horizon() == UINT64_MAX);
  for (uint64_t i = 0; i < 6; ++i) s.step_ended(100 * i, 100 * i + 90, false, 0);
  CHECK(s.preroll_horizon() == 300);
  // A slow step's capture the writer has not taken yet holds the horizon back however many steps follow.
  s.step_ended(600, 690, true, 50);
  for (uint64_t i = 7; i < 20; ++i) s.step_ended(100 * i, 100 * i + 90, false, 0);
  CHECK(s.preroll_horizon() == 400);
  s.take();
  CHECK(s.preroll_horizon() == 1700);
}

// --- slow-step test -------------------------------------------------------------------------------------------

TEST_CASE("slow steps: a fixed threshold applies from the first step") {
  SlowStepDetector d({.threshold_ns = 50e6});
  CHECK_FALSE(d.observe(49e6));
  CHECK(d.observe(51e6));
  CHECK(d.last_bound_ns() == 50e6);
  CHECK(d.running_ns() == 0);
}

TEST_CASE("slow steps: k x the running p99 applies once the history holds enough steps for a p99") {
  SlowStepDetector d({.factor = 3, .percentile = 99});
  CHECK(d.min_history() == 200);
  // 10 ms steps with a little spread: 10.0 .. 10.9 ms.
  for (int i = 0; i < 199; ++i) CHECK_FALSE(d.observe(100e6));  // no percentile yet: nothing is slow
  for (int i = 0; i < 2000; ++i) d.observe((10.0 + 0.1 * (i % 10)) * 1e6);  // the 100 ms ones leave the history
  CHECK(d.running_ns() == doctest::Approx(10.9e6));
  CHECK_FALSE(d.observe(30e6));  // under 3 x 10.9 ms
  CHECK(d.observe(33e6));
  CHECK(d.last_bound_ns() == doctest::Approx(32.7e6));
}

TEST_CASE("slow steps: when more than 1 % of steps are slow, their own p99 hides them; a lower percentile does not") {
  auto flagged = [](double percentile) {
    SlowStepDetector d({.factor = 3, .percentile = percentile});
    int n = 0;
    for (int i = 0; i < 3000; ++i) n += d.observe(i % 50 == 49 ? 100e6 : 10e6);
    return n;
  };
  CHECK(flagged(99) == 0);       // every 50th step: 2 % of them, so p99 is the slow steps' own duration
  CHECK(flagged(50) == 60);  // p50 is the typical step: every slow one (the first comes after 16 steps of history)
}

TEST_CASE("slow steps: the threshold and the factor together: the lower bound wins") {
  SlowStepDetector d({.threshold_ns = 25e6, .factor = 3, .percentile = 50});
  for (int i = 0; i < 100; ++i) d.observe(10e6);
  CHECK(d.observe(26e6));  // under 3 x 10 ms, over the threshold
  CHECK(d.last_bound_ns() == 25e6);
}

// --- the ring of windows --------------------------------------------------------------------------------------

namespace {

std::vector<uint8_t> range_rec(uint64_t start, uint64_t end, uint32_t name = 1) {
  RangeRecord r{{RecordKind::kRange, 0, sizeof(RangeRecord)}, name, start, end};
  std::vector<uint8_t> b(sizeof(r));
  std::memcpy(b.data(), &r, sizeof(r));
  return b;
}

std::vector<uint8_t> kernel_rec(uint64_t start, uint64_t end) {
  GpuKernelRecord k{};
  k.h = {RecordKind::kGpuKernel, 0, sizeof(GpuKernelRecord)};
  k.start = start;
  k.end = end;
  std::vector<uint8_t> b(sizeof(k));
  std::memcpy(b.data(), &k, sizeof(k));
  return b;
}

void add(WindowStore& s, uint32_t thread, const std::vector<uint8_t>& rec) { s.add_events(thread, rec.data(), rec.size()); }

dump::WindowEntry full(uint32_t index, uint64_t begin) {
  dump::WindowEntry e{};
  e.index = index;
  e.begin_ticks = begin;
  e.flags = dump::kWindowFull;
  return e;
}

}  // namespace

RecordHeader header_of(const std::vector<uint8_t>& rec) {
  RecordHeader h;
  std::memcpy(&h, rec.data(), sizeof(h));
  return h;
}

TEST_CASE("record_time: a range's end, an activity's or call's start, an instant's time; none for pads") {
  auto r = range_rec(10, 20);
  CHECK(record_time(header_of(r), r.data()) == 20u);
  auto k = kernel_rec(30, 40);
  CHECK(record_time(header_of(k), k.data()) == 30u);
  MarkRecord m{{RecordKind::kMark, 0, sizeof(MarkRecord)}, 1, 55};
  CHECK(record_time(m.h, reinterpret_cast<const uint8_t*>(&m)) == 55u);
  CudaApiRecord a{};
  a.h = {RecordKind::kCudaApi, 1, sizeof(CudaApiRecord)};
  a.start = 70;
  a.end = 80;
  CHECK(record_time(a.h, reinterpret_cast<const uint8_t*>(&a)) == 70u);
  RecordHeader pad{RecordKind::kPad, 0, 16};
  uint8_t zeros[16] = {};
  CHECK_FALSE(record_time(pad, zeros).has_value());
  CHECK(is_always_on(RecordKind::kRange));
  CHECK_FALSE(is_always_on(RecordKind::kGpuKernel));
  CHECK_FALSE(is_always_on(RecordKind::kPyCall));
}

TEST_CASE("ring: records go to the window whose span holds their time, late GPU records included") {
  WindowStore s({});
  add(s, 1, range_rec(10, 50));   // before any window: an always-on range waits in the pre-roll
  add(s, 9, kernel_rec(40, 45));  // a GPU record outside every window: sampled out
  s.open(full(1, 100));
  add(s, 1, range_rec(90, 150));  // ends inside: kept (ranges are placed by their end)
  add(s, 9, kernel_rec(160, 170));
  s.close(1, 200, 3, 0);
  add(s, 9, kernel_rec(190, 260));  // delivered after the close, started inside: kept
  add(s, 9, kernel_rec(250, 260));  // after the window: sampled out
  CHECK(s.records_kept() == 3);
  CHECK(s.records_outside() == 2);
  auto e = s.entries(1000);
  REQUIRE(e.size() == 1);
  CHECK(e[0].records == 3);
  CHECK(e[0].end_ticks == 200);
  CHECK(e[0].steps == 3);
  CHECK((e[0].flags & dump::kWindowOpen) == 0);
  CHECK(s.window_at(150) == 1);
  CHECK(s.window_at(250) == 0);
  s.trim_preroll(60);  // the range at 50 is older than any slow step could reach back to: sampled out
  CHECK(s.records_outside() == 3);
}

TEST_CASE("ring: a light window takes the always-on records of its span from the pre-roll") {
  WindowStore s({});
  add(s, 1, range_rec(0, 90));
  add(s, 1, range_rec(100, 190));
  add(s, 2, range_rec(150, 195));
  dump::WindowEntry light{};
  light.index = 4;
  light.begin_ticks = 100;
  light.reason = static_cast<uint8_t>(WindowReason::kNeighbours);
  s.open(light);
  add(s, 1, range_rec(200, 290));
  add(s, 9, kernel_rec(210, 220));  // a GPU record in a light window's span is not kept: light windows hold ranges
  s.close(4, 300, 2, 1);
  CHECK(s.records_kept() == 3);
  CHECK(s.pin_at(250));
  auto e = s.entries(400);
  REQUIRE(e.size() == 1);
  CHECK((e[0].flags & dump::kWindowPinned) != 0);
  CHECK_FALSE(s.is_full(4));
  s.trim_preroll(1000);
  CHECK(s.records_outside() == 2);  // the kernel, and the range that ended before the light window
}

TEST_CASE("ring: at most windows_kept windows; the oldest closed goes first, a pinned one last; drops counted per thread") {
  WindowStore s({.max_windows = 3});
  for (uint32_t w = 1; w <= 5; ++w) {
    s.open(full(w, w * 1000));
    for (uint32_t k = 0; k < w; ++k) add(s, 7, kernel_rec(w * 1000 + k, w * 1000 + k + 1));
    add(s, 1, range_rec(w * 1000, w * 1000 + 10));
    if (w == 1) CHECK(s.pin_at(1000));  // window 1 holds a slow step
    s.close(w, w * 1000 + 500, 1, 0);
  }
  auto e = s.entries(9000);
  REQUIRE(e.size() == 3);
  CHECK(e[0].index == 1);  // pinned: kept while unpinned ones were older
  CHECK(e[1].index == 4);
  CHECK(e[2].index == 5);
  CHECK(s.windows_dropped() == 2);
  CHECK(s.dropped().at(7).first == 2 + 3);  // windows 2 and 3's kernels
  CHECK(s.dropped().at(1).first == 2);
  CHECK(s.dropped().at(7).second == 5 * sizeof(GpuKernelRecord));
  CHECK(s.records_kept() == 1 + 4 + 5 + 3);
}

TEST_CASE("ring: within the byte budget; the open window is never dropped, so past the budget its records are refused") {
  const uint64_t k = sizeof(GpuKernelRecord);
  WindowStore s({.max_windows = 10, .max_bytes = 4 * k});
  s.open(full(1, 0));
  for (int i = 0; i < 3; ++i) add(s, 7, kernel_rec(i, i + 1));
  s.close(1, 100, 1, 0);
  s.open(full(2, 200));
  for (int i = 0; i < 6; ++i) add(s, 7, kernel_rec(200 + i, 201 + i));
  // Window 1 made room for window 2's first records; then window 2 alone is over the budget.
  CHECK(s.windows_dropped() == 1);
  CHECK(s.dropped().at(7).first == 3);
  CHECK(s.refused().at(7).first == 2);
  CHECK(s.bytes() == 4 * k);
  CHECK(s.records_kept() == 4);
}

TEST_CASE("ring: a kept window (adaptive mode's baseline) is never dropped; the others make room around it") {
  const uint64_t k = sizeof(GpuKernelRecord);
  WindowStore s({.max_windows = 2, .max_bytes = 6 * k});
  dump::WindowEntry base = full(1, 0);
  base.flags |= dump::kWindowKept;
  s.open(base);
  for (int i = 0; i < 3; ++i) add(s, 7, kernel_rec(i, i + 1));
  s.close(1, 100, 3, 0);
  CHECK(s.bytes_of(1) == 3 * k);
  for (uint32_t w = 2; w <= 4; ++w) {
    s.open(full(w, w * 1000));
    for (int i = 0; i < 2; ++i) add(s, 7, kernel_rec(w * 1000 + i, w * 1000 + i + 1));
    s.close(w, w * 1000 + 500, 2, 0);
  }
  auto e = s.entries(9000);
  REQUIRE(e.size() == 2);
  CHECK(e[0].index == 1);  // the oldest, kept
  CHECK(e[1].index == 4);
  CHECK(s.windows_dropped() == 2);
  CHECK(s.bytes_of(2) == 0);  // dropped
  // Past the budget with only the kept window left to drop: the open window's records are refused, not the baseline's.
  s.open(full(5, 9000));
  for (int i = 0; i < 5; ++i) add(s, 7, kernel_rec(9000 + i, 9001 + i));
  CHECK(s.bytes_of(1) == 3 * k);
  CHECK(s.refused().at(7).first == 2);
}

TEST_CASE("ring: written as EVENTS chunks a dump reader reads back, each thread's records in order") {
  WindowStore s({});
  s.open(full(1, 0));
  for (uint64_t i = 0; i < 50000; ++i) add(s, 3, range_rec(i, i + 1, uint32_t(i % 7 + 1)));  // over 1 MiB: split
  add(s, 4, kernel_rec(5, 6));
  s.close(1, 60000, 0, 0);
  std::vector<uint8_t> file;
  auto fh = dump::make_file_header();
  file.insert(file.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  s.write_events(file);
  const std::string path = testutil::temp_path("ring-events.iscope");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
  dump::DumpReader r(path);
  CHECK(r.event_chunks().size() >= 3);
  uint64_t n = 0, last_end = 0;
  bool ordered = true;
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    ++n;
    if (thread == 3 && h.kind == RecordKind::kRange) {
      auto rec = dump::load<RangeRecord>(p);
      ordered = ordered && rec.end > last_end;
      last_end = rec.end;
    }
  });
  CHECK(n == 50001);
  CHECK(ordered);
}

// What a crash handler writes (write_events_to: write(2) from the stack, no allocation) must be the very bytes
// the writer's own snapshot holds, chunk splits and checksums included.
TEST_CASE("ring: write_events_to(fd) writes the same bytes as write_events, for a crash handler") {
  WindowStore s({});
  s.open(full(1, 0));
  for (uint64_t i = 0; i < 50000; ++i) add(s, 3, range_rec(i, i + 1, uint32_t(i % 7 + 1)));  // over 1 MiB: split
  add(s, 4, kernel_rec(5, 6));
  s.close(1, 60000, 0, 0);
  s.open(full(2, 70000));
  add(s, 3, range_rec(70001, 70002, 1));  // an open window too
  std::vector<uint8_t> expected;
  s.write_events(expected);
  const std::string path = testutil::temp_path("ring-events-fd.bin");
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  REQUIRE(fd >= 0);
  CHECK(s.write_events_to(fd));
  ::close(fd);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(written.size() == expected.size());
  CHECK(written == expected);
  // A descriptor that cannot be written: false, not a crash.
  CHECK_FALSE(s.write_events_to(-1));
}
