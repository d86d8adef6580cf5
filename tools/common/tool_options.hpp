// What the tools that analyse (iscope-analyze, iscope-diff) share on their command lines: the settings-to-options
// mapping (step, skip_steps, launch_bound_max_kernel_us and the rule file, through the settings model: flags >
// INFERSCOPE_* > .inferscope.yaml > defaults). One copy, so the two tools cannot drift apart. What every tool
// shares (boolean flags, the check of standard output) is in tool_common.hpp.
#pragma once

#include "analyze/analyzer.hpp"
#include "tool_common.hpp"

#include <cxxopts.hpp>

#include <string>
#include <utility>
#include <vector>

namespace inferscope::tools {

/// The report-file flags both analysing tools take, one style for both: --md FILE, --html FILE, --json FILE (the
/// flag names the format, whatever the file's extension), beside -o FILE (the extension picks it). `what` names
/// what they write ("report", "comparison") in the help.
void add_report_file_flags(cxxopts::Options& opts, const std::string& what);

/// The files those flags name, as (format, path): "md", "html", "json", in that order.
std::vector<std::pair<std::string, std::string>> report_file_flags(const cxxopts::ParseResult& args);

/// The analyzer's options from the flags a tool declared (--step, --skip-steps, --launch-bound-max-kernel-us,
/// --rules; each optional) and the settings model. A tool analyses and records nothing, so a file or variable it
/// cannot use (a stale recording key, a bad INFERSCOPE_* value) is reported once on stderr, named after `tool`,
/// and skipped; a bad flag of its own throws config::ConfigError, a bad rule file rulefile::RuleFileError.
/// `no_rules`: the built-in rules only, whatever rule file is found.
analyze::AnalyzeOptions analysis_options(const cxxopts::ParseResult& args, const char* tool, bool no_rules);

/// Why the analysis of `path` describes nothing, "" when it holds events: a dump or trace with no events at all (a
/// session that recorded nothing, a dump cut short before its first events, an empty trace) is said so and is exit 1
/// in every tool, rather than reported as a run that spent 100 % of 0 ms in host work.
std::string nothing_to_analyse(const analyze::Analysis& a, const std::string& path);

/// One rule file, named once and not empty, and not with --no-rules: "" when the flags are fine, else the message.
std::string rules_flags_problem(const cxxopts::ParseResult& args, bool no_rules);

}  // namespace inferscope::tools
