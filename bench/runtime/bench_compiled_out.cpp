// The same loop as BM_Range* with ISCOPE_DISABLE: the floor every other figure is compared with.
#define ISCOPE_DISABLE
#include <inferscope/scope.hpp>

#include <benchmark/benchmark.h>

void compiled_out_loop(benchmark::State& state) {
  for (auto _ : state) {
    ISCOPE_RANGE("compiled_out");
    benchmark::ClobberMemory();
  }
}
