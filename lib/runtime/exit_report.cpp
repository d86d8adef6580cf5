// The report written when a session that INFERSCOPE_ENABLE started stops (INFERSCOPE_REPORT).
#include "dump/files.hpp"
#include "runtime/session_state.hpp"

#include <dlfcn.h>
#include <fcntl.h>
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

namespace {

// "md", "html" or "json", from the report's extension (the setting allows only these: config check_report).
std::string report_format(const std::string& report) {
  for (const char* f : {"html", "json"})
    if (report.size() > std::strlen(f) && report.ends_with(std::string(".") + f)) return f;
  return "md";
}

// The report's file opened for writing when it is not a regular file at the end of its links, else -1 (the analyzer
// writes it through a temporary renamed into place). Non-blocking to open (a FIFO with no reader was refused above,
// one whose reader left meanwhile fails here instead of waiting), blocking to write.
int open_direct_report(const std::string& report) {
  const dump::OutputTarget t = dump::resolve_output(report);
  if (!t.error.empty() || !t.direct) return -1;
  const int fd = ::open(t.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

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
  // A report that is not a file at the end of its links (a pipe something reads, /dev/stdout into `| tee`, a device)
  // is opened here and handed to the analyzer as its standard output: the analyzer writes reports to regular files
  // or to its standard output only (docs/cli.md, "Outputs").
  const int direct = open_direct_report(report);
  const std::string format_flag = "--" + report_format(report);
  std::vector<char*> argv{const_cast<char*>(tool.c_str()), const_cast<char*>(dump_path.c_str())};
  if (direct >= 0) {
    argv.push_back(const_cast<char*>(format_flag.c_str()));
    argv.push_back(const_cast<char*>("-"));
  } else {
    argv.push_back(const_cast<char*>("-o"));
    argv.push_back(const_cast<char*>(report.c_str()));
  }
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
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (direct >= 0) posix_spawn_file_actions_adddup2(&actions, direct, 1);
  const int rc = ::posix_spawnp(&pid, tool.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (direct >= 0) ::close(direct);
  if (rc != 0) {
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
