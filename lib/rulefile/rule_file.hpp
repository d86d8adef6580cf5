// Rule files (.inferscope_rules.yaml, docs/rules.md): a team's own bottleneck rules, and the built-in rules
// disabled or re-thresholded by name. Read into analyze::rules::RuleSettings, which AnalyzeOptions carries.
//
//   bottleneck_rules:
//     - name: high_memory_overhead
//       condition: "h2d_time / total_time > 0.3"
//       suggestion: "Use pinned memory or reduce batch size"
//       confidence_weight: 1.2
//   builtin_rules:
//     slow_steps: off
//     gpu_bound: {gpu_bound_util: 0.9}
//   thresholds:
//     min_impact_pct: 3
//
//   auto settings = rulefile::load_rule_file("team.yaml");   // throws RuleFileError: every problem, FILE:LINE:COL
#pragma once

#include "analyze/rules/rule_settings.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace inferscope::rulefile {

/// The largest rule file read: rules are a few lines each.
inline constexpr size_t kMaxRuleFileBytes = size_t(1) << 20;
/// The name found in the working directory, like .inferscope.yaml.
inline constexpr const char* kDefaultRuleFile = ".inferscope_rules.yaml";

/// A rule file that cannot be used. `problems()` holds one line per problem, each "FILE:LINE:COLUMN: what".
class RuleFileError : public std::runtime_error {
 public:
  explicit RuleFileError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// Reads and checks the rule file at `path`: YAML, keys, every expression compiled against the metric table.
/// Throws RuleFileError with every problem found (not only the first).
std::shared_ptr<const analyze::rules::RuleSettings> load_rule_file(const std::string& path);

/// The rule file to use: `explicit_path` (--rules), else INFERSCOPE_RULES, else ./.inferscope_rules.yaml when it
/// exists; "" when none. `named_by` says which, for messages ("--rules", "INFERSCOPE_RULES", "the working directory").
std::string find_rule_file(const std::string& explicit_path, std::string* named_by = nullptr);

/// The rule file a tool uses (find_rule_file), loaded; null when there is none or `ignore` (--no-rules). Throws
/// RuleFileError, whose first line says which file and who named it.
std::shared_ptr<const analyze::rules::RuleSettings> rules_for_tool(const std::string& explicit_path, bool ignore);

/// What a rule file sets, in a few lines: its rules by name, the built-in rules it disables and the thresholds
/// it changes (iscope-analyze --check-rules).
std::string describe(const analyze::rules::RuleSettings& settings);

}  // namespace inferscope::rulefile
