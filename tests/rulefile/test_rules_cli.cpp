// The tools with rule files: iscope-analyze --rules on a real recorded dump (the finding in Markdown, JSON and HTML),
// ./.inferscope_rules.yaml found in the working directory, --no-rules, a broken file (exit 2, nothing written),
// --check-rules, --list-metrics against docs/rules.md's generated part, and iscope-diff with the same file.
#include "tool_run.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

const std::string kAnalyze = "tools/iscope-analyze/iscope-analyze";
const std::string kDiff = "tools/iscope-diff/iscope-diff";
const std::string kFixture = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/planted_h2d_bound.iscope";

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testutil::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// The example of docs/rules.md and a rule with an impact, on a dump whose steps are 98 % host-to-device copies.
const char* kRules = R"(bottleneck_rules:
  - name: "high_memory_overhead"
    condition: "h2d_time / total_time > 0.3"
    suggestion: "Use pinned memory or reduce batch size"
    confidence_weight: 1.2
  - name: step_budget
    condition: step_p50_ms > 20
    title: "the step takes {step_p50_ms}, over its 20 ms budget"
    impact_ms: step_p50_ms - 20
    suggestion: "Bring the step under 20 ms"
builtin_rules:
  slow_steps: off
)";

// Builds without muparser refuse every rule file: nothing here can run.
const bool kSkip = [] {
  const testutil::ToolRun r = testutil::run_tool(kAnalyze, {"--check-rules", write("probe.yaml", "")});
  if (r.exit == 0) return false;
  std::printf("SKIPPED: iscope-analyze cannot read rule files here: %s\n", r.err.c_str());
  std::exit(77);
}();

}  // namespace

TEST_CASE("iscope-analyze --rules: the rules' findings in every report format, ranked with the built-in ones") {
  const std::string rules = write("team.yaml", kRules);
  const std::string md = testutil::temp_path("r.md"), js = testutil::temp_path("r.json"), html = testutil::temp_path("r.html");
  const auto r = testutil::run_tool(kAnalyze, {kFixture, "--rules", rules, "-o", md, "--json", js, "--html", html});
  REQUIRE(r.exit == 0);
  const std::string m = testutil::read_file(md);
  CHECK(has(m, "Category: Custom rule high_memory_overhead (`custom:high_memory_overhead`)"));
  CHECK(has(m, "the values it read: h2d_time = 39.208 ms, total_time = 40.058 ms"));
  CHECK(has(m, "Category: Custom rule step_budget (`custom:step_budget`)"));
  CHECK(has(m, "the step takes 40."));
  CHECK_FALSE(has(m, "(`slow_steps`)\n"));
  const std::string j = testutil::read_file(js);
  CHECK(has(j, "\"bottleneck_type\": \"custom:step_budget\",\n      \"rule\": \"step_budget\""));
  CHECK(has(j, "\"bottleneck_type\": \"h2d_bound\",\n      \"rule\": \"h2d_bound\""));
  CHECK(has(testutil::read_file(html), "custom:high_memory_overhead"));
  // Ranked: h2d_bound's 39.2 ms first, then the budget's 20 ms, then the rule without an impact.
  const auto d = testutil::run_tool(kAnalyze, {kFixture, "--rules", rules, "--findings"});
  REQUIRE(d.exit == 0);
  const size_t h2d = d.out.find("h2d_bound primary=1"), budget = d.out.find("custom:step_budget primary=0"),
               overhead = d.out.find("custom:high_memory_overhead primary=0");
  REQUIRE(h2d != std::string::npos);
  REQUIRE(budget != std::string::npos);
  REQUIRE(overhead != std::string::npos);
  CHECK(h2d < budget);
  CHECK(budget < overhead);
}

TEST_CASE("the rules' findings in the SQLite export too") {
  REQUIRE_MESSAGE(std::system("command -v sqlite3 >/dev/null 2>&1") == 0, "the sqlite3 command (scripts/deps.sh installs it)");
  const std::string db = testutil::temp_path("rules.db");
  const auto r = testutil::run_tool(kAnalyze, {kFixture, "--rules", write("sq.yaml", kRules), "--sqlite", db});
  REQUIRE(r.exit == 0);
  const std::string out = testutil::temp_path("rules.txt");
  REQUIRE(std::system(("sqlite3 " + db + " \"SELECT category FROM findings ORDER BY id\" > " + out).c_str()) == 0);
  const std::string rows = testutil::read_file(out);
  CHECK(has(rows, "custom:step_budget\n"));
  CHECK(has(rows, "custom:high_memory_overhead\n"));
}

TEST_CASE("./.inferscope_rules.yaml is found in the working directory; --no-rules leaves it out") {
  const std::string dir = testutil::temp_path("project");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/.inferscope_rules.yaml") << kRules;
  auto r = testutil::run_tool(kAnalyze, {kFixture, "--findings"}, {.cwd = dir});
  REQUIRE(r.exit == 0);
  CHECK(has(r.out, "custom:high_memory_overhead"));
  r = testutil::run_tool(kAnalyze, {kFixture, "--findings", "--no-rules"}, {.cwd = dir});
  REQUIRE(r.exit == 0);
  CHECK_FALSE(has(r.out, "custom:"));
  // INFERSCOPE_RULES names another file, which wins over the working directory's.
  const std::string other = write("other.yaml", "builtin_rules: {h2d_bound: off}\n");
  r = testutil::run_tool(kAnalyze, {kFixture, "--findings"}, {.env = {"INFERSCOPE_RULES=" + other}, .cwd = dir});
  REQUIRE(r.exit == 0);
  CHECK(has(r.err, "iscope-analyze: using the rule file " + other + " (named by INFERSCOPE_RULES)"));
  CHECK_FALSE(has(r.out, "custom:"));
  CHECK_FALSE(has(r.out, "h2d_bound"));
}

TEST_CASE("a broken rule file stops the analysis with every problem, exit 2, before any output") {
  const std::string bad = write("bad.yaml", "bottleneck_rules:\n  - name: a\n    condition: \"h2d_tme > 1\"\n    suggestion: x\n"
                                            "thresholds: {min_impact: 3}\n");
  const std::string md = testutil::temp_path("never.md");
  const auto r = testutil::run_tool(kAnalyze, {kFixture, "--rules", bad, "-o", md});
  CHECK(r.exit == 2);
  CHECK(has(r.err, "the rule file " + bad + " (named by --rules) cannot be used:"));
  CHECK(has(r.err, "bad.yaml:3:17: condition: unknown metric 'h2d_tme'; did you mean h2d_time, h2d_ms?"));
  CHECK(has(r.err, "bad.yaml:5:14: unknown threshold 'min_impact'; did you mean 'min_impact_pct'?"));
  CHECK_FALSE(std::filesystem::exists(md));
  const auto c = testutil::run_tool(kAnalyze, {"--check-rules", bad});
  CHECK(c.exit == 1);
  CHECK(has(c.err, "bad.yaml:3:17: condition: unknown metric 'h2d_tme'"));
  const auto ok = testutil::run_tool(kAnalyze, {"--check-rules", write("good.yaml", kRules)});
  CHECK(ok.exit == 0);
  CHECK(has(ok.out, ": ok\n2 rules: high_memory_overhead, step_budget\nbuilt-in rules disabled: slow_steps\n"));
  const auto missing = testutil::run_tool(kAnalyze, {kFixture, "--rules", testutil::temp_path("absent.yaml")});
  CHECK(missing.exit == 2);
  CHECK(has(missing.err, "cannot read rule file"));
}

TEST_CASE("one rule file: --rules twice, empty, or with --no-rules is refused; --check-rules checks every file named") {
  const std::string good = write("one.yaml", kRules), bad = write("two.yaml", "thresholds: {gpu_bound_util: 90}\n");
  auto r = testutil::run_tool(kAnalyze, {kFixture, "--rules", good, "--rules", good});
  CHECK(r.exit == 2);
  CHECK(has(r.err, "--rules is given 2 times: one rule file is read"));
  r = testutil::run_tool(kAnalyze, {kFixture, "--rules", ""});
  CHECK(r.exit == 2);
  r = testutil::run_tool(kAnalyze, {kFixture, "--rules", good, "--no-rules"});
  CHECK(r.exit == 2);
  CHECK(has(r.err, "--rules and --no-rules contradict each other"));
  r = testutil::run_tool(kAnalyze, {"--check-rules", good, bad});
  CHECK(r.exit == 1);  // the second file is broken: a CI check of rules/*.yaml fails
  CHECK(has(r.out, "one.yaml: ok"));
  CHECK(has(r.err, "two.yaml:1:30: gpu_bound_util: 90 is outside 0 to 1 (a share, 0 to 1)"));
  // The report names the rule file it used and what it changed.
  const std::string md = testutil::temp_path("named.md");
  r = testutil::run_tool(kAnalyze, {kFixture, "--rules", good, "-o", md});
  REQUIRE(r.exit == 0);
  CHECK(has(testutil::read_file(md), "- Rule file: " + good + " (named by --rules): 2 rules: high_memory_overhead, step_budget; "
                                      "built-in rules disabled: slow_steps"));
}

TEST_CASE("every example in samples/rules passes --check-rules, and the example of the docs fires on its fixture") {
  std::vector<std::string> args = {"--check-rules"};
  for (const auto& e : std::filesystem::directory_iterator(std::string(INFERSCOPE_SOURCE_DIR) + "/samples/rules"))
    if (e.path().extension() == ".yaml") args.push_back(e.path().string());
  REQUIRE(args.size() >= 7);  // the docs' example and at least five of a team's own
  const auto r = testutil::run_tool(kAnalyze, args);
  CHECK(r.exit == 0);
  CHECK(r.err.empty());
  const auto f = testutil::run_tool(kAnalyze, {kFixture, "--findings", "--rules",
                                               std::string(INFERSCOPE_SOURCE_DIR) + "/samples/rules/high_memory_overhead.yaml"});
  REQUIRE(f.exit == 0);
  CHECK(has(f.out, "custom:high_memory_overhead"));
}

TEST_CASE("iscope-diff reads the same rule file for both runs") {
  const std::string rules = write("diff.yaml", kRules);
  const std::string out = testutil::temp_path("diff.md");
  const auto r = testutil::run_tool(kDiff, {kFixture, kFixture, "--rules", rules, "-o", out});
  REQUIRE(r.exit == 0);
  CHECK(has(testutil::read_file(out), "custom:step_budget"));
  const auto bad = testutil::run_tool(kDiff, {kFixture, kFixture, "--rules", write("bad2.yaml", "thresholds: 3\n")});
  CHECK(bad.exit == 2);
  CHECK(has(bad.err, "bad2.yaml:1:13: thresholds: expected 'name: value' lines"));
  const auto both = testutil::run_tool(kDiff, {kFixture, kFixture, "--rules", rules, "--no-rules"});
  CHECK(both.exit == 2);  // the same check as iscope-analyze's (tools/common)
  CHECK(has(both.err, "--rules and --no-rules contradict each other"));
}

TEST_CASE("docs/rules.md's metric tables are what --list-metrics prints (rules_doc_current)") {
  const auto r = testutil::run_tool(kAnalyze, {"--list-metrics"});
  REQUIRE(r.exit == 0);
  const std::string doc = testutil::read_file(std::string(INFERSCOPE_SOURCE_DIR) + "/docs/rules.md");
  const std::string begin = "<!-- generated by `iscope-analyze --list-metrics`; the test rules_doc_current fails when this part differs -->\n";
  const size_t a = doc.find(begin), b = doc.find("<!-- end of the generated part -->");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  const std::string generated = doc.substr(a + begin.size(), b - a - begin.size());
  if (generated != r.out)
    FAIL("docs/rules.md is out of date: put the output of `iscope-analyze --list-metrics` between its markers");
}
