// Host cost per CUDA launch of each CUPTI activity set, in one process.
//
//   launch_overhead [--mode launch|step] [--launches 4000] [--rounds 15] [--sets "none;kernel;..."] [-o dump]
//
// --mode step emulates a launch-bound inference step instead (the GPT-2 batch-1 step's shape): --ops
// operations of (--cpu-us of host work, then one launch of a kernel that runs --gpu-us on the GPU), then a
// stream synchronize; a window is --steps steps and its figure the median step time. --touch-kb K makes the
// host work read and write a K KiB working set instead of spinning on the clock; --api-calls N adds N CUDA
// calls that record nothing (cudaGetDevice, cudaGetLastError) before each launch. A set may end in @N:
// CUPTI's periodic flush every N ms during its windows (0: only when a buffer is full; default 100); then in
// /cz (CUPTI zeroes each activity buffer on the thread that asked for it, instead of getting it zeroed) and
// /NNNk (activity buffers of NNN KiB; default 8192).
//
// A session records all along with GPU collection on; each round visits every activity set in a shuffled
// order (inferscope_cupti_set_activities switches CUPTI at run time), and each visit is one window: a short
// untimed warm-up, then `launches` launches of an empty kernel on one stream, timed on the host, then a
// stream synchronize (timed separately). Prints per set the median host ns per launch, the median of the
// per-round differences to the "none" window of the same round, and the same for launch + synchronize.
// The GPT-2 batch-1 step of bench/gpu/gpt2_overhead.py makes about 230 launches per 6-7 ms, so a set's
// share of that step is about diff_ns * 230 / 6.5 ms; the program prints that estimate too. Nothing is
// asserted: figures go to docs/benchmarks.md.
#include <inferscope/scope.hpp>

#include "dump/reader.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

extern "C" int inferscope_cupti_set_activities(const char* spec);
extern "C" const char* inferscope_cupti_status();
extern "C" int inferscope_cupti_set_flush_period(uint32_t ms);
extern "C" int inferscope_cupti_set_buffer_policy(uint32_t kib, int prezeroed);

__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

__global__ void empty_kernel(int* p) {
  if (p && threadIdx.x == 1024) *p = 0;  // never true: the kernel does nothing, but is not optimised away
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void spin_host(double us);

double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

// --touch-kb: host work that reads and writes a working set of this size (0: a spin on the clock, which keeps
// nothing in the caches). A real framework's host work between launches (an interpreter, a dispatcher) has a
// working set of its own; what a tracer does per launch then also costs the cache misses it causes.
std::vector<uint64_t> g_touch;

void spin_host(double us) {
  const double end = now_ns() + us * 1e3;
  if (g_touch.empty()) {
    while (now_ns() < end) {
    }
    return;
  }
  static size_t at = 0;
  uint64_t acc = 1;
  while (now_ns() < end)
    for (int i = 0; i < 64; ++i) {  // one cache line per step, 64 steps per clock read
      at = (at + 8) % g_touch.size();
      acc = acc * 31 + g_touch[at];
      g_touch[at] = acc;
    }
}

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "launch_overhead: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

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

}  // namespace

int main(int argc, char** argv) {
  int launches = 4000, rounds = 15, ops = 230, steps = 20;
  double cpu_us = 25, gpu_us = 12;
  int api_calls = 0;  // --api-calls: CUDA calls per op that explain nothing (cudaGetDevice, cudaGetLastError)
  std::string mode = "launch";
  std::string sets =
      "none;kernel;kernel,memcpy,memset,sync,memory,overhead;runtime;runtime,api_activity;kernel,runtime;"
      "kernel,runtime,api_activity;default;default,api_activity;full";
  std::string out = "/tmp/launch_overhead.iscope";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "launch_overhead: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--launches") launches = std::atoi(next().c_str());
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (a == "--sets") sets = next();
    else if (a == "--mode") mode = next();
    else if (a == "--ops") ops = std::atoi(next().c_str());
    else if (a == "--steps") steps = std::atoi(next().c_str());
    else if (a == "--cpu-us") cpu_us = std::atof(next().c_str());
    else if (a == "--gpu-us") gpu_us = std::atof(next().c_str());
    else if (a == "--touch-kb") g_touch.assign(size_t(std::atoi(next().c_str())) * 1024 / 8, 1);
    else if (a == "--api-calls") api_calls = std::atoi(next().c_str());
    else if (a == "-o") out = next();
    else {
      std::fprintf(stderr, "usage: launch_overhead [--mode launch|step] [--launches N] [--rounds R] [--sets \"a;b\"] "
                           "[--ops N --cpu-us U --gpu-us U --steps N --touch-kb K --api-calls N] [-o dump]\n");
      return 2;
    }
  }
  std::vector<std::string> names = split(sets, ';');
  if (std::find(names.begin(), names.end(), "none") == names.end()) names.insert(names.begin(), "none");

  CHECK(cudaFree(nullptr));  // CUDA first: the session then finds the driver loaded
  inferscope::Config c;
  c.output = out;
  c.cupti_activities = "none";
  c.system = false;
  c.python = false;
  if (!inferscope::start(c)) return 1;
  std::printf("GPU collector: %s\n", inferscope_cupti_status());
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::map<std::string, std::vector<double>> launch_ns, total_ns;  // per set, per round: ns per launch
  std::mt19937 rng(12345);
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> order = names;
    std::shuffle(order.begin(), order.end(), rng);
    for (const auto& set : order) {
      // "activities[@flush_ms][/cz][/NNNk]"
      std::vector<std::string> opts = split(set, '/');
      const std::string acts = opts.front();
      bool prezeroed = true;
      uint32_t kib = 8192;
      for (size_t i = 1; i < opts.size(); ++i)
        if (opts[i] == "cz") prezeroed = false;
        else kib = uint32_t(std::atoi(opts[i].c_str()));
      const size_t at = acts.find('@');
      inferscope_cupti_set_flush_period(at == std::string::npos ? 100 : uint32_t(std::atoi(acts.c_str() + at + 1)));
      if (inferscope_cupti_set_buffer_policy(kib, prezeroed) != 0 ||
          inferscope_cupti_set_activities(acts.substr(0, at).c_str()) != 0) {
        std::fprintf(stderr, "launch_overhead: activity set '%s' refused (%s)\n", set.c_str(), inferscope_cupti_status());
        return 1;
      }
      if (mode == "step") {
        auto one_step = [&] {
          for (int i = 0; i < ops; ++i) {
            spin_host(cpu_us);
            // What a framework asks around each launch (PyTorch: the current device, the last error).
            for (int k = 0; k < api_calls; ++k) {
              int dev = 0;
              if (k % 2 == 0) (void)cudaGetDevice(&dev);
              else (void)cudaGetLastError();
            }
            spin_kernel<<<1, 32, 0, stream>>>(uint64_t(gpu_us * 1e3));
          }
          CHECK(cudaStreamSynchronize(stream));
        };
        for (int i = 0; i < 2; ++i) one_step();
        std::vector<double> w;
        for (int i = 0; i < steps; ++i) {
          const double t0 = now_ns();
          one_step();
          w.push_back(now_ns() - t0);
        }
        launch_ns[set].push_back(median(w) / ops);
        total_ns[set].push_back(median(w) / ops);
        continue;
      }
      for (int i = 0; i < 200; ++i) empty_kernel<<<1, 32, 0, stream>>>(nullptr);
      CHECK(cudaStreamSynchronize(stream));
      const double t0 = now_ns();
      for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, stream>>>(nullptr);
      const double t1 = now_ns();
      CHECK(cudaStreamSynchronize(stream));
      const double t2 = now_ns();
      launch_ns[set].push_back((t1 - t0) / launches);
      total_ns[set].push_back((t2 - t0) / launches);
    }
  }
  inferscope_cupti_set_activities("none");
  CHECK(cudaStreamDestroy(stream));
  inferscope::stop();

  if (mode == "step")
    std::printf("step mode: %d ops x (%.1f us host work%s, %d other CUDA calls, a %.1f us kernel) + sync; %d steps per "
                "window, %d rounds; ns per op, medians (diff / step time = the set's overhead on the step)\n",
                ops, cpu_us, g_touch.empty() ? "" : (" over " + std::to_string(g_touch.size() * 8 / 1024) + " KiB").c_str(),
                api_calls, gpu_us, steps, rounds);
  else
    std::printf("%d rounds x %d launches per window; ns per launch (host), medians\n", rounds, launches);
  std::printf("%-48s %10s %12s %12s %14s %14s\n", "activity set", mode == "step" ? "op ns" : "launch ns", "diff ns",
              mode == "step" ? "+% step" : "+% GPT-2 b1", "launch+sync", "diff ns");
  for (const auto& set : names) {
    std::vector<double> d, dt;
    for (int r = 0; r < rounds; ++r) {
      d.push_back(launch_ns[set][r] - launch_ns["none"][r]);
      dt.push_back(total_ns[set][r] - total_ns["none"][r]);
    }
    const double diff = median(d);
    std::printf("%-48s %10.1f %12.1f %11.2f%% %14.1f %14.1f\n", set.c_str(), median(launch_ns[set]), diff,
                mode == "step" ? 100.0 * diff / median(launch_ns["none"]) : 100.0 * diff * 230 / 6.5e6,
                median(total_ns[set]), median(dt));
  }

  // Where the API records came from: callbacks write them on the calling thread, api_activity through the
  // "gpu" channel named by CUPTI's thread id, which must be this thread's OS id for attribution to work.
  const uint32_t me = static_cast<uint32_t>(::syscall(SYS_gettid));
  inferscope::dump::DumpReader r(out);
  uint64_t on_thread = 0, on_channel = 0, channel_tid_match = 0, kernels = 0;
  uint32_t other_tid = 0;
  r.for_each_record([&](uint32_t thread, const inferscope::RecordHeader& h, const uint8_t* p) {
    if (h.kind == inferscope::RecordKind::kGpuKernel) ++kernels;
    if (h.kind != inferscope::RecordKind::kCudaApi) return;
    auto it = r.threads().find(thread);
    const bool channel = it != r.threads().end() && it->second.is_channel();
    auto a = inferscope::dump::load<inferscope::CudaApiRecord>(p);
    if (!channel) ++on_thread;
    else {
      ++on_channel;
      if (a.os_tid == me) ++channel_tid_match;
      else other_tid = a.os_tid;
    }
  });
  std::printf("dump %s: %llu kernels, %llu API records on the calling thread, %llu through the gpu channel "
              "(%llu with os_tid == gettid() %u%s%u), %llu dropped\n",
              out.c_str(), (unsigned long long)kernels, (unsigned long long)on_thread, (unsigned long long)on_channel,
              (unsigned long long)channel_tid_match, me, other_tid ? "; another: " : "", other_tid,
              (unsigned long long)r.total_dropped_records());
  return 0;
}
