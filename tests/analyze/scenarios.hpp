// Synthetic traces with one planted bottleneck each (and a healthy GPU-bound one). Each writes a real dump
// through dump::DumpBuilder; tests/fixtures/<name>.expected holds the findings digest the analyzer must give.
#pragma once

#include "support/dump_builder.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::testsupport {

inline const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> n = {"cpu_bound", "launch_bound", "sync_bound", "h2d_bound", "d2h_bound",
                                             "gpu_bound", "memory_alloc", "cpu_contention", "pcie_saturation", "layers"};
  return n;
}

/// api_activity: the CUDA calls come as CUPTI's API activity records (GPU channel, caller by OS thread id).
/// process: extra process-info keys, as the recorder writes them (e.g. cpus_allowed).
inline void write_scenario(const std::string& name, const std::string& path, bool api_activity = false,
                           const std::vector<std::pair<std::string, std::string>>& process = {}) {
  dump::DumpBuilder b(path);
  for (auto& [k, v] : process) b.process(k, v);
  Sim sim(b);
  sim.set_api_activity(api_activity);
  constexpr int kSteps = 20;
  constexpr int64_t us = 1'000, ms = 1'000'000;
  auto steps = [&](const std::function<void()>& body) {
    for (int i = 0; i < kSteps; ++i) {
      sim.range("step", [&] { sim.py("Model.run_step", body, "serve.py", 40); });
      sim.host(200 * us);  // between steps: not part of any step
    }
  };
  if (name == "cpu_bound") {
    steps([&] {
      sim.py("preprocess", [&] { sim.py("tokenize", [&] { sim.host(4 * ms); }, "tok.py", 7); sim.host(1 * ms); }, "serve.py", 12);
      for (int k = 0; k < 5; ++k) sim.py("forward", [&] { sim.launch("ampere_sgemm_64x64_nn", 200 * us); });
      sim.sync();
    });
  } else if (name == "launch_bound") {
    steps([&] {
      for (int k = 0; k < 400; ++k)
        sim.py("LayerNorm.forward", [&] { sim.host(3 * us); sim.launch(k % 2 ? "vectorized_elementwise_kernel" : "layer_norm_kernel", 3 * us, 6 * us); });
      sim.sync();
    });
  } else if (name == "sync_bound") {
    steps([&] {
      for (int k = 0; k < 30; ++k) {
        sim.py("decode_step", [&] { sim.launch("softmax_kernel", 60 * us); sim.host(20 * us); });
        sim.py("Tensor.item", [&] { sim.sync("cudaStreamSynchronize"); }, "torch/_tensor.py", 1);
        sim.host(60 * us);
      }
    });
  } else if (name == "h2d_bound") {
    steps([&] {
      sim.py("load_batch", [&] { sim.copy(CopyKind::kHtoD, 48'000'000, 6.0, MemoryKind::kPageable); });
      for (int k = 0; k < 3; ++k) sim.launch("conv2d_kernel", 500 * us);
      sim.sync();
    });
  } else if (name == "d2h_bound") {
    steps([&] {
      for (int k = 0; k < 3; ++k) sim.launch("conv2d_kernel", 500 * us);
      sim.py("fetch_output", [&] { sim.copy(CopyKind::kDtoH, 32'000'000, 5.0, MemoryKind::kPageable); });
    });
  } else if (name == "pcie_saturation") {
    steps([&] {
      sim.py("upload", [&] { sim.copy(CopyKind::kHtoD, 256'000'000, 50.0, MemoryKind::kPinned, true); });
      for (int k = 0; k < 2; ++k) sim.launch("gemm_kernel", 500 * us);
      sim.sync();
    });
  } else if (name == "gpu_bound") {
    steps([&] {
      sim.py("forward", [&] {
        for (int k = 0; k < 8; ++k) sim.launch("ampere_sgemm_128x64_tn", 2500 * us);
        for (int k = 0; k < 2; ++k) sim.launch("softmax_warp_forward", 500 * us);
      });
      sim.sync();
    });
  } else if (name == "memory_alloc") {
    steps([&] {
      for (int k = 0; k < 2; ++k) {
        sim.py("CUDACachingAllocator.malloc", [&] { sim.malloc(64 << 20, 1500 * us); }, "torch/cuda/memory.py", 1);
        sim.launch("elementwise_kernel", 500 * us);
        sim.py("empty_cache", [&] { sim.free(64 << 20, 1500 * us); }, "torch/cuda/memory.py", 2);
      }
      sim.sync();
    });
  } else if (name == "cpu_contention") {
    uint32_t sys = b.channel("system");
    uint32_t worker = b.thread("worker", 4250);
    uint32_t busy = b.code("busy_loop", "worker.py", 3);
    int64_t t0 = sim.now();
    steps([&] {
      sim.py("preprocess", [&] { sim.host(4 * ms); }, "serve.py", 12);
      for (int k = 0; k < 4; ++k) sim.launch("gemm_kernel", 250 * us);
      sim.sync();
    });
    int64_t t1 = sim.now();
    // The worker thread runs Python the whole time; the step thread gets the CPU 25 % of the wall time.
    for (int64_t t = t0; t + 10 * ms <= t1; t += 10 * ms) b.pycall(worker, busy, 0, t, t + 10 * ms);
    for (int64_t t = t0; t <= t1; t += 5 * ms) {
      b.counter(sys, "thread.cpu.user_ns", CounterScope::kThread, sim.thread(), t, (t - t0) / 4);
      b.counter(sys, "thread.ctx.involuntary", CounterScope::kThread, sim.thread(), t, (t - t0) / ms * 3);
      b.counter(sys, "thread.cpu.user_ns", CounterScope::kThread, worker, t, t - t0);  // on a CPU all the time
    }
  } else if (name == "layers") {
    steps([&] {
      sim.host(100 * us);
      for (int l = 0; l < 4; ++l) {
        std::string layer = "model.layers." + std::to_string(l);
        sim.range(layer, [&] {
          sim.range(layer + ".attn", [&] {
            sim.py("Attention.forward", [&] { sim.launch("flash_fwd_kernel", 400 * us); sim.launch("gemm_kernel", 200 * us); });
          });
          sim.range(layer + ".mlp", [&] { sim.py("MLP.forward", [&] { sim.launch("gemm_kernel", 600 * us); }); });
        }, /*layer_attr=*/true);
      }
      sim.sync();
    });
  } else {
    throw std::invalid_argument("unknown scenario " + name);
  }
  b.finish();
}

}  // namespace inferscope::testsupport
