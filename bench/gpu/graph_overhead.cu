// What recording costs on a decode step replayed as a CUDA graph, graph level against node level, in one process.
//
//   graph_overhead [--kernels 1500] [--rounds 20] [--replays 10] [--sets "default;default,graph_nodes"] [-o dump]
//
// The step: one launch of a graph of --kernels small element-wise kernels (captured once from a stream), then a
// stream synchronize; the shape of a serving engine's decode step (docs/history/benchmarks-2026-11.md, "CUDA graphs").
//
// First the A/B: one session records all along, started before the program's first CUDA call, and the graph is
// instantiated in it; each round visits "none" and every set in a shuffled order (inferscope_cupti_set_activities
// switches CUPTI at run time), each visit a window of two untimed replays and --replays timed ones; a window's
// figure is its median step. Then the probes: for each of a few activity sets, a session of its own replays the
// graph three times, and the program counts what its dump holds (graph launch records, kernel records of graph
// nodes). A probe set ending in "@capture" captures a new graph in its session first; after one captured in a
// graph_nodes session, graph-level tracing is refused (CUPTI crashes on such a graph) and the probe says why. Prints per set the median step and the median of the per-round ratios to the "none"
// window of the same round. Nothing is asserted: figures go to docs/benchmarks.md.
#include <inferscope/scope.hpp>

#include "dump/reader.hpp"

#include <cuda_runtime.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

extern "C" int inferscope_cupti_set_activities(const char* spec);
extern "C" const char* inferscope_cupti_status();

__global__ void axpb(float* x, int n, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

namespace {

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "graph_overhead: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(sep, b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

struct Graph {
  cudaStream_t stream{};
  cudaGraphExec_t exec{};
  double replay_ms() const {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

Graph capture_graph(float* x, int kernels, int elements) {
  Graph g;
  CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kernels; ++k) axpb<<<(elements + 255) / 256, 256, 0, g.stream>>>(x, elements, 0.999f, 0.001f);
  CHECK(cudaStreamEndCapture(g.stream, &graph));
  CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  return g;
}

void on_crash(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = "graph_overhead: crashed; backtrace:\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

// A session of its own with `set`, three replays of `g`; what its dump holds. With `capture`, `g` is first
// replaced by a graph captured and instantiated inside the session.
void probe(Graph& g, float* x, int kernels, int elements, const std::string& set, const std::string& out, bool capture) {
  inferscope::Config c;
  c.output = out;
  c.cupti_activities = set;
  c.system = false;
  c.python = false;
  if (!inferscope::start(c)) std::exit(1);
  if (capture) g = capture_graph(x, kernels, elements);
  std::printf("probe %s%s: session started, replaying\n", set.c_str(), capture ? " (graph captured in it)" : "");
  for (int i = 0; i < 3; ++i) g.replay_ms();
  const std::string status = inferscope_cupti_status();
  inferscope::stop();
  inferscope::dump::DumpReader r(out);
  uint64_t graphs = 0, node_kernels = 0, other_kernels = 0;
  r.for_each_record([&](uint32_t, const inferscope::RecordHeader& h, const uint8_t* p) {
    if (h.kind == inferscope::RecordKind::kGpuGraphLaunch) ++graphs;
    if (h.kind != inferscope::RecordKind::kGpuKernel) return;
    auto k = inferscope::dump::load<inferscope::GpuKernelRecord>(p);
    ++(k.graph_id ? node_kernels : other_kernels);
  });
  std::printf("probe %-28s 3 replays: %llu graph launch records, %llu kernel records of graph nodes, %llu other "
              "kernels, %llu dropped\n", set.c_str(), (unsigned long long)graphs, (unsigned long long)node_kernels,
              (unsigned long long)other_kernels, (unsigned long long)r.total_dropped_records());
  if (status.find("node by node") != std::string::npos) std::printf("  (%s)\n", status.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int kernels = 1500, rounds = 20, replays = 10, elements = 4096;
  std::string sets = "default;default,graph_nodes";
  std::string probes = "default;default,graph_nodes;default,graph_nodes@capture;default";
  std::string out = "/tmp/graph_overhead.iscope";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "graph_overhead: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--kernels") kernels = std::atoi(next().c_str());
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (a == "--replays") replays = std::atoi(next().c_str());
    else if (a == "--elements") elements = std::atoi(next().c_str());
    else if (a == "--sets") sets = next();
    else if (a == "--probes") probes = next();
    else if (a == "-o") out = next();
    else {
      std::fprintf(stderr, "usage: graph_overhead [--kernels N] [--rounds R] [--replays N] [--sets \"a;b\"] "
                           "[--probes \"a;b\"] [-o dump]\n");
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, also into a pipe
  signal(SIGSEGV, on_crash);
  signal(SIGABRT, on_crash);
  // The A/B session starts before the program's first CUDA call, so CUPTI sees every graph instantiated, and
  // the graph is instantiated with graph-level tracing on: that tracing may then be switched on and off around
  // it (the collector never enables it for a graph instantiated without it: CUPTI crashes on those).
  std::vector<std::string> names = split(sets, ';');
  names.insert(names.begin(), "none");
  inferscope::Config c;
  c.output = out;
  c.cupti_activities = "default";
  c.system = false;
  c.python = false;
  if (!inferscope::start(c)) return 1;
  float* x = nullptr;
  CHECK(cudaMalloc(&x, sizeof(float) * size_t(elements)));
  CHECK(cudaMemset(x, 0, sizeof(float) * size_t(elements)));
  Graph g = capture_graph(x, kernels, elements);
  for (int i = 0; i < 5; ++i) g.replay_ms();
  std::printf("GPU collector: %s\n", inferscope_cupti_status());
  std::map<std::string, std::vector<double>> step_ms;  // per set, per round: the window's median step
  std::mt19937 rng(12345);
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> order = names;
    std::shuffle(order.begin(), order.end(), rng);
    for (const auto& set : order) {
      if (inferscope_cupti_set_activities(set.c_str()) != 0) {
        std::fprintf(stderr, "graph_overhead: activity set '%s' refused (%s)\n", set.c_str(), inferscope_cupti_status());
        return 1;
      }
      for (int i = 0; i < 2; ++i) g.replay_ms();
      std::vector<double> w;
      for (int i = 0; i < replays; ++i) w.push_back(g.replay_ms());
      step_ms[set].push_back(median(w));
    }
  }
  inferscope_cupti_set_activities("default");
  inferscope::stop();
  std::printf("graph of %d kernels (%d elements each), %d rounds x %d replays per window; median step, median of "
              "per-round ratios to 'none'\n", kernels, elements, rounds, replays);
  std::printf("%-36s %12s %12s\n", "activity set", "step ms", "vs none");
  for (const auto& set : names) {
    std::vector<double> ratio;
    for (int r = 0; r < rounds; ++r) ratio.push_back(step_ms[set][r] / step_ms["none"][r]);
    std::printf("%-36s %12.3f %+11.1f%%\n", set.c_str(), median(step_ms[set]), 100.0 * (median(ratio) - 1));
  }

  // The probes replay that graph unless one captures a new graph: a probe set ending in "@capture" captures
  // it inside its session (one captured in a graph_nodes session has no graph-level tracing from then on).
  for (auto set : split(probes, ';')) {
    const std::string tag = "@capture";
    const bool capture = set.size() > tag.size() && set.compare(set.size() - tag.size(), tag.size(), tag) == 0;
    if (capture) set.resize(set.size() - tag.size());
    probe(g, x, kernels, elements, set, out + ".probe", capture);
  }
  CHECK(cudaFree(x));
  return 0;
}
