// The system sampler's parts, switched for measurement (inferscope_system_set_parts): the specification's parser,
// each part's effect on a sampler reading a made-up /proc and the fake NVML, and the collector's entry point in a
// real session (its answers, and that "none" stops the rounds until the parts come back).
#include <doctest/doctest.h>

#include <inferscope/scope.hpp>

#include "collect/system/sampler.hpp"
#include "collect/system/sampler_parts.hpp"
#include "dump/reader.hpp"
#include "runtime/runtime.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

using namespace inferscope;
using namespace std::chrono_literals;

extern "C" int inferscope_system_set_parts(const char* spec);

TEST_CASE("parse_sampler_parts: names, all, none, tick_us, and what it refuses") {
  std::string err;
  auto p = sys::parse_sampler_parts("rounds, nvml", &err);
  REQUIRE(p);
  CHECK(p->mask == (sys::kPartRounds | sys::kPartNvml));
  CHECK(p->tick_us == 0);
  CHECK(sys::parse_sampler_parts("all", &err)->mask == sys::kAllSamplerParts);
  CHECK(sys::parse_sampler_parts("none", &err)->mask == 0);
  p = sys::parse_sampler_parts("rounds,ticks,tick_us=4000", &err);
  REQUIRE(p);
  CHECK(p->mask == (sys::kPartRounds | sys::kPartTicks));
  CHECK(p->tick_us == 4000);
  CHECK(sys::sampler_parts_text(sys::kAllSamplerParts) == "rounds,nvml,ticks,blocked_in,exact_clock");
  CHECK(sys::sampler_parts_text(sys::kPartTicks | sys::kPartBlockedIn) == "ticks,blocked_in");
  CHECK(sys::sampler_parts_text(0) == "none");

  CHECK_FALSE(sys::parse_sampler_parts("rounds,gpu", &err));
  CHECK(err.find("unknown part 'gpu'") != std::string::npos);
  CHECK_FALSE(sys::parse_sampler_parts("", &err));
  CHECK(err.find("empty") != std::string::npos);
  CHECK_FALSE(sys::parse_sampler_parts("rounds,,ticks", &err));
  CHECK(err.find("an empty name") != std::string::npos);
  for (const char* bad : {"tick_us=0", "tick_us=-5", "tick_us=12ms", "tick_us=", "tick_us=2000000"}) {
    INFO(bad);
    CHECK_FALSE(sys::parse_sampler_parts(bad, &err));
    CHECK(err.find("tick_us wants a whole number") != std::string::npos);
  }
}

namespace {

struct TempProc {
  std::string root;
  TempProc() {
    char dir[] = "/tmp/iscope-partsproc-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    root = dir;
    put("self/statm", "1000 500 10 1 0 100 0\n");
    put("self/task/77/stat", "77 (t) S 1 1 1 0 -1 0 10 0 0 0 100 0 0 0 20 0 1 0 5 1000 50\n");
    put("self/task/77/status", "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2\n");
    put("self/task/77/schedstat", "1000000 300 7\n");
    put("self/task/77/syscall", "202 0x7f00 0x80 0x0 0x0 0x0 0x0 0x7ffc 0x7f01\n");  // a futex wait
  }
  ~TempProc() { std::filesystem::remove_all(root); }
  void put(const std::string& rel, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }
};

}  // namespace

TEST_CASE("each part switched off leaves out what it reads, and on again brings it back") {
  TempProc p;
  sys::SamplerOptions o;
  o.proc_root = p.root;
  o.period_ms = 100;  // every round is also a slow one (machine, NUMA, GPU)
  o.nvml_library = INFERSCOPE_FAKE_NVML;
  std::vector<CounterRecord> got;
  // Thread 77 is the session's thread 5: what it is blocked in is read for it.
  sys::SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, [](uint64_t& generation, sys::ThreadMap& m) {
    if (generation == 1) return false;
    generation = 1;
    m = {{77u, 5u}};
    return true;
  });
  const std::string status = s.open();
  INFO("status: " << status);
  REQUIRE(s.has_gpu());
  const auto& n = sys::CounterNames::get();
  auto count = [&](uint32_t name) {
    size_t c = 0;
    for (auto& r : got) c += r.name == name;
    return c;
  };
  CHECK(s.parts() == sys::kAllSamplerParts);
  s.set_parts(sys::kPartRounds);
  s.round(false);
  CHECK(count(n.thread_sched_run_ns) == 1);  // the rounds read the thread
  CHECK(count(n.gpu_util_pct) == 0);         // NVML off
  CHECK(count(n.thread_blocked_in) == 0);    // blocked-in off
  got.clear();
  s.set_parts(sys::kPartRounds | sys::kPartNvml | sys::kPartBlockedIn);
  p.put("self/task/77/schedstat", "2000000 300 8\n");
  s.round(false);
  CHECK(count(n.gpu_util_pct) == 2);  // the fake's two devices
  REQUIRE(count(n.thread_blocked_in) == 1);
  for (auto& r : got)
    if (r.name == n.thread_blocked_in) {
      CHECK(r.scope == CounterScope::kThread);
      CHECK(r.target == 5);
    }
}

namespace {

std::string temp_dump(const char* tag) {
  return "/tmp/iscope-parts-" + std::string(tag) + "-" + std::to_string(::getpid()) + ".iscope";
}

// When each of the dump's system sampler rounds started (its overhead records "system_sampler").
std::vector<uint64_t> round_starts(const std::string& path) {
  dump::DumpReader r(path);
  std::vector<uint64_t> starts;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind != RecordKind::kCollectorOverhead) return;
    const auto o = dump::load<OverheadRecord>(p);
    if (r.string_at(o.name) == "system_sampler") starts.push_back(o.start);
  });
  std::remove(path.c_str());
  return starts;
}

}  // namespace

TEST_CASE("inferscope_system_set_parts: refused without a session or for a bad specification; 'none' stops the rounds") {
  CHECK(inferscope_system_set_parts("all") == -2);  // no session
  Config c;
  c.output = temp_dump("switch");
  c.cupti = false;
  c.python = false;
  c.sample_period_ms = 10;
  c.thread_sample_us = 1000;
  REQUIRE(start(c));
  CHECK(inferscope_system_set_parts("rounds,bogus") == -1);
  if (std::filesystem::exists("/proc/self/schedstat")) {  // fast rounds need schedstat (CONFIG_SCHED_INFO)
    CHECK(inferscope_system_set_parts("all,tick_us=10000") == -1);  // not shorter than the 10 ms period
    CHECK(inferscope_system_set_parts("all,tick_us=2000") == 0);
  }
  CHECK(inferscope_system_set_parts("none") == 0);
  const uint64_t off = detail::now();
  std::this_thread::sleep_for(150ms);
  const uint64_t on = detail::now();
  CHECK(inferscope_system_set_parts("all") == 0);
  // Long enough for a 10 ms round on a loaded machine; the rounds' count is not asserted, only that they resumed.
  std::this_thread::sleep_for(1s);
  REQUIRE(stop());
  CHECK(inferscope_system_set_parts("all") == -2);  // stopped
  const std::vector<uint64_t> starts = round_starts(c.output);
  size_t while_off = 0, after = 0;
  for (uint64_t t : starts) {
    while_off += t > off && t < on;
    after += t >= on;
  }
  // At most one round starts after the switch: the one whose start had already been decided (it takes the parts
  // before it reads the clock).
  CHECK(while_off <= 1);
  CHECK(after >= 2);  // the rounds came back, and stop's final round
}
