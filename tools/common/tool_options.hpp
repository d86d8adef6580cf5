// What the tools that analyse (iscope-analyze, iscope-diff) share on their command lines: the settings-to-options
// mapping (step, skip_steps, launch_bound_max_kernel_us and the rule file, through the settings model: flags >
// INFERSCOPE_* > .inferscope.yaml > defaults) and boolean flags, spelt as the settings spell booleans. One copy,
// so the two tools cannot drift apart.
#pragma once

#include "analyze/analyzer.hpp"

#include <cxxopts.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace inferscope::tools {

/// A flag that is on when given bare (--no-children) and takes a value written with '=' (--no-children=false,
/// =0, =no). A string rather than cxxopts' bool: its bool counts --no-children=false as given and refuses =no.
/// With an implicit value the next argument is never its value.
std::shared_ptr<cxxopts::Value> boolean_flag();

/// The flags a tool declared with boolean_flag(); on() answers for them after parse() checked every value.
class BooleanFlags {
 public:
  explicit BooleanFlags(std::vector<std::string> names) : names_(std::move(names)) {}
  /// Empty, or the message for the first value that is not a boolean.
  std::string parse(const cxxopts::ParseResult& args);
  bool on(const std::string& name) const;

 private:
  std::vector<std::string> names_;
  std::map<std::string, bool> on_;
};

/// The analyzer's options from the flags a tool declared (--step, --skip-steps, --launch-bound-max-kernel-us,
/// --rules; each optional) and the settings model. A tool analyses and records nothing, so a file or variable it
/// cannot use (a stale recording key, a bad INFERSCOPE_* value) is reported once on stderr, named after `tool`,
/// and skipped; a bad flag of its own throws config::ConfigError, a bad rule file rulefile::RuleFileError.
/// `no_rules`: the built-in rules only, whatever rule file is found.
analyze::AnalyzeOptions analysis_options(const cxxopts::ParseResult& args, const char* tool, bool no_rules);

/// One rule file, named once and not empty, and not with --no-rules: "" when the flags are fine, else the message.
std::string rules_flags_problem(const cxxopts::ParseResult& args, bool no_rules);

}  // namespace inferscope::tools
