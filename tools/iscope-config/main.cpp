// iscope-config: shows the effective settings and where each came from, validates config files, and lists
// every key. A thin main over lib/config: everything it prints is rendered there.
//
//   iscope-config show [--config FILE] [--set key=value]... [--json]
//   iscope-config validate FILE...
//   iscope-config keys [--markdown]
//
// Exit status: 0 success, 1 the configuration is invalid or standard output could not be written, 2 the command
// line is wrong.
#define CXXOPTS_VECTOR_DELIMITER '\0'  // a --set value may itself be a comma list (python_include=a,b)
#include <cxxopts.hpp>

#include "config/settings.hpp"
#include "tool_common.hpp"

#include <inferscope/version.hpp>

#include <iostream>

namespace {

namespace cfg = inferscope::config;

constexpr int kOk = 0;
constexpr int kInvalidConfig = 1;
constexpr int kUsage = 2;

int report_errors(const cfg::ConfigError& error) {
  for (const std::string& message : error.errors()) std::cerr << message << "\n";
  return kInvalidConfig;
}

int show(const cxxopts::ParseResult& args, bool json) {
  cfg::ResolveOptions options;
  options.flag_spelling = "--set {key}";
  if (args.count("config")) options.config_path = args["config"].as<std::string>();
  if (args.count("set")) {
    for (const std::string& assignment : args["set"].as<std::vector<std::string>>()) {
      const size_t eq = assignment.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "iscope-config: --set expects key=value, got '" << assignment << "'\n";
        return kUsage;
      }
      options.flags.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
    }
  }
  try {
    const cfg::Resolved resolved = cfg::resolve(options);
    std::cout << (json ? cfg::format_show_json(resolved) : cfg::format_show(resolved));
    return kOk;
  } catch (const cfg::ConfigError& error) {
    return report_errors(error);
  }
}

int validate(const std::vector<std::string>& files) {
  if (files.empty()) {
    std::cerr << "iscope-config: validate needs a FILE\n";
    return kUsage;
  }
  int status = kOk;
  for (const std::string& file : files) {
    try {
      cfg::validate_file(file);
    } catch (const cfg::ConfigError& error) {
      status = report_errors(error);
    }
  }
  if (status == kOk) std::cout << "OK\n";
  return status;
}

cxxopts::Options make_options() {
  cxxopts::Options options("iscope-config",
                           "Show the effective InferScope settings, validate a config file, list every key.\n"
                           "Precedence: flag > environment (INFERSCOPE_*) > .inferscope.yaml > default.");
  options.positional_help("show|validate FILE|keys");
  options.add_options()
      ("config", "read this YAML file instead of ./.inferscope.yaml (show)", cxxopts::value<std::string>(), "FILE")
      ("set", "set a key as a command-line flag would; repeatable (show)", cxxopts::value<std::vector<std::string>>(),
       "KEY=VALUE")
      ("json", "print JSON (show)", inferscope::tools::boolean_flag(), "BOOL")
      ("markdown", "print the Markdown reference table (keys)", inferscope::tools::boolean_flag(), "BOOL")
      ("h,help", "print this help")
      ("version", "print the version and exit")
      ("command", "show, validate or keys", cxxopts::value<std::string>())
      ("args", "files to validate", cxxopts::value<std::vector<std::string>>());
  options.parse_positional({"command", "args"});
  return options;
}

int run(int argc, char** argv) {
  cxxopts::Options options = make_options();
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "iscope-config: " << e.what() << "\n" << options.help();
    return kUsage;
  }
  // --json=false is no JSON, as every tool reads a boolean flag's value (it used to turn JSON on).
  inferscope::tools::BooleanFlags flags({"json", "markdown"});
  if (const std::string bad = flags.parse(args); !bad.empty()) {
    std::cerr << "iscope-config: " << bad << "\n" << options.help();
    return kUsage;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return kOk;
  }
  if (args.count("version")) {
    std::cout << "iscope-config " INFERSCOPE_VERSION_STRING "\n";
    return kOk;
  }
  const std::string command = args.count("command") ? args["command"].as<std::string>() : "";
  const std::vector<std::string> rest =
      args.count("args") ? args["args"].as<std::vector<std::string>>() : std::vector<std::string>{};

  if (command == "show" && rest.empty()) return show(args, flags.on("json"));
  if (command == "validate") return validate(rest);
  if (command == "keys" && rest.empty()) {
    std::cout << (flags.on("markdown") ? cfg::format_keys_markdown() : cfg::format_keys_text());
    return kOk;
  }
  std::cerr << "iscope-config: expected 'show', 'validate FILE' or 'keys'\n" << options.help();
  return kUsage;
}

}  // namespace

// What it prints is its result: standard output that could not be written (`> /dev/full`, a closed descriptor) is
// exit 1 with a message, not 0 (tool_common.hpp, as in every tool).
int main(int argc, char** argv) { return inferscope::tools::guarded_main("iscope-config", run, argc, argv); }
