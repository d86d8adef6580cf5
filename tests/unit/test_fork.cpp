// fork() in a recording process: the child gets a clean runtime (free locks, no writer thread, no inherited
// pipe) and either a session of its own (follow_children) or none; the parent's session never notices.
// Every child is waited for with a deadline, so a regression (a child hung on a lock or on a writer thread
// it does not have) fails the test instead of hanging it.
#include <doctest/doctest.h>

#include "runtime/runtime.hpp"
#include "sampled_window_wait.hpp"
#include "test_util.hpp"

#include <inferscope/scope.hpp>

#include <sys/syscall.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/sanitizers.hpp"  // ISCOPE_TEST_ASAN: built with AddressSanitizer

// A forked child has only the thread that called fork(); the parent's writer thread, and whatever its stack
// held at that instant (a buffer being filled, a snapshot being written), exist in the child as unreachable
// heap. LeakSanitizer, run at a child's std::exit, would report those bytes as leaks of the child. They are
// the parent's, and only copy-on-write pages in the child, so this binary tells LeakSanitizer to ignore
// allocations made under writer_main; every other test binary still checks the writer for leaks.
#if defined(ISCOPE_TEST_ASAN)
extern "C" const char* __lsan_default_suppressions() { return "leak:writer_main\n"; }
#endif

using namespace inferscope;
using testutil::count_named;
using testutil::read_all;

namespace {

Config config_for(const std::string& file) {
  Config c;
  c.output = testutil::temp_path(file);
  c.cupti = false;
  c.system = false;
  c.python = false;
  return c;
}

void record_parent(int n) {
  for (int i = 0; i < n; ++i) {
    ISCOPE_RANGE("parent");
  }
}

// fork(), except under AddressSanitizer. GCC 12's ASan allocator (Debian 12) is not fork-safe: a parent thread
// inside malloc/free at the instant of fork() leaves one of its size-class locks held in the child, whose next
// allocation then waits forever (seen: 4 hangs in 60 runs, the child's new writer blocked in ASan's
// SizeClassAllocator64 lock). glibc's malloc takes its own locks around fork(), and without ASan this binary
// passed 100 runs of 100. So under ASan only, each fork first waits until the parent's writer is idle in poll()
// between two drains; it narrows the window to the instant between that check and the fork (0 hangs in 200
// runs), and the child tests the runtime rather than the sanitizer.
#if defined(ISCOPE_TEST_ASAN)
// True when the thread `tid` of this process is blocked in poll() or ppoll().
bool blocked_in_poll(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/syscall");
  long nr = -1;
  if (!(in >> nr)) return false;
#ifdef SYS_poll
  if (nr == SYS_poll) return true;  // (aarch64 has ppoll only)
#endif
  return nr == SYS_ppoll;
}

// Waits (at most 2 s) until the runtime's writer thread, named iscope-writer, sits in poll().
void wait_for_idle_writer() {
  namespace fs = std::filesystem;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == "iscope-writer" && blocked_in_poll(task.path().filename().string()))
        return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
#endif

pid_t fork_child() {
#if defined(ISCOPE_TEST_ASAN)
  wait_for_idle_writer();
#endif
  return ::fork();
}

// The child's exit status (0 = all its checks held), or -1 when it had to be killed after `ms`.
int child_result(pid_t pid, int ms = 10000) {
  int st = testutil::wait_status_within(pid, ms);
  if (st == -1) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("a forked child starts and stops its own session; the parent's session loses nothing") {
  REQUIRE(start(config_for("fork-parent.iscope")));
  record_parent(10000);
  const std::string child_out = testutil::temp_path("fork-own-child.iscope");
  pid_t pid = fork_child();
  if (pid == 0) {
    int bad = is_active() ? 1 : 0;  // the parent's session is not the child's
    Config c = config_for("fork-own-child.iscope");
    if (!start(c)) bad |= 2;
    for (int i = 0; i < 50; ++i) {
      ISCOPE_RANGE("child");
    }
    if (!stop()) bad |= 4;  // joined the child's own writer (before issue 18: hung on the parent's)
    ::_exit(bad);
  }
  CHECK(child_result(pid) == 0);
  record_parent(20000);
  REQUIRE(stop());
  dump::DumpReader parent(testutil::temp_path("fork-parent.iscope"));
  CHECK(parent.complete());
  CHECK(parent.total_dropped_records() == 0);
  CHECK(count_named(read_all(parent).ranges, "parent") == 30000);
  CHECK(count_named(read_all(parent).ranges, "child") == 0);
  dump::DumpReader child(child_out);
  CHECK(child.complete());
  CHECK(count_named(read_all(child).ranges, "child") == 50);
  CHECK(count_named(read_all(child).ranges, "parent") == 0);
  CHECK(testutil::process_value(child, "pid") == std::to_string(pid));
}

TEST_CASE("fork while another thread holds the string table's lock: every child interns, none deadlocks") {
  REQUIRE(start(config_for("fork-strings.iscope")));
  int ok = 0;
  for (int round = 0; round < 10; ++round) {
    CAPTURE(round);
    std::atomic<bool> held{false};
    std::thread holder([&] { runtime::hold_strings_lock_for_test(100, [&] { held = true; }); });
    while (!held) std::this_thread::yield();
    pid_t pid = fork_child();  // the holder still has the lock here
    if (pid == 0) {
      const std::string name = "child name " + std::to_string(round);
      const uint32_t id = runtime::intern(name);
      ::_exit(id != 0 && runtime::intern(name) == id ? 0 : 1);
    }
    holder.join();
    const int r = child_result(pid, 5000);
    CHECK(r == 0);
    ok += r == 0;
  }
  CHECK(ok == 10);
  record_parent(10);
  REQUIRE(stop());
  CHECK(dump::DumpReader(testutil::temp_path("fork-strings.iscope")).complete());
}

TEST_CASE("follow_children: a forked child records into <stem>.<pid>.iscope, linked to its parent by pid/ppid") {
  Config c = config_for("fork-family.iscope");
  c.follow_children = true;
  REQUIRE(start(c));
  record_parent(100);
  pid_t pid = fork_child();
  if (pid == 0) {
    if (!is_active()) ::_exit(1);
    for (int i = 0; i < 100; ++i) {
      ISCOPE_RANGE("in_child");
    }
    std::exit(0);  // atexit completes the child's dump
  }
  CHECK(child_result(pid) == 0);
  record_parent(100);
  REQUIRE(stop());
  dump::DumpReader parent(c.output);
  CHECK(parent.complete());
  CHECK(count_named(read_all(parent).ranges, "parent") == 200);
  CHECK(count_named(read_all(parent).ranges, "in_child") == 0);
  const std::string child_path = testutil::temp_path("fork-family." + std::to_string(pid) + ".iscope");
  REQUIRE(std::filesystem::exists(child_path));
  dump::DumpReader child(child_path);
  CHECK(child.complete());
  CHECK(count_named(read_all(child).ranges, "in_child") == 100);
  CHECK(count_named(read_all(child).ranges, "parent") == 0);
  CHECK(testutil::process_value(child, "pid") == std::to_string(pid));
  CHECK(testutil::process_value(child, "ppid") == std::to_string(::getpid()));
}

TEST_CASE("without follow_children a forked child records nothing and writes no file") {
  Config c = config_for("fork-quiet.iscope");
  REQUIRE(start(c));
  pid_t pid = fork_child();
  if (pid == 0) {
    for (int i = 0; i < 100; ++i) {
      ISCOPE_RANGE("in_child");
    }
    // No session: is_active() is false, stop() has nothing to stop (and must not wait for a writer).
    ::_exit(!is_active() && !stop() ? 0 : 1);
  }
  CHECK(child_result(pid) == 0);
  record_parent(10);
  REQUIRE(stop());
  dump::DumpReader parent(c.output);
  CHECK(parent.complete());
  CHECK(count_named(read_all(parent).ranges, "in_child") == 0);
  CHECK(count_named(read_all(parent).ranges, "parent") == 10);
  CHECK_FALSE(std::filesystem::exists(testutil::temp_path("fork-quiet." + std::to_string(pid) + ".iscope")));
}

TEST_CASE("sampled mode: a child forked while a window is open starts its own sampler, with nothing of the parent's") {
  Config c = config_for("fork-sampled.iscope");
  c.mode = CaptureMode::kSampled;
  c.window_steps = 5;
  c.window_every_steps = 10;
  c.follow_children = true;
  c.slow_step_factor = 0;
  REQUIRE(start(c));
  auto steps = [](int n, int step_us = 200) {
    for (int i = 0; i < n; ++i) {
      ISCOPE_RANGE("step");
      std::this_thread::sleep_for(std::chrono::microseconds(step_us));
    }
  };
  steps(12);  // the first window is open now (it counts steps 10..14)
  // A snapshot asked for just before the fork: the child must not write it. (Under ASan, fork_child waits for
  // the writer, which then has usually written it already: this case is checked in the normal build.)
  ::raise(SIGUSR2);
  pid_t pid = fork_child();
  if (pid == 0) {
    if (!is_active()) ::_exit(1);
    // Windows are opened by the child's own writer thread, woken by the step that is due (the 10th, the 20th of
    // its own count). Before the steps a window counts, the child waits until it is open (a loaded machine can
    // hold the writer back longer than any step), so both windows open however the scheduler runs it.
    steps(10);
    if (!testutil::wait_sampled_window("open")) ::_exit(2);
    steps(10);
    if (!testutil::wait_sampled_window("open")) ::_exit(3);
    steps(5);
    std::exit(0);  // atexit completes the child's dump
  }
  CHECK(child_result(pid, 60000) == 0);  // 2, 3: the first or the second window did not open within 20 s
  steps(8);
  REQUIRE(stop());
  dump::DumpReader parent(c.output);
  REQUIRE(parent.is_sampled());
  CHECK(parent.sampling()->summary.steps_seen == 20);
  const std::string child_path = testutil::temp_path("fork-sampled." + std::to_string(pid) + ".iscope");
  REQUIRE(std::filesystem::exists(child_path));
  dump::DumpReader child(child_path);
  CHECK(child.complete());
  REQUIRE(child.is_sampled());
  const auto& cs = *child.sampling();
  CHECK(cs.summary.steps_seen == 25);  // its own steps, counted from 0: no count, window or flag of the parent's
  CHECK(cs.summary.windows_opened == 2);
  REQUIRE(cs.windows.size() >= 1);
  CHECK(cs.windows[0].first_step == 10);
  CHECK_FALSE(std::filesystem::exists(testutil::temp_path("fork-sampled." + std::to_string(pid) + ".flush1.iscope")));
}
