// Starting without code changes: INFERSCOPE_ENABLE=1 in the environment starts a session when the library
// loads (an application linked with it, LD_PRELOAD by iscope-run, or the CUDA injection entry point). A session
// started in code takes from the same sources every setting the code did not set.
#include "config/settings.hpp"
#include "dump/files.hpp"
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
// (lib/runtime/process_hooks.cpp). This image records to the same path. A dump that holds nothing of the program (the
// image was a shim: env, bash, pyenv) is replaced, so an exec chain leaves one dump; any other moves aside to
// <stem>.pre-exec<N>.iscope (the first N free) instead of being overwritten.
void take_over_pre_exec_dump(const std::string& path) {
  const char* from = std::getenv("INFERSCOPE_EXEC_FROM");
  const bool empty = std::getenv("INFERSCOPE_EXEC_EMPTY") != nullptr;
  const bool same_process = from && std::atol(from) == ::getpid();
  ::unsetenv("INFERSCOPE_EXEC_FROM");  // the program's environment stays as iscope-run made it
  ::unsetenv("INFERSCOPE_EXEC_EMPTY");
  if (!same_process || ::access(path.c_str(), F_OK) != 0) return;
  if (empty) {
    ::unlink(path.c_str());
    return;
  }
  for (int n = 1; n < 1000; ++n) {
    const std::string aside = dump::insert_suffix(path, "pre-exec" + std::to_string(n));
    if (::access(aside.c_str(), F_OK) == 0) continue;
    if (::rename(path.c_str(), aside.c_str()) != 0)
      log(LogLevel::kWarn, "cannot keep the dump written before exec: rename " + path + " to " + aside + " failed");
    return;
  }
}

// A process recording from the environment with no iscope-run above it is the root of its run, as iscope-run's
// program is: its descendants, which inherit INFERSCOPE_ENABLE and INFERSCOPE_OUTPUT, are told so and record only
// with follow_children, each into <stem>.<pid>.iscope. Without this an exec'd child took the same output, was refused
// ("... is being written by another session; not recording") and was never recorded, follow_children or not.
void become_root_of_run(const std::string& family) {
  if (std::getenv("INFERSCOPE_ROOT_PID")) return;
  ::setenv("INFERSCOPE_ROOT_PID", std::to_string(::getpid()).c_str(), 1);
  // The descendants' files are named after this one wherever they run (a child that changes its directory too).
  ::setenv("INFERSCOPE_OUTPUT", dump::absolute_path(family).c_str(), 1);
}

// The output descendants of the root name their dumps after: the root's (INFERSCOPE_OUTPUT, or the root's default).
std::string family_output(const Config& cfg) {
  if (!cfg.output.empty()) return cfg.output;
  const char* root = std::getenv("INFERSCOPE_ROOT_PID");
  return root && below_recorded_root() ? "inferscope-" + std::string(root) + ".iscope" : default_output_path();
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
    const std::string family = family_output(cfg);
    // Children record only when asked to (follow_children), each into its own file, so nobody overwrites the
    // parent's dump; the run has one live page, the root's.
    if (below_recorded_root()) {
      if (!cfg.follow_children) return false;
      cfg.output = with_pid_suffix(family);
      if (!cfg.report.empty()) cfg.report = with_pid_suffix(cfg.report);
      cfg.live.clear();
    } else {
      become_root_of_run(family);
    }
    take_over_pre_exec_dump(cfg.output.empty() ? default_output_path() : cfg.output);
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

__attribute__((constructor)) static void inferscope_autostart() {
  inferscope::runtime::take_inherited_live();
  inferscope::runtime::autostart_from_environment();
  inferscope::runtime::close_unused_inherited_live();
}
