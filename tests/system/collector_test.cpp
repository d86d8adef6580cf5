// The system collector in real sessions: busy threads' CPU time grows and a sleeper's does not, the
// sleeper's voluntary switches grow, RSS follows a 200 MB allocation, threads the session does not know are
// sampled under their OS thread id, and a missing NVML is one clear note, never a failure.
#include <doctest/doctest.h>

#include <inferscope/scope.hpp>

#include "collect/system/nvml.hpp"
#include "collect/system/sampler.hpp"
#include "dump/reader.hpp"
#include "runtime/runtime.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sys/wait.h>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

using namespace inferscope;
using namespace std::chrono_literals;

namespace {

struct Sample {
  std::string name;
  CounterScope scope;
  uint32_t target;
  uint64_t ts;
  int64_t i;
  double d;
};

struct Loaded {
  std::vector<Sample> samples;
  std::map<std::string, uint32_t> thread_by_name;  // dump thread id
  std::map<uint32_t, uint32_t> os_tid;             // dump thread id -> os tid
  std::string status;
  std::vector<std::pair<std::string, std::string>> process;
  size_t overhead_rounds = 0;
};

std::string temp_dump(const char* tag) {
  return "/tmp/iscope-system-" + std::string(tag) + "-" + std::to_string(::getpid()) + ".iscope";
}

Config base_config(const std::string& out) {
  Config c;
  c.output = out;
  c.sample_period_ms = 10;
  c.cupti = false;
  c.python = false;
  return c;
}

Loaded load(const std::string& path) {
  dump::DumpReader r(path);
  Loaded l;
  for (auto& [k, v] : r.collector_status())
    if (k == "system") l.status = v;
  l.process = r.process_info();
  for (auto& [id, t] : r.threads()) {
    if (!t.name.empty()) l.thread_by_name[t.name] = id;
    l.os_tid[id] = t.os_tid;
  }
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind == RecordKind::kCounter) {
      auto c = dump::load<CounterRecord>(p);
      l.samples.push_back({r.string_at(c.name), c.scope, c.target, c.ts, c.value.i, c.value.d});
    } else if (h.kind == RecordKind::kCollectorOverhead) {
      auto o = dump::load<OverheadRecord>(p);
      if (r.string_at(o.name) == "system_sampler") ++l.overhead_rounds;
    }
  });
  std::remove(path.c_str());
  return l;
}

// Growth (last - first) of a per-thread counter, joining the thread's kThread and kOsThread series.
std::optional<int64_t> thread_growth(const Loaded& l, const std::string& counter, uint32_t dump_id) {
  const uint32_t tid = l.os_tid.at(dump_id);
  std::optional<int64_t> first, last;
  uint64_t first_ts = ~0ull, last_ts = 0;
  for (auto& s : l.samples) {
    if (s.name != counter) continue;
    const bool mine = (s.scope == CounterScope::kThread && s.target == dump_id) ||
                      (s.scope == CounterScope::kOsThread && s.target == tid);
    if (!mine) continue;
    if (s.ts <= first_ts) first_ts = s.ts, first = s.i;
    if (s.ts >= last_ts) last_ts = s.ts, last = s.i;
  }
  if (!first) return std::nullopt;
  return *last - *first;
}

// The samples of a per-thread counter for one thread, its kThread and kOsThread series joined, in time order.
std::vector<const Sample*> thread_series(const Loaded& l, const std::string& counter, uint32_t dump_id) {
  const uint32_t tid = l.os_tid.at(dump_id);
  std::vector<const Sample*> v;
  for (auto& s : l.samples)
    if (s.name == counter && ((s.scope == CounterScope::kThread && s.target == dump_id) ||
                              (s.scope == CounterScope::kOsThread && s.target == tid)))
      v.push_back(&s);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  return v;
}

bool thread_series_monotonic(const Loaded& l, const std::string& counter, uint32_t dump_id) {
  const auto v = thread_series(l, counter, dump_id);
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i]->i < v[i - 1]->i) return false;
  return true;
}

std::optional<int64_t> thread_last(const Loaded& l, const std::string& counter, uint32_t dump_id) {
  const auto v = thread_series(l, counter, dump_id);
  if (v.empty()) return std::nullopt;
  return v.back()->i;
}

std::vector<const Sample*> named(const Loaded& l, const std::string& counter) {
  std::vector<const Sample*> v;
  for (auto& s : l.samples)
    if (s.name == counter) v.push_back(&s);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  return v;
}

void spin_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 1000; ++i) x = x + i;
}

}  // namespace

TEST_CASE("a running thread's run time is exact at every read: never more CPU time than wall time between two") {
  Config c = base_config(temp_dump("exact-run"));
  c.thread_sample_us = 1000;
  REQUIRE(start(c));
  const uint64_t t0 = detail::now();
  const auto w0 = std::chrono::steady_clock::now();
  std::thread spinner([] {
    set_thread_name("spinner");
    spin_for(300ms);
  });
  spinner.join();
  const uint64_t t1 = detail::now();
  const double wall_ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - w0).count());
  REQUIRE(stop());
  Loaded l = load(c.output);
  REQUIRE(l.thread_by_name.count("spinner"));
  const double ns_per_tick = wall_ns / double(t1 - t0);
  std::vector<const Sample*> run;
  for (const Sample* s : named(l, std::string(counter_names::kThreadSchedRunNs)))
    if (s->scope == CounterScope::kThread && s->target == l.thread_by_name["spinner"]) run.push_back(s);
  // Read every millisecond, written as corners: exact, a steady spin is a straight line of few corners; lagging
  // and catching up, a zigzag of hundreds.
  REQUIRE(run.size() >= 2);
  CHECK(run.back()->i - run.front()->i > 30'000'000);  // it spun (some of 300 ms, however loaded the machine)
  // schedstat alone accounts a running thread only at a tick or a switch: read every millisecond it lagged, then
  // credited several milliseconds in one (79 such intervals in this test). The thread's CPU clock is exact: CPU
  // time exceeds wall time only where the sampler itself was preempted between the clock read and its timestamp
  // (once under a loaded sanitizer build), so at most two such intervals are allowed.
  int ahead = 0;
  for (size_t i = 1; i < run.size(); ++i) {
    const double cpu = double(run[i]->i - run[i - 1]->i);
    const double wall = double(run[i]->ts - run[i - 1]->ts) * ns_per_tick;
    if (cpu > wall + 100'000) ++ahead;
  }
  CHECK(ahead <= 2);
}

TEST_CASE("busy threads and a sleeper: found, counted under their dump ids, counters that agree with the kernel's") {
  // What the collector reports must be consistent, however much CPU the scheduler grants: on a loaded 2-core
  // machine (an ASan build beside another build) a thread spinning for 1.5 s got 80 ms, so no assertion here is on
  // an amount of CPU or a number of rounds. The threads stay alive (parked) until the session has stopped: its
  // final round reads every live thread, so each has a last sample taken after its work, whatever the load.
  const std::string out = temp_dump("threads");
  REQUIRE(start(base_config(out)));
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  int done = 0;
  const auto park = [&] {
    std::unique_lock lk(mu);
    ++done;
    cv.notify_all();
    cv.wait(lk, [&] { return stopped; });
  };
  struct Own {
    int64_t cpu_ns = 0;       // the thread's own CPU clock after its work
    int64_t voluntary = 0;    // its own voluntary switches after its work
  };
  Own own[3];
  const auto own_counts = [](Own& o) {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    o.cpu_ns = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    rusage ru{};
    ::getrusage(RUSAGE_THREAD, &ru);
    o.voluntary = ru.ru_nvcsw;
  };
  constexpr auto kRun = 1500ms;
  std::thread b1([&] { set_thread_name("busy-1"); spin_for(kRun); own_counts(own[0]); park(); });
  std::thread b2([&] { set_thread_name("busy-2"); spin_for(kRun); own_counts(own[1]); park(); });
  std::thread sl([&] {
    set_thread_name("sleeper");
    for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(5ms);
    own_counts(own[2]);
    park();
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return done == 3; });
  }
  REQUIRE(stop());
  {
    std::lock_guard lk(mu);
    stopped = true;
  }
  cv.notify_all();
  b1.join();
  b2.join();
  sl.join();
  Loaded l = load(out);
  INFO("status: " << l.status);
  CHECK(l.status.rfind("on:", 0) == 0);

  const int64_t tick_ns = 1'000'000'000 / ::sysconf(_SC_CLK_TCK);
  const char* names[] = {"busy-1", "busy-2", "sleeper"};
  for (int k = 0; k < 3; ++k) {
    const std::string name = names[k];
    INFO(name);
    REQUIRE(l.thread_by_name.count(name));
    const uint32_t id = l.thread_by_name[name];
    // Once the session knows the thread, its samples carry the dump thread id.
    bool by_dump_id = false;
    for (auto& s : l.samples) by_dump_id |= s.scope == CounterScope::kThread && s.target == id;
    CHECK(by_dump_id);
    // Cumulative counters never go back, and the last reading (the final round, after the thread's work) is at
    // least what the thread read of itself then: the same kernel counters, read later.
    for (const char* counter : {"thread.cpu.user_ns", "thread.cpu.system_ns", "thread.sched.run_ns",
                                "thread.ctx.voluntary", "thread.ctx.involuntary"}) {
      INFO(counter);
      CHECK(thread_series_monotonic(l, counter, id));
    }
    const auto user = thread_last(l, "thread.cpu.user_ns", id), sys = thread_last(l, "thread.cpu.system_ns", id);
    REQUIRE(user);
    REQUIRE(sys);
    // /proc's user and system time are the thread's run time split by ticks and each truncated to a whole tick.
    INFO("user + system " << (*user + *sys) << " ns, the thread's own clock " << own[k].cpu_ns << " ns");
    CHECK(*user + *sys >= own[k].cpu_ns - 2 * tick_ns);
    if (const auto run = thread_last(l, "thread.sched.run_ns", id)) {  // absent without CONFIG_SCHED_INFO
      CHECK(*run >= own[k].cpu_ns);  // the same clock as CLOCK_THREAD_CPUTIME_ID, read later
      CHECK(*user + *sys <= *run + tick_ns);
    }
    const auto vol = thread_last(l, "thread.ctx.voluntary", id);
    REQUIRE(vol);
    CHECK(*vol >= own[k].voluntary);
  }
  CHECK(own[2].voluntary >= 100);  // the sleeper's 100 naps, each a voluntary switch: the kernel's count, not ours

  // Process totals: every series of the process's CPU time runs forward, and its last reading holds the threads'
  // time (getrusage of the process is the sum over its threads, the parked ones included).
  for (const char* counter : {"cpu.user_ns", "cpu.system_ns"}) {
    auto v = named(l, counter);
    REQUIRE(!v.empty());
    for (size_t i = 1; i < v.size(); ++i) CHECK(v[i]->i >= v[i - 1]->i);
  }
  const int64_t process_cpu = named(l, "cpu.user_ns").back()->i + named(l, "cpu.system_ns").back()->i;
  CHECK(process_cpu >= own[0].cpu_ns + own[1].cpu_ns - 2 * tick_ns);
  CHECK(!named(l, "thread.state").empty());
  CHECK(!named(l, "load.1m").empty());
}

TEST_CASE("RSS grows when 200 MB are allocated and touched") {
  const std::string out = temp_dump("rss");
  REQUIRE(start(base_config(out)));
  std::this_thread::sleep_for(100ms);
  constexpr size_t kBytes = 200u << 20;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    for (size_t i = 0; i < kBytes; i += 4096) block[i] = static_cast<char>(i);
    std::this_thread::sleep_for(150ms);
    CHECK(block[kBytes - 4096] == static_cast<char>(kBytes - 4096));
  }
  std::this_thread::sleep_for(50ms);
  REQUIRE(stop());
  Loaded l = load(out);
  auto rss = named(l, "mem.rss_bytes");
  REQUIRE(rss.size() >= 2);
  int64_t lo = rss.front()->i, hi = lo;
  for (auto* s : rss) hi = std::max(hi, s->i);
  INFO("rss from " << lo / 1e6 << " MB to " << hi / 1e6 << " MB");
  CHECK(hi - lo >= int64_t(150u << 20));
  auto faults = named(l, "mem.minor_faults");
  REQUIRE(faults.size() >= 2);
  CHECK(faults.back()->i > faults.front()->i);
}

TEST_CASE("no NVML: one clear note in the status, CPU counters still recorded") {
  sys::set_nvml_library_for_testing("/nonexistent/libnvidia-ml.so.1");
  const std::string out = temp_dump("nonvml");
  REQUIRE(start(base_config(out)));
  std::this_thread::sleep_for(60ms);
  REQUIRE(stop());
  sys::set_nvml_library_for_testing("");
  Loaded l = load(out);
  INFO("status: " << l.status);
  CHECK(l.status.rfind("on:", 0) == 0);
  CHECK(l.status.find("no NVML: cannot load /nonexistent/libnvidia-ml.so.1") != std::string::npos);
  for (auto& s : l.samples) CHECK(s.name.rfind("gpu.", 0) != 0);
  CHECK(!named(l, "cpu.user_ns").empty());

  Config c = base_config(temp_dump("nvmloff"));
  c.nvml = false;
  REQUIRE(start(c));
  REQUIRE(stop());
  Loaded off = load(c.output);
  CHECK(off.status.find("GPU counters off (nvml: false)") != std::string::npos);
}

TEST_CASE("NVML: each GPU's PCIe link is written once into process info, under the keys the analyzer reads") {
  sys::set_nvml_library_for_testing(INFERSCOPE_FAKE_NVML);
  const std::string out = temp_dump("fakenvml");
  REQUIRE(start(base_config(out)));
  std::this_thread::sleep_for(30ms);
  REQUIRE(stop());
  sys::set_nvml_library_for_testing("");
  Loaded l = load(out);
  INFO("status: " << l.status);
  CHECK(l.status.find("GPU counters for 2 devices via NVML") != std::string::npos);
  std::map<std::string, std::string> info(l.process.begin(), l.process.end());
  auto at = [&](const std::string& k) { return info.count(k) ? info[k] : std::string("<absent>"); };
  // Device 0 idles at Gen1: the maximum generation is the peak, not the idle one.
  CHECK(at("gpu.0.pcie_gen") == "4");
  CHECK(at("gpu.0.pcie_width") == "16");
  CHECK(at("gpu.0.pcie_gen_current") == "1");
  CHECK(at("gpu.0.pcie_gen_max") == "4");
  // Device 1 trained to x8 in a x16-capable link: the narrower width is the peak.
  CHECK(at("gpu.1.pcie_gen") == "5");
  CHECK(at("gpu.1.pcie_width") == "8");
  CHECK(at("gpu.1.pcie_width_max") == "16");
  CHECK(at("gpu.1.pcie_width_current") == "8");
  // Utilization (GPU and memory) is all the fake samples; the counters it lacks are absent, not failures.
  std::map<uint32_t, int64_t> util;
  for (auto& s : l.samples) {
    if (s.name.rfind("gpu.", 0) != 0) continue;
    CHECK((s.name == "gpu.util_pct" || s.name == "gpu.mem_util_pct"));
    CHECK(s.scope == CounterScope::kDevice);
    if (s.name == "gpu.util_pct") util[s.target] = s.i;
  }
  CHECK(util == std::map<uint32_t, int64_t>{{0, 40}, {1, 41}});
  CHECK(at("gpu.1.nvml_index") == "1");
  CHECK(at("gpu.1.nvml_pci_location") == "0000:3b:00");
  CHECK(at("nvml.device_map") == "nvml_order");
}

namespace {

// The system collector's view of the fake NVML's two devices in one session: process info and, per device
// number of the counters, the utilization (device 0 reads 40 %, device 1 41 %).
struct DeviceView {
  std::map<std::string, std::string> info;
  std::map<uint32_t, int64_t> util;
};

DeviceView fake_nvml_session(const char* tag) {
  sys::set_nvml_library_for_testing(INFERSCOPE_FAKE_NVML);
  const std::string out = temp_dump(tag);
  REQUIRE(start(base_config(out)));
  std::this_thread::sleep_for(30ms);
  REQUIRE(stop());
  sys::set_nvml_library_for_testing("");
  Loaded l = load(out);
  DeviceView v;
  for (auto& [k, val] : l.process) v.info[k] = val;  // later values win
  for (auto& s : l.samples)
    if (s.name == "gpu.util_pct") v.util[s.target] = s.i;
  ::unlink(out.c_str());
  return v;
}

}  // namespace

TEST_CASE("NVML devices get CUDA's numbers: CUDA_VISIBLE_DEVICES picks and reorders, another process's GPU is not sampled") {
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  DeviceView v = fake_nvml_session("visible1");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  // CUDA's device 0 is NVML's device 1 (the Gen5 x8 one); NVML's device 0 belongs to someone else.
  CHECK(v.util == std::map<uint32_t, int64_t>{{0, 41}});
  CHECK(v.info["gpu.0.nvml_index"] == "1");
  CHECK(v.info["gpu.0.pcie_gen"] == "5");
  CHECK(v.info["gpu.0.pcie_width"] == "8");
  CHECK(v.info.count("gpu.1.pcie_gen") == 0);
  CHECK(v.info["nvml.device_map"] == "CUDA_VISIBLE_DEVICES");

  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa", 1);  // UUID prefixes, in CUDA's order
  v = fake_nvml_session("visibleuuid");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  CHECK(v.util == std::map<uint32_t, int64_t>{{0, 41}, {1, 40}});
  CHECK(v.info["gpu.0.pcie_gen"] == "5");
  CHECK(v.info["gpu.1.pcie_gen"] == "4");
}

TEST_CASE("once the GPU collector publishes CUDA's PCI locations, they decide the numbering") {
  // As if CUDA saw only the device at bus 0x3b (e.g. a container given one GPU, no CUDA_VISIBLE_DEVICES).
  runtime::set_cuda_device_locations({"0000:3b:00"});
  DeviceView v = fake_nvml_session("bylocation");
  runtime::set_cuda_device_locations({});
  CHECK(v.util == std::map<uint32_t, int64_t>{{0, 41}});
  CHECK(v.info["gpu.0.nvml_index"] == "1");
  CHECK(v.info["gpu.0.nvml_pci_location"] == "0000:3b:00");
  CHECK(v.info["gpu.0.pcie_gen"] == "5");
  CHECK(v.info["nvml.device_map"] == "pci_location");
}

TEST_CASE("map_nvml_to_cuda follows CUDA's reading of CUDA_VISIBLE_DEVICES and prefers PCI locations") {
  const std::vector<std::string> loc = {"0000:19:00", "0000:3b:00", "0000:5d:00"};
  const std::vector<std::string> uuid = {"GPU-aaaa", "GPU-abbb", "GPU-cccc"};
  using V = std::vector<int>;
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, nullptr).cuda == V{0, 1, 2});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, nullptr).source == "nvml_order");
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "0").source == "CUDA_VISIBLE_DEVICES");
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {"0000:19:00"}, "1").source == "pci_location");
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "2,0").cuda == V{1, -1, 0});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, " 1 ").cuda == V{-1, 0, -1});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "").cuda == V{-1, -1, -1});  // no device visible
  // CUDA stops at the first entry that names no device, a repeated one, or a MIG instance.
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "1,7,0").cuda == V{-1, 0, -1});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "1,1,0").cuda == V{-1, 0, -1});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "0,MIG-xyz,1").cuda == V{0, -1, -1});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "-1").cuda == V{-1, -1, -1});
  // UUID prefixes: one that fits two devices names none.
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "GPU-c,GPU-aa").cuda == V{1, -1, 0});
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {}, "GPU-a").cuda == V{-1, -1, -1});
  // PCI locations win over the environment; an NVML device CUDA does not see gets -1.
  CHECK(sys::map_nvml_to_cuda(loc, uuid, {"0000:5d:00", "0000:19:00"}, "1").cuda == V{1, -1, 0});
  // NVML that gives no location at all: the environment again.
  CHECK(sys::map_nvml_to_cuda({"", "", ""}, uuid, {"0000:5d:00"}, "1").cuda == V{-1, 0, -1});
}

TEST_CASE("effective_pcie_link: maximum generation, narrower width, nothing when half is unknown") {
  sys::PcieLink l;
  CHECK_FALSE(sys::effective_pcie_link(l));
  l.max_gen = 5;
  CHECK_FALSE(sys::effective_pcie_link(l));
  l.cur_width = 16;
  CHECK(sys::effective_pcie_link(l) == std::make_pair(5u, 16u));
  l.max_width = 8;
  l.cur_gen = 2;
  CHECK(sys::effective_pcie_link(l) == std::make_pair(5u, 8u));
  l.max_gen.reset();  // an older driver without the max query: the current generation is all there is
  CHECK(sys::effective_pcie_link(l) == std::make_pair(2u, 8u));
}

TEST_CASE("Nvml::open names the library it could not load") {
  sys::Nvml n;
  std::string err = n.open("/nonexistent/libnvidia-ml.so.1");
  CHECK(err.find("cannot load /nonexistent/libnvidia-ml.so.1") != std::string::npos);
  CHECK_FALSE(n.is_open());
  CHECK(n.device_count() == 0);
  CHECK_FALSE(n.sample(0).util_pct);
}

TEST_CASE("threads the session does not know are sampled under their OS thread id and named") {
  const std::string out = temp_dump("osthread");
  REQUIRE(start(base_config(out)));
  std::atomic<uint32_t> tid{0};
  std::thread plain([&] {
    pthread_setname_np(pthread_self(), "plain-worker");
    tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    spin_for(200ms);
  });
  plain.join();
  REQUIRE(stop());
  Loaded l = load(out);
  bool sampled = false;
  for (auto& s : l.samples) sampled |= s.scope == CounterScope::kOsThread && s.target == tid.load();
  CHECK(sampled);
  std::string last_name;  // later values for a key win
  for (auto& [k, v] : l.process)
    if (k == "os_thread." + std::to_string(tid.load()) + ".name") last_name = v;
  CHECK(last_name == "plain-worker");
}

TEST_CASE("perf sampling: per-thread cpu-clock counters, or one note saying why not") {
  Config c = base_config(temp_dump("perf"));
  c.perf_sampling = true;
  REQUIRE(start(c));
  std::thread b([&] { set_thread_name("perf-busy"); spin_for(400ms); });
  b.join();
  REQUIRE(stop());
  Loaded l = load(c.output);
  INFO("status: " << l.status);
  if (l.status.find("perf cpu-clock per thread") != std::string::npos) {
    auto g = thread_growth(l, "perf.task_clock_ns", l.thread_by_name.at("perf-busy"));
    REQUIRE(g);
    CHECK(*g >= 40'000'000);  // a tenth of 400 ms
  } else {
    CHECK(l.status.find("perf sampling unavailable: perf_event_open: ") != std::string::npos);
  }
}

TEST_CASE("malformed /proc files are skipped with a reason, never a crash") {
  char dir[] = "/tmp/iscope-fakeproc-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string root = dir;
  ::mkdir((root + "/self").c_str(), 0755);
  ::mkdir((root + "/self/task").c_str(), 0755);
  ::mkdir((root + "/self/task/77").c_str(), 0755);
  auto put = [](const std::string& p, const std::string& text) { std::ofstream(p) << text; };
  put(root + "/self/statm", "garbage\n");
  put(root + "/self/task/77/stat", "77 (x) R 1 2\n");
  put(root + "/self/task/77/status", "Name: x\n");
  put(root + "/self/task/77/schedstat", "1 2\n");
  put(root + "/loadavg", "not a loadavg\n");
  put(root + "/stat", "intr 1 2 3\n");
  put(root + "/meminfo", "\0\0\0");
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = root;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  s.round(false);
  s.round(true);
  CHECK(s.skipped_samples() >= 6);
  CHECK(!s.last_error().empty());
  const auto& n = sys::CounterNames::get();
  for (auto& r : got) {
    CHECK(r.name != n.mem_rss_bytes);
    CHECK(r.name != n.thread_cpu_user_ns);
    CHECK(r.name != n.load_1m);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("change-only writes: unchanged values wait for the keep-alive, the final round writes all") {
  char dir[] = "/tmp/iscope-fakeproc-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string root = dir;
  std::filesystem::create_directories(root + "/self/task/77");
  auto put = [](const std::string& p, const std::string& text) { std::ofstream(p) << text; };
  const std::string stat_a =
      "77 (fake) S 1 1 1 0 -1 0 10 0 0 0 100 20 0 0 20 0 1 0 5 1000 50 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0\n";
  put(root + "/self/statm", "1000 500 10 1 0 100 0\n");
  put(root + "/self/task/77/stat", stat_a);
  put(root + "/self/task/77/status", "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t1\n");
  put(root + "/self/task/77/schedstat", "1000 200 3\n");
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = root;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  const auto& n = sys::CounterNames::get();
  auto count = [&](uint32_t name) {
    return std::count_if(got.begin(), got.end(), [&](const CounterRecord& r) { return r.name == name; });
  };
  auto last = [&](uint32_t name) {
    for (auto it = got.rbegin(); it != got.rend(); ++it)
      if (it->name == name) return *it;
    FAIL("no sample of " << name);
    return CounterRecord{};
  };

  s.round(false);
  CHECK(count(n.mem_rss_bytes) == 1);
  CHECK(last(n.mem_rss_bytes).value.i == 500 * ::sysconf(_SC_PAGESIZE));
  CHECK(count(n.thread_cpu_user_ns) == 1);
  const CounterRecord user = last(n.thread_cpu_user_ns);
  CHECK(user.scope == CounterScope::kOsThread);  // no lookup: the thread is not known to a session
  CHECK(user.target == 77);
  CHECK(user.value.i == int64_t(100 * 1e9 / ::sysconf(_SC_CLK_TCK)));
  CHECK(last(n.thread_state).value.i == 'S');
  CHECK(last(n.thread_ctx_voluntary).value.i == 5);

  got.clear();
  s.round(false);  // nothing changed
  CHECK(count(n.mem_rss_bytes) == 0);
  CHECK(count(n.thread_cpu_user_ns) == 0);
  CHECK(count(n.thread_sched_run_ns) == 0);

  // stat moved but schedstat did not: the thread did not run, so stat is not re-read before the keep-alive.
  put(root + "/self/task/77/stat", "77 (fake) S 1 1 1 0 -1 0 10 0 0 0 900 20 0 0 20 0 1 0 5 1000 50\n");
  put(root + "/self/statm", "1000 700 10 1 0 100 0\n");
  got.clear();
  s.round(false);
  CHECK(count(n.thread_cpu_user_ns) == 0);
  REQUIRE(count(n.mem_rss_bytes) == 1);
  CHECK(last(n.mem_rss_bytes).value.i == 700 * ::sysconf(_SC_PAGESIZE));

  // Once schedstat moves, the thread's files are read again.
  put(root + "/self/task/77/schedstat", "5000 200 4\n");
  got.clear();
  s.round(false);
  REQUIRE(count(n.thread_cpu_user_ns) == 1);
  CHECK(last(n.thread_cpu_user_ns).value.i == int64_t(900 * 1e9 / ::sysconf(_SC_CLK_TCK)));

  got.clear();
  s.round(true);  // the final round writes every value
  CHECK(count(n.mem_rss_bytes) == 1);
  CHECK(count(n.thread_cpu_user_ns) == 1);
  CHECK(count(n.thread_ctx_voluntary) == 1);
  // schedstat goes through its corner filter: the final round writes what it held back, and the last value.
  CHECK(count(n.thread_sched_run_ns) >= 1);
  CHECK(last(n.thread_sched_run_ns).value.i == 5000);
  CHECK(s.skipped_samples() == 0);
  std::filesystem::remove_all(root);
}

namespace {

struct FakeProc {
  std::string root;
  FakeProc() {
    char dir[] = "/tmp/iscope-fakeproc-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    root = dir;
    put("self/statm", "1000 500 10 1 0 100 0\n");
  }
  ~FakeProc() { std::filesystem::remove_all(root); }
  void put(const std::string& rel, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }
  // A task with `ticks` of user time, `run_ns` on a CPU and 2 involuntary switches.
  void task(uint32_t tid, uint64_t ticks, uint64_t run_ns) const {
    const std::string d = "self/task/" + std::to_string(tid) + "/";
    put(d + "stat", std::to_string(tid) + " (t) R 1 1 1 0 -1 0 10 0 0 0 " + std::to_string(ticks) +
                        " 0 0 0 20 0 1 0 5 1000 50\n");
    put(d + "status", "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2\n");
    put(d + "schedstat", std::to_string(run_ns) + " 300 7\n");
  }
};

}  // namespace

TEST_CASE("a thread born during the session starts its counters from 0 at the round before it was seen") {
  FakeProc p;
  p.task(77, 100, 5'000'000);
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = p.root;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  const auto& n = sys::CounterNames::get();
  auto of = [&](uint32_t tid, uint32_t name) {
    std::vector<CounterRecord> v;
    for (auto& r : got)
      if (r.target == tid && r.name == name) v.push_back(r);
    return v;
  };
  s.round(false);
  // There at the first round: its counters start where they stand (the session's start), no 0 before them.
  REQUIRE(of(77, n.thread_sched_run_ns).size() == 1);
  CHECK(of(77, n.thread_sched_run_ns)[0].value.i == 5'000'000);
  const uint64_t first_round = of(77, n.thread_sched_run_ns)[0].ts;

  p.task(88, 3, 48'700'000);  // born, ran 48.7 ms, seen by the next round
  s.round(false);
  s.round(true);  // schedstat's corner filter holds its latest reading back until a corner or the final round
  for (uint32_t name : {n.thread_sched_run_ns, n.thread_sched_wait_ns, n.thread_cpu_user_ns, n.thread_ctx_involuntary}) {
    CAPTURE(name);
    auto v = of(88, name);
    REQUIRE(v.size() >= 2);
    CHECK(v[0].value.i == 0);
    CHECK(v[0].ts <= first_round);  // the listing before: the thread did not exist then
    CHECK(v[1].ts > first_round);
    CHECK(v[0].scope == CounterScope::kOsThread);
  }
  CHECK(of(88, n.thread_sched_run_ns).back().value.i == 48'700'000);
}

TEST_CASE("a thread's CPU counters read as it exits, under its dump thread id") {
  FakeProc p;
  p.task(99, 4, 48'700'000);
  std::vector<CounterRecord> got;
  sys::sample_thread_at_exit(p.root + "/self/task/99", 12, [&](const CounterRecord& r) { got.push_back(r); });
  const auto& n = sys::CounterNames::get();
  std::map<uint32_t, int64_t> v;
  for (auto& r : got) {
    CHECK(r.scope == CounterScope::kThread);
    CHECK(r.target == 12);
    v[r.name] = r.value.i;
  }
  CHECK(v.at(n.thread_sched_run_ns) == 48'700'000);
  CHECK(v.at(n.thread_sched_wait_ns) == 300);
  CHECK(v.at(n.thread_cpu_user_ns) == int64_t(4 * 1e9 / ::sysconf(_SC_CLK_TCK)));
  CHECK(v.at(n.thread_cpu_system_ns) == 0);
  got.clear();
  sys::sample_thread_at_exit(p.root + "/self/task/100", 12, [&](const CounterRecord& r) { got.push_back(r); });
  CHECK(got.empty());  // gone already: nothing, no error
}

TEST_CASE("a thread that lives less than a sampling period still has its CPU time, from its exit") {
  Config c = base_config(temp_dump("short"));
  c.sample_period_ms = 5000;  // the first round at start, the next one at stop
  REQUIRE(start(c));
  std::this_thread::sleep_for(50ms);  // after the first round
  std::thread t([] {
    set_thread_name("short-lived");
    // 60 ms of CPU time, however loaded the machine: the check below does not depend on the scheduler.
    timespec cpu{};
    do {
      spin_for(1ms);
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    } while (cpu.tv_sec == 0 && cpu.tv_nsec < 60'000'000);
  });
  t.join();
  REQUIRE(stop());
  Loaded l = load(c.output);
  REQUIRE(l.thread_by_name.count("short-lived"));
  const uint32_t id = l.thread_by_name["short-lived"];
  std::map<std::string, int64_t> last;
  for (auto& s : l.samples)
    if (s.scope == CounterScope::kThread && s.target == id) last[s.name] = s.i;
  INFO("schedstat " << (std::filesystem::exists("/proc/self/schedstat") ? "present" : "absent"));
  if (std::filesystem::exists("/proc/self/schedstat")) {
    REQUIRE(last.count("thread.sched.run_ns"));
    CHECK(last["thread.sched.run_ns"] >= 59'000'000);  // schedstat's run time is the thread's CPU clock
    CHECK(last["thread.sched.run_ns"] <= 5'000'000'000);
  } else {
    CHECK(last.count("thread.cpu.user_ns"));
  }
}

TEST_CASE("child processes and their children are found and sampled under their pid, and forgotten when gone") {
  FakeProc p;
  p.task(77, 100, 5'000'000);
  p.put("self/task/77/children", "4711 \n");
  auto child = [&](uint32_t pid, const char* comm, uint64_t ticks, uint64_t run_ns, const char* kids) {
    const std::string d = std::to_string(pid) + "/";
    p.put(d + "stat", std::to_string(pid) + " (" + comm + ") R 1 1 1 0 -1 0 10 0 0 0 " + std::to_string(ticks) +
                          " 2 0 0 20 0 1 0 5 1000 50\n");
    p.put(d + "schedstat", std::to_string(run_ns) + " 300 7\n");
    p.put(d + "cmdline", std::string("python3\0-c\0work", 16));
    p.put(d + "task/" + std::to_string(pid) + "/children", kids);
  };
  child(4711, "pt_data_worker", 50, 400'000'000, "4712");
  child(4712, "grandchild", 7, 70'000'000, "");
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = p.root;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  const auto& n = sys::CounterNames::get();
  auto last_of = [&](uint32_t pid, uint32_t name) -> std::optional<int64_t> {
    std::optional<int64_t> v;
    for (auto& r : got)
      if (r.scope == CounterScope::kChildProcess && r.target == pid && r.name == name) v = r.value.i;
    return v;
  };
  s.round(false);  // the first round discovers them
  s.round(true);
  CHECK(last_of(4711, n.child_sched_run_ns) == 400'000'000);
  CHECK(last_of(4711, n.child_cpu_user_ns) == int64_t(50 * 1e9 / ::sysconf(_SC_CLK_TCK)));
  CHECK(last_of(4712, n.child_sched_run_ns) == 70'000'000);  // a child's child, through its main thread
  std::optional<int64_t> count;
  for (auto& r : got)
    if (r.name == n.children) count = r.value.i;
  CHECK(count == 2);

  // 4712 exits: the next discovery (every ~100 ms of rounds) forgets it; 4711 is still sampled.
  std::filesystem::remove_all(p.root + "/4712");
  p.put("4711/task/4711/children", "");
  p.put("4711/schedstat", "450000000 300 8\n");
  for (int i = 0; i < 11; ++i) s.round(false);
  got.clear();  // 4712's held-back reading was written as it was forgotten; nothing of it after that
  s.round(true);
  CHECK_FALSE(last_of(4712, n.child_sched_run_ns));
  CHECK(last_of(4711, n.child_sched_run_ns) == 450'000'000);
  count.reset();
  for (auto& r : got)
    if (r.name == n.children) count = r.value.i;
  CHECK(count == 1);
  CHECK(s.skipped_samples() == 0);
}

TEST_CASE("fast rounds read busy threads between rounds and write only where their rate changes") {
  FakeProc p;
  p.task(77, 100, 1'000'000);
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = p.root;
  o.period_ms = 10;
  o.thread_sample_us = 1000;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  CHECK(s.fast_every_us() == 1000);
  const auto& n = sys::CounterNames::get();
  auto runs = [&] {
    std::vector<CounterRecord> v;
    for (auto& r : got)
      if (r.name == n.thread_sched_run_ns && r.target == 77) v.push_back(r);
    return v;
  };
  s.round(false);
  p.put("self/task/77/schedstat", "2000000 300 8\n");  // it ran since: a fast round reads it
  s.round(false);                                           // moved: in the fast tier for ~100 ms
  got.clear();
  // Twenty fast reads of a thread that does not run (its run time stays): a flat line, nothing written. (A steady
  // non-zero rate is a line too: corner_filter_test checks that on its own clock, free of this file's write times.)
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(200us);
    s.fast_round();
  }
  CHECK(runs().size() <= 1);  // at most the corner where the rounds' rate gave way to the flat line
  // A burst of 5 ms, then still again: the corners around it are written.
  const size_t before = runs().size();
  p.put("self/task/77/schedstat", "7000000 300 10\n");
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(200us);
    s.fast_round();
  }
  CHECK(runs().size() >= before + 2);
  CHECK(runs().back().value.i == 7'000'000);

  sys::SamplerOptions off = o;
  off.thread_sample_us = 0;
  sys::SystemSampler s2(off, [](const CounterRecord&) {}, nullptr);
  s2.open();
  CHECK(s2.fast_every_us() == 0);
  off.thread_sample_us = 20000;  // not shorter than the period: rounds only
  sys::SystemSampler s3(off, [](const CounterRecord&) {}, nullptr);
  s3.open();
  CHECK(s3.fast_every_us() == 0);
}

TEST_CASE("a thread's first read does not put it in the fast rounds: only a round that sees it move does") {
  FakeProc p;
  p.task(77, 100, 1'000'000);
  sys::SamplerOptions o;
  o.nvml = false;
  o.proc_root = p.root;
  o.period_ms = 10;
  o.thread_sample_us = 1000;
  std::vector<CounterRecord> got;
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  s.open();
  const auto& n = sys::CounterNames::get();
  auto runs = [&] {
    size_t c = 0;
    for (auto& r : got) c += r.name == n.thread_sched_run_ns && r.target == 77;
    return c;
  };
  s.round(false);  // the first read: nothing to compare with
  got.clear();
  // It runs now, but no round has seen it move: the fast rounds leave it to the next round.
  for (uint64_t i = 1; i <= 5; ++i) {
    p.put("self/task/77/schedstat", std::to_string(1'000'000 + i * 900'000) + " 300 " + std::to_string(7 + i) + "\n");
    s.fast_round();
  }
  CHECK(runs() == 0);
  s.round(false);  // sees it move: from now on the fast rounds read it
  got.clear();
  for (uint64_t i = 1; i <= 5; ++i) {  // a burst, then still: its corners are written
    p.put("self/task/77/schedstat", std::to_string(5'500'000 + (i < 3 ? i : 3) * 900'000) + " 300 20\n");
    std::this_thread::sleep_for(200us);
    s.fast_round();
  }
  CHECK(runs() >= 1);
}

TEST_CASE("what a known thread is blocked in: a sleep, a lock, a timed wait; and a child process's CPU time") {
  Config c = base_config(temp_dump("blocked"));
  c.thread_sample_us = 1000;
  REQUIRE(start(c));
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::thread sleeper([] {
    set_thread_name("sleeper");
    std::this_thread::sleep_for(300ms);
  });
  std::thread waiter([&] {
    set_thread_name("waiter");
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return go; });
  });
  std::thread timed_waiter([&] {  // a wait with a deadline, as CPython waits for the GIL
    set_thread_name("timed-waiter");
    std::unique_lock lk(mu);
    cv.wait_for(lk, 10s, [&] { return go; });
  });
  const pid_t child = ::fork();
  if (child == 0) {  // spins 300 ms of CPU time and leaves without running the parent's atexit work
    timespec cpu{};
    do {
      spin_for(1ms);
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    } while (cpu.tv_sec == 0 && cpu.tv_nsec < 300'000'000);
    ::_exit(0);
  }
  REQUIRE(child > 0);
  int status = 0;
  // Stop while the child still runs (its last samples are taken by the rounds before it exits).
  std::this_thread::sleep_for(250ms);
  sleeper.join();
  {
    std::lock_guard lk(mu);
    go = true;
  }
  cv.notify_all();
  waiter.join();
  timed_waiter.join();
  REQUIRE(stop());
  ::waitpid(child, &status, 0);
  Loaded l = load(c.output);
  REQUIRE(l.thread_by_name.count("sleeper"));
  REQUIRE(l.thread_by_name.count("waiter"));
  REQUIRE(l.thread_by_name.count("timed-waiter"));
  auto saw = [&](const std::string& thread, inferscope::BlockedIn b) {
    for (auto& s : l.samples)
      if (s.name == counter_names::kThreadBlockedIn && s.scope == CounterScope::kThread &&
          s.target == l.thread_by_name[thread] && s.i == int64_t(b))
        return true;
    return false;
  };
  CHECK(saw("sleeper", inferscope::BlockedIn::kSleep));
  CHECK(saw("waiter", inferscope::BlockedIn::kLockUntimed));
  CHECK(saw("timed-waiter", inferscope::BlockedIn::kLockTimed));
  CHECK_FALSE(saw("waiter", inferscope::BlockedIn::kLockTimed));
  int64_t child_run = 0;
  for (auto& s : l.samples)
    if (s.name == counter_names::kChildSchedRunNs && s.scope == CounterScope::kChildProcess &&
        s.target == uint32_t(child))
      child_run = std::max(child_run, s.i);
  // Sampled while it spun: some of its 300 ms of CPU. Not "at least 100 ms": under a loaded ASan ctest the child
  // had run 79 ms when the last round before stop() read it.
  CHECK(child_run > 10'000'000);
  bool named = false;
  for (auto& [k, v] : l.process) named |= k == "child." + std::to_string(child) + ".parent";
  CHECK(named);
}
