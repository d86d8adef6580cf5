// A rule file's rule evaluated into a Finding (expression_rule.hpp).
#include "rulefile/expression_rule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace inferscope::rulefile {
namespace {

namespace rules = analyze::rules;
using analyze::Finding;

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  const size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// A placeholder's value: in its unit when the expression is one metric, else as a plain number.
std::string placeholder_text(const Expression& e, const Evaluation& v) {
  if (v.inputs.size() == 1 && trimmed(e.text()) == v.inputs.front().name) return format_value(v.value, v.inputs.front().unit);
  char b[64];
  std::snprintf(b, sizeof(b), "%.4g", v.value);
  return b;
}

// The title with each {expression} replaced by its value.
std::string fill_title(const RuleSpec& spec, const rules::RuleInput& in) {
  if (spec.title.empty()) return "Rule '" + spec.name + "': " + spec.condition.text();
  std::string out;
  size_t part = 0;
  for (size_t i = 0; i < spec.title.size(); ++i) {
    const size_t close = spec.title[i] == '{' ? spec.title.find('}', i) : std::string::npos;
    if (close == std::string::npos || part >= spec.title_parts.size()) {
      out += spec.title[i];
      continue;
    }
    const Expression& e = spec.title_parts[part++];
    out += placeholder_text(e, e.evaluate(in));
    i = close;
  }
  return out;
}

void add_inputs(Finding& f, const Evaluation& v) {
  std::string line = "the values it read: ";
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const InputValue& x = v.inputs[i];
    line += (i ? ", " : "") + x.name + " = " + format_value(x.value, x.unit);
    f.metrics[x.name] = x.value;
  }
  if (!v.inputs.empty()) f.evidence.push_back(line);
}

// The condition's value as a truth: finite and non-zero. NaN (0/0) and infinities (x/0) are no answer.
bool holds(double v) { return std::isfinite(v) && v != 0; }

}  // namespace

std::string format_value(double value, rules::MetricUnit unit) {
  char b[64];
  switch (unit) {
    case rules::MetricUnit::kMs: std::snprintf(b, sizeof(b), "%.3f ms", value); break;
    case rules::MetricUnit::kUs: std::snprintf(b, sizeof(b), "%.1f us", value); break;
    case rules::MetricUnit::kShare: std::snprintf(b, sizeof(b), "%.1f %%", value * 100); break;
    case rules::MetricUnit::kBytes:
      if (value >= 1e6) std::snprintf(b, sizeof(b), "%.2f MB", value / 1e6);
      else if (value >= 1e3) std::snprintf(b, sizeof(b), "%.1f kB", value / 1e3);
      else std::snprintf(b, sizeof(b), "%.0f B", value);
      break;
    case rules::MetricUnit::kCount: std::snprintf(b, sizeof(b), value == std::floor(value) ? "%.0f" : "%.2f", value); break;
    case rules::MetricUnit::kFlag: std::snprintf(b, sizeof(b), "%.0f", value); break;
  }
  return b;
}

std::optional<Finding> ExpressionRule::evaluate(const rules::RuleInput& in, std::vector<std::string>& warnings) const {
  const std::string who = "rule '" + spec_.name + "'";
  Evaluation cond;
  try {
    cond = spec_.condition.evaluate(in);
  } catch (const std::exception& e) {
    warnings.push_back(who + ": its condition could not be evaluated: " + e.what());
    return std::nullopt;
  }
  for (const std::string& m : cond.missing) warnings.push_back(who + ": " + m + "; it reads 0");
  if (!std::isfinite(cond.value)) {
    warnings.push_back(who + ": its condition `" + spec_.condition.text() + "` has no value on this trace (a division by "
                       "zero?); the rule did not fire");
    return std::nullopt;
  }
  if (!holds(cond.value)) return std::nullopt;

  Finding f;
  f.category = "custom:" + spec_.name;
  f.rule = spec_.name;
  const double step_ms = in.step_ms();
  if (spec_.impact_ms) {
    const double impact = spec_.impact_ms->evaluate(in).value;
    f.impact_ms = std::isfinite(impact) ? std::clamp(impact, 0.0, step_ms) : 0;
  }
  f.impact_pct = step_ms > 0 ? f.impact_ms / step_ms * 100 : 0;
  f.confidence = std::min(1.0, kCustomBaseConfidence * spec_.confidence_weight);
  f.uncertain = f.confidence < in.th.uncertain_below;
  f.title = fill_title(spec_, in);
  f.evidence.push_back("the rule file's condition holds: " + spec_.condition.text());
  add_inputs(f, cond);
  if (!spec_.impact_ms)
    f.evidence.push_back("impact not estimated: the rule gives no impact_ms, so it is listed after the findings that cost "
                         "a known share of the step");
  for (const RuleSuggestion& s : spec_.suggestions) {
    analyze::Suggestion out{s.action, s.priority, 0, false, ""};
    if (s.saving_ms) {
      const double saving = s.saving_ms->evaluate(in).value;
      out.impact_ms = std::isfinite(saving) ? std::clamp(saving, 0.0, step_ms) : 0;
      out.estimated = true;
      out.model = "rule file: " + s.saving_ms->text();
      // The built-in rules' rule: a saving nobody would see is never more than low priority.
      if (out.impact_ms < rules::kWorthwhileShare * step_ms) out.priority = "low";
    }
    f.suggestions.push_back(std::move(out));
  }
  return f;
}

}  // namespace inferscope::rulefile
