// Whole processes started from the environment (INFERSCOPE_ENABLE=1): the dump survives kill -9 up to its
// last chunk, is complete after SIGTERM, SIGINT, exit() and a normal return, and bad settings start nothing.
#include <doctest/doctest.h>

#include "test_util.hpp"

#include <sched.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

using namespace inferscope;

namespace {

std::string recorder() { return testutil::binary("tests/unit/iscope_test_recorder"); }

std::vector<std::string> env_for(const std::string& out, std::vector<std::string> more = {}) {
  more.push_back("INFERSCOPE_ENABLE=1");
  more.push_back("INFERSCOPE_OUTPUT=" + out);
  return more;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Starts the recorder's "loop" and returns once it has said "ready" (its session is recording), so a signal sent
// next finds the session running however slow the machine (an ASan build under a loaded ctest took over 300 ms).
pid_t spawn_loop(const std::vector<std::string>& env, const std::string& tag) {
  const std::string said = testutil::temp_path(tag + ".stdout");
  std::filesystem::remove(said);
  pid_t pid = testutil::spawn({recorder(), "loop"}, env, said);
  for (int i = 0; i < 3000; ++i) {  // up to 60 s
    std::ifstream f(said);
    std::string line;
    if (std::getline(f, line) && line == "ready") break;
    sleep_ms(20);
  }
  return pid;
}

}  // namespace

TEST_CASE("kill -9 mid-run: the dump is readable up to its last whole chunk") {
  std::string out = testutil::temp_path("killed.iscope");
  pid_t pid = spawn_loop(env_for(out), "killed");
  REQUIRE(pid > 0);
  sleep_ms(400);
  ::kill(pid, SIGKILL);
  int st = testutil::wait_status(pid);
  CHECK(WIFSIGNALED(st));
  dump::DumpReader r(out);
  CHECK_FALSE(r.complete());
  auto c = testutil::read_all(r);
  CHECK(testutil::count_named(c.ranges, "tick") > 1000);
  CHECK(r.calibration().size() >= 2);
}

TEST_CASE("SIGTERM and SIGINT write a complete dump, then the signal's default action happens") {
  for (int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    std::string out = testutil::temp_path("signal-" + std::to_string(sig) + ".iscope");
    pid_t pid = spawn_loop(env_for(out), "signal-" + std::to_string(sig));
    REQUIRE(pid > 0);
    sleep_ms(300);
    ::kill(pid, sig);
    int st = testutil::wait_status(pid);
    REQUIRE(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == sig);
    dump::DumpReader r(out);
    CHECK(r.complete());
    CHECK_FALSE(r.damage());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "tick") > 1000);
  }
}

TEST_CASE("exit() while other threads still record: complete dump, exit status kept") {
  std::string out = testutil::temp_path("exit-threads.iscope");
  pid_t pid = testutil::spawn({recorder(), "exit-with-threads", "4"}, env_for(out));
  int st = testutil::wait_status(pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 7);
  dump::DumpReader r(out);
  CHECK(r.complete());
  auto c = testutil::read_all(r);
  CHECK(testutil::count_named(c.ranges, "main_before_exit") == 1);
  std::set<uint32_t> tick_threads;
  for (auto& x : c.ranges)
    if (x.name == "tick") tick_threads.insert(x.thread);
  CHECK(tick_threads.size() == 4);
}

TEST_CASE("a normal return writes every range, with the chosen clock") {
  for (const char* clock : {"", "monotonic"}) {
    CAPTURE(clock);
    std::string out = testutil::temp_path(std::string("count-") + clock + ".iscope");
    std::vector<std::string> env = env_for(out);
    if (*clock) env.push_back(std::string("INFERSCOPE_CLOCK=") + clock);
    pid_t pid = testutil::spawn({recorder(), "count", "5000"}, env);
    int st = testutil::wait_status(pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    dump::DumpReader r(out);
    CHECK(r.complete());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 5000);
    if (*clock) CHECK(r.process_value("clock") == "monotonic_raw");
    // How many CPUs the program may use (its affinity), for the analyzer's worker suggestions.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    REQUIRE(::sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
    CHECK(r.process_value("cpus_allowed") == std::to_string(CPU_COUNT(&allowed)));
  }
}

TEST_CASE("a rank of a multi-process job is in the process info, from its launcher's environment") {
  struct Case {
    std::vector<std::string> env;
    std::string rank, source, world, local;
  };
  const Case cases[] = {
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"}, "1", "torchrun", "2", "1"},
      {{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4"}, "3", "openmpi", "4", ""},
      // torchrun's own variables win over the MPI launcher that started its agent
      {{"OMPI_COMM_WORLD_RANK=0", "RANK=5", "WORLD_SIZE=8"}, "5", "torchrun", "8", ""},
      {{"RANK=one", "SLURM_PROCID=2", "SLURM_NTASKS=x"}, "2", "slurm", "", ""},  // not numbers: skipped
      {{}, "", "", "", ""},
  };
  // The empty case means something only when this test's own environment names no rank (spawn inherits it).
  const bool clean_env = !std::getenv("RANK") && !std::getenv("OMPI_COMM_WORLD_RANK") && !std::getenv("PMI_RANK") &&
                         !std::getenv("SLURM_PROCID");
  int i = 0;
  for (const Case& c : cases) {
    CAPTURE(i);
    if (c.env.empty() && !clean_env) continue;
    std::string out = testutil::temp_path("rank-" + std::to_string(i++) + ".iscope");
    pid_t pid = testutil::spawn({recorder(), "count", "10"}, env_for(out, c.env));
    int st = testutil::wait_status(pid);
    REQUIRE(WIFEXITED(st));
    dump::DumpReader r(out);
    CHECK(r.process_value("rank") == c.rank);
    CHECK(r.process_value("rank_source") == c.source);
    CHECK(r.process_value("world_size") == c.world);
    CHECK(r.process_value("local_rank") == c.local);
  }
}

TEST_CASE("a bad setting in the environment starts nothing and the program runs unchanged") {
  std::string out = testutil::temp_path("bad-config.iscope");
  pid_t pid = testutil::spawn({recorder(), "exit-code", "5"}, env_for(out, {"INFERSCOPE_TRACE_SIZE_MB=lots"}));
  int st = testutil::wait_status(pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 5);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("ring mode: SIGUSR2 writes a snapshot and recording goes on") {
  std::string out = testutil::temp_path("ring-signal.iscope");
  pid_t pid = spawn_loop(env_for(out, {"INFERSCOPE_BUFFER_MODE=ring"}), "ring-signal");
  sleep_ms(300);
  ::kill(pid, SIGUSR2);
  std::string snap = testutil::temp_path("ring-signal.flush1.iscope");
  for (int i = 0; i < 100 && !std::filesystem::exists(snap); ++i) sleep_ms(20);
  REQUIRE(std::filesystem::exists(snap));
  sleep_ms(100);
  ::kill(pid, SIGTERM);
  int st = testutil::wait_status(pid);
  CHECK(WIFSIGNALED(st));
  dump::DumpReader s(snap);
  CHECK(s.complete());
  CHECK(s.is_ring_snapshot());
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "tick") >
        testutil::count_named(testutil::read_all(s).ranges, "tick") / 2);
}

TEST_CASE("sampled mode from the environment: SIGUSR2 writes the ring, the process goes on, SIGTERM completes it") {
  std::string out = testutil::temp_path("sampled-signal.iscope");
  pid_t pid = spawn_loop(env_for(out, {"INFERSCOPE_MODE=sampled", "INFERSCOPE_WINDOW_MS=20",
                                       "INFERSCOPE_WINDOW_EVERY_MS=100"}),
                         "sampled-signal");
  sleep_ms(300);
  ::kill(pid, SIGUSR2);  // its default action would end the process: ours replaced it
  std::string snap = testutil::temp_path("sampled-signal.flush1.iscope");
  for (int i = 0; i < 100 && !std::filesystem::exists(snap); ++i) sleep_ms(20);
  REQUIRE(std::filesystem::exists(snap));
  sleep_ms(400);  // several 100 ms periods: a window opens after the snapshot even with a slow writer
  CHECK(::kill(pid, 0) == 0);  // still running
  ::kill(pid, SIGTERM);
  int st = testutil::wait_status(pid);
  CHECK(WIFSIGNALED(st));
  dump::DumpReader s(snap);
  CHECK(s.complete());
  REQUIRE(s.is_sampled());
  CHECK(s.sampling()->summary.windows_opened >= 1);
  CHECK(testutil::count_named(testutil::read_all(s).ranges, "tick") > 0);  // the timed windows' ranges
  dump::DumpReader r(out);
  CHECK(r.complete());
  REQUIRE(r.is_sampled());
  CHECK(r.sampling()->summary.windows_opened > s.sampling()->summary.windows_opened);
}

TEST_CASE("children of an iscope-run process record only when asked, each into its own file") {
  // INFERSCOPE_ROOT_PID names another process: this one is a child and stays silent by default.
  std::string out = testutil::temp_path("child.iscope");
  pid_t pid = testutil::spawn({recorder(), "count", "10"}, env_for(out, {"INFERSCOPE_ROOT_PID=1"}));
  testutil::wait_status(pid);
  CHECK_FALSE(std::filesystem::exists(out));
  pid = testutil::spawn({recorder(), "count", "10"},
                        env_for(out, {"INFERSCOPE_ROOT_PID=1", "INFERSCOPE_FOLLOW_CHILDREN=1"}));
  testutil::wait_status(pid);
  std::string own = testutil::temp_path("child." + std::to_string(pid) + ".iscope");
  REQUIRE(std::filesystem::exists(own));
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(own)).ranges, "counted") == 10);
}

TEST_CASE("a forked child killed by SIGTERM dies alone: the parent exits 0 and its dump is complete") {
  // The child inherits the runtime's handler and (before issue 18) the writer's pipe: its signal byte ended
  // the parent's session and re-raised SIGTERM in the parent.
  std::string out = testutil::temp_path("fork-term.iscope");
  std::string log = testutil::temp_path("fork-term.out");
  pid_t pid = testutil::spawn({recorder(), "fork-term"}, env_for(out), log);
  int st = testutil::wait_status(pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(testutil::read_file(log).find("child signal 15") != std::string::npos);
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(r.total_dropped_records() == 0);
  auto c = testutil::read_all(r);
  CHECK(testutil::count_named(c.ranges, "before_fork") == 1000);
  CHECK(testutil::count_named(c.ranges, "after_fork") == 1000);
}

TEST_CASE("exec keeps what was recorded before it: <stem>.pre-exec1.iscope, and the new image's own dump") {
  std::string out = testutil::temp_path("exec.iscope");
  pid_t pid = testutil::spawn({recorder(), "exec-self", "7"}, env_for(out));
  int st = testutil::wait_status(pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  dump::DumpReader before(testutil::temp_path("exec.pre-exec1.iscope"));
  CHECK(before.complete());
  CHECK(testutil::count_named(testutil::read_all(before).ranges, "before_exec") == 500);
  dump::DumpReader after(out);
  CHECK(after.complete());
  auto c = testutil::read_all(after);
  CHECK(testutil::count_named(c.ranges, "counted") == 7);
  CHECK(testutil::count_named(c.ranges, "before_exec") == 0);
  CHECK(testutil::process_value(before, "pid") == testutil::process_value(after, "pid"));
}
