// Starting without code changes: INFERSCOPE_ENABLE=1 in the environment starts a session when the library
// loads (an application linked with it, LD_PRELOAD by iscope-run, or the CUDA injection entry point).
#include "config/settings.hpp"
#include "dump/path.hpp"
#include "runtime/session.hpp"

#include <unistd.h>

#include <cstdlib>
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

std::string with_pid_suffix(const std::string& path) { return dump::insert_suffix(path, std::to_string(::getpid())); }

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

bool autostart_from_environment() {
  if (!std::getenv("INFERSCOPE_ENABLE")) return false;
  try {
    config::Resolved r = config::resolve();
    if (!r.config.enable) return false;
    Config cfg = r.config;
    const std::string family = cfg.output.empty() ? default_output_path() : cfg.output;
    // iscope-run names the process it started. Its children inherit the environment: they record only
    // when asked to (follow_children), each into its own file, so nobody overwrites the parent's dump.
    if (const char* root = std::getenv("INFERSCOPE_ROOT_PID"); root && std::atol(root) != ::getpid()) {
      if (!cfg.follow_children) return false;
      cfg.output = with_pid_suffix(family);
      if (!cfg.report.empty()) cfg.report = with_pid_suffix(cfg.report);
    }
    keep_pre_exec_dump(cfg.output.empty() ? default_output_path() : cfg.output);
    return start_from_environment(cfg, family);
  } catch (const std::exception& e) {
    // Nothing starts with a half-understood configuration.
    log(LogLevel::kError, std::string("configuration error: ") + e.what() + "; not recording");
    return false;
  }
}

}  // namespace inferscope::runtime

__attribute__((constructor)) static void inferscope_autostart() { inferscope::runtime::autostart_from_environment(); }
