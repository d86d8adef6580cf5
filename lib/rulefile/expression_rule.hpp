// A rule of a rule file as a CustomRule (analyze/rules/rule_settings.hpp): its condition, title, impact and
// suggestions compiled once, evaluated over each analysis's RuleInput into a Finding.
#pragma once

#include "analyze/rules/rule_settings.hpp"
#include "rulefile/expression.hpp"

#include <optional>
#include <string>
#include <vector>

namespace inferscope::rulefile {

struct RuleSuggestion {
  std::string action;
  std::string priority = "medium";
  std::optional<Expression> saving_ms;  ///< the saving per step, in ms; none: "not estimated"
};

struct RuleSpec {
  std::string name;
  Expression condition;
  std::string title;                     ///< may hold {expression} placeholders; "" = made from the condition
  std::vector<Expression> title_parts;   ///< the placeholders' expressions, in order
  std::optional<Expression> impact_ms;   ///< cost per step; none: ranked after every finding with an impact
  std::vector<RuleSuggestion> suggestions;
  double confidence_weight = 1.0;
};

/// A custom rule's confidence before its weight: the condition holding is a fact of the trace, but that it is
/// what slows the step is the rule author's claim. 0.75 keeps it above the uncertain mark (0.5) at weight 1; a
/// weight under 2/3 marks it uncertain, one of 4/3 or more makes it certain (1).
inline constexpr double kCustomBaseConfidence = 0.75;

class ExpressionRule : public analyze::rules::CustomRule {
 public:
  explicit ExpressionRule(RuleSpec spec) : spec_(std::move(spec)) {}
  const std::string& name() const override { return spec_.name; }
  std::optional<analyze::Finding> evaluate(const analyze::rules::RuleInput& in,
                                           std::vector<std::string>& warnings) const override;

 private:
  RuleSpec spec_;
};

/// "12.3 ms", "41 %", "1.50 MiB", "600": a value in its unit, for titles and evidence.
std::string format_value(double value, analyze::rules::MetricUnit unit);

}  // namespace inferscope::rulefile
