// Runs a program with its stdout captured (the iscope-run and GPU tests).
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
};

// Runs argv with stdout captured; sends `sig` to it after `signal_after_ms` when given.
inline Result run(const std::vector<std::string>& argv, int signal_after_ms = -1, int sig = 0) {
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  std::thread killer;
  if (signal_after_ms >= 0)
    killer = std::thread([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(signal_after_ms));
      ::kill(pid, sig);
    });
  Result r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (killer.joinable()) killer.join();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace iscope_test
