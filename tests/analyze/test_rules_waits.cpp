// The wait and cpu_contention rules on hand-made inputs (a RuleInput with a typical step and a wait attribution):
// the party the title names, the suggestions that fit it and the ones that must never appear (no DataLoader advice
// where workers exist, no "add a producer thread" where one exists), the worker count from the party's CPU per
// step, and the rules every suggestion follows (low under 1 % of the step; above the impact only with a reason).
#include "analyze/rules/rule.hpp"
#include "analyze/waits/waits.hpp"
#include "rule_fixture.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace inferscope;
using namespace inferscope::analyze;
using detail::WaitParty;
using Kind = WaitParty::Kind;

namespace {

constexpr double ms = 1e6;

struct Input : testing::RuleFixture {
  detail::WaitAttribution& w = waits;
  Input() {
    gpu_work = true;
    process["cpus_allowed"] = "16";
    step_thread_name = "MainThread";
    typical.steps = 20;
    typical.dur = 30 * ms;
    typical.host_state_measured = true;
    typical.idle_host = 27 * ms;
    typical.host_wait = 26 * ms;
    typical.host_running = 1 * ms;
    typical.host_out_api = 27 * ms;
    w.measured = true;
    w.thread_sample_ms = 1;
  }
  rules::RuleInput in() const { return input(); }
  WaitParty& add(Kind k, const std::string& name, size_t members, double blocked_ms) {
    WaitParty p;
    p.kind = k;
    p.name = name;
    for (size_t i = 0; i < members; ++i) {
      p.members.push_back(uint32_t(100 + i));
      p.member_names.push_back(name);
    }
    p.blocked_ns = blocked_ms * ms;
    p.span_ns = blocked_ms * ms;
    w.parties.push_back(p);
    w.blocked_ns += p.blocked_ns;
    return w.parties.back();
  }
};

bool any_action(const Finding& f, const std::string& text) {
  for (const auto& s : f.suggestions)
    if (s.action.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("wait names the DataLoader's workers and raises num_workers by their CPU per batch") {
  Input t;
  WaitParty& p = t.add(Kind::kProcesses, "pt_data_worker", 2, 500);
  p.cpu_ns = 2 * 500 * ms;   // both busy throughout
  p.cpu_per_step_ns = 60 * ms;  // 60 ms of CPU per batch
  p.site = "_BaseDataLoaderIter.__next__";
  p.site_is_wait_point = true;
  p.site_kind = WaitKind::kDataLoader;
  const auto f = rules::host_wait(t.in());
  REQUIRE(f);
  CAPTURE(f->title);
  CHECK(f->title.find("the DataLoader's 2 worker processes (pt_data_worker)") != std::string::npos);
  CHECK(f->impact_ms == doctest::Approx(26));
  // The rest of the step is 30 - 26 = 4 ms: ceil(60 / 4) = 15 workers, which 16 CPUs allow (one kept).
  CHECK(any_action(*f, "num_workers from 2 to 15"));
  bool knob = false;  // the knob that measures it on the program itself (iscope-run --try)
  for (const auto& s : f->suggestions) knob |= s.action.find("num_workers from 2 to 15") != std::string::npos && s.try_knob == "num_workers=15";
  CHECK(knob);
  CHECK_FALSE(any_action(*f, "Fetch ahead"));
  CHECK(f->suggestions.size() >= 3);
  // Four CPUs: at most 3 workers beside the step thread.
  t.process["cpus_allowed"] = "4";
  CHECK(any_action(*rules::host_wait(t.in()), "num_workers from 2 to 3"));
  // Two CPUs: no worker to spare: make the work cheaper instead.
  t.process["cpus_allowed"] = "2";
  const auto g = rules::host_wait(t.in());
  CHECK_FALSE(any_action(*g, "num_workers from"));
  CHECK(any_action(*g, "cheaper"));
}

TEST_CASE("wait on a busy Python producer thread: processes, not another producer thread") {
  Input t;
  WaitParty& p = t.add(Kind::kThreads, "producer", 1, 500);
  p.python = true;
  p.cpu_ns = 490 * ms;
  p.cpu_per_step_ns = 9 * ms;
  p.wakeups = 20;
  p.hot = {{"tokenize", 400 * ms}, {"fetch", 50 * ms}};
  const auto f = rules::host_wait(t.in());
  REQUIRE(f);
  CHECK(f->title.find("thread 'producer' (tokenize)") != std::string::npos);
  CHECK(any_action(*f, "worker processes"));
  CHECK_FALSE(any_action(*f, "producer thread or DataLoader"));
  bool wakeups = false;
  for (const auto& e : f->evidence) wakeups |= e.find("ended 20 of the step thread's waits") != std::string::npos;
  CHECK(wakeups);
}

TEST_CASE("wait on an idle party: the fix follows what it sat in (a sleep, a logging lock, I/O)") {
  SUBCASE("polling with a sleep") {
    Input t;
    WaitParty& p = t.add(Kind::kThreads, "batcher", 1, 500);
    p.off_cpu_in = BlockedIn::kSleep;
    p.hot = {{"poll_for_batch", 1 * ms}};
    CHECK(any_action(*rules::host_wait(t.in()), "Stop polling"));
  }
  SUBCASE("a logging handler's lock") {
    Input t;
    WaitParty& p = t.add(Kind::kThreads, "audit", 1, 500);
    p.site_is_wait_point = true;
    p.site_kind = WaitKind::kLogging;
    p.hot = {{"post_to_collector", 400 * ms}};
    CHECK(any_action(*rules::host_wait(t.in()), "QueueHandler"));
  }
  SUBCASE("a reader thread") {
    Input t;
    WaitParty& p = t.add(Kind::kThreads, "reader-0", 1, 500);
    p.off_cpu_in = BlockedIn::kRead;
    CHECK(any_action(*rules::host_wait(t.in()), "Keep more items in flight"));
  }
  SUBCASE("its own sleep") {
    Input t;
    WaitParty& p = t.add(Kind::kOwnSleep, "MainThread", 1, 500);
    p.site = "serve_one";
    const auto f = rules::host_wait(t.in());
    CHECK(f->title.find("sleeps") != std::string::npos);
    CHECK(any_action(*f, "Remove the sleep from serve_one"));
  }
}

TEST_CASE("wait with nobody to blame is uncertain and fetches ahead only where nothing feeds the step") {
  Input t;
  t.add(Kind::kUnknown, "", 0, 500);
  const auto f = rules::host_wait(t.in());
  REQUIRE(f);
  CHECK(f->uncertain);
  CHECK(any_action(*f, "Fetch ahead"));
  t.w.parties.clear();
  t.add(Kind::kUnknown, "", 0, 400);
  t.add(Kind::kThreads, "producer", 1, 100);  // a producer exists (under half of the wait: not named)
  const auto g = rules::host_wait(t.in());
  CHECK_FALSE(any_action(*g, "Fetch ahead"));
}

TEST_CASE("cpu_contention names the GIL's holder and moves it out of the process") {
  Input t;
  t.typical.host_wait = 1 * ms;
  t.typical.host_contention = 20 * ms;
  t.typical.host_gil = 20 * ms;
  WaitParty& p = t.add(Kind::kGil, "metrics", 1, 400);
  p.python = true;
  p.cpu_ns = 390 * ms;
  p.hot = {{"summarize_window", 300 * ms}};
  const auto f = rules::cpu_contention(t.in());
  REQUIRE(f);
  CHECK(f->title.find("thread 'metrics' holding the GIL (summarize_window)") != std::string::npos);
  CHECK(any_action(*f, "separate process"));
  CHECK(any_action(*f, "share a lock"));
}

TEST_CASE("suggestions: under 1 % of the step they are low; above their finding's impact they say why") {
  Input t;
  t.graphs.resize(1);
  replay::StepGraph& g = t.graphs.front();
  replay::HostOp op;
  op.kind = replay::OpKind::kLaunch;
  op.gap_before_ns = int64_t(10 * ms);
  op.dur_ns = 5'000;
  g.host.push_back(op);
  g.tail_ns = int64_t(20 * ms);
  g.recorded_ns = replay::simulate(g);
  const rules::RuleInput in = t.in();
  Finding f = rules::make_finding(in, rules::Category::kWait, "t", 1.0, 0.9);  // impact 1 ms
  replay::Change small;
  small.host_gap_scale = 0.999;  // saves 30 us of a 30 ms step
  rules::suggest_replayed(f, in, "high", "tiny", small, "m");
  CHECK(f.suggestions.back().priority == "low");
  replay::Change big;
  big.host_gap_scale = 0.5;  // saves 15 ms, over the 1 ms impact
  rules::suggest_replayed(f, in, "high", "big", big, "m");
  CHECK(f.suggestions.back().priority == "high");
  CHECK(f.suggestions.back().model.find("more than this finding's") != std::string::npos);
}
