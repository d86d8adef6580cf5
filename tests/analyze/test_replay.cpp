// What-if replay (lib/analyze/what_if/replay.hpp): every expected number is computed by hand in the comment beside it
// (times in µs from the step's start), so a change to the model shows up as a mismatch against the reasoning.
#include "analyze/what_if/replay.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

using namespace inferscope::analyze::replay;

namespace {

constexpr int64_t us(int64_t v) { return v * 1000; }

GpuWork kernel(int64_t dur_ns, uint16_t stream = 0) {
  GpuWork w;
  w.dur_ns = dur_ns;
  w.stream = stream;
  return w;
}

GpuWork copy(int64_t dur_ns, uint64_t bytes, bool pageable, uint16_t stream = 0) {
  GpuWork w = kernel(dur_ns, stream);
  w.copy = true;
  w.pageable = pageable;
  w.bytes = bytes;
  return w;
}

HostOp& call(StepGraph& g, OpKind kind, int64_t gap, int64_t dur, int64_t wait = 0) {
  HostOp op;
  op.kind = kind;
  op.gap_before_ns = gap;
  op.dur_ns = dur;
  op.wait_ns = wait;
  g.host.push_back(op);
  return g.host.back();
}

HostOp& queue(StepGraph& g, HostOp& op, std::initializer_list<GpuWork> work) {
  for (const GpuWork& w : work) {
    op.work.push_back(static_cast<uint32_t>(g.gpu.size()));
    g.gpu.push_back(w);
  }
  return op;
}

void launch(StepGraph& g, int64_t gap, int64_t cost, std::initializer_list<GpuWork> work) {
  queue(g, call(g, OpKind::kLaunch, gap, cost), work);
}

void sync(StepGraph& g, int64_t gap, int64_t dur, int64_t wait, int32_t stream = -1) {
  call(g, OpKind::kSync, gap, dur, wait).sync_stream = stream;
}

void copy_sync(StepGraph& g, int64_t gap, int64_t dur, int64_t wait, GpuWork w) {
  queue(g, call(g, OpKind::kCopySync, gap, dur, wait), {w});
}

// 100 launches of 5 µs for 2 µs kernels, then a sync. Launch i returns at 5(i+1), its kernel runs
// [5(i+1), 5(i+1)+2]: the last ends at 502; the sync starts at 500 (own cost 1) and returns at 502.
StepGraph launch_bound() {
  StepGraph g;
  for (int i = 0; i < 100; ++i) launch(g, 0, us(5), {kernel(us(2))});
  sync(g, 0, us(2), us(1));
  g.recorded_ns = us(502);
  return g;
}

// 3 launches of 5 µs for 10 ms kernels, then a sync. Kernels run back to back from 5: end 30005; the sync
// starts at 15 and returns at 30005.
StepGraph gpu_bound() {
  StepGraph g;
  for (int i = 0; i < 3; ++i) launch(g, 0, us(5), {kernel(us(10000))});
  sync(g, 0, us(29990), us(29989));
  g.recorded_ns = us(30005);
  return g;
}

// Decode loop: per token a 30 µs host gap, 10 launches of 5 µs (kernels of `kernel_us` each), one 4-byte
// kCopySync (own cost 2 µs, its copy 1 µs) that waits for them and lasted `sync_us` in the recording.
StepGraph decode(int tokens, int64_t kernel_us, int64_t sync_us) {
  StepGraph g;
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < 10; ++i) launch(g, i == 0 ? us(30) : 0, us(5), {kernel(us(kernel_us))});
    copy_sync(g, 0, us(sync_us), us(sync_us - 2), copy(us(1), 4, true));
  }
  g.recorded_ns = tokens * us(80 + sync_us);
  return g;
}

int64_t recorded_waits(const StepGraph& g) {
  int64_t sum = 0;
  for (const HostOp& op : g.host) sum += op.wait_ns;
  return sum;
}

}  // namespace

TEST_CASE("baseline: blocking ops reproduce their recorded durations when the GPU timing matches") {
  SUBCASE("gap, one launch, a sync that waited") {
    // Launch returns at 105, kernel [105, 155]; the sync starts at 105, own cost 2, returns at 155.
    StepGraph g;
    launch(g, us(100), us(5), {kernel(us(50))});
    sync(g, 0, us(50), us(48));
    CHECK(simulate(g) == us(155));
  }
  SUBCASE("launch-bound: about the host time") { CHECK(simulate(launch_bound()) == us(502)); }
  SUBCASE("GPU-bound: first launch + GPU time") { CHECK(simulate(gpu_bound()) == us(30005)); }
  SUBCASE("copy-sync in the middle, then more work and a tail") {
    // Kernel [25, 125]; the copy-sync starts at 25, copy ready at 28, runs [125, 127], returns at 127 (its
    // recorded 102). Gap 40 -> 167, launch -> 172, kernel [172, 202], the sync returns at 202, tail 10 -> 212.
    StepGraph g;
    launch(g, us(20), us(5), {kernel(us(100))});
    copy_sync(g, 0, us(102), us(99), copy(us(2), 4096, false));
    launch(g, us(40), us(5), {kernel(us(30))});
    sync(g, 0, us(30), us(29));
    g.tail_ns = us(10);
    CHECK(simulate(g) == us(212));
  }
  SUBCASE("the previous step's work delays this step's kernels") {
    // Every stream is busy until 30: the kernel runs [30, 40], the sync returns at 40.
    StepGraph g;
    g.gpu_busy_at_start_ns = us(30);
    launch(g, 0, us(5), {kernel(us(10))});
    sync(g, 0, us(35), us(34));
    CHECK(simulate(g) == us(40));
  }
  SUBCASE("decode loop") {
    // Per token: launches return at 35..80, kernels back to back [35, 115], the copy [115, 116]: 116 per token.
    CHECK(simulate(decode(3, 8, 36)) == us(348));
  }
}

TEST_CASE("remove_syncs: the saving is the overlap gained, not the sum of the waits") {
  Change c;
  c.remove_syncs = true;
  SUBCASE("host per token equals GPU per token, but kernels outpace launches") {
    // Tokens 0 and 1 stop waiting: host per token 82 (gap 30 + launches 50 + own 2). Token 1's kernels run
    // [117, 197], token 2's [199, 279]; token 2's copy-sync still waits: copy [279, 280]. 348 -> 280.
    StepGraph g = decode(3, 8, 36);
    CHECK(simulate(g, c) == us(280));
    CHECK(saving_ns(g, c) == us(68));
  }
  SUBCASE("host-bound tokens: about nothing to gain") {
    // 2 µs kernels keep up with 5 µs launches: each token's last kernel ends at 82, its copy at 83 (83 per
    // token, 249 in all). Without the waits the host goes on at 82 and 164; the last copy ends at 247.
    StepGraph g = decode(3, 2, 3);
    CHECK(simulate(g) == us(249));
    CHECK(simulate(g, c) == us(247));
    CHECK(saving_ns(g, c) == us(2));
    CHECK(saving_ns(g, c) < g.recorded_ns / 100);
  }
  SUBCASE("GPU-bound tokens: the host gap and first launch overlap the GPU, the waits do not vanish") {
    // 20 µs kernels: a token is 35 + 200 + 1 = 236 with waits (154 each, 462 in all). Without them the GPU
    // runs from 35 back to back, 201 per token: the last copy ends at 35 + 3 * 201 = 638.
    StepGraph g = decode(3, 20, 156);
    CHECK(simulate(g) == us(708));
    CHECK(recorded_waits(g) == us(462));
    CHECK(simulate(g, c) == us(638));
    CHECK(saving_ns(g, c) == us(70));
  }
  SUBCASE("the step's last blocking op still waits") {
    // One token, then 20 µs of host work that needs the value: 116 + 20. Were the last wait removed too, the
    // host would end at 82 + 20 and the step with the GPU at 116.
    StepGraph g = decode(1, 8, 36);
    g.tail_ns = us(20);
    CHECK(simulate(g) == us(136));
    CHECK(simulate(g, c) == us(136));
    CHECK(saving_ns(g, c) == 0);
  }
  SUBCASE("a removed wait keeps its own cost") {
    // Sync (own 3) mid-step, then host work of 10 µs, then the final sync (own 1). Waiting: kernel [5, 105],
    // the first sync returns at 105, gap 10, the final sync at 116. Not waiting: 5 + 3 + 10 + 1 = 19, but the
    // final sync still waits for the kernel: 105.
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(100))});
    sync(g, 0, us(100), us(97));
    call(g, OpKind::kOther, us(10), 0);
    sync(g, 0, us(1), 0);
    CHECK(simulate(g) == us(116));
    CHECK(simulate(g, c) == us(105));
  }
}

TEST_CASE("collapse_launches: a CUDA graph") {
  Change c;
  c.collapse_launches = true;
  c.graph_launch_ns = us(10);
  SUBCASE("launch-bound: large saving") {
    // The graph launch returns at 10; 100 kernels of 2 µs back to back end at 210; the sync returns at 210.
    StepGraph g = launch_bound();
    CHECK(simulate(g, c) == us(210));
    CHECK(saving_ns(g, c) == us(292));
  }
  SUBCASE("GPU-bound: about nothing, and never negative") {
    StepGraph g = gpu_bound();
    c.graph_launch_ns = us(5);  // as the first launch: the kernels start at 5 as before
    CHECK(simulate(g, c) == us(30005));
    CHECK(saving_ns(g, c) == 0);
    c.graph_launch_ns = us(50);  // dearer than the launch it replaces: the model is slower, the saving 0
    CHECK(simulate(g, c) == us(30050));
    CHECK(saving_ns(g, c) == 0);
  }
  SUBCASE("the host code between two launches vanishes, however long; other gaps stay") {
    // Recorded: A 0 -> 5, B 8 -> 13, other 16 -> 18, C 68 -> 73, D (after 200 µs of Python) 273 -> 278,
    // kernels [5, 6], [13, 14], [73, 74], [278, 279]; sync -> 279.
    // Graph (4 µs): A 0 -> 4, B's gap 3 vanishes -> 4, the other op keeps its gap 3 -> 7 -> 9, C keeps its
    // 50 µs gap (after a non-launch call) -> 59, D's 200 µs gap between two launches vanishes -> 59; the four
    // kernels run [4, 5], [5, 6], [59, 60], [60, 61]; the sync's own cost 1 -> 61.
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(1))});
    launch(g, us(3), us(5), {kernel(us(1))});
    call(g, OpKind::kOther, us(3), us(2));
    launch(g, us(50), us(5), {kernel(us(1))});
    launch(g, us(200), us(5), {kernel(us(1))});
    sync(g, 0, us(1), 0);
    CHECK(simulate(g) == us(279));
    c.graph_launch_ns = us(4);
    CHECK(simulate(g, c) == us(61));
  }
  SUBCASE("a graph allocates nothing: the calls, their waits and the code around them between launches go") {
    // Recorded: A 0 -> 5 (kernel [5, 105] on stream 0); 20 µs of code; cudaFree waits for the kernel (105), unmaps
    // 10 -> 115; 30 µs of code; cudaMalloc 20 -> 165; B 165 -> 170 (kernel [170, 270] on stream 1); sync -> 270;
    // then empty_cache's cudaFree after the last launch: waits to 270, unmaps 10 -> 280.
    // Graph (4 µs): A 0 -> 4 ([4, 104]); the allocation calls and both gaps go; B's kernel runs beside A's on its
    // own stream, [4, 104]; the sync's own cost 0 -> 104; the trailing free costs nothing and waits for nothing.
    // A cudaFree that still waited for A would hold B back to [104, 204].
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(100))});
    call(g, OpKind::kFree, us(20), us(90), us(80));
    call(g, OpKind::kAlloc, us(30), us(20));
    launch(g, 0, us(5), {kernel(us(100), 1)});
    sync(g, 0, 0, 0);
    call(g, OpKind::kFree, 0, us(10), 0);
    CHECK(simulate(g) == us(280));
    c.graph_launch_ns = us(4);
    CHECK(simulate(g, c) == us(104));
    CHECK(gap_inside_graph(g, 1));   // launch | gap | free
    CHECK(gap_inside_graph(g, 2));   // free | gap | malloc, between two launches
    CHECK(gap_inside_graph(g, 3));   // malloc | launch
    CHECK_FALSE(gap_inside_graph(g, 4));  // before the sync
    CHECK_FALSE(gap_inside_graph(g, 5));  // after the last launch
    CHECK_FALSE(gap_inside_graph(g, 0));
    CHECK_FALSE(gap_inside_graph(g, 99));
  }
  SUBCASE("host work feeding a copy between host and device stays before it") {
    // Recorded: A 0 -> 5 (kernel [5, 6]), 300 µs preparing a batch, its H2D copy 305 -> 310 ([310, 320]),
    // B 310 -> 315 ([320, 321]), sync -> 321. Graph (4 µs): A 0 -> 4 ([4, 5]); the 300 µs gap stays: the copy
    // is queued at 304 -> 304 ([304, 314]); B's gap 0 -> 304 ([314, 315]); the sync's own cost 0 -> 315.
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(1))});
    launch(g, us(300), us(5), {copy(us(10), 1'000'000, false)});
    launch(g, 0, us(5), {kernel(us(1))});
    sync(g, 0, 0, 0);
    CHECK(simulate(g) == us(321));
    c.graph_launch_ns = us(4);
    CHECK(simulate(g, c) == us(315));
  }
}

TEST_CASE("remove_allocs: the cache saves the calls and the waits cudaFree forced") {
  // Recorded: kernel [5, 105]; cudaFree waits for it, then unmaps (own 10) -> 115; gap 50, launch -> 170, kernel
  // [170, 270]; cudaMalloc 20 -> 190; launch -> 195, kernel [270, 370]; the sync returns at 370.
  // Cached: free and malloc cost 0 and do not wait: launches return at 5, 60, 65, kernels back to back from 5:
  // the last ends at 305. The saving (65) is more than the calls' own cost (30).
  StepGraph g;
  launch(g, 0, us(5), {kernel(us(100))});
  call(g, OpKind::kFree, 0, us(100), us(90));
  launch(g, us(50), us(5), {kernel(us(100))});
  call(g, OpKind::kAlloc, 0, us(20));
  launch(g, 0, us(5), {kernel(us(100))});
  sync(g, 0, us(175), us(174));
  g.recorded_ns = us(370);
  Change c;
  c.remove_allocs = true;
  CHECK(simulate(g) == us(370));
  CHECK(simulate(g, c) == us(305));
  CHECK(saving_ns(g, c) == us(65));
}

TEST_CASE("pin_copies: pageable copies at the pinned rate, pinned ones unchanged") {
  // 256 MB at 6 GB/s (6 bytes/ns): 42,666,667 ns; at 24 GB/s: 10,666,667 ns. The call's own cost (500 µs of
  // staging) goes, so the pinned copy starts at 0.
  constexpr uint64_t kBytes = 256'000'000;
  constexpr int64_t kPageableNs = 42'666'667;
  auto step = [&](bool pageable, int64_t copy_ns) {
    StepGraph g;
    copy_sync(g, 0, us(500) + copy_ns, copy_ns, copy(copy_ns, kBytes, pageable));
    return g;
  };
  Change c;
  c.pin_copies = true;
  c.pinned_gbps = 24;
  SUBCASE("pageable: 4x shorter") {
    StepGraph g = step(true, kPageableNs);
    CHECK(simulate(g) == us(500) + kPageableNs);
    CHECK(simulate(g, c) == 10'666'667);
    CHECK(std::abs(static_cast<double>(kPageableNs) / simulate(g, c) - 4.0) < 1e-6);
  }
  SUBCASE("pinned: unchanged") {
    StepGraph g = step(false, kPageableNs);
    CHECK(simulate(g, c) == simulate(g));
  }
  SUBCASE("a pageable copy already faster than pinned_gbps is not slowed down") {
    StepGraph g = step(true, 8'533'333);  // 30 GB/s
    c.pinned_call_ns = us(500);           // keep the call's cost to see the copy alone
    CHECK(simulate(g, c) == simulate(g));
  }
  SUBCASE("an async pageable copy keeps at most pinned_call_ns of its launch") {
    // 1 MB at 2 GB/s: 500 µs, pinned at 24 GB/s: 41,667 ns. The launch (200 µs of staging) keeps 3 µs.
    StepGraph g;
    launch(g, 0, us(200), {copy(us(500), 1'000'000, true)});
    c.pinned_call_ns = us(3);
    CHECK(simulate(g) == us(700));
    CHECK(simulate(g, c) == us(3) + 41'667);
  }
}

TEST_CASE("host_gap_scale: only gaps at least min_scaled_gap_ns long, the tail included") {
  // Gaps 100 and 10, tail 60, two 1 µs calls: 172. Scale 0.5 above 50 µs: 50 + 1 + 10 + 1 + 30 = 92.
  StepGraph g;
  call(g, OpKind::kOther, us(100), us(1));
  call(g, OpKind::kOther, us(10), us(1));
  g.tail_ns = us(60);
  Change c;
  c.host_gap_scale = 0.5;
  c.min_scaled_gap_ns = us(50);
  CHECK(simulate(g) == us(172));
  CHECK(simulate(g, c) == us(92));
  c.host_gap_scale = 0;  // host work moved off the path
  CHECK(simulate(g, c) == us(12));
  c.host_gap_scale = std::numeric_limits<double>::quiet_NaN();  // nonsense: no change
  CHECK(simulate(g, c) == us(172));
}

TEST_CASE("moved_work_workers: host work moved to workers still bounds the step by their throughput") {
  // Gaps 100 and 10, tail 60, two 1 µs calls: 172. Scale 0 above 50 µs moves 100 + 60 = 160 µs off the thread,
  // which keeps 10 + 2 = 12. Four workers deliver one step's 160 µs every 40 µs: the step is max(12, 40) = 40.
  StepGraph g;
  call(g, OpKind::kOther, us(100), us(1));
  call(g, OpKind::kOther, us(10), us(1));
  g.tail_ns = us(60);
  Change c;
  c.host_gap_scale = 0;
  c.min_scaled_gap_ns = us(50);
  c.moved_work_workers = 4;
  CHECK(simulate(g, c) == us(40));
  c.moved_work_workers = 1;  // one worker: the work only overlaps with what the step still does
  CHECK(simulate(g, c) == us(160));
  c.moved_work_workers = 32;  // enough workers: the thread's remaining 12 µs is the step again
  CHECK(simulate(g, c) == us(12));
  c.moved_work_workers = 3;  // 160 µs / 3 = 53.33 µs: a worker needs the whole last nanosecond, rounded up
  CHECK(simulate(g, c) == 53'334);
  c.moved_work_workers = -3;  // nonsense: as 0, the moved time is gone
  CHECK(simulate(g, c) == us(12));
  // Scale 0.5 moves half of each long gap (50 + 30 = 80 µs) to 4 workers: 20 µs, below the thread's 92.
  c.host_gap_scale = 0.5;
  c.moved_work_workers = 4;
  CHECK(simulate(g, c) == us(92));
}

TEST_CASE("keep_launching_code: the code between the step's launches stays on the step thread") {
  // 300 µs of preparation, launch A 300 -> 305 ([305, 306]), 200 µs of forward code, launch B 505 -> 510
  // ([510, 511]), sync -> 511, 100 µs of tail: 611. Moving the long gaps to 4 workers takes 300 + 200 + 100 µs
  // off the thread (11 µs left) and delivers a step every 150 µs. Keeping the code between the launches moves
  // only 300 + 100: the thread runs 0 -> 5 ([5, 6]), 200 µs -> 205, B -> 210 ([210, 211]), sync -> 211, and the
  // workers deliver every 100 µs. Half the preparation and tail moved: 150 -> 155, 355 -> 360, 361, + 50 = 411.
  StepGraph g;
  launch(g, us(300), us(5), {kernel(us(1))});
  launch(g, us(200), us(5), {kernel(us(1))});
  sync(g, 0, us(1), us(1));
  g.tail_ns = us(100);
  CHECK(simulate(g) == us(611));
  Change c;
  c.host_gap_scale = 0;
  c.min_scaled_gap_ns = us(50);
  c.moved_work_workers = 4;
  CHECK(simulate(g, c) == us(150));
  c.keep_launching_code = true;
  CHECK(simulate(g, c) == us(211));
  c.host_gap_scale = 0.5;
  CHECK(simulate(g, c) == us(411));
}

TEST_CASE("streams run concurrently; a stream sync waits for its stream only") {
  // Kernel A on stream 0 [5, 105], kernel B on stream 1 [10, 310].
  auto step = [](int32_t sync_stream) {
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(100), 0)});
    launch(g, 0, us(5), {kernel(us(300), 1)});
    sync(g, 0, us(1), 0, sync_stream);
    g.tail_ns = us(1000);
    return g;
  };
  CHECK(simulate(step(-1)) == us(1310));  // waits for 310 (not 400: the streams overlap)
  CHECK(simulate(step(0)) == us(1105));   // waits for A only
  CHECK(simulate(step(7)) == us(1011));   // a stream with nothing queued: only the sync's own 1 µs

  // A copy-sync on stream 1 waits for its copy only: own 1 -> 6, copy [6, 8], tail 1000 -> 1008 (A ends at 505).
  StepGraph g;
  launch(g, 0, us(5), {kernel(us(500), 0)});
  copy_sync(g, 0, us(3), us(2), copy(us(2), 4, true, 1));
  g.tail_ns = us(1000);
  CHECK(simulate(g) == us(1008));
}

TEST_CASE("edge cases") {
  SUBCASE("empty graph") {
    StepGraph g;
    CHECK(simulate(g) == 0);
    Change c;
    c.remove_syncs = true;
    CHECK(saving_ns(g, c) == 0);
    g.tail_ns = us(100);
    CHECK(simulate(g) == us(100));
    g.gpu_busy_at_start_ns = us(300);  // the previous step's work is not this step's
    CHECK(simulate(g) == us(100));
  }
  SUBCASE("a sync in an otherwise empty step waits for the previous step's work") {
    StepGraph g;
    g.gpu_busy_at_start_ns = us(30);
    sync(g, 0, us(30), us(30));
    CHECK(simulate(g) == us(30));
  }
  SUBCASE("ops with no work, zero durations") {
    StepGraph g;
    call(g, OpKind::kLaunch, 0, 0);
    call(g, OpKind::kOther, 0, 0);
    sync(g, 0, 0, 0);
    CHECK(simulate(g) == 0);
  }
  SUBCASE("a copy-sync without a recorded copy waits for the device") {
    StepGraph g;
    launch(g, 0, us(5), {kernel(us(100), 3)});
    call(g, OpKind::kCopySync, 0, us(101), us(100));
    g.tail_ns = us(10);
    CHECK(simulate(g) == us(115));
  }
  SUBCASE("work indexes out of range are ignored, a piece queued twice runs once") {
    StepGraph g;
    HostOp& op = call(g, OpKind::kLaunch, 0, us(5));
    op.work = {7, 0, 0, std::numeric_limits<uint32_t>::max()};
    g.gpu.push_back(kernel(us(10)));
    sync(g, 0, us(10), us(10));
    CHECK(simulate(g) == us(15));
  }
  SUBCASE("negative inputs count as 0, a wait above the duration as the duration") {
    StepGraph g;
    g.tail_ns = -5;
    g.gpu_busy_at_start_ns = -100;
    launch(g, -us(10), -us(3), {kernel(-us(50))});
    call(g, OpKind::kOther, us(2), us(5), us(9));  // own cost 0
    CHECK(simulate(g) == us(2));
    Change c;
    c.collapse_launches = true;
    c.graph_launch_ns = -1;
    c.min_scaled_gap_ns = -1;
    c.host_gap_scale = -2;
    CHECK(simulate(g, c) == 0);
    CHECK(saving_ns(g, c) == us(2));
  }
  SUBCASE("a very large stream number") {
    StepGraph g;
    launch(g, 0, us(1), {kernel(us(4), 65535)});
    sync(g, 0, us(4), us(4), 65535);
    CHECK(simulate(g) == us(5));
  }
}

TEST_CASE("saving_ns is scaled to the recorded step") {
  // The model says 502 -> 210 (292 saved); the step really took twice as long: the saving is doubled.
  StepGraph g = launch_bound();
  g.recorded_ns = us(1004);
  Change c;
  c.collapse_launches = true;
  c.graph_launch_ns = us(10);
  CHECK(saving_ns(g, c) == us(584));
  g.recorded_ns = 0;  // unknown: unscaled
  CHECK(saving_ns(g, c) == us(292));
}

TEST_CASE("min_step_ns: the changed step is no shorter than the floor, in the recorded step's time") {
  // One 1000 us host gap, a 5 us launch of a 100 us kernel: the step takes 1105 us (GPU ends at 1105).
  StepGraph g;
  HostOp& op = call(g, OpKind::kLaunch, us(1000), us(5));
  op.work.push_back(0);
  g.gpu.push_back(kernel(us(100)));
  g.recorded_ns = simulate(g);
  Change c;
  c.host_gap_scale = 0;  // the gap removed: 5 + 100 = 105 us, a saving of 1000 us
  CHECK(saving_ns(g, c) == us(1000));
  c.min_step_ns = us(400);  // but the producer delivers a step's input every 400 us
  CHECK(saving_ns(g, c) == us(1105 - 400));
  c.min_step_ns = us(5000);  // a floor above the recorded step: no saving, never negative
  CHECK(saving_ns(g, c) == 0);
}
