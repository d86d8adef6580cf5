// A helper process for the foundation tests: records in a chosen pattern so tests can kill it, signal it
// or let it exit, and then check the dump. Sessions start from the environment (INFERSCOPE_ENABLE=1).
#include <inferscope/scope.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void work_forever() {
  for (uint64_t i = 0;; ++i) {
    ISCOPE_RANGE("tick");
    if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (mode == "count") {  // records N ranges and returns from main
    long n = argc > 2 ? std::atol(argv[2]) : 1000;
    for (long i = 0; i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    std::printf("recorded %ld\n", n);
    return 0;
  }
  if (mode == "loop") {  // records until a signal ends it
    std::printf("ready\n");
    std::fflush(stdout);
    work_forever();
  }
  if (mode == "exit-with-threads") {  // calls exit() while other threads still record
    int threads = argc > 2 ? std::atoi(argv[2]) : 4;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(work_forever);
    for (auto& t : ts) t.detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    {
      ISCOPE_RANGE("main_before_exit");
    }
    std::exit(7);
  }
  if (mode == "exit-code") return argc > 2 ? std::atoi(argv[2]) : 0;
  return 2;
}
