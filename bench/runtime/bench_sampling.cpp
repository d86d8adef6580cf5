// What sampled and adaptive capture do on the application's thread at the end of every step, past the first 200
// (docs/benchmarks.md, "Sampled and adaptive capture are modelled from parts"): the slow-step detector's update
// and the window scheduler's count. The duty groups of bench/gpu/overhead_table.py run sessions of 6 steps, in
// which the detector never has the history it needs, so its cost in a long run is this benchmark's figure.
#include "runtime/sampling/slow_steps.hpp"
#include "runtime/sampling/window_scheduler.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

using inferscope::runtime::sampling::ScheduleOptions;
using inferscope::runtime::sampling::SlowStepDetector;
using inferscope::runtime::sampling::SlowStepOptions;
using inferscope::runtime::sampling::WindowScheduler;

// Step durations around 6 ms (GPT-2 batch 1's), spread by +-3 % from a fixed generator: no step is slow.
std::vector<double> step_durations(size_t n) {
  std::vector<double> d(n);
  uint64_t x = 88172645463325252ull;
  for (auto& v : d) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = 6e6 * (0.97 + 0.06 * double(x % 1000) / 1000.0);
  }
  return d;
}

SlowStepOptions defaults() {
  SlowStepOptions o;
  o.factor = 3;  // the default criterion (docs/configuration.md: slow_step_factor 3 x the p99)
  return o;
}

// One step's update, the history full (past min_history(): the percentile is recomputed every `refresh` steps,
// the cost that the per-step mean carries).
void BM_SlowStepDetectorObserve(benchmark::State& state) {
  SlowStepDetector det(defaults());
  const auto d = step_durations(4096);
  for (size_t i = 0; i < 2048; ++i) det.observe(d[i]);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(det.observe(d[i]));
    i = (i + 1) & 4095;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SlowStepDetectorObserve);

// The scheduler's count of one step between windows (none falls due: every_steps far away), its requests taken.
void BM_SchedulerStepBetweenWindows(benchmark::State& state) {
  ScheduleOptions o;
  o.every_steps = 1000000000;
  WindowScheduler sched(o, 0);
  uint64_t t = 1000;
  for (auto _ : state) {
    sched.step_ended(t, t + 6000000, false, 0.0);
    t += 6000000;
    benchmark::DoNotOptimize(sched.take());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SchedulerStepBetweenWindows);

}  // namespace

BENCHMARK_MAIN();
