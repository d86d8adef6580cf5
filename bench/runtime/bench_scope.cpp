// Cost of the annotation API (budgets, docs/benchmarks.md: <= 10 ns per enabled range, <= 1 ns with the session
// stopped). Run: build/bench/runtime/bench_scope --benchmark_repetitions=5 --benchmark_report_aggregates_only
// Every enabled benchmark reports drop_pct: records the writer could not keep up with are dropped (and
// counted), which is cheaper than recording, so a figure with a high drop_pct flatters the hot path.
#include <inferscope/scope.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

void compiled_out_loop(benchmark::State& state);

namespace {

void start_session(inferscope::BufferMode mode) {
  inferscope::Config c;
  c.output = "/tmp/inferscope-bench-" + std::to_string(::getpid()) + ".iscope";
  c.buffer_mode = mode;
  c.trace_size_mb = 64;
  c.thread_buffer_kb = 16384;  // 16 MiB per thread: the writer, draining every ms, keeps up
  c.flush_period_ms = 1;
  c.cupti = c.system = c.python = false;
  if (!inferscope::start(c)) std::abort();
}
void start_ring(const benchmark::State&) { start_session(inferscope::BufferMode::kRing); }
void start_stream(const benchmark::State&) { start_session(inferscope::BufferMode::kStream); }
void stop_session(const benchmark::State&) {
  inferscope::stop();
  std::remove(inferscope::output_path().c_str());
}

void report_drops(benchmark::State& state) {
  auto* r = inferscope::detail::t_state.ring;
  double dropped = r ? static_cast<double>(r->dropped_records.load()) : 0;
  state.counters["drop_pct"] =
      benchmark::Counter(100.0 * dropped / static_cast<double>(state.iterations()), benchmark::Counter::kAvgThreads);
}

void BM_RangeCompiledOut(benchmark::State& state) { compiled_out_loop(state); }
BENCHMARK(BM_RangeCompiledOut);

// The floor of an enabled range: it must read the clock twice. On some CPUs (AMD Zen under KVM here) one
// TSC read alone costs more than the 10 ns budget.
void BM_TwoClockReads(benchmark::State& state) {
  inferscope::detail::g_clock_is_tsc = true;
  for (auto _ : state) {
    benchmark::DoNotOptimize(inferscope::detail::now());
    benchmark::DoNotOptimize(inferscope::detail::now());
  }
}
BENCHMARK(BM_TwoClockReads);

void BM_RangeSessionStopped(benchmark::State& state) {
  for (auto _ : state) {
    ISCOPE_RANGE("stopped");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeSessionStopped);

void BM_RangeEnabled(benchmark::State& state) {
  for (auto _ : state) {
    ISCOPE_RANGE("enabled");
    benchmark::ClobberMemory();
  }
  report_drops(state);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RangeEnabled)->Name("BM_RangeEnabled/ring")->Setup(start_ring)->Teardown(stop_session)
    ->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_RangeEnabled)->Name("BM_RangeEnabled/stream")->Setup(start_stream)->Teardown(stop_session)
    ->ThreadRange(1, 2)->UseRealTime();

void BM_NestedRanges3(benchmark::State& state) {
  for (auto _ : state) {
    ISCOPE_RANGE("a");
    ISCOPE_RANGE("b");
    ISCOPE_RANGE("c");
    benchmark::ClobberMemory();
  }
  report_drops(state);
}
BENCHMARK(BM_NestedRanges3)->Setup(start_ring)->Teardown(stop_session);

void BM_RangeWithAttrs(benchmark::State& state) {
  int64_t i = 0;
  for (auto _ : state) {
    ISCOPE_RANGE_ATTRS("attrs", {"batch", ++i}, {"model", "gpt2"});
    benchmark::ClobberMemory();
  }
  report_drops(state);
}
BENCHMARK(BM_RangeWithAttrs)->Setup(start_ring)->Teardown(stop_session);

void BM_RangeWithAttrsStopped(benchmark::State& state) {
  int64_t i = 0;
  for (auto _ : state) {
    ISCOPE_RANGE_ATTRS("attrs", {"batch", ++i}, {"model", "gpt2"});
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeWithAttrsStopped);

void BM_MarkEvent(benchmark::State& state) {
  int64_t i = 0;
  for (auto _ : state) inferscope::mark_event("mark", {{"n", ++i}});
  report_drops(state);
}
BENCHMARK(BM_MarkEvent)->Setup(start_ring)->Teardown(stop_session);

void BM_MarkEventStopped(benchmark::State& state) {
  int64_t i = 0;
  for (auto _ : state) ISCOPE_MARK("mark", {"n", ++i});
}
BENCHMARK(BM_MarkEventStopped);

void BM_AsyncRange(benchmark::State& state) {
  for (auto _ : state) {
    inferscope::AsyncRange r("async");
    r.end();
  }
  report_drops(state);
}
BENCHMARK(BM_AsyncRange)->Setup(start_ring)->Teardown(stop_session);

}  // namespace

BENCHMARK_MAIN();
