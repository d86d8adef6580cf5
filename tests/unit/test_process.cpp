// Whole processes started from the environment (INFERSCOPE_ENABLE=1): the dump survives kill -9 up to its
// last chunk, is complete after SIGTERM, SIGINT, exit() and a normal return, and bad settings start nothing.
#include <doctest/doctest.h>

#include "test_util.hpp"

#include <poll.h>
#include <pty.h>
#include <sched.h>

#include <chrono>
#include <cstring>
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

std::string iscope_run() { return testutil::binary("tools/iscope-run/iscope-run"); }

// Waits up to 60 s for `text` in the file `path` (a program's stdout); false when it never comes.
bool wait_for_text(const std::string& path, const std::string& text) {
  for (int i = 0; i < 3000; ++i) {
    if (testutil::read_file(path).find(text) != std::string::npos) return true;
    sleep_ms(20);
  }
  return false;
}

// Ends the program whose dump is `out` (its pid from the process info the dump opens with): a program left
// running by a failed check must not outlive the test.
void kill_program_of(const std::string& out) {
  const auto info = dump::leading_process_info(out);
  if (!info) return;
  for (const auto& [k, v] : *info)
    if (k == "pid" && std::atoi(v.c_str()) > 1) ::kill(std::atoi(v.c_str()), SIGKILL);
}

// Reads the pseudo-terminal `master` into `seen` until `text` has come after `seen`'s first `from` bytes (true)
// or `ms` milliseconds passed (false).
bool read_terminal_until(int master, std::string& seen, const std::string& text, int ms, size_t from = 0) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (seen.find(text, from) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(master, buf, sizeof(buf));
    if (n <= 0) return seen.find(text, from) != std::string::npos;
    seen.append(buf, static_cast<size_t>(n));
  }
  return true;
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

// A signal sent to iscope-run's pid alone (kill PID, a supervisor, a job scheduler), not to its process group:
// iscope-run ignored SIGINT, so the program ran on and iscope-run waited for it. Now it passes SIGINT, SIGTERM and
// SIGHUP on, and the program ends as it would have (the runtime completes the dump on SIGINT and SIGTERM).
TEST_CASE("iscope-run passes SIGINT, SIGTERM, SIGHUP and SIGALRM sent to its pid alone on to the program") {
  // SIGALRM (and SIGVTALRM, SIGPROF) ended iscope-run alone: exit 142 at once, the program left running.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGALRM}) {
    CAPTURE(sig);
    const std::string tag = "run-signal-" + std::to_string(sig);
    const std::string out = testutil::temp_path(tag + ".iscope"), said = testutil::temp_path(tag + ".stdout");
    pid_t run = testutil::spawn({iscope_run(), "-q", "-o", out, "--", recorder(), "loop"}, {}, said);
    REQUIRE(run > 0);
    REQUIRE(wait_for_text(said, "ready"));
    sleep_ms(300);  // the writer has flushed ticks (SIGHUP ends the program without writing what it holds)
    ::kill(run, sig);  // iscope-run's pid only
    const int st = testutil::wait_status_within(run, 20000);
    if (st == -1) kill_program_of(out);  // the signal never reached the program: it still runs
    REQUIRE(st != -1);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 128 + sig);  // the program ended by the signal, as without iscope-run
    dump::DumpReader r(out);
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "tick") > 0);
    // SIGHUP's and SIGALRM's default action ends the program at once, possibly while its writer writes a chunk:
    // its dump is readable up to its last whole chunk, cut short at most (seen under load), never corrupt.
    if (sig != SIGHUP && sig != SIGALRM) {
      CHECK_FALSE(r.damage());
      CHECK(r.complete());
    } else if (r.damage()) {
      CHECK_MESSAGE(r.damage()->truncated, r.damage()->message);
    }
  }
}

// SIGTERM to a program under iscope-run, or to iscope-run (which passes it on): without us the program would stop at
// once. It used to run on while its writer wrote the dump and then the report (--report: iscope-analyze, seconds),
// and a program that finished meanwhile ended through exit(0), whose atexit found the session stopped already:
// iscope-run exited 0. Now the thread the signal interrupted waits in the handler until the dump and the report are
// written and the signal's default action ends the process. A report writer that sleeps 2 s (INFERSCOPE_ANALYZE)
// opens that window wide: the program records for 1.5 s, so without the wait it always finished first.
TEST_CASE("SIGTERM under iscope-run: the program stops where it was once its dump is written; exit 143, with --report too") {
  const std::string slow = testutil::temp_path("slow-analyze.sh");
  {
    std::ofstream script(slow);
    script << "#!/bin/sh\nsleep 2\nexec " << testutil::binary("tools/iscope-analyze/iscope-analyze") << " \"$@\"\n";
  }
  std::filesystem::permissions(slow, std::filesystem::perms::owner_all);
  for (const bool to_tool : {true, false}) {
    CAPTURE(to_tool);
    const std::string tag = to_tool ? "term-tool" : "term-program";
    const std::string out = testutil::temp_path(tag + ".iscope"), said = testutil::temp_path(tag + ".stdout");
    const std::string report = testutil::temp_path(tag + ".md");
    const pid_t run = testutil::spawn({iscope_run(), "-q", "-o", out, "--report", report, "--", recorder(), "work-for", "1500"},
                                      {"INFERSCOPE_ANALYZE=" + slow}, said);
    REQUIRE(run > 0);
    REQUIRE(wait_for_text(said, "ready "));
    sleep_ms(200);
    const std::string text = testutil::read_file(said);
    const pid_t program = std::atoi(text.substr(text.find("ready ") + 6).c_str());
    REQUIRE(program > 1);
    ::kill(to_tool ? run : program, SIGTERM);
    const int st = testutil::wait_status_within(run, 60000);
    if (st == -1) kill_program_of(out);
    REQUIRE(st != -1);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 128 + SIGTERM);  // as a shell reports a program ended by SIGTERM; it was 0
    CHECK(testutil::read_file(said).find("finished") == std::string::npos);  // it did not run on to its end
    dump::DumpReader r(out);
    CHECK(r.complete());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "tick") > 0);
    CHECK(std::filesystem::file_size(report) > 0);  // written before the process ended
  }
}

// Ctrl-C at a terminal goes to the whole foreground process group: the program has it already, and iscope-run,
// which now passes on a SIGINT sent to it, must not deliver it a second time (a second KeyboardInterrupt inside
// the program's own `finally`).
TEST_CASE("Ctrl-C at a terminal reaches the program under iscope-run once") {
  const std::string out = testutil::temp_path("ctrl-c.iscope");
  const std::string tool = iscope_run(), program = recorder();
  int master = -1;
  const pid_t run = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (run < 0) {
    MESSAGE("SKIPPED: no pseudo-terminal here (" << std::strerror(errno) << ")");
    return;
  }
  if (run == 0) {
    ::execl(tool.c_str(), tool.c_str(), "-q", "-o", out.c_str(), "--", program.c_str(), "count-sigint",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string seen;
  const bool ready = read_terminal_until(master, seen, "ready", 60000);
  if (ready) CHECK(::write(master, "\x03", 1) == 1);  // the terminal's interrupt character
  const bool counted = ready && read_terminal_until(master, seen, "sigints ", 20000) &&
                       read_terminal_until(master, seen, "\n", 2000, seen.find("sigints "));
  CAPTURE(seen);
  const int st = testutil::wait_status_within(run, 20000);
  ::close(master);
  if (st == -1) kill_program_of(out);
  REQUIRE(counted);
  CHECK(seen.find("sigints 1") != std::string::npos);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(dump::DumpReader(out).complete());
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
  // The process goes on and opens windows after the snapshot. Each further SIGUSR2 writes the ring again
  // (flush2, flush3, ...): wait until one holds more windows than the first, however slow the machine (a fixed
  // sleep failed under ASan on a loaded machine).
  const uint64_t first_windows = dump::DumpReader(snap).sampling()->summary.windows_opened;
  bool more = false;
  for (int n = 2; n <= 40 && !more; ++n) {
    sleep_ms(250);
    ::kill(pid, SIGUSR2);
    const std::string next = testutil::temp_path("sampled-signal.flush" + std::to_string(n) + ".iscope");
    for (int i = 0; i < 250 && !std::filesystem::exists(next); ++i) sleep_ms(20);
    REQUIRE(std::filesystem::exists(next));
    sleep_ms(50);  // the snapshot is renamed into place complete; read it once its writer is done
    dump::DumpReader later(next);
    more = later.is_sampled() && later.sampling()->summary.windows_opened > first_windows;
  }
  CHECK(more);
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
