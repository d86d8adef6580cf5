// A C++ CUDA "post-processing pipeline" that launches ~200 tiny kernels per step and synchronizes the stream at
// the end of each step (planted: launch_bound). Fixed (--fixed): the step is captured once into a CUDA graph and
// replayed, one launch per step.
//
//   cuda_graph_app [--fixed] [--steps N] [--ab ROUNDS]
// Prints its step time; in --ab mode alternates windows of both variants in one process and prints
// "AB broken_ms=.. fixed_ms=.. saving_pct=..". Exits 77 when there is no CUDA device.
// EXPECTED: launch_bound
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "cuda_graph_app: %s failed: %s\n", #call, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

constexpr int kElems = 4096;
constexpr int kStages = 50;  // 4 kernels a stage: 200 launches a step

__global__ void scale_bias(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
__global__ void relu(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void add(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}
__global__ void clamp(float* x, float lo, float hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fminf(fmaxf(x[i], lo), hi);
}

void enqueue_step(cudaStream_t s, float* a, float* b) {
  const int threads = 256, blocks = (kElems + threads - 1) / threads;
  for (int k = 0; k < kStages; ++k) {
    scale_bias<<<blocks, threads, 0, s>>>(a, 0.99f, 0.01f, kElems);
    relu<<<blocks, threads, 0, s>>>(a, kElems);
    add<<<blocks, threads, 0, s>>>(b, a, kElems);
    clamp<<<blocks, threads, 0, s>>>(b, -10.f, 10.f, kElems);
  }
}

struct App {
  cudaStream_t stream{};
  float* a{};
  float* b{};
  cudaGraphExec_t exec{};

  void step(bool fixed) {
    if (fixed) {
      CHECK(cudaGraphLaunch(exec, stream));
    } else {
      enqueue_step(stream, a, b);
    }
    CHECK(cudaStreamSynchronize(stream));
  }
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  bool fixed = false;
  int steps = 300, ab_rounds = 0, window = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--fixed")) {
      fixed = true;
    } else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--ab") && i + 1 < argc) {
      ab_rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--window") && i + 1 < argc) {
      window = std::atoi(argv[++i]);
    } else {
      std::printf("usage: %s [--fixed] [--steps N] [--ab ROUNDS] [--window N]\n", argv[0]);
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_graph_app: no CUDA device; nothing to run\n");
    return 77;
  }
  App app;
  CHECK(cudaStreamCreateWithFlags(&app.stream, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&app.a, kElems * sizeof(float)));
  CHECK(cudaMalloc(&app.b, kElems * sizeof(float)));
  CHECK(cudaMemset(app.a, 0, kElems * sizeof(float)));
  CHECK(cudaMemset(app.b, 0, kElems * sizeof(float)));
  if (fixed || ab_rounds > 0) {
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(app.stream, cudaStreamCaptureModeThreadLocal));
    enqueue_step(app.stream, app.a, app.b);
    CHECK(cudaStreamEndCapture(app.stream, &graph));
    CHECK(cudaGraphInstantiate(&app.exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
  }

  if (ab_rounds > 0) {
    for (int w = 0; w < 3; ++w) {
      app.step(false);
      app.step(true);
    }
    std::vector<double> tb, tf;
    for (int r = 0; r < ab_rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        bool f = (k == 0) == (r % 2 == 1);
        double t0 = now_ms();
        for (int i = 0; i < window; ++i) app.step(f);
        (f ? tf : tb).push_back((now_ms() - t0) / window);
      }
    }
    double b = median(tb), f = median(tf);
    std::printf("AB broken_ms=%.4f fixed_ms=%.4f saving_pct=%.1f rounds=%d window=%d\n", b, f, (b - f) / b * 100,
                ab_rounds, window);
    return 0;
  }

  double t0 = now_ms(), t_first = t0;
  for (int i = 0; i < steps; ++i) {
    app.step(fixed);
    if (i == 0) t_first = now_ms();
  }
  double t_end = now_ms();
  std::printf("cuda_graph_app (%s): %d steps in %.2f s; first step %.1f ms (warm-up), then %.3f ms/step\n",
              fixed ? "fixed" : "broken", steps, (t_end - t0) / 1e3, t_first - t0,
              (t_end - t_first) / std::max(steps - 1, 1));
  return 0;
}
