// What every tool shares on its command line and at its end, with nothing but the settings model behind it (so
// iscope-run and iscope-config use it without the analyzer): boolean flags spelt as the settings spell booleans,
// and the check that standard output really took what the tool wrote there. One copy, so the tools cannot drift
// apart.
#pragma once

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

/// A flag's value that is not a boolean: "--FLAG=VALUE: 'VALUE' is not a boolean (...)"; "" when it is one, with
/// `on` set.
std::string parse_boolean_flag(const std::string& flag, const std::string& value, bool& on);

/// The exit status of a tool whose work ended with `status`, once what it wrote to standard output is flushed:
/// what reached standard output is part of the result, so a write that failed there (a full disk, `> /dev/full`,
/// a closed descriptor) is exit 1 with a message naming `tool`, not a silent 0. A failing `status` is kept.
int exit_status_after_stdout(const char* tool, int status);

/// A tool's main: `run(argc, argv)`, then exit_status_after_stdout. A failure nothing below caught (an input that
/// cannot be opened again for an export, out of memory outside the analysis) is one line naming `tool` and the
/// reason, exit 1; it used to escape main and end the tool by std::terminate (SIGABRT, exit 134).
int guarded_main(const char* tool, int (*run)(int, char**), int argc, char** argv);

}  // namespace inferscope::tools
