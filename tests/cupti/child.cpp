// A program without CUDA and without InferScope, for iscope-run's tests:
//   iscope_run_child [--print TEXT] [--stderr TEXT] [--sleep-ms N] [--exit N] [--raise SIG]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int code = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* a = argv[i];
    const char* v = argv[i + 1];
    if (!std::strcmp(a, "--print")) std::printf("%s\n", v);
    else if (!std::strcmp(a, "--stderr")) std::fprintf(stderr, "%s\n", v);
    else if (!std::strcmp(a, "--sleep-ms")) ::usleep(static_cast<useconds_t>(std::atol(v)) * 1000);
    else if (!std::strcmp(a, "--exit")) code = std::atoi(v);
    else if (!std::strcmp(a, "--raise")) {
      std::fflush(stdout);
      ::raise(std::atoi(v));
    }
    std::fflush(stdout);
  }
  return code;
}
