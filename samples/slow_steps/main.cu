// A serving loop whose every `--every`th step is slow for a planted reason, for sampled mode
// (docs/sampled-mode.md). Each step ("step" range) prepares its input on the host, launches 30 small kernels and
// waits for them; a planted step also waits for one extra kernel that spins for `--slow-ms` on the GPU
// (`--cause kernel`, the default) or sleeps that long on the host (`--cause sleep`).
//
//   iscope-run -o slow.iscope --set mode=sampled --set window_every_steps=25 -- sample_slow_steps
//   iscope-analyze slow.iscope        # the Sampled run section lists the slow steps; slow_steps says why
//
// Prints "planted=30,80,..." (the slow steps' numbers, from 0) and "step_ms=..." (a typical step).
#include <inferscope/scope.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void scale(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}

// Spins for `cycles` GPU clock cycles: a kernel whose length does not depend on the GPU's speed.
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Options {
  int steps = 400, every = 50, phase = 30;
  double slow_ms = 20;
  std::string cause = "kernel";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--steps") o.steps = std::atoi(v.c_str());
    else if (k == "--every") o.every = std::atoi(v.c_str());
    else if (k == "--phase") o.phase = std::atoi(v.c_str());
    else if (k == "--slow-ms") o.slow_ms = std::atof(v.c_str());
    else if (k == "--cause") o.cause = v;
    else std::fprintf(stderr, "unknown option %s\n", k.c_str());
  }
  return o;
}

#define CHECK_CUDA(x)                                                              \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                 \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

// The host's share of a step: a little arithmetic over the input, as tokenizing would.
float prepare(std::vector<float>& host) {
  ISCOPE_RANGE("prepare");
  float sum = 0;
  for (size_t i = 0; i < host.size(); ++i) sum += host[i] = float(i % 7) * 0.5f;
  return sum;
}

void planted(const Options& o, long long cycles, cudaStream_t stream) {
  ISCOPE_RANGE("planted");
  if (o.cause == "sleep") std::this_thread::sleep_for(std::chrono::microseconds(long(o.slow_ms * 1000)));
  else spin<<<1, 1, 0, stream>>>(cycles);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  constexpr int n = 1 << 16;
  float* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, n * sizeof(float)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  int khz = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  const long long cycles = static_cast<long long>(o.slow_ms * khz);
  std::vector<float> host(4096);
  std::string planted_list;
  double normal_ms = 0;
  int normal = 0;
  for (int i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    {
      ISCOPE_RANGE("step");
      prepare(host);
      for (int k = 0; k < 30; ++k) scale<<<n / 256, 256, 0, stream>>>(d, n, 0.999f);
      if (i % o.every == o.phase) {
        planted(o, cycles, stream);
        planted_list += (planted_list.empty() ? "" : ",") + std::to_string(i);
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    if (i % o.every != o.phase) {
      normal_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ++normal;
    }
    // The loop's own work between requests (receiving the next one): the writer switches windows meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK_CUDA(cudaFree(d));
  std::printf("planted=%s\nstep_ms=%.3f\ncause=%s\n", planted_list.c_str(), normal ? normal_ms / normal : 0.0,
              o.cause.c_str());
  return 0;
}
