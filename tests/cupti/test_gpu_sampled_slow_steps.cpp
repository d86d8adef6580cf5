// GPU test (labels gpu, sampled): sampled mode on a CUDA program whose every 50th step is slow for a planted
// reason (samples/slow_steps). Under iscope-run with windows of 10 steps every 25 and a 10 ms threshold, the
// runtime must catch every planted step (20 ms; the others take about 1 ms), keep most of them in full detail
// (inside a window, with their neighbours), and the analyzer must name the planted cause: GPU compute for the
// extra kernel, the host for the sleep. Exits 77
// (skipped, with the reason) without a GPU or without the sample.
#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "gpu_skip.hpp"
#include "run_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

using namespace inferscope;
using iscope_test::have_gpu;
using iscope_test::run;
using iscope_test::skip;

namespace {

[[maybe_unused]] std::set<uint64_t> planted_steps(const std::string& out) {
  std::set<uint64_t> s;
  const auto p = out.find("planted=");
  REQUIRE_MESSAGE(p != std::string::npos, out);
  std::stringstream in(out.substr(p + 8, out.find('\n', p) - p - 8));
  for (std::string x; std::getline(in, x, ',');) s.insert(std::stoull(x));
  return s;
}

[[maybe_unused]] const analyze::Finding* find(const analyze::Analysis& a, const std::string& category) {
  for (const auto& f : a.findings)
    if (f.category == category) return &f;
  return nullptr;
}

#ifdef SAMPLE_SLOW_STEPS
struct Outcome {
  std::set<uint64_t> planted;
  std::string dump;
  analyze::Analysis a;
};

// The sample under iscope-run in sampled mode; checks what the runtime caught, then analyses the dump.
Outcome run_sampled(const std::string& cause) {
  Outcome o;
  o.dump = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/sampled_slow_" + cause + "." + std::to_string(::getpid()) +
           ".iscope";
  auto r = run({ISCOPE_RUN, "-q", "-o", o.dump, "--set", "mode=sampled", "--set", "window_steps=10", "--set",
                "window_every_steps=25", "--set", "windows_kept=12", "--set", "slow_step_ms=10", "--set",
                "slow_step_factor=0", "--set", "slow_step_neighbours=2", "--", SAMPLE_SLOW_STEPS, "--steps", "400",
                "--every", "50", "--phase", "30", "--slow-ms", "20", "--cause", cause});
  REQUIRE_MESSAGE(r.status == 0, r.out);
  std::printf("%s", r.out.c_str());
  o.planted = planted_steps(r.out);
  REQUIRE(o.planted.size() == 8);
  dump::DumpReader d(o.dump);
  CHECK(d.complete());
  REQUIRE(d.is_sampled());
  const auto& s = *d.sampling();
  CHECK(s.summary.steps_seen == 400);
  std::set<uint64_t> caught;
  size_t full = 0;
  for (auto& e : s.slow_steps) {
    caught.insert(e.step);
    full += e.flags & 1u;
  }
  // Every planted step. Another step over 10 ms would be the machine's (or CUPTI's first enabling in a window):
  // printed, and tolerated twice at most.
  std::set<uint64_t> missed, extra;
  for (uint64_t p : o.planted)
    if (!caught.count(p)) missed.insert(p);
  for (uint64_t c : caught)
    if (!o.planted.count(c)) extra.insert(c);
  CHECK_MESSAGE(missed.empty(), missed.size() << " planted slow steps not caught, the first "
                                  << (missed.empty() ? 0ull : (unsigned long long)*missed.begin()));
  for (uint64_t x : extra) std::printf("caught a slow step that was not planted: %llu\n", (unsigned long long)x);
  CHECK(extra.size() <= 2);
  CHECK_MESSAGE(full >= 6, full << " of 8 slow steps kept in full detail");
  for (auto& [k, v] : d.collector_status())
    if (k == "cupti") CHECK_MESSAGE(v.find("inside sampled windows only") != std::string::npos, v);
  uint64_t kernels = 0;
  d.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t*) { kernels += h.kind == RecordKind::kGpuKernel; });
  CHECK(kernels > 0);
  CHECK(kernels < 30 * 400);  // sampled: most steps' kernels were never recorded
  o.a = analyze::analyze_dump(d, {});
  std::printf("sampled: %llu of %llu steps in windows, %zu windows kept, %zu of 8 slow steps in full detail\n",
              (unsigned long long)s.summary.steps_in_windows, (unsigned long long)s.summary.steps_seen, s.windows.size(),
              full);
  return o;
}

// The slow_steps finding names planted steps by their number in the run, each with the cause `part` (its three
// slowest steps: a slower one that was not planted may take a place, but not every place).
void check_explained(const Outcome& o, const std::string& part) {
  const auto* f = find(o.a, "slow_steps");
  REQUIRE_MESSAGE(f != nullptr, "no slow_steps finding");
  REQUIRE_FALSE(f->evidence.empty());
  size_t planted = 0;
  for (const auto& e : f->evidence) {
    std::printf("  evidence: %s\n", e.c_str());
    const auto p = e.find("(step ");
    REQUIRE_MESSAGE(p != std::string::npos, e);
    if (!o.planted.count(std::stoull(e.substr(p + 6)))) continue;
    ++planted;
    CHECK_MESSAGE(e.find(part) != std::string::npos, e);
  }
  CHECK(planted >= 1);
  CHECK(o.a.sampling.sampled);
  CHECK(o.a.sampling.step_coverage_pct < 100);
}
#endif

}  // namespace

TEST_CASE("sampled mode catches the planted slow steps of a GPU program: an extra kernel is GPU compute") {
#ifndef SAMPLE_SLOW_STEPS
  skip("samples/slow_steps was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const Outcome o = run_sampled("kernel");
  check_explained(o, "GPU compute");
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(o.dump.c_str());
#endif
}

TEST_CASE("... and a host sleep is the host's") {
#ifndef SAMPLE_SLOW_STEPS
  skip("samples/slow_steps was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const Outcome o = run_sampled("sleep");
  // With the system counters of the window the sleep reads as waiting; without them as host work.
  const auto* f = find(o.a, "slow_steps");
  REQUIRE(f != nullptr);
  size_t host = 0;
  for (const auto& e : f->evidence)
    host += e.find("waiting") != std::string::npos || e.find("host work") != std::string::npos;
  CHECK_MESSAGE(host >= 1, f->evidence.front());
  check_explained(o, " against the typical step");
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(o.dump.c_str());
#endif
}
