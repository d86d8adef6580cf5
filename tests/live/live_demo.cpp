// A program for the live page's test (tests/live/live_check.py): steps marked with ISCOPE_RANGE("step"), each
// with two child ranges; one planted slow step (400 ms more in "compute") once SLOW exists, so the test plants it
// when it is watching; steps made while STOP does not exist, then idle until EXIT exists (so the test can read
// the final counts while the program still runs). Its last line, "live_demo: done ...", arrives only when its exit
// completes.
//
//   live_demo STOP EXIT SLOW
#include <inferscope/scope.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace {

bool exists(const char* path) {
  if (std::FILE* f = std::fopen(path, "r")) return std::fclose(f), true;
  return false;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: live_demo STOP EXIT SLOW\n"), 2;
  bool planted = false;
  int steps = 0;
  for (int i = 0; !exists(argv[1]) && i < 100000; ++i, ++steps) {
    const bool slow = !planted && exists(argv[3]);
    planted = planted || slow;
    ISCOPE_RANGE("step");
    { ISCOPE_RANGE("preprocess"); sleep_ms(10); }
    { ISCOPE_RANGE("compute"); sleep_ms(slow ? 420 : 40); }
  }
  while (!exists(argv[2])) sleep_ms(20);
  // Buffered (stdout is a pipe under the tests), so it reaches them only when exit() completes: live_stress.py checks
  // that it does.
  std::printf("live_demo: done after %d steps\n", steps);
  return 0;
}
