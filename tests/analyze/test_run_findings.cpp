// The run's findings as worded (lib/analyze/run/run_findings.hpp): which suggestion comes first, with which saving,
// and what the title says, from measurements given by hand.
#include "analyze/run/run_findings.hpp"

#include <doctest/doctest.h>

using namespace inferscope::analyze;

namespace {

RunAnalysis two_ranks(double step_ms) {
  RunAnalysis run;
  run.step_ms = step_ms;
  run.steps_matched = 20;
  for (int r = 0; r < 2; ++r) {
    RankRow row;
    row.rank = r;
    row.step_ms = step_ms;
    row.compute_ms = 2;
    row.comm_ms = 6;
    row.transfer_ms = 5;
    row.wait_ms = 1;
    run.ranks.push_back(row);
  }
  return run;
}

}  // namespace

TEST_CASE("communication: coalescing first and in the title when it saves more than the exposed transfer") {
  const RunAnalysis run = two_ranks(20);
  CollectiveRuns runs;
  runs.runs = 1, runs.collectives = 240, runs.span_ms = 16, runs.transfer_ms = 5, runs.saving_ms = 9;
  const Finding f = communication(run, run.ranks[0], 5, /*f32=*/true, 240, 0.1, runs, GatherSelect{});
  CHECK(f.impact_ms == doctest::Approx(9));
  CHECK(f.title.find("240 collectives per step issued back to back") != std::string::npos);
  REQUIRE(f.suggestions.size() >= 3);
  CHECK(f.suggestions[0].action.starts_with("Coalesce the 240 collectives"));
  CHECK(f.suggestions[0].priority == "high");
  CHECK(f.suggestions[0].impact_ms == doctest::Approx(9));
  CHECK(f.suggestions[1].action.starts_with("Send half the bytes"));  // then the bytes
  for (const Suggestion& s : f.suggestions) CHECK_FALSE(s.action.starts_with("Bucket"));  // said once, estimated
}

TEST_CASE("communication: runs not worth coalescing leave the unestimated bucketing advice and the transfer title") {
  const RunAnalysis run = two_ranks(20);
  CollectiveRuns runs;  // none
  const Finding f = communication(run, run.ranks[0], 5, false, 8, 0.1, runs, GatherSelect{});
  CHECK(f.impact_ms == doctest::Approx(5));
  CHECK(f.title.starts_with("Communication: 5.00 ms per step moving data"));
  bool bucket = false;
  for (const Suggestion& s : f.suggestions) {
    CHECK_FALSE(s.action.starts_with("Coalesce"));
    if (s.action.starts_with("Bucket")) {
      bucket = true;
      CHECK(s.priority == "low");
    }
  }
  CHECK(bucket);
}

TEST_CASE("communication: a gather only selected from gets 'select before gathering', not 'send fewer bytes'") {
  const RunAnalysis run = two_ranks(12);
  GatherSelect g;
  g.gathers = 4, g.transfer_ms = 4, g.between_ms = 2, g.saving_ms = 6;
  const Finding f = communication(run, run.ranks[0], 4.4, false, 8, 0.1, CollectiveRuns{}, g);
  CHECK(f.impact_ms == doctest::Approx(6));
  CHECK(f.title.find("gather a whole tensor only for an argmax or top-k") != std::string::npos);
  CHECK(f.suggestions[0].action.starts_with("Select before gathering"));
  CHECK(f.suggestions[0].impact_ms == doctest::Approx(6));
  for (const Suggestion& s : f.suggestions) CHECK_FALSE(s.action.starts_with("Send fewer bytes"));
}

TEST_CASE("collective_wait: a kernel the straggler ran more of is named with its launcher, and sharing it is the fix") {
  RunAnalysis run = two_ranks(12);
  run.ranks[0].late_ms = 6, run.ranks[1].wait_ms = 6;
  Excess did{"kernel", "sgemm_fp32", 5.5, "score (model.py:9)"};
  const Finding f = collective_wait(run, run.ranks[0], 0.99, did, "launch_bound");
  CHECK(f.impact_ms == doctest::Approx(6));
  CHECK(f.suggestions[0].action.starts_with("Give rank 0 the same GPU work as the others: its kernel sgemm_fp32 "
                                            "(launched by score (model.py:9)) runs 5.50 ms per step longer"));
  CHECK(f.suggestions[0].priority == "high");
  // an excess under half the lateness does not explain it: find the cause instead
  did.ms = 1;
  const Finding g = collective_wait(run, run.ranks[0], 0.99, did, "launch_bound");
  CHECK(g.suggestions[0].action.starts_with("Find what makes rank 0 late"));
}
