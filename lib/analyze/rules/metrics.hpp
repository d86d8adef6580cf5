// The metrics a rule file's conditions read (docs/rules.md): one table, with each metric's name, unit, meaning and
// how it is read from the rules' input. docs/rules.md's metric list is generated from this table
// (`iscope-analyze --list-metrics`), and a test compares the two, so the page and the analyzer cannot drift.
//
//   if (const Metric* m = find_metric("h2d_share")) double v = m->value(rule_input);
//   NamedValue r = find_named_metric("range_mean_ms")->value(rule_input, "tokenize");
#pragma once

#include "analyze/rules/rule.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::analyze::rules {

enum class MetricUnit { kMs, kUs, kShare, kCount, kBytes, kFlag, kPerSecond };
/// "ms", "us", "share (0..1)", "count", "bytes", "0 or 1", "per second".
const char* unit_name(MetricUnit unit);

/// A number of the analysis, read by name in a condition: `h2d_share > 0.3`.
struct Metric {
  const char* name;
  MetricUnit unit;
  const char* meaning;
  double (*value)(const RuleInput& in);
};

/// A named function, range or kernel's figure; found: the name matched something in this trace.
struct NamedValue {
  double value = 0;
  bool found = false;
};
/// A number about one function, range or kernel of the trace, read with its name: `range_mean_ms("tokenize") > 2`.
struct NamedMetric {
  const char* name;
  MetricUnit unit;
  const char* meaning;
  const char* kind;  ///< "range", "function", "kernel": what the name names
  NamedValue (*value)(const RuleInput& in, std::string_view key);
};

std::span<const Metric> metrics();
std::span<const NamedMetric> named_metrics();
const Metric* find_metric(std::string_view name);
const NamedMetric* find_named_metric(std::string_view name);

/// Up to `n` known names (metrics and named metrics) closest to `unknown` by edit distance, closest first; only
/// those within a third of the name's length (a typo, not a different word).
std::vector<std::string> closest_metric_names(std::string_view unknown, size_t n = 3);

/// The names of the trace's ranges, functions or kernels (`kind` as NamedMetric::kind) closest to `key`, for a
/// warning when a name matched nothing.
std::vector<std::string> closest_trace_names(const RuleInput& in, std::string_view kind, std::string_view key,
                                             size_t n = 3);

/// The Markdown tables of every metric and named metric: the generated part of docs/rules.md.
std::string metrics_markdown();

}  // namespace inferscope::analyze::rules
