// The representative step's timeline beyond its spans: each thread lane's scheduler states (from thread.state
// samples, TimelineLane::states) and the correlation ids that join a CUDA call with the GPU work it launched
// (TimelineSpan::correlation), both drawn by the HTML report.
#include "analyze/analyzer.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

namespace fs = std::filesystem;
using namespace inferscope;

namespace {

constexpr int64_t kMs = 1'000'000;

fs::path work_dir() {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work";
  fs::create_directories(d);
  return d;
}

// Eight steps of 1 ms of host work, two launches and a sync; with `states`, the main thread's state sampled
// every 0.25 ms (running in the first half of each ms, sleeping in the second), and a thread the session never
// saw (by its OS id) sampled too.
analyze::Analysis run(const std::string& name, bool states) {
  const fs::path p = work_dir() / (name + ".iscope");
  {
    dump::DumpBuilder b(p.string());
    testsupport::Sim sim(b);
    const uint32_t sys = b.channel("system");
    const int64_t t0 = sim.now();
    for (int i = 0; i < 8; ++i)
      sim.range("step", [&] {
        sim.host(kMs);
        sim.launch("gemm", 300'000);
        sim.launch("relu", 100'000);
        sim.sync();
      });
    const int64_t t1 = sim.now() + kMs;
    for (int64_t t = t0 - kMs; states && t <= t1; t += kMs / 4) {
      b.counter(sys, "thread.state", CounterScope::kThread, sim.thread(), t, (t - t0) % kMs < kMs / 2 ? 'R' : 'S');
      b.counter(sys, "thread.state", CounterScope::kOsThread, 4300, t, 'D');
    }
    b.finish();
  }
  return analyze::analyze_file(p.string(), {});
}

}  // namespace

TEST_CASE("timeline: a thread lane's states cover the step as sampled, in order, each a change from the one before") {
  const analyze::Analysis a = run("lane_states", true);
  const double step = a.representative.step.duration_ms;
  REQUIRE(step > 0);
  size_t thread_lanes = 0;
  for (const auto& l : a.representative.lanes) {
    CAPTURE(l.name);
    if (l.gpu) {
      CHECK(l.states.empty());
      continue;
    }
    ++thread_lanes;
    REQUIRE(l.states.size() >= 2);
    // Samples before and after the step: its whole length has a known state.
    CHECK(l.states.front().start_ms == doctest::Approx(0));
    CHECK(l.states.back().end_ms == doctest::Approx(step));
    for (size_t i = 0; i < l.states.size(); ++i) {
      CHECK((l.states[i].code == 'R' || l.states[i].code == 'S'));  // never the unseen thread's 'D'
      CHECK(l.states[i].end_ms > l.states[i].start_ms);
      if (i) {
        CHECK(l.states[i].start_ms == doctest::Approx(l.states[i - 1].end_ms));
        CHECK(l.states[i].code != l.states[i - 1].code);
      }
    }
  }
  CHECK(thread_lanes == 1);  // the thread sampled by its OS id ran nothing: no lane, so no states
}

TEST_CASE("timeline: no thread.state samples, no states") {
  const analyze::Analysis a = run("lane_no_states", false);
  REQUIRE(!a.representative.lanes.empty());
  for (const auto& l : a.representative.lanes) CHECK(l.states.empty());
}

TEST_CASE("timeline: a launch and its kernel share their correlation id; a call without GPU work in the step has none") {
  const analyze::Analysis a = run("lane_pairs", false);
  std::map<uint32_t, std::string> calls, work;  // correlation id -> label
  size_t syncs = 0;
  for (const auto& l : a.representative.lanes)
    for (const auto& s : l.spans) {
      if (s.category == "sync") {
        ++syncs;
        CHECK(s.correlation == 0);  // it launched nothing
      }
      if (!s.correlation) continue;
      auto& side = l.gpu ? work : calls;
      CHECK(side.emplace(s.correlation, s.label).second);  // one call and one kernel per id
    }
  CHECK(syncs >= 1);
  REQUIRE(work.size() == 2);  // gemm and relu
  CHECK(calls.size() == work.size());
  for (const auto& [corr, label] : work) {
    CAPTURE(label);
    REQUIRE(calls.count(corr));
    CHECK(calls.at(corr) == "cudaLaunchKernel");
  }
}
