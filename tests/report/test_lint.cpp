// The report linter (lib/report/lint.hpp) over every real dump in tests/fixtures, in every format: no saving larger
// than its step, no suggestion whose evidence is missing, no advice for a cause that costs nothing, counts that add
// up, one unit per quantity. ISCOPE_LINT_EXTRA (a directory) adds the dumps in it, for dumps recorded on the GPU
// that are too large to keep as fixtures. Then each property on an analysis planted to break it: the linter must
// catch what it claims to catch.
#include "analyze/analyzer.hpp"
#include "report/lint.hpp"
#include "report/report.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> dumps_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".iscope") || n.ends_with(".json.gz") || (n.ends_with(".json") && n.rfind("kineto", 0) == 0))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<report::LintProblem> lint_file(const fs::path& p) {
  const analyze::Analysis a = analyze::analyze_file(p.string(), {});
  std::ostringstream md, html, json;
  report::write_markdown(a, md);
  report::write_html(a, html);
  report::write_json(a, json);
  return report::lint_report(a, md.str(), html.str(), json.str());
}

}  // namespace

TEST_CASE("every fixture's reports pass the linter") {
  std::vector<fs::path> files = dumps_in(testsupport::fixtures());
  if (const char* extra = std::getenv("ISCOPE_LINT_EXTRA")) {
    const std::vector<fs::path> more = dumps_in(extra);
    files.insert(files.end(), more.begin(), more.end());
  }
  REQUIRE(files.size() >= 20);
  for (const fs::path& p : files) {
    CAPTURE(p.string());
    std::vector<report::LintProblem> problems;
    try {
      problems = lint_file(p);
    } catch (const std::exception& e) {
      // Fixtures of damaged inputs are read elsewhere; one that cannot be analysed has no report to lint.
      MESSAGE("not analysed: " << e.what());
      continue;
    }
    for (const auto& x : problems) {
      const std::string m = x.rule + ": " + x.what;
      FAIL_CHECK(m);
    }
  }
}

TEST_CASE("the linter catches each property it checks") {
  analyze::Analysis a;
  a.end_to_end_ms = 10;
  a.steps.count = 8;
  a.steps.total = 10;
  a.steps.warmup = 2;
  a.steps.typical = 8;
  a.program.holds["python"] = "test";
  analyze::Finding f;
  f.category = "cpu_bound";
  f.impact_ms = 12;  // more than the step
  analyze::Suggestion s{"Move it to 4 DataLoader workers (num_workers=4)", "high", 11, true, "replay", {"prefetchable"}};
  f.suggestions.push_back(s);
  a.findings.push_back(f);
  analyze::Finding zero;
  zero.category = "memory_alloc";
  zero.impact_ms = 0;
  zero.suggestions.push_back({"Do something", "low", 0, false, "", {}});
  a.findings.push_back(zero);
  auto rules_of = [](const std::vector<report::LintProblem>& v) {
    std::set<std::string> r;
    for (const auto& p : v) r.insert(p.rule);
    return r;
  };
  const auto r = rules_of(report::lint_report(a, "it ended within the baseline, after 0 steps; 3 MiB and 2 MB", "", ""));
  CHECK(r.count("saving_within_step"));
  CHECK(r.count("needs_hold"));           // prefetchable does not hold
  CHECK(r.count("advice_fits_facts"));    // DataLoader without a DataLoader
  CHECK(r.count("no_advice_at_zero"));
  CHECK(r.count("no_zero_count_claim"));
  CHECK(r.count("one_unit"));
  a.steps.total = 11;
  CHECK(rules_of(report::lint_report(a, "", "", "")).count("counts_add_up"));
  // A native program told to use torch or py-spy.
  analyze::Analysis c;
  c.end_to_end_ms = 5;
  c.program.holds["cpp"] = "test";
  analyze::Finding g;
  g.category = "sync_bound";
  g.impact_ms = 2;
  g.suggestions.push_back({"Profile it with py-spy", "low", 0, false, "", {}});
  c.findings.push_back(g);
  CHECK(rules_of(report::lint_report(c, "", "", "")).count("advice_fits_language"));
}
