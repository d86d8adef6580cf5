// The report written when a session that INFERSCOPE_ENABLE started stops (INFERSCOPE_REPORT).
#include "dump/files.hpp"
#include "runtime/session_state.hpp"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace inferscope::runtime {

// INFERSCOPE_REPORT: the runtime never links the analyzer (by design the hot path never includes analysis
// code), so it runs the iscope-analyze tool installed beside the library, or the one on PATH.
void write_report_at_exit(const std::string& dump_path, const std::string& report, const std::string& step) {
  // A FIFO nobody reads (or a socket) at the report's path would hold the program's exit while the analyzer waits to
  // open it: iscope-run refuses one up front; a session started from the environment says so here, at the end.
  if (const auto why = dump::report_target_would_block(report)) {
    log(LogLevel::kError, "the report was not written: " + report + " " + *why +
                              ", and writing it would hold the program's exit until something reads it");
    return;
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("INFERSCOPE_ANALYZE")) candidates.emplace_back(env);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&write_report_at_exit), &info) && info.dli_fname) {
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    candidates.push_back(dir + "../bin/iscope-analyze");                      // installed
    candidates.push_back(dir + "../../tools/iscope-analyze/iscope-analyze");  // build tree
  }
  std::string tool = "iscope-analyze";
  for (auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) {
      tool = c;
      break;
    }
  std::vector<char*> argv{const_cast<char*>(tool.c_str()), const_cast<char*>(dump_path.c_str()),
                          const_cast<char*>("-o"), const_cast<char*>(report.c_str())};
  if (!step.empty()) {
    argv.push_back(const_cast<char*>("--step"));
    argv.push_back(const_cast<char*>(step.c_str()));
  }
  argv.push_back(nullptr);
  // The analyzer must not record itself.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "INFERSCOPE_", 11) != 0 && std::strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        std::strncmp(*e, "CUDA_INJECTION64_PATH=", 22) != 0)
      env_store.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawnp(&pid, tool.c_str(), nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    log(LogLevel::kError, "cannot run " + tool + " to write " + report + ": " + std::strerror(rc));
    return;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    log(LogLevel::kError, tool + " was killed by signal " + std::to_string(WTERMSIG(status)) + " writing " + report);
  else if (WEXITSTATUS(status) != 0)
    log(LogLevel::kError, tool + " could not write " + report + " (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
}

}  // namespace inferscope::runtime
