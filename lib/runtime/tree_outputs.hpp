// The output of a process below the one iscope-run started: iscope-run hands the whole process tree one output
// and one report (INFERSCOPE_OUTPUT, INFERSCOPE_REPORT), meant for the process it started, which it names in
// INFERSCOPE_ROOT_PID. A descendant that records writes its own files, named with its pid. Header-only: the
// runtime (sessions from the environment and from C++ code) and the Python binding (start()) share it.
#pragma once

#include "config/settings.hpp"
#include "dump/path.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace inferscope::runtime {

/// Whether this process descends from the one iscope-run started (and so inherited its output and report).
inline bool below_recorded_root() {
  const char* root = std::getenv("INFERSCOPE_ROOT_PID");
  return root && std::atol(root) != ::getpid();
}

/// `path` with this process's pid before its extension: run.iscope -> run.4242.iscope.
inline std::string with_pid_suffix(const std::string& path) {
  return dump::insert_suffix(path, std::to_string(::getpid()));
}

/// A session started in code below that process: an output or a report the code did not give itself (its origin
/// is the environment or the file, not "code" nor a start() keyword) is the tree's, so it gets this pid.
inline void own_files_below_root(const config::Resolved& resolved, Config& cfg) {
  if (!below_recorded_root()) return;
  auto from_outside = [&](const char* key) {
    const std::string& origin = resolved.origin.at(key);
    return origin != "code" && origin.rfind("flag:", 0) != 0;
  };
  if (!cfg.output.empty() && from_outside("output")) cfg.output = with_pid_suffix(cfg.output);
  if (!cfg.report.empty() && from_outside("report")) cfg.report = with_pid_suffix(cfg.report);
  if (!cfg.live.empty() && from_outside("live")) cfg.live.clear();  // the run's page is the root's
}

}  // namespace inferscope::runtime
