// Helper of cgroup_live_test: moves itself into a cgroup, records a session with the system collector while it
// spins on the CPU in 20 steps of 50 ms, and stops.   iscope_test_cgroup_spinner CGROUP_PROCS_FILE OUTPUT
#include <inferscope/scope.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CGROUP_PROCS_FILE OUTPUT\n", argv[0]);
    return 2;
  }
  // In the cgroup before the session starts, so the writer and sampler threads are created inside it too.
  const std::string pid = std::to_string(::getpid());
  const int fd = ::open(argv[1], O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) {
    std::perror(argv[1]);
    return 3;
  }
  ::close(fd);
  inferscope::Config c;
  c.output = argv[2];
  c.cupti = c.python = c.nvml = false;
  c.system = true;
  c.sample_period_ms = 10;
  if (!inferscope::start(c)) return 4;
  // 20 steps of 50 ms of spinning: at 0.2 CPU each step is mostly spent waiting for the next quota period.
  for (int step = 0; step < 20; ++step) {
    ISCOPE_RANGE("step");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    volatile unsigned long x = 0;
    while (std::chrono::steady_clock::now() < until)
      for (int i = 0; i < 1000; ++i) x = x + i;
  }
  return inferscope::stop() ? 0 : 5;
}
