// A decode loop replayed as a CUDA graph: `--kernels` small kernels are captured once from a stream into a
// graph, and each step ("decode" range) replays the graph and waits for it. Serving engines (vLLM, TensorRT-LLM,
// torch.compile's "reduce-overhead") run their decode steps this way. A few eager steps first launch the same
// kernels one by one (the "prefill" range), so a dump holds both kinds of GPU work. The graph launch sits in a
// "replay_graph" range, which the report names as the graph's launcher.
//
//   iscope-run -o graph.iscope -- sample_graph_replay            # one record per graph launch (the default)
//   iscope-run -o nodes.iscope --set graph_nodes=true -- sample_graph_replay   # every kernel of every launch
//   iscope-analyze graph.iscope
//   sample_graph_replay --session late.iscope   # starts its own session after instantiating the graph
//
// Prints "graph_launches=N kernels_per_graph=K eager_kernels=E step_ms=..." for the test that checks the dump.
#include <inferscope/scope.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

__global__ void axpb(float* x, int n, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

struct Options {
  int kernels = 1500, steps = 200, eager_steps = 3, elements = 4096;
  std::string session;  // --session PATH: record in-process from after the graph's instantiation on
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--kernels") o.kernels = std::max(1, std::atoi(v.c_str()));
    else if (k == "--steps") o.steps = std::max(1, std::atoi(v.c_str()));
    else if (k == "--eager-steps") o.eager_steps = std::max(0, std::atoi(v.c_str()));
    else if (k == "--elements") o.elements = std::max(32, std::atoi(v.c_str()));
    else if (k == "--session") o.session = v;
    else {
      std::fprintf(stderr, "usage: sample_graph_replay [--kernels N] [--steps N] [--eager-steps N] [--elements N] "
                           "[--session PATH]\n");
      std::exit(2);
    }
  }
  return o;
}

#define CHECK_CUDA(x)                                                      \
  do {                                                                     \
    cudaError_t e = (x);                                                   \
    if (e != cudaSuccess) {                                                \
      std::fprintf(stderr, "sample_graph_replay: %s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// One layer stack: `kernels` tiny element-wise kernels in a row on `stream`.
void launch_layers(float* x, const Options& o, cudaStream_t stream) {
  const int threads = 256, blocks = (o.elements + threads - 1) / threads;
  for (int k = 0; k < o.kernels; ++k) axpb<<<blocks, threads, 0, stream>>>(x, o.elements, 0.999f, 0.001f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  float* x = nullptr;
  CHECK_CUDA(cudaMalloc(&x, sizeof(float) * size_t(o.elements)));
  CHECK_CUDA(cudaMemset(x, 0, sizeof(float) * size_t(o.elements)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  for (int s = 0; s < o.eager_steps; ++s) {
    ISCOPE_RANGE("prefill");
    launch_layers(x, o, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch_layers(x, o, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  if (!o.session.empty()) {  // a session started now meets a graph instantiated before it
    inferscope::Config c;
    c.output = o.session;
    c.system = false;
    if (!inferscope::start(c)) return 1;
  }

  std::vector<double> ms;
  for (int s = 0; s < o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    {
      ISCOPE_RANGE("decode");
      {
        ISCOPE_RANGE("replay_graph");
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("graph_launches=%d kernels_per_graph=%d eager_kernels=%d step_ms=%.3f\n", o.steps, o.kernels,
              o.eager_steps * o.kernels, ms[ms.size() / 2]);
  if (!o.session.empty()) inferscope::stop();
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(x));
  return 0;
}
