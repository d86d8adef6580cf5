// libFuzzer target: the settings reader (lib/config/settings.cpp) on hostile .inferscope.yaml files: the YAML
// parse, the key table's value parsers (integers, numbers, booleans, choices, lists, path checks), duplicate and
// unknown keys, the sampled-mode combination check, then `iscope-config show` and `show --json` on what it
// accepted. Every recording program and every tool reads this file, so a crash here stops all of them.
// The input is one config file; `validate_file` and `resolve` (as a tool reads it, with --config) both read it.
// fuzz-sources: lib/config/*.cpp
// fuzz-seeds: config
// fuzz-libs: -lyaml-cpp
#include "config/settings.hpp"
#include "fuzz_support.hpp"

#include <exception>

using namespace inferscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_file(std::vector<uint8_t>(data, data + size));
  if (path.empty()) return 0;
  try {
    config::validate_file(path);
  } catch (const config::ConfigError& e) {
    if (e.errors().empty()) __builtin_trap();  // a refusal always says why
  }
  config::ResolveOptions options;
  options.config_path = path;
  options.read_environment = false;
  try {
    const config::Resolved resolved = config::resolve(options);
    (void)config::format_show(resolved);
    (void)config::format_show_json(resolved);
  } catch (const config::ConfigError& e) {
    if (e.errors().empty()) __builtin_trap();
  }
  // Anything else escaping (std::bad_alloc, a yaml-cpp exception the reader does not catch) is a finding:
  // libFuzzer reports the uncaught exception as a crash.
  return 0;
}
