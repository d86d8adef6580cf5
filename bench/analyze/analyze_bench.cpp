// Times the analyzer on a dump in-process and prints events/s and memory: bench_analyze DUMP [REPEATS]
// (generate a dump with bench_analyze_gen). Memory is read from /proc/self/status: VmHWM is the peak resident
// set including the mapped dump's pages (file-backed, reclaimable); RssAnon is the analyzer's own memory.
#include "analyze/analyzer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <time.h>

namespace {
double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}
long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::string(key).size() + 1);
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_analyze DUMP [REPEATS]\n");
    return 2;
  }
  int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<double> secs, cpus;
  uint64_t events = 0;
  // The analyzer frees its arrays before returning: sample RssAnon while it runs to see the peak.
  std::atomic<long> anon_peak{0};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      long v = status_kb("RssAnon:");
      if (v > anon_peak) anon_peak = v;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_s();
    inferscope::analyze::Analysis a = inferscope::analyze::analyze_file(argv[1], {});
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpus.push_back(cpu_s() - c0);
    events = a.events;
    if (i == 0)
      std::printf("steps %llu, primary %s, findings %zu\n", (unsigned long long)a.steps.count,
                  a.findings.empty() ? "-" : a.findings.front().category.c_str(), a.findings.size());
  }
  done = true;
  sampler.join();
  {
    auto t0 = std::chrono::steady_clock::now();
    inferscope::dump::DumpReader r(argv[1]);
    std::printf("opening the dump (chunk walk + CRC-32C of %.0f MiB): %.3f s\n", double(r.file_size()) / (1 << 20),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  std::sort(cpus.begin(), cpus.end());
  double med = secs[secs.size() / 2], cmed = cpus[cpus.size() / 2];
  // On a shared machine the wall time includes waiting for a core; the CPU time is what the analysis costs.
  std::printf("events %llu, runs %d: wall median %.2f s (min %.2f, max %.2f) = %.1f M events/s; CPU median %.2f s = %.1f M events/s per core\n",
              (unsigned long long)events, reps, med, secs.front(), secs.back(), double(events) / med / 1e6, cmed,
              double(events) / cmed / 1e6);
  std::printf("peak RSS (VmHWM, includes mapped dump pages) %.0f MiB; peak RssAnon (the analyzer's own memory) %.0f MiB (%.1f bytes/event)\n",
              double(status_kb("VmHWM:")) / 1024, double(anon_peak.load()) / 1024, double(anon_peak.load()) * 1024 / double(events));
  return 0;
}
