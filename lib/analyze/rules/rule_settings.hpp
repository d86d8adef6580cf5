// What a rule file changes about the rules (docs/rules.md): built-in rules disabled or given other thresholds by
// name, and the file's own rules (CustomRule, compiled by lib/rulefile), which run over the same RuleInput as the
// built-in ones and are ranked with them.
//
//   rules::RuleSettings s;
//   s.disabled.insert("slow_steps");
//   s.thresholds["gpu_bound"]["gpu_bound_util"] = 0.9;      // "" as the rule: every rule that reads it
//   rules::RulesResult r = rules::run_rules(rule_input, s);   // findings ranked, primary first; warnings
#pragma once

#include "analyze/rules/rule.hpp"

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace inferscope::analyze::rules {

/// A rule from a rule file. It reads the same input as the built-in rules and returns its finding when its
/// condition holds; what it could not read (a name that matched nothing, an undefined value) goes to `warnings`.
class CustomRule {
 public:
  virtual ~CustomRule() = default;
  virtual const std::string& name() const = 0;
  virtual std::optional<Finding> evaluate(const RuleInput& in, std::vector<std::string>& warnings) const = 0;
};

struct RuleSettings {
  std::set<std::string> disabled;  ///< built-in rules (registry names) that do not run
  /// Per built-in rule ("" = every rule that reads it): threshold name -> value.
  std::map<std::string, std::map<std::string, double>> thresholds;
  std::vector<std::shared_ptr<const CustomRule>> custom;  ///< in the file's order
  std::string source;  ///< the rule file these came from ("" = none)
  std::string named_by;  ///< who named it: "--rules", "INFERSCOPE_RULES", "the working directory"
};

struct RulesResult {
  std::vector<Finding> findings;  ///< ranked: by impact, informational ones last, the first marked primary
  std::vector<std::string> warnings;
};

/// Every enabled built-in rule with its thresholds, then every custom rule; ranked as run_all ranks. No steps, or
/// a typical step of no length: nothing.
RulesResult run_rules(const RuleInput& in, const RuleSettings& settings);

/// A threshold of Thresholds, by the name a rule file uses.
struct ThresholdDef {
  const char* name;
  const char* meaning;
  std::variant<double Thresholds::*, int64_t Thresholds::*, int Thresholds::*> member;
  const char* read_by;  ///< the built-in rules that read it, ", "-separated; "*": every rule
  double min = 0, max = 1;  ///< the values a rule file may set
  const char* unit = "a share, 0 to 1";
};
std::span<const ThresholdDef> threshold_table();
const ThresholdDef* find_threshold(std::string_view name);
/// `rule` (a registry name) reads the threshold.
bool reads_threshold(const ThresholdDef& def, std::string_view rule);
/// The names of the built-in rules, as registry() runs them.
std::vector<std::string> builtin_rule_names();
/// `base` with the overrides that apply to `rule`: those for every rule, then the rule's own.
Thresholds thresholds_for(const Thresholds& base, const RuleSettings& settings, const std::string& rule);
/// The Markdown tables of the built-in rules and the thresholds: the generated part of docs/rules.md.
std::string thresholds_markdown();

}  // namespace inferscope::analyze::rules
