// Starting without code changes: INFERSCOPE_ENABLE=1 in the environment starts a session when the library
// loads (an application linked with it, LD_PRELOAD by iscope-run, or the CUDA injection entry point).
#include "config/settings.hpp"
#include "runtime/session.hpp"

#include <cstdlib>

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

bool autostart_from_environment() {
  if (!std::getenv("INFERSCOPE_ENABLE")) return false;
  try {
    config::Resolved r = config::resolve();
    if (!r.config.enable) return false;
    return start_from_environment(r.config);
  } catch (const std::exception& e) {
    // Nothing starts with a half-understood configuration.
    log(LogLevel::kError, std::string("configuration error: ") + e.what() + "; not recording");
    return false;
  }
}

}  // namespace inferscope::runtime

__attribute__((constructor)) static void inferscope_autostart() { inferscope::runtime::autostart_from_environment(); }
