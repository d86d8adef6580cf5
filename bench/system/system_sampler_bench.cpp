// Cost of the system sampler, printed (never asserted):
//   direct:  SystemSampler::round() in a loop at the period, on the bench thread: median and mean µs per
//            round, and the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) as a share of one CPU;
//   session: a real session with the collector's thread; per-round cost from the dump's OverheadRecords;
//   fast tier: sessions at 10 ms rounds with and without thread_sample_us (reads between rounds).
// The process holds --threads extra threads, since per-thread files dominate the cost: "idle" threads wake
// every 500 ms (most rounds skip them after one schedstat read), "active" ones every 2 ms (every round reads
// all their files).
//
//   system_sampler_bench [--seconds 2] [--threads 8] [--repeats 3]
#include <inferscope/scope.hpp>

#include "collect/system/sampler.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

using namespace inferscope;
using Clock = std::chrono::steady_clock;

namespace {

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

struct Result {
  double median_us = 0, mean_us = 0, cpu_share_pct = 0, records_per_round = 0;
  size_t rounds = 0;
};

Result direct(uint32_t period_ms, double seconds) {
  sys::SamplerOptions o;
  o.period_ms = period_ms;
  uint64_t records = 0;
  sys::SystemSampler s(o, [&](const CounterRecord&) { ++records; }, nullptr);
  s.open();
  std::vector<double> cost;
  const double cpu0 = thread_cpu_ns();
  const auto t0 = Clock::now();
  auto next = t0;
  while (Clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    const auto a = Clock::now();
    s.round(false);
    cost.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
    next += std::chrono::milliseconds(period_ms);
    std::this_thread::sleep_until(next);
  }
  const double wall = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  Result r;
  r.rounds = cost.size();
  r.median_us = median(cost);
  r.mean_us = mean(cost);
  r.cpu_share_pct = 100.0 * (thread_cpu_ns() - cpu0) / wall;
  r.records_per_round = double(records) / double(cost.size());
  return r;
}

// A real session; with thread_sample_us, the busy and known threads are also read between rounds (the fast tier):
// its time (OverheadRecords "system_sampler_threads", one per round) counts into the CPU share and records.
Result in_session(uint32_t period_ms, double seconds, uint32_t thread_sample_us = 0) {
  Config c;
  c.output = "/tmp/iscope-system-bench-" + std::to_string(::getpid()) + ".iscope";
  c.sample_period_ms = period_ms;
  c.thread_sample_us = thread_sample_us;
  c.cupti = false;
  c.python = false;
  Result r;
  if (!start(c)) return r;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop();
  dump::DumpReader d(c.output);
  dump::ClockModel clock(d.calibration());
  std::vector<double> cost;
  double fast_us = 0;
  uint64_t counters = 0, first = ~0ull, last = 0;
  d.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind == RecordKind::kCounter) ++counters;
    if (h.kind != RecordKind::kCollectorOverhead) return;
    auto o = dump::load<OverheadRecord>(p);
    const std::string name = d.string_at(o.name);
    if (name == "system_sampler_threads") fast_us += clock.duration_ns(o.end - o.start) / 1e3;
    if (name != "system_sampler") return;
    cost.push_back(clock.duration_ns(o.end - o.start) / 1e3);
    first = std::min(first, o.start);
    last = std::max(last, o.end);
  });
  std::remove(c.output.c_str());
  r.rounds = cost.size();
  r.median_us = median(cost);
  r.mean_us = mean(cost);
  const double span_us = last > first ? clock.duration_ns(last - first) / 1e3 : 0;
  r.cpu_share_pct = span_us > 0 ? 100.0 * (mean(cost) * double(cost.size()) + fast_us) / span_us : 0;
  r.records_per_round = cost.empty() ? 0 : double(counters) / double(cost.size());
  return r;
}

}  // namespace

// What the fast tier reads per known thread besides schedstat: its CPU-time clock (exact run time) and its
// /proc/self/task/<tid>/syscall (what it is blocked in), for a thread that sleeps and one that spins. Median µs
// per call over 2000 calls.
void per_thread_read_costs() {
  std::atomic<bool> stop{false};
  std::atomic<pid_t> sleeper_tid{0}, spinner_tid{0};
  std::thread sleeper([&] {
    sleeper_tid = ::gettid();
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  std::thread spinner([&] {
    spinner_tid = ::gettid();
    volatile uint64_t x = 0;
    while (!stop) x = x + 1;
  });
  while (!sleeper_tid || !spinner_tid) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto [who, tid] : {std::pair{"sleeping", sleeper_tid.load()}, std::pair{"spinning", spinner_tid.load()}}) {
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/syscall";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const clockid_t clock = static_cast<clockid_t>((~uint32_t(tid) << 3) | 6u);
    std::vector<double> syscall_us, clock_us;
    char buf[256];
    for (int i = 0; i < 2000; ++i) {
      auto a = Clock::now();
      if (fd >= 0) [[maybe_unused]] ssize_t n = ::pread(fd, buf, sizeof buf, 0);
      auto b = Clock::now();
      timespec ts{};
      ::clock_gettime(clock, &ts);
      auto c = Clock::now();
      syscall_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
      clock_us.push_back(std::chrono::duration<double, std::micro>(c - b).count());
    }
    if (fd >= 0) ::close(fd);
    std::printf("known thread %s: syscall file %.2f us, CPU-time clock %.2f us (median of 2000)\n", who,
                median(syscall_us), median(clock_us));
  }
  stop = true;
  sleeper.join();
  spinner.join();
}

int main(int argc, char** argv) {
  double seconds = 2;
  int threads = 8, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  std::atomic<bool> quit{false};
  std::atomic<int> wake_ms{500};
  std::vector<std::thread> sleepers;
  for (int i = 0; i < threads; ++i)
    sleepers.emplace_back([&] {
      while (!quit) std::this_thread::sleep_for(std::chrono::milliseconds(wake_ms.load()));
    });
  {
    sys::SamplerOptions o;
    sys::SystemSampler probe(o, [](const CounterRecord&) {}, nullptr);
    std::printf("sampler sources: %s\n", probe.open().c_str());
  }
  {  // NVML alone: one Nvml::sample() (all GPU counters of one device)
    sys::Nvml nvml;
    if (std::string err = nvml.open(); err.empty()) {
      std::vector<double> us;
      for (int i = 0; i < 200; ++i) {
        const auto a = Clock::now();
        nvml.sample(0);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
      }
      std::printf("NVML sample of device 0 (%s), all parts back to back: median %.1f us over 200\n",
                  nvml.device_name(0).c_str(), median(us));
      // Each query alone, 10 ms apart as in the sampler (NVML answers repeated calls from a cache).
      const std::pair<const char*, uint32_t> parts[] = {
          {"utilization", sys::kGpuUtil}, {"memory", sys::kGpuMemory},     {"sm_clock", sys::kGpuClock},
          {"throttle", sys::kGpuThrottle}, {"temperature", sys::kGpuTemp}, {"power", sys::kGpuPower},
          {"pcie_bytes", sys::kGpuPcie},   {"all", sys::kGpuAll}};
      for (auto& [name, bits] : parts) {
        std::vector<double> v;
        for (int i = 0; i < 30; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          const auto a = Clock::now();
          nvml.sample(0, bits);
          v.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
        }
        std::printf("  NVML %-12s every 10 ms: median %8.1f us\n", name, median(v));
      }
    }
  }
  per_thread_read_costs();
  std::printf("process threads: main + %d others; %d repeats of %.1f s each; medians over repeats\n", threads,
              repeats, seconds);
  std::printf("%-7s %-8s %-7s %8s %12s %10s %14s %16s\n", "threads", "mode", "period", "rounds", "median_us",
              "mean_us", "cpu_share_%", "counters/round");
  for (int active = 0; active < 2; ++active)
  for (uint32_t period : {10u, 1u}) {
    wake_ms = active ? 2 : 500;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // every sleeper picked up the new period
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<double> med, avg, share, recs, rounds;
      for (int k = 0; k < repeats; ++k) {
        Result r = mode == 0 ? direct(period, seconds) : in_session(period, seconds);
        med.push_back(r.median_us);
        avg.push_back(r.mean_us);
        share.push_back(r.cpu_share_pct);
        recs.push_back(r.records_per_round);
        rounds.push_back(double(r.rounds));
      }
      std::printf("%-7s %-8s %4u ms %8.0f %12.1f %10.1f %14.2f %16.1f\n", active ? "active" : "idle",
                  mode == 0 ? "direct" : "session", period,
                  median(rounds), median(med), median(avg), median(share), median(recs));
    }
  }
  // The fast tier (thread_sample_us = 1000) beside plain 10 ms rounds, in sessions: the sampler thread's CPU share
  // and the counters written per second, the threads idle and then busy.
  std::printf("\nfast tier: sessions at 10 ms rounds, known and busy threads read every thread_sample_us between them\n");
  std::printf("%-7s %-18s %14s %14s\n", "threads", "thread_sample_us", "cpu_share_%", "counters/s");
  for (int active = 0; active < 2; ++active)
    for (uint32_t us : {0u, 1000u}) {
      wake_ms = active ? 2 : 500;
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      std::vector<double> share, per_s;
      for (int k = 0; k < repeats; ++k) {
        const Result r = in_session(10, seconds, us);
        share.push_back(r.cpu_share_pct);
        per_s.push_back(r.records_per_round * double(r.rounds) / seconds);
      }
      std::printf("%-7s %-18u %14.2f %14.0f\n", active ? "active" : "idle", us, median(share), median(per_s));
    }
  quit = true;
  for (auto& t : sleepers) t.join();
  return 0;
}
