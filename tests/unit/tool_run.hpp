// Runs one of the built tools as a child process under resource limits and reports how it ended, its peak
// resident set and its stderr: the tests of hostile inputs and outputs assert on these, never on time.
//
//   testutil::ToolRun r = testutil::run_tool("tools/iscope-analyze/iscope-analyze", {"d.iscope", "-o", "r.md"},
//                                            {.address_space = 1ull << 30});
//   CHECK(r.exit == 0);   // -1: killed (it hung past the deadline) or ended by a signal
#pragma once

#include "test_util.hpp"

#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

namespace testutil {

struct ToolRun {
  int exit = -1;       // -1: killed (it hung) or did not exit normally
  long maxrss_kb = 0;  // the child's own peak resident set (wait4)
  std::string err, out;
};

struct ToolLimits {
  std::vector<std::string> env;  ///< added to the environment (INFERSCOPE_* of the test's own is left out)
  std::string cwd;               ///< run there ("" : here)
  long fsize = 0;                ///< > 0: files it writes may not exceed this many bytes (writes past it: EFBIG)
  unsigned long long address_space = 0;  ///< > 0: RLIMIT_AS, so a runaway allocation fails (bad_alloc) rather
                                         ///< than taking the machine's memory
  long nofile = 0;               ///< > 0: RLIMIT_NOFILE, at most this many open descriptors (numbers below it)
  int deadline_s = 60;           ///< killed after this long (a hang fails the test instead of stalling it)
};

/// Runs the tool at `rel` (relative to the build directory) with `args`.
inline ToolRun run_tool(const std::string& rel, const std::vector<std::string>& args, const ToolLimits& lim = {}) {
  std::vector<std::string> argv{binary(rel)};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string err_file = temp_path("tool.err"), out_file = temp_path("tool.out");
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("INFERSCOPE_", 0) != 0) envs.push_back(*e);
  envs.insert(envs.end(), lim.env.begin(), lim.env.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!lim.cwd.empty() && ::chdir(lim.cwd.c_str()) != 0) ::_exit(120);
    int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    if (lim.fsize > 0) {
      std::signal(SIGXFSZ, SIG_IGN);
      rlimit r{rlim_t(lim.fsize), rlim_t(lim.fsize)};
      ::setrlimit(RLIMIT_FSIZE, &r);
    }
    if (lim.address_space > 0) {
      rlimit r{rlim_t(lim.address_space), rlim_t(lim.address_space)};
      ::setrlimit(RLIMIT_AS, &r);
    }
    if (lim.nofile > 0) {
      rlimit r{rlim_t(lim.nofile), rlim_t(lim.nofile)};
      ::setrlimit(RLIMIT_NOFILE, &r);
    }
    std::vector<char*> a, en;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (auto& s : envs) en.push_back(const_cast<char*>(s.c_str()));
    en.push_back(nullptr);
    ::execve(a[0], a.data(), en.data());
    ::_exit(127);
  }
  ToolRun r;
  int st = 0;
  rusage ru{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(lim.deadline_s);
  while (::wait4(pid, &st, WNOHANG, &ru) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &st, 0, &ru);
      r.err = read_file(err_file);
      r.out = read_file(out_file);
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.exit = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.maxrss_kb = ru.ru_maxrss;
  r.err = read_file(err_file);
  r.out = read_file(out_file);
  return r;
}

}  // namespace testutil
