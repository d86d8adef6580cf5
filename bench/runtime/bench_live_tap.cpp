// The live tap's cost on the writer thread (docs/live.md, docs/benchmarks.md): what feeding one drained chunk of
// a step (one step range and N child ranges) costs, and what one snapshot plus the page's data costs on the
// server thread. Neither runs on the application's threads; the GPU-side overhead with the page open is open.
#include "live/render.hpp"
#include "live/tap.hpp"

#include <inferscope/records.hpp>

#include <benchmark/benchmark.h>

#include <vector>

namespace {

std::vector<uint8_t> step_chunk(int children) {
  std::vector<uint8_t> buf;
  auto add = [&](uint32_t name, uint8_t depth, uint64_t s, uint64_t e) {
    inferscope::RangeRecord r{{inferscope::RecordKind::kRange, depth, sizeof(r)}, name, s, e};
    const auto* p = reinterpret_cast<const uint8_t*>(&r);
    buf.insert(buf.end(), p, p + sizeof(r));
  };
  for (int i = 0; i < children; ++i) add(2 + i % 4, 1, 1000 + i * 10, 1005 + i * 10);
  add(1, 0, 1000, 1000 + children * 10);
  return buf;
}

std::string name(uint32_t id) { return "range" + std::to_string(id); }

// Per step: the tap reads one chunk holding the step and its children (state.range(0)).
void BM_TapObserveStep(benchmark::State& state) {
  inferscope::live::Tap tap(1, 0, 1.0, name);
  const auto chunk = step_chunk(static_cast<int>(state.range(0)));
  for (auto _ : state) tap.observe(1, chunk.data(), chunk.size());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TapObserveStep)->Arg(2)->Arg(16)->Arg(64);

// Per page refresh (once a second): a snapshot of full rings and the JSON the page reads.
void BM_SnapshotAndData(benchmark::State& state) {
  inferscope::live::Tap tap(1, 0, 1.0, name);
  const auto chunk = step_chunk(16);
  for (int i = 0; i < 2000; ++i) tap.observe(1, chunk.data(), chunk.size());
  for (auto _ : state) benchmark::DoNotOptimize(inferscope::live::render_data_json(tap.snapshot()));
}
BENCHMARK(BM_SnapshotAndData);

}  // namespace
BENCHMARK_MAIN();
