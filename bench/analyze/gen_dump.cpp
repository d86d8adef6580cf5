// Writes a synthetic dump of about N events shaped like a traced PyTorch eager inference loop: per step an
// ISCOPE step range, a Python run_step frame, layer ranges, and per op a Python call, a launch call and its
// kernel; a synchronization and a host copy every step; CPU counters every 10 ms.
//   bench_analyze_gen EVENTS PATH
#include "support/dump_builder.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_analyze_gen EVENTS PATH\n");
    return 2;
  }
  const uint64_t target = std::strtoull(argv[1], nullptr, 10);
  auto t0 = std::chrono::steady_clock::now();
  inferscope::dump::DumpBuilder b(argv[2], 2.4);  // a 2.4 GHz TSC
  inferscope::testsupport::Sim sim(b);
  uint32_t sys = b.channel("system");
  const char* kernels[] = {"ampere_sgemm_128x64_tn", "layer_norm_kernel", "vectorized_elementwise_kernel",
                           "softmax_warp_forward", "flash_fwd_kernel"};
  const char* funcs[] = {"Linear.forward", "LayerNorm.forward", "GELU.forward", "softmax", "Attention.forward"};
  int64_t next_counter = 0;
  uint64_t step = 0;
  while (b.records() < target) {
    sim.range("step", [&] {
      sim.py("Model.run_step", [&] {
        sim.copy(inferscope::CopyKind::kHtoD, 1 << 20, 12.0, inferscope::MemoryKind::kPinned, true);
        for (int layer = 0; layer < 12; ++layer) {
          sim.range("model.layers." + std::to_string(layer), [&] {
            for (int op = 0; op < 40; ++op) {
              int k = (op + layer) % 5;
              sim.py(funcs[k], [&] {
                sim.host(4'000 + (op % 7) * 500);
                sim.launch(kernels[k], 3'000 + (k == 0 ? 9'000 : 0) + (op % 3) * 1'000, 5'000);
              });
            }
          });
        }
        sim.py("Tensor.item", [&] { sim.sync("cudaStreamSynchronize"); });
      });
    });
    if (sim.now() >= next_counter) {
      b.counter(sys, "thread.cpu.user_ns", inferscope::CounterScope::kThread, sim.thread(), sim.now(), sim.now() * 9 / 10);
      next_counter = sim.now() + 10'000'000;
    }
    sim.host(50'000);
    ++step;
  }
  b.finish();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %llu records (%llu steps) to %s in %.1f s\n", (unsigned long long)b.records(),
              (unsigned long long)step, argv[2], s);
  return 0;
}
