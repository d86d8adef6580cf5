// Ranks on several hosts (lib/analyze/run/host_clocks.hpp): the offset between two hosts' clocks, estimated from the
// ends of the collectives matched between a rank of each, and the run analysis on the reference host's clock. The
// H100 fixtures were recorded on one host; a second host is made of one of them by giving its rank another
// hostname and moving all its times by a known offset, which the estimate must recover.
#include "analyze/analyzer.hpp"
#include "analyze/run/host_clocks.hpp"
#include "analyze/run/ranks.hpp"
#include "dump/reader.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::analyze;

namespace {

RankStep step_with_ends(uint64_t index, std::vector<int64_t> ends) {
  RankStep s;
  s.index = index;
  for (int64_t e : ends) {
    CollectiveKernel k;
    k.op = "AllReduce";
    k.start_ns = e - 1000;
    k.end_ns = e;
    s.collectives.push_back(k);
  }
  return s;
}

// Both ranks of a real run (the H100 straggler fixture), each read and analysed alone.
struct Fixture {
  std::vector<Analysis> analyses;
  std::vector<RankTrace> traces;
  std::vector<const Analysis*> ptrs() const { return {&analyses[0], &analyses[1]}; }
};

Fixture straggler_ranks() {
  Fixture f;
  for (const char* pid : {"1334", "1335"}) {
    const std::string path = (std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" /
                              (std::string("mg_straggler_rank.") + pid + ".iscope")).string();
    dump::DumpReader r(path);
    f.analyses.push_back(analyze_dump(r, {}));
    f.analyses.back().source = path;
    f.traces.push_back(read_rank_trace(r, f.analyses.back()));
  }
  return f;
}

constexpr int64_t kShiftNs = 3'700'000'000;  // 3.7 s: far more than a step, so no step overlaps unless aligned

// Rank 1 moved to another host whose clock reads `shift_ns` more than rank 0's.
void on_second_host(Fixture& f, int64_t shift_ns) {
  f.traces[1].hostname = f.traces[0].hostname + "-b";
  f.traces[1] = on_reference_clock(f.traces[1], -shift_ns);
}

bool warned(const RunAnalysis& run, const std::string& words) {
  for (const auto& w : run.warnings)
    if (w.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("the clock offset is the median of the end differences; its precision the spread or the causal bound") {
  // 9 collectives that both ranks reached at once and ran for 20 us, on clocks 3.7 s apart; each ends on B within a
  // few us of A, one 400 us late
  std::vector<MatchedCollective> c;
  int64_t t = 0;
  for (int64_t us : {-3, -2, -1, 0, 0, 1, 2, 3, 400}) {
    t += 1'000'000;
    c.push_back({t, t + 20'000, t + 3'700'000'000, t + 20'000 + 3'700'000'000 + us * 1000, true});
  }
  const ClockOffset o = estimate_clock_offset(c);
  CHECK(o.estimated);
  CHECK(o.used == 9);
  CHECK(o.offset_ns == doctest::Approx(3.7e9));  // the late one does not move the median
  // causality: B's kernels started 20 us before A's ended, so the offset may be up to 20 us lower than the median
  // (and at most 17 us higher: the earliest end on B); that is more than the spread (1.4826 x a MAD of 2 us)
  CHECK(o.precision_ns == doctest::Approx(20'000));

  // one-way collectives (a broadcast) bound nothing: the spread alone
  for (MatchedCollective& x : c) x.both_ways = false;
  CHECK(estimate_clock_offset(c).precision_ns == doctest::Approx(1.4826 * 2e3));

  c.resize(kMinClockCollectives - 1);
  const ClockOffset few = estimate_clock_offset(c);
  CHECK_FALSE(few.estimated);
  CHECK(few.used == kMinClockCollectives - 1);
  CHECK(few.offset_ns == 0);
}

TEST_CASE("collectives are matched for the offset by step index and order; steps whose counts differ are skipped") {
  RankTrace a, b;
  a.steps = {step_with_ends(3, {100, 200}), step_with_ends(4, {300, 400}), step_with_ends(5, {500})};
  // b: step 3 on a clock 1000 ns ahead, step 4 ran one collective more (skipped), step 6 not on a
  b.steps = {step_with_ends(3, {1100, 1205}), step_with_ends(4, {1300, 1400, 1450}), step_with_ends(6, {1600})};
  const std::vector<MatchedCollective> m = matched_collectives(a, b);
  REQUIRE(m.size() == 2);
  CHECK(m[0].end_b - m[0].end_a == 1000);
  CHECK(m[1].end_b - m[1].end_a == 1005);
  CHECK(m[1].start_a == 200 - 1000);
  CHECK(m[1].start_b == 1205 - 1000);
  CHECK(m[0].both_ways);  // an AllReduce
}

TEST_CASE("collectives of different operations at one place are not paired; an unnamed one gives no causal bound") {
  RankTrace a, b;
  a.steps = {step_with_ends(1, {100, 200, 300})};
  b.steps = {step_with_ends(1, {1100, 1200, 1300})};
  b.steps[0].collectives[1].op = "AllGather";    // the ranks ran their collectives in another order here
  a.steps[0].collectives[2].op = "collective";   // NCCL's generic kernel: maybe a send/receive
  b.steps[0].collectives[2].op = "collective";
  const std::vector<MatchedCollective> m = matched_collectives(a, b);
  REQUIRE(m.size() == 2);
  CHECK(m[0].end_a == 100);
  CHECK(m[0].both_ways);
  CHECK(m[1].end_a == 300);
  CHECK_FALSE(m[1].both_ways);
}

TEST_CASE("host clocks: one host has none; another host's offset is estimated against the lowest rank's") {
  RankTrace a, b, c;
  a.hostname = b.hostname = "node0";
  c.hostname = "node1";
  for (uint64_t i = 0; i < 10; ++i) {
    a.steps.push_back(step_with_ends(i, {int64_t(i) * 1000'000 + 500}));
    b.steps.push_back(step_with_ends(i, {int64_t(i) * 1000'000 + 510}));
    c.steps.push_back(step_with_ends(i, {int64_t(i) * 1000'000 + 500 + 42'000'000}));
  }
  std::vector<RankRow> rows(3);
  rows[0].rank = 0, rows[1].rank = 1, rows[2].rank = 2;
  CHECK(host_clocks({&a, &b}, {rows[0], rows[1]}).empty());
  const std::vector<HostClock> clocks = host_clocks({&a, &b, &c}, rows);
  REQUIRE(clocks.size() == 2);
  CHECK(clocks[0].hostname == "node0");
  CHECK(clocks[0].reference);
  CHECK(clocks[0].ranks == "0,1");
  CHECK(clocks[1].hostname == "node1");
  CHECK(clocks[1].ranks == "2");
  CHECK(clocks[1].estimated);
  CHECK(clocks[1].offset_ms == doctest::Approx(42.0));
  CHECK(clocks[1].collectives_used == 10);
  CHECK(all_estimated(clocks));
  CHECK(offset_ns_of(clocks, "node1") == 42'000'000);
  CHECK(offset_ns_of(clocks, "node0") == 0);
  const RankTrace moved = on_reference_clock(c, offset_ns_of(clocks, "node1"));
  CHECK(moved.steps[2].collectives[0].end_ns == a.steps[2].collectives[0].end_ns);
}

TEST_CASE("H100 x2, rank 1 on another host 3.7 s ahead: the offset is recovered and the straggler is the same") {
  Fixture same = straggler_ranks();
  const RunAnalysis base = analyze_ranks(same.traces, same.ptrs());
  REQUIRE(base.straggler == 1);
  CHECK(base.host_clocks.empty());  // one host: no clocks to align

  Fixture moved = straggler_ranks();
  on_second_host(moved, kShiftNs);
  const RunAnalysis run = analyze_ranks(moved.traces, moved.ptrs());
  REQUIRE(run.host_clocks.size() == 2);
  const HostClock& b = run.host_clocks[1];
  CHECK(b.hostname == moved.traces[1].hostname);
  REQUIRE(b.estimated);
  CHECK(b.collectives_used >= kMinClockCollectives);
  // recovered within its stated precision (one host's ranks share a clock: the true offset is the shift)
  CHECK(std::fabs(b.offset_ms * 1e6 - double(kShiftNs)) <= b.precision_us * 1e3);
  CHECK(b.precision_us < 50);  // the ranks' collectives end within microseconds of each other
  CHECK(run.steps_matched == base.steps_matched);
  CHECK(run.straggler == 1);
  CHECK(run.straggler_did == base.straggler_did);
  REQUIRE(run.ranks.size() == 2);
  // every collective's arrival moves by the estimate's error at most
  double per_step_collectives = 0;
  for (const CollectiveRow& c : run.collectives) per_step_collectives += c.per_step;
  const double tolerance_ms = b.precision_us * 1e-3 * std::max(1.0, per_step_collectives) + 1e-6;
  CHECK(std::fabs(run.ranks[0].wait_ms - base.ranks[0].wait_ms) <= tolerance_ms);
  CHECK(std::fabs(run.ranks[1].late_ms - base.ranks[1].late_ms) <= tolerance_ms);
  // the timeline is drawn from the matched step on one clock: rank 0's GPU lane waits for rank 1 as before
  CHECK(run.timeline.lanes.size() == base.timeline.lanes.size());
  CHECK(run.timeline.step.index == base.timeline.step.index);
  REQUIRE_FALSE(run.findings.empty());
  CHECK(run.findings.front().category == "collective_wait");
}

TEST_CASE("H100 x2, rank 1 on another host with too few collectives: no offset, a warning, nothing matched") {
  Fixture f = straggler_ranks();
  on_second_host(f, kShiftNs);
  for (RankTrace& t : f.traces) {  // one steady step of 3 collectives each
    t.steps.resize(1);
    t.steps[0].collectives.resize(std::min<size_t>(3, t.steps[0].collectives.size()));
  }
  const RunAnalysis run = analyze_ranks(f.traces, f.ptrs());
  REQUIRE(run.host_clocks.size() == 2);
  CHECK_FALSE(run.host_clocks[1].estimated);
  CHECK(run.host_clocks[1].collectives_used <= 3);
  CHECK(run.steps_matched == 0);
  CHECK(run.straggler == -1);
  CHECK(run.findings.empty());
  CHECK(warned(run, "could not be put on host"));
  CHECK(warned(run, "not matched across the hosts"));
}
