#include "tool_options.hpp"

#include "config/settings.hpp"
#include "rulefile/rule_file.hpp"

#include <algorithm>
#include <iostream>
#include <optional>

namespace inferscope::tools {

analyze::AnalyzeOptions analysis_options(const cxxopts::ParseResult& args, const char* tool, bool no_rules) {
  config::ResolveOptions ro;
  ro.lenient_sources = true;
  ro.flag_spelling = "--{key-}";  // messages name the flag as typed: "flag --skip-steps: ..."
  // Each value as typed, checked whole by the settings' own parser: cxxopts' double took "5abc" as 5.
  for (const char* flag : {"step", "launch-bound-max-kernel-us", "skip-steps"})
    if (args.count(flag)) {
      std::string key = flag;
      std::replace(key.begin(), key.end(), '-', '_');
      ro.flags.emplace_back(key, args[flag].as<std::string>());
    }
  const auto resolved = config::resolve(ro);
  if (!resolved.ignored.empty()) {
    std::cerr << tool << ": warning: ignoring settings it cannot use (" << resolved.ignored.size() << " problem"
              << (resolved.ignored.size() == 1 ? "" : "s") << "; `iscope-config validate` lists them): "
              << resolved.ignored.front() << "\n";
  }
  analyze::AnalyzeOptions o;
  o.step = resolved.config.step;
  o.launch_bound_max_kernel_us = resolved.config.launch_bound_max_kernel_us;
  o.skip_steps = resolved.config.skip_steps == "auto" ? -1 : std::stoi(resolved.config.skip_steps);
  o.rules = rulefile::rules_for_tool(args.count("rules") ? args["rules"].as<std::string>() : "", no_rules);
  return o;
}

void add_report_file_flags(cxxopts::Options& opts, const std::string& what) {
  opts.add_options()
      ("md", "also write the Markdown " + what + " here, whatever the extension", cxxopts::value<std::string>())
      ("html", "also write the HTML " + what + " here, whatever the extension", cxxopts::value<std::string>())
      ("json", "also write the JSON " + what + " here, whatever the extension", cxxopts::value<std::string>());
}

std::vector<std::pair<std::string, std::string>> report_file_flags(const cxxopts::ParseResult& args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* fmt : {"md", "html", "json"})
    if (args.count(fmt)) out.emplace_back(fmt, args[fmt].as<std::string>());
  return out;
}

std::string nothing_to_analyse(const analyze::Analysis& a, const std::string& path) {
  if (a.events > 0) return "";
  return path + ": holds no events, so there is nothing to analyse (" +
         (a.complete ? std::string("the session recorded nothing, or the trace is empty")
                     : std::string("the dump was cut short before its first events: no END chunk")) +
         "); no report is written";
}

std::string rules_flags_problem(const cxxopts::ParseResult& args, bool no_rules) {
  if (args.count("rules") > 1) return "--rules is given " + std::to_string(args.count("rules")) +
                                         " times: one rule file is read (put the rules in one file)";
  if (args.count("rules") && args["rules"].as<std::string>().empty()) return "--rules: an empty file name";
  if (args.count("rules") && no_rules) return "--rules and --no-rules contradict each other: give one";
  return "";
}

}  // namespace inferscope::tools
