// The settings model: resolves an effective inferscope::Config from defaults, .inferscope.yaml, the
// environment (INFERSCOPE_*) and command-line flags, in that order of increasing precedence.
#pragma once

#include <inferscope/config.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::config {

/// A setting that could not be understood: names the file or variable, the line when known, and the key.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ResolveOptions {
  std::string config_path;  ///< --config; empty: INFERSCOPE_CONFIG, else ./.inferscope.yaml if present
  std::vector<std::pair<std::string, std::string>> flags;  ///< key -> value from the command line
  bool read_environment = true;
  bool read_file = true;
};

/// Where an effective value came from: "default", "file:/path/.inferscope.yaml:12", "env:INFERSCOPE_X",
/// "flag:--x".
struct Resolved {
  Config config;
  std::map<std::string, std::string> origin;  ///< key -> source description
};

/// Resolves the effective configuration; throws ConfigError on any unknown key, wrong type or bad value.
Resolved resolve(const ResolveOptions& options = {});

}  // namespace inferscope::config
