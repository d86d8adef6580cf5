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

bool autostart_from_environment() {
  if (!std::getenv("INFERSCOPE_ENABLE")) return false;
  try {
    config::Resolved r = config::resolve();
    if (!r.config.enable) return false;
    Config cfg = r.config;
    // iscope-run names the process it started. Its children inherit the environment: they record only
    // when asked to, each into its own file, so nobody overwrites the parent's dump.
    if (const char* root = std::getenv("INFERSCOPE_ROOT_PID"); root && std::atol(root) != ::getpid()) {
      const char* follow = std::getenv("INFERSCOPE_FOLLOW_CHILDREN");
      if (!follow || std::string(follow) != "1") return false;
      cfg.output = with_pid_suffix(cfg.output.empty() ? default_output_path() : cfg.output);
      if (!cfg.report.empty()) cfg.report = with_pid_suffix(cfg.report);
    }
    return start_from_environment(cfg);
  } catch (const std::exception& e) {
    // Nothing starts with a half-understood configuration.
    log(LogLevel::kError, std::string("configuration error: ") + e.what() + "; not recording");
    return false;
  }
}

}  // namespace inferscope::runtime

__attribute__((constructor)) static void inferscope_autostart() { inferscope::runtime::autostart_from_environment(); }
