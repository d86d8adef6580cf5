// A helper process for the foundation tests: records in a chosen pattern so tests can kill it, signal it
// or let it exit, and then check the dump. Sessions start from the environment (INFERSCOPE_ENABLE=1).
#include <inferscope/scope.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

namespace {

void work_forever() {
  for (uint64_t i = 0;; ++i) {
    ISCOPE_RANGE("tick");
    if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Records, forks a child that only sleeps, sends it SIGTERM, waits for it, records again. Prints how the
// child ended; the parent returns 0 (the signal was the child's alone).
int fork_term() {
  for (long i = 0; i < 1000; ++i) {
    ISCOPE_RANGE("before_fork");
  }
  pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the child is in pause()
  ::kill(child, SIGTERM);
  int st = 0;
  while (::waitpid(child, &st, 0) < 0) {
  }
  std::printf("child %s %d\n", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  for (long i = 0; i < 1000; ++i) {
    ISCOPE_RANGE("after_fork");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a byte the child's handler wrote would be read now
  return 0;
}

// Records until its own SIGINT handler has run, records half a second more (a second SIGINT would arrive by
// then), prints how many SIGINTs it got and returns 0.
std::atomic<int> g_sigints{0};
int count_sigints() {
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_sigints.fetch_add(1); };
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);
  while (g_sigints.load() == 0) {
    ISCOPE_RANGE("tick");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < until) {
    ISCOPE_RANGE("tick");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::printf("sigints %d\n", g_sigints.load());
  return 0;
}

// Records, then execs itself as `count N` (which records N ranges into the same output path).
int exec_self(const char* self, const char* n) {
  for (long i = 0; i < 500; ++i) {
    ISCOPE_RANGE("before_exec");
  }
  std::fflush(stdout);
  ::execl(self, self, "count", n, static_cast<char*>(nullptr));
  std::perror("execl");
  return 3;
}

// Records N ranges, waits for the writer to drain them (several flush periods), then ends abnormally: "abort"
// calls abort(), "segv" writes to a page mapped without access, "bus" raises SIGBUS. "segv-handled OUT" installs a
// SIGSEGV handler of its own that prints and exits 42, then starts a ring session into OUT itself (so the
// runtime's handler is installed over the program's and must chain to it).
void on_segv_exit_42(int) {
  const char msg[] = "own handler\n";
  [[maybe_unused]] ssize_t r = ::write(1, msg, sizeof(msg) - 1);
  ::_exit(42);
}

int crash(const std::string& how, long n, const char* out) {
  if (how == "segv-handled") {
    ::signal(SIGSEGV, on_segv_exit_42);
    inferscope::Config c;
    c.output = out;
    c.buffer_mode = inferscope::BufferMode::kRing;
    c.cupti = c.python = c.system = false;
    if (!inferscope::start(c)) return 4;
  }
  for (long i = 0; i < n; ++i) {
    ISCOPE_RANGE("counted");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (how == "abort") std::abort();
  if (how == "bus") ::raise(SIGBUS);
  // A real fault that no sanitizer check stops first (UBSan rejects a store through a null pointer): a page
  // mapped without access.
  void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 5;
  *static_cast<volatile int*>(page) = 1;
  return 3;
}

// "segv-recover N OUT": a program that recovers from SIGSEGV (a guard page made writable by its own handler, as
// garbage collectors and JITs do), its handler installed before a session in the default mode starts in code.
// Records N "before", faults once, records N "after", stops; prints whether stop() wrote the dump.
void* g_guard = nullptr;
void on_segv_unprotect(int) { ::mprotect(g_guard, 4096, PROT_READ | PROT_WRITE); }

int segv_recover(long n, const char* out) {
  g_guard = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_guard == MAP_FAILED) return 5;
  ::signal(SIGSEGV, on_segv_unprotect);
  inferscope::Config c;
  c.output = out;
  c.cupti = c.python = c.system = false;
  if (!inferscope::start(c)) return 4;
  for (long i = 0; i < n; ++i) {
    ISCOPE_RANGE("before");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  *static_cast<volatile int*>(g_guard) = 1;  // the fault; the handler makes the page writable and returns
  for (long i = 0; i < n; ++i) {
    ISCOPE_RANGE("after");
  }
  std::printf("stopped %d\n", inferscope::stop() ? 1 : 0);
  return 0;
}

// `inferscope::Session` started in code, as the README shows: the collectors off (set in code), the output OUT
// when one is given ("-": none, left to the environment and .inferscope.yaml). Records N ranges and prints whether
// the session started and where it wrote; the exit status is 0 either way (a session that did not start is the
// program's business, not a failure of the program).
int code_session(const char* out, long n) {
  inferscope::Config c;
  if (std::strcmp(out, "-") != 0) c.output = out;
  c.cupti = c.python = c.system = false;
  inferscope::Session session(c);
  for (long i = 0; i < n; ++i) {
    ISCOPE_RANGE("counted");
  }
  std::printf("session %s %s\n", session.ok() ? "started" : "not-started", inferscope::output_path().c_str());
  return 0;
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
  if (mode == "work-for") {  // prints "ready PID", records for MS milliseconds, prints "finished", returns 0
    const long ms = argc > 2 ? std::atol(argv[2]) : 1000;
    std::printf("ready %d\n", static_cast<int>(::getpid()));
    std::fflush(stdout);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      ISCOPE_RANGE("tick");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::printf("finished\n");
    return 0;
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
  if (mode == "fork-term") return fork_term();
  if (mode == "count-sigint") return count_sigints();
  if (mode == "exec-self") return exec_self(argv[0], argc > 2 ? argv[2] : "7");
  if (mode == "abort" || mode == "segv" || mode == "bus" || mode == "segv-handled")
    return crash(mode, argc > 2 ? std::atol(argv[2]) : 1000, argc > 3 ? argv[3] : "");
  if (mode == "segv-recover") return segv_recover(argc > 2 ? std::atol(argv[2]) : 1000, argc > 3 ? argv[3] : "");
  if (mode == "code-session") return code_session(argc > 2 ? argv[2] : "-", argc > 3 ? std::atol(argv[3]) : 100);
  if (mode == "exit-code") return argc > 2 ? std::atoi(argv[2]) : 0;
  if (mode == "chdir") {  // records N ranges, changes its working directory to DIR, records N more, returns
    if (argc < 4) return 2;
    const long n = std::atol(argv[3]);
    for (long i = 0; i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    if (::chdir(argv[2]) != 0) return 3;
    for (long i = 0; i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    std::printf("recorded %ld\n", 2 * n);
    return 0;
  }
  if (mode == "paced") {  // records N ranges at a pace the writer keeps up with (1 ms pause every 100)
    long n = argc > 2 ? std::atol(argv[2]) : 1000;
    for (long i = 0; i < n; ++i) {
      ISCOPE_RANGE("counted");
      if (i % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("recorded %ld\n", n);
    return 0;
  }
  if (mode == "fill-fds") {  // records N ranges, opens /dev/null until the descriptor limit, prints how many
    for (long i = 0, n = argc > 2 ? std::atol(argv[2]) : 100; i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the collectors have opened what they keep
    long opened = 0;
    // A descriptor the recorder holds only for a read comes back: the limit is tried again a few times.
    for (int tries = 0; tries < 5; ++tries) {
      while (::open("/dev/null", O_RDONLY) >= 0) ++opened;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::printf("opened %ld\n", opened);
    std::fflush(stdout);
    return 0;  // every descriptor still taken: the recorder writes its dump at exit with what it holds
  }
  if (mode == "children") {  // runs "count N" for each N given, each in a child process (posix_spawn), in turn
    for (int i = 2; i < argc; ++i) {
      char* child[] = {argv[0], const_cast<char*>("count"), argv[i], nullptr};
      pid_t pid = 0;
      if (::posix_spawn(&pid, argv[0], nullptr, nullptr, child, environ) != 0) return 3;
      int st = 0;
      while (::waitpid(pid, &st, 0) < 0) {
      }
    }
    return 0;
  }
  if (mode == "underscore-exit") {  // records N ranges, waits for the writer to drain them, ends with _exit(0)
    for (long i = 0, n = argc > 2 ? std::atol(argv[2]) : 100; i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::_exit(0);  // no atexit: the session never stops, its dump has no END chunk
  }
  if (mode == "until-file") {  // prints "ready PID", records until the file PATH exists (at most 60 s), returns 0
    if (argc < 3) return 2;
    std::printf("ready %d\n", static_cast<int>(::getpid()));
    std::fflush(stdout);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (::access(argv[2], F_OK) != 0 && std::chrono::steady_clock::now() < until) {
      ISCOPE_RANGE("tick");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return 0;
  }
  if (mode == "own-write") {  // records N ranges, then writes BYTES to FILE itself (a file-size limit ends it)
    if (argc < 5) return 2;
    for (long i = 0, n = std::atol(argv[2]); i < n; ++i) {
      ISCOPE_RANGE("counted");
    }
    std::vector<char> bytes(static_cast<size_t>(std::atol(argv[4])), 'x');
    FILE* f = std::fopen(argv[3], "wb");
    if (!f) return 3;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    std::printf("wrote %zu\n", bytes.size());
    return 0;
  }
  return 2;
}
