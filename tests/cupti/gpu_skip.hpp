// What every GPU test (label gpu) does first: find out whether this machine has a CUDA GPU, and skip visibly,
// with the reason, when it has none (exit 77, which CTest reports as skipped; CI has no GPU).
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace iscope_test {

[[noreturn]] inline void skip(const char* why) {
  std::printf("skipped: %s\n", why);
  std::fflush(stdout);
  std::_Exit(77);
}

/// The driver loads, initialises and sees at least one device.
inline bool have_gpu() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return false;
  auto init = reinterpret_cast<int (*)(unsigned)>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<int (*)(int*)>(::dlsym(h, "cuDeviceGetCount"));
  int n = 0;
  return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

}  // namespace iscope_test
