// Custom rules over a hand-made RuleInput (tests/analyze/rule_fixture.hpp): the finding a rule file's rule makes
// (category, rule, confidence, impact, evidence, suggestions), its ranking with the built-in findings, built-in rules
// disabled and re-thresholded, names that match nothing, undefined values, and the metric table's values.
#include "analyze/rules/metrics.hpp"
#include "analyze/rules/rule_settings.hpp"
#include "rule_fixture.hpp"
#include "rulefile/expression.hpp"
#include "rulefile/expression_rule.hpp"
#include "rulefile/rule_file.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <unistd.h>

using namespace inferscope;
using namespace inferscope::analyze;

namespace {

const bool kSkipWithoutMuparser = [] {
  if (rulefile::expressions_available()) return false;
  std::printf("SKIPPED: this build has no muparser (libmuparser-dev): rule files are refused\n");
  std::exit(77);
}();

constexpr double ms = 1e6;

// A 100 ms typical step (so ms are also %), 20 steady steps; h2d 40 ms.
struct Input : testing::RuleFixture {
  Input() {
    breakdown.step_ms = 100;
    breakdown.h2d_ms = 40;
    typical.steps = 20;
    typical.dur = 100 * ms;
    stats.total = 25;
    stats.count = 20;
    stats.p99_ms = 130;
    steps.resize(25);
    selection.steady.assign(25, true);
    for (size_t i = 0; i < 5; ++i) selection.steady[i] = false;
    steps[2].d2h_bytes = 9'000'000;   // warm-up: not counted in max_step_d2h_bytes
    steps[10].d2h_bytes = 2'000'000;
    RangeRow r;
    r.name = "tokenize";
    r.count = 50;
    r.total_ms = 125;
    r.mean_us = 2500;
    r.p99_us = 4000;
    tables.ranges = {r};
    KernelRow k1, k2;
    k1.name = "sm90_xmma_gemm_bf16";
    k1.count = 100, k1.total_ms = 50, k1.share = 0.5;
    k2.name = "ampere_gemm_fp16";
    k2.count = 100, k2.total_ms = 30, k2.share = 0.3;
    tables.kernels = {k1, k2};
    PythonRow p;
    p.qualname = "Tokenizer.encode";
    p.count = 25, p.total_ms = 75, p.self_ms = 60;
    tables.python = {p};
  }
};

std::shared_ptr<const rules::RuleSettings> load(const std::string& text) {
  static int n = 0;
  const std::string path = std::filesystem::temp_directory_path() /
                           ("iscope-rules-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".yaml");
  std::ofstream(path) << text;
  auto s = rulefile::load_rule_file(path);
  std::filesystem::remove(path);
  return s;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kExample = R"(bottleneck_rules:
  - name: "high_memory_overhead"
    condition: "h2d_time / total_time > 0.3"
    suggestion: "Use pinned memory or reduce batch size"
    confidence_weight: 1.2
)";

}  // namespace

TEST_CASE("the example rule: a finding with its values as evidence, not estimated, never primary alone") {
  Input t;
  const auto r = rules::run_rules(t.input(), *load(kExample));
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK(f.category == "custom:high_memory_overhead");
  CHECK(f.rule == "high_memory_overhead");
  CHECK(f.title == "Rule 'high_memory_overhead': h2d_time / total_time > 0.3");
  CHECK(f.confidence == doctest::Approx(0.9));  // 0.75 x 1.2
  CHECK_FALSE(f.uncertain);
  CHECK(f.impact_ms == 0);
  CHECK_FALSE(f.primary);  // no impact: it says something is wrong, not what it costs
  CHECK(f.evidence.at(0) == "the rule file's condition holds: h2d_time / total_time > 0.3");
  CHECK(f.evidence.at(1) == "the values it read: h2d_time = 40.000 ms, total_time = 100.000 ms");
  CHECK(f.metrics.at("h2d_time") == 40);
  REQUIRE(f.suggestions.size() == 1);
  CHECK(f.suggestions[0].action == "Use pinned memory or reduce batch size");
  CHECK(f.suggestions[0].priority == "medium");
  CHECK_FALSE(f.suggestions[0].estimated);
  CHECK(r.warnings.empty());
  // At the threshold the condition is false: no finding.
  t.breakdown.h2d_ms = 30;
  CHECK(rules::run_rules(t.input(), *load(kExample)).findings.empty());
}

TEST_CASE("a rule with impact_ms is ranked with the built-in findings and can be primary") {
  Input t;
  t.typical.kernels = 500;
  t.typical.idle_gaps = 30 * ms;  // launch_bound: 30 ms per step
  t.tables.ranges[0].total_ms = 1250;  // 50 ms per step over the 25 steps
  t.tables.ranges[0].count = 500;
  const auto s = load(R"(bottleneck_rules:
  - name: tokenizer_budget
    condition: 'range_mean_ms("tokenize") > 2'
    title: 'tokenize takes {range_mean_ms("tokenize")} per call ({range_count("tokenize") / steps_total} per step)'
    impact_ms: 'range_ms_per_step("tokenize")'
    suggestions:
      - {action: Cache tokenized prompts, priority: high, saving_ms: 'range_ms_per_step("tokenize") * 0.8'}
      - {action: Trim whitespace first, priority: high, saving_ms: '0.5'}
)");
  const auto r = rules::run_rules(t.input(), *s);
  REQUIRE(r.findings.size() == 2);
  const Finding& f = r.findings[0];
  CHECK(f.category == "custom:tokenizer_budget");
  CHECK(f.primary);
  CHECK(f.impact_ms == doctest::Approx(50));
  CHECK(f.impact_pct == doctest::Approx(50));
  CHECK(r.findings[1].category == "launch_bound");
  CHECK_FALSE(r.findings[1].primary);
  CHECK(f.title == "tokenize takes 2.500 ms per call (20 per step)");
  CHECK(f.suggestions[0].estimated);
  CHECK(f.suggestions[0].impact_ms == doctest::Approx(40.0));
  CHECK(f.suggestions[0].priority == "high");
  CHECK(f.suggestions[0].model == "rule file: range_ms_per_step(\"tokenize\") * 0.8");
  CHECK(f.suggestions[1].priority == "low");  // 0.5 ms of a 100 ms step: under 1 %, nobody would see it
}

TEST_CASE("a rule without impact_ms comes after the findings with one") {
  Input t;
  t.typical.kernels = 500;
  t.typical.idle_gaps = 30 * ms;
  const auto r = rules::run_rules(t.input(), *load(kExample));
  REQUIRE(r.findings.size() == 2);
  CHECK(r.findings[0].category == "launch_bound");
  CHECK(r.findings[0].primary);
  CHECK(r.findings[0].rule == "launch_bound");  // the name that disables it
  CHECK(r.findings[1].category == "custom:high_memory_overhead");
}

TEST_CASE("built-in rules disabled by name; thresholds for one rule or for all") {
  Input t;
  t.typical.kernels = 500;
  t.typical.idle_gaps = 30 * ms;
  t.breakdown.gpu_utilization = 0.85;
  t.breakdown.gpu_compute_ms = 60;
  auto cats = [&](const std::string& text) {
    std::vector<std::string> out;
    for (const Finding& f : rules::run_rules(t.input(), *load(text)).findings) out.push_back(f.category);
    return out;
  };
  CHECK(cats("") == std::vector<std::string>{"gpu_bound", "launch_bound"});
  CHECK(cats("builtin_rules: {launch_bound: off}") == std::vector<std::string>{"gpu_bound"});
  CHECK(cats("builtin_rules: {launch_bound: {enabled: false}}") == std::vector<std::string>{"gpu_bound"});
  // gpu_bound's own threshold: busy 85 % is no longer enough.
  CHECK(cats("builtin_rules: {gpu_bound: {gpu_bound_util: 0.9}}") == std::vector<std::string>{"launch_bound"});
  // min_impact_pct for every rule that reads it: launch_bound's 30 % is under 35 %; gpu_bound does not read it.
  CHECK(cats("thresholds: {min_impact_pct: 35}") == std::vector<std::string>{"gpu_bound"});
  // A rule's own entry wins over the one for all.
  CHECK(cats("thresholds: {min_impact_pct: 35}\nbuiltin_rules: {launch_bound: {min_impact_pct: 5}}") ==
        std::vector<std::string>{"gpu_bound", "launch_bound"});
  // launch_min_kernels for launch_bound only.
  CHECK(cats("builtin_rules: {launch_bound: {launch_min_kernels: 501}}") == std::vector<std::string>{"gpu_bound"});
}

TEST_CASE("named metrics: ranges by name, functions by their last part, kernels by what their name holds") {
  Input t;
  auto value = [&](const std::string& expr) {
    return rulefile::Expression::compile(expr).evaluate(t.input());
  };
  CHECK(value("range_mean_ms(\"tokenize\")").value == doctest::Approx(2.5));
  CHECK(value("range_p99_ms(\"tokenize\")").value == doctest::Approx(4.0));
  CHECK(value("range_ms_per_step(\"tokenize\")").value == doctest::Approx(5.0));  // 125 ms over 25 steps
  CHECK(value("function_total_ms(\"encode\")").value == doctest::Approx(75));      // Tokenizer.encode
  CHECK(value("function_total_ms(\"Tokenizer.encode\")").value == doctest::Approx(75));
  CHECK(value("function_mean_ms(\"encode\")").value == doctest::Approx(3));
  CHECK(value("function_self_ms(\"encode\")").value == doctest::Approx(60));
  CHECK(value("function_count(\"code\")").missing.size() == 1);                    // not a last part
  CHECK(value("kernel_share(\"gemm\")").value == doctest::Approx(0.8));            // both GEMMs
  CHECK(value("kernel_total_ms(\"sm90\")").value == doctest::Approx(50));
  CHECK(value("kernel_mean_us(\"gemm\")").value == doctest::Approx(400));          // 80 ms over 200
  const rulefile::Evaluation v = value("range_mean_ms(\"tokenise\") + 1");
  CHECK(v.value == 1);
  REQUIRE(v.missing.size() == 1);
  CHECK(v.missing[0] == "no range named \"tokenise\" in this trace (closest: \"tokenize\")");
}

TEST_CASE("a name that matches nothing warns and reads 0; a value that is not finite on the way stops the rule") {
  Input t;
  auto r = rules::run_rules(t.input(), *load(R"(bottleneck_rules:
  - {name: a, condition: 'range_max_ms("tokenise") < 1', suggestion: x}
  - {name: b, condition: 'h2d_ms / (d2h_ms - d2h_ms) > 1', suggestion: x}
  - {name: c, condition: '0 / 0 > 1 || 0 / 0 < 1', suggestion: x}
  - {name: d, condition: 'sqrt(-1) != 5', suggestion: x}
  - {name: e, condition: 'min(h2d_ms, 1 / 0) >= 0', suggestion: x}
)"));
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].category == "custom:a");
  REQUIRE(r.warnings.size() == 5);
  CHECK(r.warnings[0] == "rule 'a': no range named \"tokenise\" in this trace (closest: \"tokenize\"); it reads 0");
  // 40 / 0 is infinite and would be > 1; NaN compares false; sqrt(-1) != 5 would hold: each is no answer here.
  for (const char* rule : {"rule 'b'", "rule 'c'", "rule 'd'", "rule 'e'"}) {
    bool warned = false;
    for (const std::string& w : r.warnings) warned |= has(w, std::string(rule) + ": its condition") && has(w, "not finite");
    CHECK_MESSAGE(warned, rule);
  }
}

TEST_CASE("impact_ms and saving_ms: not finite is not estimated, negative is 0, each with a warning") {
  Input t;
  auto r = rules::run_rules(t.input(), *load(R"(bottleneck_rules:
  - name: a
    condition: step_ms > 1
    impact_ms: step_ms / 0
    suggestions:
      - {action: x, saving_ms: '1 / 0'}
      - {action: y, saving_ms: '-5'}
)"));
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK_FALSE(f.impact_estimated);
  CHECK(f.impact_ms == 0);
  CHECK_FALSE(f.suggestions[0].estimated);
  CHECK(f.suggestions[1].estimated);
  CHECK(f.suggestions[1].impact_ms == 0);
  CHECK(r.warnings.size() == 3);
  CHECK(has(r.warnings[0], "rule 'a': impact_ms `step_ms / 0` has no value on this trace"));
  CHECK(has(r.warnings[2], "rule 'a': saving_ms `-5` is negative on this trace (-5.000 ms): counted as 0"));
}

TEST_CASE("confidence: 0.75 x the weight, at most 1; uncertain under the uncertain mark") {
  Input t;
  auto confidence = [&](const char* weight) {
    const auto r = rules::run_rules(
        t.input(), *load(std::string("bottleneck_rules:\n  - {name: w, condition: step_ms > 1, suggestion: x, confidence_weight: ") +
                         weight + "}\n"));
    return r.findings.at(0);
  };
  CHECK(confidence("1").confidence == doctest::Approx(0.75));
  CHECK(confidence("2").confidence == doctest::Approx(1.0));
  CHECK(confidence("0.6").uncertain);
  CHECK_FALSE(confidence("0.7").uncertain);
}

TEST_CASE("a title placeholder is in its metric's unit") {
  Input t;
  t.typical.d2h_bytes = 1.5e6;
  const auto r = rules::run_rules(t.input(), *load(R"(bottleneck_rules:
  - name: d2h_budget
    condition: max_step_d2h_bytes > 1048576
    title: '{d2h_bytes_per_step} per step, {max_step_d2h_bytes} at most; {h2d_share}; {h2d_ms * 2}'
    suggestion: Keep results on the GPU
)"));
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].title == "1.50 MB per step, 2.00 MB at most; 40.0 %; 80");  // 1.5e6 and 2e6 bytes
}

TEST_CASE("one rule set serves analyses on several threads at once") {
  const auto s = load(R"(bottleneck_rules:
  - {name: a, condition: 'range_mean_ms("tokenize") > 2 && h2d_ms > 1', suggestion: x, impact_ms: h2d_ms}
)");
  std::vector<std::thread> threads;
  std::vector<double> impacts(8);
  std::vector<Input> inputs(8);
  for (size_t i = 0; i < 8; ++i) {
    inputs[i].breakdown.h2d_ms = double(10 + i);
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) impacts[i] = rules::run_rules(inputs[i].input(), *s).findings.at(0).impact_ms;
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < 8; ++i) CHECK(impacts[i] == double(10 + i));
}

TEST_CASE("the metric table: every metric reads its field; names are unique; the Markdown lists each") {
  Input t;
  t.typical.kernels = 321;
  t.typical.host_gil = 7 * ms;
  t.breakdown.gpu_utilization = 0.42;
  auto v = [&](const char* name) {
    const rules::Metric* m = rules::find_metric(name);
    REQUIRE(m);
    return m->value(t.input());
  };
  CHECK(v("step_ms") == 100);
  CHECK(v("total_time") == 100);
  CHECK(v("h2d_time") == 40);
  CHECK(v("h2d_share") == doctest::Approx(0.4));
  CHECK(v("step_p99_ms") == 130);
  CHECK(v("steps_total") == 25);
  CHECK(v("kernels_per_step") == 321);
  CHECK(v("gil_wait_ms") == doctest::Approx(7));
  CHECK(v("gpu_utilization") == doctest::Approx(0.42));
  CHECK(v("max_step_d2h_bytes") == 2'000'000);  // the warm-up step's 9 MB is not a steady step
  std::set<std::string> names;
  const std::string md = rules::metrics_markdown();
  for (const rules::Metric& m : rules::metrics()) {
    CHECK(names.insert(m.name).second);
    CHECK(has(md, "| `" + std::string(m.name) + "` |"));
  }
  for (const rules::NamedMetric& m : rules::named_metrics()) {
    CHECK(names.insert(m.name).second);
    CHECK(has(md, "| `" + std::string(m.name) + "(\"name\")` |"));
  }
  CHECK(rules::closest_metric_names("h2d_tme") == std::vector<std::string>{"h2d_time", "h2d_ms"});
}

TEST_CASE("the threshold table covers every threshold a rule file may set, each read by the rules it names") {
  const rules::Thresholds defaults;
  rules::RuleSettings s;
  s.thresholds["gpu_bound"]["gpu_bound_util"] = 0.5;
  s.thresholds["gpu_bound"]["launch_min_kernels"] = 99;  // not read by gpu_bound: not applied
  s.thresholds[""]["min_impact_pct"] = 2;                // read by launch_bound, not by gpu_bound
  const rules::Thresholds g = rules::thresholds_for(defaults, s, "gpu_bound");
  CHECK(g.gpu_bound_util == 0.5);
  CHECK(g.launch_min_kernels == defaults.launch_min_kernels);
  CHECK(g.min_impact_pct == defaults.min_impact_pct);
  CHECK(rules::thresholds_for(defaults, s, "launch_bound").min_impact_pct == 2);
  for (const rules::ThresholdDef& d : rules::threshold_table()) {
    const std::string read_by = d.read_by;
    if (read_by == "*") continue;
    for (const std::string& name : rules::builtin_rule_names())
      if (has(read_by, name)) CHECK(rules::reads_threshold(d, name));
  }
  CHECK_FALSE(rules::reads_threshold(*rules::find_threshold("saturated_share"), "h2d"));  // whole names only
}
