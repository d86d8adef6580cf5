// Runs a program with its stdout (and, when asked, its stderr) captured (the iscope-run and GPU tests).
#pragma once

#include <doctest/doctest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace iscope_test {

struct Result {
  int status = -1;  // as a shell reports it: exit code, or 128 + signal
  std::string out;
  std::string err;  // only with capture_err
};

// Runs argv with stdout captured; sends `sig` to it after `signal_after_ms` when given.
inline Result run(const std::vector<std::string>& argv, int signal_after_ms = -1, int sig = 0,
                  bool capture_err = false) {
  int pipefd[2], errfd[2] = {-1, -1};
  REQUIRE(::pipe(pipefd) == 0);
  if (capture_err) REQUIRE(::pipe(errfd) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  if (capture_err) {
    posix_spawn_file_actions_adddup2(&fa, errfd[1], 2);
    posix_spawn_file_actions_addclose(&fa, errfd[0]);
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  Result r;
  std::thread err_reader;
  if (capture_err) {
    ::close(errfd[1]);
    err_reader = std::thread([&r, fd = errfd[0]] {
      char b[4096];
      ssize_t k;
      while ((k = ::read(fd, b, sizeof(b))) > 0) r.err.append(b, static_cast<size_t>(k));
      ::close(fd);
    });
  }
  std::thread killer;
  if (signal_after_ms >= 0)
    killer = std::thread([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(signal_after_ms));
      ::kill(pid, sig);
    });
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (killer.joinable()) killer.join();
  if (err_reader.joinable()) err_reader.join();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace iscope_test
