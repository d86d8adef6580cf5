// libFuzzer target: the rule-file reader (lib/rulefile) on hostile .inferscope_rules.yaml files: the YAML parse,
// every key and value check, expressions compiled by muparser (metrics, named metrics, placeholders in titles,
// impact_ms and saving_ms), then every rule it accepted evaluated with the built-in rules over a small analysis
// input with steps, ranges, functions and kernels (run_rules). The input is one rule file.
// fuzz-sources: lib/rulefile/*.cpp lib/config/yaml_file.cpp lib/dump/*.cpp lib/import/*.cpp lib/analyze/*.cpp lib/analyze/serving/*.cpp lib/analyze/run/*.cpp lib/analyze/waits/*.cpp lib/analyze/generation/*.cpp lib/analyze/what_if/*.cpp lib/analyze/support/*.cpp lib/analyze/rules/*.cpp lib/text/*.cpp
// fuzz-seeds: rules
// fuzz-flags: -fno-sanitize=alignment -DINFERSCOPE_HAVE_MUPARSER=1
// fuzz-libs: -lyaml-cpp -lmuparser -lz
#include "fuzz_support.hpp"
#include "../tests/analyze/rule_fixture.hpp"
#include "rulefile/rule_file.hpp"

#include <exception>

using namespace inferscope;

namespace {

// An analysis input every metric has something to read in: 10 steps (2 of warm-up), a range, a function, kernels.
analyze::testing::RuleFixture make_input() {
  analyze::testing::RuleFixture t;
  t.breakdown.step_ms = 20;
  t.breakdown.h2d_ms = 5;
  t.breakdown.gpu_utilization = 0.6;
  t.typical.steps = 8;
  t.typical.dur = 20e6;
  t.typical.kernels = 40;
  t.stats.total = 10;
  t.stats.count = 8;
  t.steps.resize(10);
  t.selection.steady.assign(10, true);
  t.selection.steady[0] = t.selection.steady[1] = false;
  analyze::RangeRow r;
  r.name = "tokenize";
  r.count = 10, r.total_ms = 12, r.mean_us = 1200;
  t.tables.ranges = {r};
  analyze::PythonRow p;
  p.qualname = "Model.forward";
  p.count = 10, p.total_ms = 100;
  t.tables.python = {p};
  analyze::KernelRow k;
  k.name = "sm90_gemm";
  k.count = 400, k.total_ms = 80, k.share = 1;
  t.tables.kernels = {k};
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_file(std::vector<uint8_t>(data, data + size));
  if (path.empty()) return 0;
  static const analyze::testing::RuleFixture input = make_input();
  try {
    const auto settings = rulefile::load_rule_file(path);
    const analyze::rules::RulesResult r = analyze::rules::run_rules(input.input(), *settings);
    (void)rulefile::describe(*settings);
    for (const analyze::Finding& f : r.findings)
      if (f.category.empty() || (f.suggestions.empty() && f.category.rfind("custom:", 0) == 0)) __builtin_trap();
  } catch (const rulefile::RuleFileError& e) {
    if (e.problems().empty()) __builtin_trap();  // a refusal always says why
  }
  // Anything else escaping (std::bad_alloc, a muparser or yaml-cpp exception the reader does not catch) is a
  // finding: libFuzzer reports the uncaught exception as a crash.
  return 0;
}
