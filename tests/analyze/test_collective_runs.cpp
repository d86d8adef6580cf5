// Collectives issued back to back (lib/analyze/run/collective_runs.hpp): runs, their parts and the coalescing saving,
// on two ranks' steps written by hand (times in microseconds).
#include "analyze/run/collective_runs.hpp"

#include <doctest/doctest.h>

using namespace inferscope::analyze;

namespace {

constexpr int64_t kUs = 1000;

// One rank's step: `n` collectives, the i-th starting at start(i) and ending at end(i); compute intervals given.
RankStep step_of(int n, int64_t (*start)(int, int), int64_t (*end)(int), int rank,
                 std::vector<std::pair<int64_t, int64_t>> compute) {
  RankStep s;
  s.start_ns = 0;
  s.end_ns = 100'000 * kUs;
  for (int i = 0; i < n; ++i) s.collectives.push_back({"AllReduce", false, start(i, rank), end(i), 0, 8});
  s.compute = std::move(compute);
  return s;
}

}  // namespace

TEST_CASE("a loop of small collectives, late by turns: one run; its saving keeps the transfer and one wait") {
  // Collective i: the ranks arrive at 100 i and 100 i + 20, rank 0 late on even i, rank 1 on odd i;
  // all end at 100 i + 60 (transfer 40 after the later arrival). Between them, a 10 us copy (shorter than a
  // collective): one run of 10.
  auto start = [](int i, int r) -> int64_t { return (100 * i + ((i % 2) == r ? 20 : 0)) * kUs; };
  auto end = [](int i) -> int64_t { return (100 * i + 60) * kUs; };
  std::vector<std::pair<int64_t, int64_t>> copies;
  for (int i = 0; i < 9; ++i) copies.emplace_back((100 * i + 70) * kUs, (100 * i + 80) * kUs);
  const RankStep a = step_of(10, start, end, 0, copies), b = step_of(10, start, end, 1, copies);
  const std::vector<std::vector<const RankStep*>> matched = {{&a, &b}, {&a, &b}};
  const CollectiveRuns r = collective_runs(matched, 0, /*one_straggler=*/false);
  CHECK(r.runs == doctest::Approx(1));
  CHECK(r.collectives == doctest::Approx(10));
  CHECK(r.span_ms == doctest::Approx(0.940));      // rank 0's: 20 (late to the first) to 960 us
  CHECK(r.compute_ms == doctest::Approx(0.090));   // nine 10 us copies
  CHECK(r.transfer_ms == doctest::Approx(0.400));  // ten of 40 us
  CHECK(r.wait_ms == doctest::Approx(0.100));      // rank 0 waits 20 us on the five odd ones
  // 940 - 90 - 400 - one mean wait (100 / 10) = 440 us: the launches and gaps between, and nine of the waits
  CHECK(r.saving_ms == doctest::Approx(0.440));
  CHECK(worth_coalescing(r));

  // With a straggler the waits stay: one collective would wait as long for it.
  const CollectiveRuns s = collective_runs(matched, 0, /*one_straggler=*/true);
  CHECK(s.saving_ms == doctest::Approx(0.350));
}

TEST_CASE("per-layer collectives, each after a layer's compute: no run, nothing to coalesce") {
  // Layer i: 800 us of compute, then a collective of 100 us; the compute between two is longer than a collective.
  auto start = [](int i, int) -> int64_t { return (1000 * i + 800) * kUs; };
  auto end = [](int i) -> int64_t { return (1000 * i + 900) * kUs; };
  std::vector<std::pair<int64_t, int64_t>> layers;
  for (int i = 0; i < 8; ++i) layers.emplace_back(1000 * i * kUs, (1000 * i + 800) * kUs);
  const RankStep a = step_of(8, start, end, 0, layers), b = step_of(8, start, end, 1, layers);
  const CollectiveRuns r = collective_runs({{&a, &b}}, 1, false);
  CHECK(r.runs == 0);
  CHECK(r.saving_ms == 0);
  CHECK_FALSE(worth_coalescing(r));
}

TEST_CASE("back-to-back collectives that mostly move data: bandwidth-bound, coalescing not suggested") {
  // Four 1 ms collectives with 10 us between them: the fixed costs are small beside the transfer.
  auto start = [](int i, int) -> int64_t { return (1010 * i) * kUs; };
  auto end = [](int i) -> int64_t { return (1010 * i + 1000) * kUs; };
  const RankStep a = step_of(4, start, end, 0, {}), b = step_of(4, start, end, 1, {});
  const CollectiveRuns r = collective_runs({{&a, &b}}, 0, false);
  CHECK(r.runs == doctest::Approx(1));
  CHECK(r.transfer_ms == doctest::Approx(4.0));
  CHECK(r.saving_ms == doctest::Approx(0.030));  // the three 10 us gaps
  CHECK_FALSE(worth_coalescing(r));
}

TEST_CASE("per-layer collectives after short layers, a rank waiting in each: still no run") {
  // Layer i: 30 us of compute, then an all_reduce; rank 1 arrives 80 us late to each, so rank 0's kernels last
  // 100 us (80 waiting, 20 moving data). The compute between two (30 us) is shorter than rank 0's whole kernel but
  // longer than its transfer: measured against the transfer, no run.
  auto start = [](int i, int r) -> int64_t { return (200 * i + 30 + (r ? 80 : 0)) * kUs; };
  auto end = [](int i) -> int64_t { return (200 * i + 130) * kUs; };
  std::vector<std::pair<int64_t, int64_t>> layers;
  for (int i = 0; i < 8; ++i) layers.emplace_back(200 * i * kUs, (200 * i + 30) * kUs);
  const RankStep a = step_of(8, start, end, 0, layers), b = step_of(8, start, end, 1, layers);
  CHECK(collective_runs({{&a, &b}}, 0, true).runs == 0);

  // Shorter layers than the transfer, but each layer's matmul ran between them: the collectives feed one another.
  auto start2 = [](int i, int) -> int64_t { return (100 * i + 10) * kUs; };
  auto end2 = [](int i) -> int64_t { return (100 * i + 90) * kUs; };
  std::vector<std::pair<int64_t, int64_t>> short_layers;
  for (int i = 0; i < 8; ++i) short_layers.emplace_back(100 * i * kUs, (100 * i + 10) * kUs);
  RankStep c = step_of(8, start2, end2, 0, short_layers), d = step_of(8, start2, end2, 1, short_layers);
  CHECK(collective_runs({{&c, &d}}, 0, false).runs == doctest::Approx(1));  // copies only: one run
  for (RankStep* x : {&c, &d})
    for (CollectiveKernel& k : x->collectives) k.matmul_before = true;
  CHECK(collective_runs({{&c, &d}}, 0, false).runs == 0);  // a matmul before each: none
}
