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

// The title with each {expression} replaced by its value ("{{" and "}}" are literal braces); what its placeholders
// could not read goes to `missing`.
std::string fill_title(const RuleSpec& spec, const rules::RuleInput& in, std::vector<std::string>& missing) {
  if (spec.title.empty()) return "Rule '" + spec.name + "': " + spec.condition.text();
  std::string out;
  size_t part = 0;
  const std::string& t = spec.title;
  for (size_t i = 0; i < t.size(); ++i) {
    if ((t[i] == '{' || t[i] == '}') && i + 1 < t.size() && t[i + 1] == t[i]) {
      out += t[i++];
      continue;
    }
    const size_t close = t[i] == '{' ? t.find('}', i) : std::string::npos;
    if (close == std::string::npos || part >= spec.title_parts.size()) {
      out += t[i];
      continue;
    }
    const Expression& e = spec.title_parts[part++];
    const Evaluation v = e.evaluate(in);
    missing.insert(missing.end(), v.missing.begin(), v.missing.end());
    out += placeholder_text(e, v);
    i = close;
  }
  return out;
}

// An impact or a saving read from the rule file: a number of ms in [0, step], or nullopt (with a warning) when
// it has no value here; a negative one counts as 0, with a warning.
std::optional<double> ms_value(const Expression& e, const rules::RuleInput& in, const std::string& who, const char* key,
                               std::vector<std::string>& warnings) {
  const Evaluation v = e.evaluate(in);
  for (const std::string& m : v.missing) warnings.push_back(who + ": " + key + ": " + m + "; it reads 0");
  if (v.not_finite) {
    warnings.push_back(who + ": " + key + " `" + e.text() + "` has no value on this trace (a division by zero?): not estimated");
    return std::nullopt;
  }
  if (v.value < 0) {
    warnings.push_back(who + ": " + key + " `" + e.text() + "` is negative on this trace (" + format_value(v.value, rules::MetricUnit::kMs) +
                       "): counted as 0");
    return 0.0;
  }
  return std::min(v.value, in.step_ms());
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
      // Decimal units, as the reports write bytes (report/common.hpp fmt_bytes) and the analyzer's sentences do:
      // a rule's "4.19 MB" reads the same as the Metrics line.
      if (value >= 1e9) std::snprintf(b, sizeof(b), "%.2f GB", value / 1e9);
      else if (value >= 1e6) std::snprintf(b, sizeof(b), "%.2f MB", value / 1e6);
      else if (value >= 1e3) std::snprintf(b, sizeof(b), "%.1f kB", value / 1e3);
      else std::snprintf(b, sizeof(b), "%.0f B", value);
      break;
    case rules::MetricUnit::kCount: std::snprintf(b, sizeof(b), value == std::floor(value) ? "%.0f" : "%.2f", value); break;
    case rules::MetricUnit::kFlag: std::snprintf(b, sizeof(b), "%.0f", value); break;
    case rules::MetricUnit::kPerSecond: std::snprintf(b, sizeof(b), "%.1f /s", value); break;
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
  if (cond.not_finite) {
    warnings.push_back(who + ": its condition `" + spec_.condition.text() + "` met a value that is not finite on this "
                       "trace (a division by zero, sqrt or log of a value out of range); the rule did not fire");
    return std::nullopt;
  }
  if (!holds(cond.value)) return std::nullopt;

  Finding f;
  f.category = "custom:" + spec_.name;
  f.rule = spec_.name;
  const double step_ms = in.step_ms();
  if (spec_.impact_ms) {
    const std::optional<double> impact = ms_value(*spec_.impact_ms, in, who, "impact_ms", warnings);
    f.impact_ms = impact.value_or(0);
    f.impact_estimated = impact.has_value();
  } else {
    f.impact_estimated = false;
  }
  f.impact_pct = step_ms > 0 ? f.impact_ms / step_ms * 100 : 0;
  f.confidence = std::min(1.0, kCustomBaseConfidence * spec_.confidence_weight);
  f.uncertain = f.confidence < in.th.uncertain_below;
  std::vector<std::string> title_missing;
  f.title = fill_title(spec_, in, title_missing);
  for (const std::string& m : title_missing) warnings.push_back(who + ": title: " + m + "; it reads 0");
  f.evidence.push_back("the rule file's condition holds: " + spec_.condition.text());
  add_inputs(f, cond);
  if (!f.impact_estimated)
    f.evidence.push_back(spec_.impact_ms ? "impact not estimated: impact_ms has no value on this trace"
                                         : "impact not estimated: the rule gives no impact_ms, so it is listed after the "
                                           "findings that cost a known share of the step");
  for (const RuleSuggestion& s : spec_.suggestions) {
    analyze::Suggestion out{s.action, s.priority, 0, false, ""};
    const std::optional<double> saving = s.saving_ms ? ms_value(*s.saving_ms, in, who, "saving_ms", warnings) : std::nullopt;
    if (saving) {
      out.impact_ms = *saving;
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
