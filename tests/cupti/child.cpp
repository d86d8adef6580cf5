// A program without CUDA and without InferScope, for iscope-run's tests:
//   iscope_run_child [--print TEXT] [--stderr TEXT] [--sleep-ms N] [--exit N] [--raise SIG]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

int main(int argc, char** argv) {
  int code = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* a = argv[i];
    const char* v = argv[i + 1];
    if (!std::strcmp(a, "--print")) std::printf("%s\n", v);
    else if (!std::strcmp(a, "--stderr")) std::fprintf(stderr, "%s\n", v);
    else if (!std::strcmp(a, "--sleep-ms")) {
      // Keeps sleeping when a signal handler interrupts the sleep, like a program busy with work.
      timespec left{std::atol(v) / 1000, (std::atol(v) % 1000) * 1000000};
      while (::nanosleep(&left, &left) != 0) {
      }
    }
    else if (!std::strcmp(a, "--exit")) code = std::atoi(v);
    else if (!std::strcmp(a, "--raise")) {
      std::fflush(stdout);
      ::raise(std::atoi(v));
    }
    std::fflush(stdout);
  }
  return code;
}
