// The rule-file reader (lib/rulefile/rule_file.cpp, docs/rules.md): what a valid file sets, and every error path,
// each with the file, line and column it names. Every problem of a file is reported at once.
#include "rulefile/expression.hpp"
#include "rulefile/rule_file.hpp"
#include "test_util.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace inferscope;
namespace rules = analyze::rules;

namespace {

std::string write_rules(const std::string& name, const std::string& text) {
  const std::string path = testutil::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// The problems of a file that must not load ("" joined by newlines); FAIL when it loads.
std::string problems_of(const std::string& text, const std::string& name = "r.yaml") {
  const std::string path = write_rules(name, text);
  try {
    rulefile::load_rule_file(path);
  } catch (const rulefile::RuleFileError& e) {
    std::string all;
    for (const std::string& p : e.problems()) all += p.substr(p.find(name) == std::string::npos ? 0 : p.find(name)) + "\n";
    return all;
  }
  FAIL("the file loaded: " << text);
  return "";
}

// The problems of the file at `path`, which must not load.
std::string problems_of_path(const std::string& path) {
  try {
    rulefile::load_rule_file(path);
  } catch (const rulefile::RuleFileError& e) {
    return e.what();
  }
  FAIL("loaded: " << path);
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

// Without muparser every rule is refused: nothing here can run (exit 77: skipped, with the reason).
const bool kSkipWithoutMuparser = [] {
  if (rulefile::expressions_available()) return false;
  std::printf("SKIPPED: this build has no muparser (libmuparser-dev): rule files are refused\n");
  std::exit(77);
}();

TEST_CASE("the example of docs/rules.md loads: one rule with its weight") {
  const auto s = rulefile::load_rule_file(write_rules("example.yaml", R"(bottleneck_rules:
  - name: "high_memory_overhead"
    condition: "h2d_time / total_time > 0.3"
    suggestion: "Use pinned memory or reduce batch size"
    confidence_weight: 1.2
)"));
  REQUIRE(s->custom.size() == 1);
  CHECK(s->custom[0]->name() == "high_memory_overhead");
  CHECK(s->disabled.empty());
  CHECK(s->thresholds.empty());
  CHECK(rulefile::describe(*s) == "1 rule: high_memory_overhead\nbuilt-in rules disabled: none\nthresholds changed: none\n");
}

TEST_CASE("built-in rules are disabled and re-thresholded by name; thresholds for every rule") {
  const auto s = rulefile::load_rule_file(write_rules("builtin.yaml", R"(builtin_rules:
  slow_steps: off
  warmup: {enabled: false}
  gpu_bound: {gpu_bound_util: 0.9, gpu_bound_compute: 0.6}
  launch_bound: on
thresholds:
  min_impact_pct: 3
)"));
  CHECK(s->disabled == std::set<std::string>{"slow_steps", "warmup"});
  CHECK(s->thresholds.at("gpu_bound").at("gpu_bound_util") == 0.9);
  CHECK(s->thresholds.at("gpu_bound").at("gpu_bound_compute") == 0.6);
  CHECK(s->thresholds.at("").at("min_impact_pct") == 3);
  CHECK(s->custom.empty());
}

TEST_CASE("an empty file, or one of comments only, sets nothing") {
  for (const char* text : {"", "# nothing yet\n"}) {
    const auto s = rulefile::load_rule_file(write_rules("empty.yaml", text));
    CHECK(s->custom.empty());
    CHECK(s->disabled.empty());
  }
}

TEST_CASE("an unknown metric names its line and column and the closest metrics") {
  const std::string p = problems_of("bottleneck_rules:\n  - name: a\n    condition: \"h2d_tme / total_time > 0.3\"\n    suggestion: x\n");
  CHECK(p == "r.yaml:3:17: condition: unknown metric 'h2d_tme'; did you mean h2d_time, h2d_ms? (in `h2d_tme / total_time > 0.3`)\n");
  // Far from any metric: no guess, the list's place instead.
  CHECK(has(problems_of("bottleneck_rules:\n  - name: a\n    condition: zzzzzz > 1\n    suggestion: x\n"),
            "r.yaml:3:16: condition: unknown metric 'zzzzzz'; docs/rules.md lists every metric"));
}

TEST_CASE("an unknown function is named, with the named metrics of its kind; a metric called like one is told so") {
  // muparser alone answers 'Unexpected parenthesis "(" at position 8' and never names range_ms.
  CHECK(problems_of("bottleneck_rules:\n  - name: a\n    condition: 'range_ms(\"tokenize\") > 2'\n    suggestion: x\n") ==
        "r.yaml:3:17: condition: unknown function 'range_ms'; did you mean range_ms_per_step, range_count, range_mean_ms, "
        "range_p50_ms, range_p99_ms, range_max_ms, range_total_ms? (in `range_ms(\"tokenize\") > 2`)\n");
  CHECK(has(problems_of("bottleneck_rules:\n  - name: a\n    condition: 'range_mean_msx(\"t\") > 2'\n    suggestion: x\n"),
            "r.yaml:3:17: condition: unknown function 'range_mean_msx'; did you mean range_mean_ms, range_max_ms, range_count"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: a\n    condition: 'qqqq(\"t\") > 2'\n    suggestion: x\n"),
            "unknown function 'qqqq'; docs/rules.md lists every metric that takes a name"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: a\n    condition: 'h2d_ms (1) > 2'\n    suggestion: x\n"),
            "r.yaml:3:17: condition: h2d_ms is a metric, not a function: write it without parentheses"));
  // muparser's own functions and quoted names that look like calls are not refused.
  CHECK_NOTHROW(rulefile::load_rule_file(write_rules(
      "r.yaml", "bottleneck_rules:\n  - name: a\n    condition: 'max(h2d_ms, d2h_ms) > 2 && atan2(h2d_ms, 1) >= 0 && range_count(\"f(x)\") >= 0'\n"
                "    suggestion: x\n")));
}

TEST_CASE("a named metric needs its name in double quotes") {
  CHECK(has(problems_of("bottleneck_rules:\n  - name: b\n    condition: 'range_mean_ms(tokenize) > 2'\n    suggestion: x\n"),
            "r.yaml:3:17: condition: range_mean_ms takes a name in double quotes, e.g. range_mean_ms(\"tokenize\")"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: b\n    condition: 'kernel_share > 0.5'\n    suggestion: x\n"),
            "r.yaml:3:17: condition: kernel_share takes a name in double quotes"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: b\n    condition: '\"gemm\" > 0.5'\n    suggestion: x\n"),
            "a quoted name is only an argument of a named metric"));
}

TEST_CASE("a condition must compare, and '=' is refused where '==' was meant") {
  CHECK(has(problems_of("bottleneck_rules:\n  - name: c\n    condition: h2d_ms / step_ms\n    suggestion: x\n"),
            "r.yaml:3:16: condition: `h2d_ms / step_ms` compares nothing"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: d\n    condition: \"h2d_ms = 3\"\n    suggestion: x\n"),
            "r.yaml:3:24: condition: '=' assigns; compare with '=='"));
}

TEST_CASE("a syntax error of an expression points into it") {
  const std::string p = problems_of("bottleneck_rules:\n  - name: e\n    condition: \"step_ms > 1 &&\"\n    suggestion: x\n");
  CHECK(has(p, "r.yaml:3:31: condition: Unexpected end of expression"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: e\n    condition: \"(step_ms > 1\"\n    suggestion: x\n"),
            "condition: Missing parenthesis"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: e\n    condition: \"   \"\n    suggestion: x\n"),
            "condition: the expression is empty"));
}

TEST_CASE("a rule needs a name, a condition and a suggestion") {
  CHECK(problems_of("bottleneck_rules:\n  - condition: step_ms > 1\n    suggestion: x\n") == "r.yaml:2:5: a rule needs a name\n");
  CHECK(problems_of("bottleneck_rules:\n  - name: f\n    suggestion: x\n") == "r.yaml:2:5: rule 'f' needs a condition\n");
  CHECK(has(problems_of("bottleneck_rules:\n  - name: f\n    condition: step_ms > 1\n"),
            "r.yaml:2:5: rule 'f' needs a suggestion (what to do when it holds)"));
  // Everything missing at once.
  CHECK(problems_of("bottleneck_rules:\n  - title: t\n") ==
        "r.yaml:2:5: a rule needs a name, a condition and a suggestion (what to do when it holds)\n");
  CHECK(has(problems_of("bottleneck_rules:\n  - name: f\n    conditon: step_ms > 1\n    suggestion: x\n"),
            "r.yaml:3:5: unknown rule key 'conditon'; did you mean 'condition'?"));
}

TEST_CASE("rule names: valid characters, unique, and not a built-in rule's") {
  CHECK(has(problems_of("bottleneck_rules:\n  - name: 'a b'\n    condition: step_ms > 1\n    suggestion: x\n"),
            "r.yaml:2:11: name: 'a b': use letters, digits"));
  CHECK(has(problems_of("bottleneck_rules:\n  - {name: g, condition: step_ms > 1, suggestion: x}\n"
                        "  - {name: g, condition: step_ms > 2, suggestion: y}\n"),
            "r.yaml:3:5: rule 'g': a second rule of that name (first at line 2)"));
  CHECK(has(problems_of("bottleneck_rules:\n  - {name: launch_bound, condition: step_ms > 1, suggestion: x}\n"),
            "rule 'launch_bound': the name of a built-in rule"));
}

TEST_CASE("suggestions: sentences or {action, priority, saving_ms}, each checked") {
  const auto s = rulefile::load_rule_file(write_rules("sugg.yaml", R"(bottleneck_rules:
  - name: h
    condition: step_ms > 1
    suggestions:
      - Do this first
      - {action: Then this, priority: high, saving_ms: "h2d_ms * 0.5"}
)"));
  CHECK(s->custom.size() == 1);
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestions: []\n"),
            "r.yaml:4:18: suggestions: the list is empty"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestions:\n      - {action: x, priority: urgent}\n"),
            "r.yaml:5:31: priority: 'urgent'; allowed: high, medium, low"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestions:\n      - {priority: low}\n"),
            "r.yaml:5:9: suggestions: a suggestion needs an action"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestions:\n      - {action: x, saving: 3}\n"),
            "unknown suggestion key 'saving'; did you mean 'saving_ms'?"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestion: x\n    suggestions: [y]\n"),
            "r.yaml:5:18: suggestions: give suggestion or suggestions, not both"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: h\n    condition: step_ms > 1\n    suggestions:\n      - {action: x, saving_ms: 'h2d_m'}\n"),
            "saving_ms: unknown metric 'h2d_m'"));
}

TEST_CASE("confidence_weight is a number in (0, 10]") {
  const std::string head = "bottleneck_rules:\n  - name: i\n    condition: step_ms > 1\n    suggestion: x\n    confidence_weight: ";
  CHECK(has(problems_of(head + "lots\n"), "r.yaml:5:24: confidence_weight: expected a number, got 'lots'"));
  CHECK(has(problems_of(head + "0\n"), "confidence_weight: 0 is outside (0, 10]"));
  CHECK(has(problems_of(head + "11\n"), "confidence_weight: 11 is outside (0, 10]"));
  CHECK(has(problems_of(head + "nan\n"), "expected a number, got 'nan'"));
}

TEST_CASE("titles: {expression} placeholders are compiled; a '{' without '}' is an error") {
  CHECK(has(problems_of("bottleneck_rules:\n  - name: j\n    condition: step_ms > 1\n    suggestion: x\n    title: 'took {step_ms'\n"),
            "r.yaml:5:18: title: a '{' without its '}'"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: j\n    condition: step_ms > 1\n    suggestion: x\n    title: 'took {stp_ms}'\n"),
            "r.yaml:5:19: title: in {stp_ms}: unknown metric 'stp_ms'; did you mean step_ms"));
}

TEST_CASE("builtin_rules and thresholds: unknown names, values and thresholds a rule does not read") {
  CHECK(has(problems_of("builtin_rules:\n  gpu_bund: off\n"), "r.yaml:2:3: unknown built-in rule 'gpu_bund'; did you mean 'gpu_bound'?"));
  CHECK(has(problems_of("builtin_rules:\n  sync_bound: maybe\n"), "r.yaml:2:15: sync_bound: 'maybe'; allowed: on, off"));
  CHECK(has(problems_of("builtin_rules:\n  launch_bound: {gpu_bound_util: 0.5}\n"),
            "r.yaml:2:18: launch_bound does not read gpu_bound_util; it is read by gpu_bound"));
  CHECK(has(problems_of("builtin_rules:\n  launch_bound: [a]\n"), "launch_bound: expected off, on, or a mapping of thresholds"));
  CHECK(has(problems_of("thresholds:\n  min_impact: 3\n"), "r.yaml:2:3: unknown threshold 'min_impact'; did you mean 'min_impact_pct'?"));
  CHECK(has(problems_of("thresholds:\n  min_impact_pct: -1\n"), "min_impact_pct: -1 is outside 0 to 100 (percent of the step)"));
  CHECK(has(problems_of("thresholds:\n  gpu_bound_util: 90\n"), "gpu_bound_util: 90 is outside 0 to 1 (a share, 0 to 1)"));
  CHECK(has(problems_of("thresholds:\n  max_suggested_workers: 0\n"), "max_suggested_workers: 0 is outside 1 to 1024"));
  CHECK(has(problems_of("thresholds:\n  max_suggested_workers: 2.5\n"), "max_suggested_workers: 2.5 is not a whole number"));
  CHECK(has(problems_of("bottleneck_rules:\n  - {name: e, condition: step_ms > 1, suggestion: ''}\n"), "suggestion: empty; say what to do"));
  CHECK(has(problems_of("thresholds:\n  min_impact_pct: high\n"), "min_impact_pct: expected a number, got 'high'"));
  CHECK(has(problems_of("thresholds: 3\n"), "r.yaml:1:13: thresholds: expected 'name: value' lines"));
  CHECK(has(problems_of("bottleneck_rule:\n  - name: x\n"), "r.yaml:1:1: unknown key 'bottleneck_rule'; did you mean 'bottleneck_rules'?"));
}

TEST_CASE("YAML problems: syntax, a second document, a key twice, a quote left open, not a mapping") {
  CHECK(has(problems_of("bottleneck_rules: [\n"), "r.yaml:2:1: YAML syntax error"));
  CHECK(has(problems_of("thresholds: {min_impact_pct: 3}\n---\nthresholds: {}\n"),
            "r.yaml:3: a rule file holds one YAML document; this is a second one"));
  CHECK(has(problems_of("thresholds:\n  min_impact_pct: 3\n  min_impact_pct: 4\n"),
            "r.yaml:3:3: min_impact_pct: set twice (first at line 2)"));
  CHECK(has(problems_of("bottleneck_rules:\n  - name: k\n    condition: \"step_ms > 1\n    suggestion: x\n"),
            "YAML syntax error"));
  CHECK(has(problems_of("- a\n- b\n"), "r.yaml:1:1: expected the keys bottleneck_rules, builtin_rules and thresholds"));
  CHECK(has(problems_of(","), "YAML syntax error"));  // yaml-cpp's LoadAll never returned on this
}

TEST_CASE("every problem of a file is reported at once") {
  const std::string p = problems_of(R"(bottleneck_rules:
  - name: a
    condition: "h2d_tme > 1"
    suggestion: x
  - name: b
    condition: "step_ms >"
    suggestion: x
builtin_rules:
  gpu_bund: off
thresholds:
  min_impact: 3
)");
  CHECK(lines(p) == 4);
  CHECK(has(p, "r.yaml:3:"));
  CHECK(has(p, "r.yaml:6:"));
  CHECK(has(p, "r.yaml:9:"));
  CHECK(has(p, "r.yaml:11:"));
}

TEST_CASE("what is not a rule file is refused by name and kind, never read without end") {
  const std::string dir = testutil::temp_path("a_directory");
  std::filesystem::create_directories(dir);
  CHECK(has(problems_of_path(dir), "is a directory, not a regular file"));
  const std::string fifo = testutil::temp_path("a_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(has(problems_of_path(fifo), "is a FIFO (named pipe), not a regular file"));  // and it did not block
  CHECK(has(problems_of_path("/dev/zero"), "is a character device"));
  CHECK(has(problems_of_path(testutil::temp_path("missing.yaml")), "cannot read rule file"));
  const std::string big = write_rules("big.yaml", "# " + std::string(rulefile::kMaxRuleFileBytes, 'x') + "\n");
  CHECK(has(problems_of_path(big), "larger than 1 MiB; a rule file holds a few rules"));
}

TEST_CASE("the file comes from --rules, else INFERSCOPE_RULES, else ./.inferscope_rules.yaml") {
  const std::string dir = testutil::temp_path("cwd");
  std::filesystem::create_directories(dir);
  const auto here = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  ::unsetenv("INFERSCOPE_RULES");
  std::string by;
  CHECK(rulefile::find_rule_file("", &by).empty());
  std::ofstream(".inferscope_rules.yaml") << "";
  CHECK(rulefile::find_rule_file("", &by) == dir + "/.inferscope_rules.yaml");
  CHECK(by == "the working directory");
  ::setenv("INFERSCOPE_RULES", "/x/env.yaml", 1);
  CHECK(rulefile::find_rule_file("", &by) == "/x/env.yaml");
  CHECK(by == "INFERSCOPE_RULES");
  CHECK(rulefile::find_rule_file("/x/flag.yaml", &by) == "/x/flag.yaml");
  CHECK(by == "--rules");
  // A broken file found in the working directory says where it came from and how to analyse without it.
  ::unsetenv("INFERSCOPE_RULES");
  std::ofstream(".inferscope_rules.yaml") << "thresholds: {min_impact: 3}\n";
  try {
    rulefile::rules_for_tool("", false);
    FAIL("a broken rule file was used");
  } catch (const rulefile::RuleFileError& e) {
    CHECK(has(e.what(), "(named by the working directory) cannot be used (--no-rules analyses without it):"));
    CHECK(has(e.what(), ".inferscope_rules.yaml:1:14: unknown threshold 'min_impact'"));
  }
  CHECK(rulefile::rules_for_tool("", true) == nullptr);  // --no-rules
  std::filesystem::current_path(here);
}
