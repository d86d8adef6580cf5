// Starting without code changes: INFERSCOPE_ENABLE=1 in the environment starts a session when the library
// loads (an application linked with it, LD_PRELOAD by iscope-run, or the CUDA injection entry point). A session
// started in code takes from the same sources every setting the code did not set.
#include "config/settings.hpp"
#include "dump/path.hpp"
#include "runtime/session.hpp"
#include "runtime/tree_outputs.hpp"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <string>

// Collectors built into this library define these; a build without one simply lacks the symbol.
extern "C" void inferscope_register_cupti_collector() __attribute__((weak));
extern "C" void inferscope_register_system_collector() __attribute__((weak));

namespace inferscope::runtime {

void ensure_builtin_collectors() {
  static const bool done = [] {
    if (inferscope_register_cupti_collector) inferscope_register_cupti_collector();
    if (inferscope_register_system_collector) inferscope_register_system_collector();
    return true;
  }();
  (void)done;
}

// A program exec'd by a recorded process: that process completed its dump at `path` just before the exec
// (lib/runtime/process_hooks.cpp). This image records to the same path, so the earlier dump moves aside to
// <stem>.pre-exec<N>.iscope (the first N free) instead of being overwritten.
void keep_pre_exec_dump(const std::string& path) {
  const char* from = std::getenv("INFERSCOPE_EXEC_FROM");
  if (!from) return;
  const bool same_process = std::atol(from) == ::getpid();
  ::unsetenv("INFERSCOPE_EXEC_FROM");  // the program's environment stays as iscope-run made it
  if (!same_process || ::access(path.c_str(), F_OK) != 0) return;
  for (int n = 1; n < 1000; ++n) {
    const std::string aside = dump::insert_suffix(path, "pre-exec" + std::to_string(n));
    if (::access(aside.c_str(), F_OK) == 0) continue;
    if (::rename(path.c_str(), aside.c_str()) != 0)
      log(LogLevel::kWarn, "cannot keep the dump written before exec: rename " + path + " to " + aside + " failed");
    return;
  }
}

void log_configuration_error(const std::exception& e) {
  // Nothing starts with a half-understood configuration.
  log(LogLevel::kError, std::string("configuration error: ") + e.what() + "; not recording");
}

bool autostart_from_environment() {
  if (!std::getenv("INFERSCOPE_ENABLE")) return false;
  try {
    config::Resolved r = config::resolve();
    if (!r.config.enable) return false;
    Config cfg = r.config;
    const std::string family = cfg.output.empty() ? default_output_path() : cfg.output;
    // Children record only when asked to (follow_children), each into its own file, so nobody overwrites the
    // parent's dump.
    if (below_recorded_root()) {
      if (!cfg.follow_children) return false;
      cfg.output = with_pid_suffix(family);
      if (!cfg.report.empty()) cfg.report = with_pid_suffix(cfg.report);
    }
    keep_pre_exec_dump(cfg.output.empty() ? default_output_path() : cfg.output);
    return start_from_environment(cfg, family);
  } catch (const std::exception& e) {
    log_configuration_error(e);
    return false;
  }
}

bool start_from_code(const Config& code) {
  Config cfg;
  try {
    config::ResolveOptions options;
    options.code = &code;
    const config::Resolved r = config::resolve(options);
    cfg = r.config;
    own_files_below_root(r, cfg);
  } catch (const std::exception& e) {
    log_configuration_error(e);
    return false;
  }
  return start_session(cfg, false, {}, false);
}

}  // namespace inferscope::runtime

__attribute__((constructor)) static void inferscope_autostart() { inferscope::runtime::autostart_from_environment(); }
