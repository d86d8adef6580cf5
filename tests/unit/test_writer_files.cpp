// The runtime's writer side of issue 18 (docs/reliability.md, "Files" and "Ring mode on abnormal exits"): the
// dump file is never torn, never someone else's, never shared by two live sessions, and a ring-mode session
// leaves its window behind when the program aborts or faults.
#include <doctest/doctest.h>

#include "dump/files.hpp"
#include "runtime/runtime.hpp"
#include "test_util.hpp"
#include "writer_test_support.hpp"
#include "tool_run.hpp"
#include "support/files.hpp"
#include "support/sanitizers.hpp"

#include <inferscope/scope.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

using namespace inferscope;
using namespace inferscope::writer_test;
namespace fs = std::filesystem;

namespace {

// A disk that fills: while `g_full` is set every write puts half of what it is given on disk (down to 64
// bytes), then fails with ENOSPC, as a write that reaches the end of the space does. `g_interrupt`: every other
// call fails with EINTR and no call writes more than 1000 bytes (both must be retried, nothing dropped).
std::atomic<bool> g_full{false}, g_interrupt{false};
std::atomic<int> g_calls{0}, g_failures{0};

ssize_t faulty_write(int fd, const void* p, size_t n, off_t off) {
  const int call = g_calls.fetch_add(1);
  if (g_interrupt && call % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  if (g_interrupt) return ::pwrite(fd, p, std::min<size_t>(n, 1000), off);
  if (!g_full) return ::pwrite(fd, p, n, off);
  if (n > 64) return ::pwrite(fd, p, n / 2, off);
  g_failures.fetch_add(1);
  errno = ENOSPC;
  return -1;
}

struct WriteHook {
  WriteHook() {
    g_full = g_interrupt = false;
    g_calls = g_failures = 0;
    runtime::set_dump_write_for_testing(faulty_write);
  }
  ~WriteHook() { runtime::set_dump_write_for_testing(nullptr); }
};

// This process's stderr goes to a file while alive (what the runtime says), then back.
struct CaptureStderr {
  explicit CaptureStderr(const std::string& path) : saved(::dup(2)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~CaptureStderr() {
    ::dup2(saved, 2);
    ::close(saved);
  }
  int saved;
};

std::string recorder() { return testutil::binary("tests/unit/iscope_test_recorder"); }
std::string iscope_run() { return testutil::binary("tools/iscope-run/iscope-run"); }

// The count in the runtime's last line when END could not be written ("... is not complete (END could not be
// written): N records could not be written"); 0 when the line is not there.
uint64_t count_said_not_written(const std::string& out) {
  const std::string head = "is not complete (END could not be written): ";
  const size_t at = out.find(head);
  if (at == std::string::npos) return 0;
  return std::strtoull(out.c_str() + at + head.size(), nullptr, 10);
}

}  // namespace

// --- a full disk ------------------------------------------------------------------------------------------

TEST_CASE("a disk that fills and frees: failed appends are cut back to the last whole chunk and counted") {
  WriteHook hook;
  const std::string out = testutil::temp_path("enospc.iscope");
  REQUIRE(start(config_for(out)));
  RECORD("before", 3000);
  g_full = true;
  RECORD("while_full", 3000);
  g_full = false;
  RECORD("after", 3000);
  CHECK(stop());  // complete, with the loss counted: the dump was written
  CHECK(g_failures > 0);
  dump::DumpReader r(out);
  auto c = testutil::read_all(r);
  CHECK(testutil::count_named(c.ranges, "before") == 3000);
  CHECK(testutil::count_named(c.ranges, "after") == 3000);  // writing resumed once space came back
  CHECK(testutil::count_named(c.ranges, "while_full") < 3000);
  CHECK_FALSE(r.damage());
  CHECK(r.complete());
  const uint64_t lost = drops_for(r, "write_failed");
  CHECK(lost + testutil::count_named(c.ranges, "while_full") + drops_for(r, "buffer_full") == 3000);
  CHECK(accounting(r).count("lost_in_file") == 0);
  for (const auto& x : c.ranges) CHECK(x.name != "<string 0>");  // strings dropped with a chunk went again
}

// Adaptive mode streams its baseline as a copy: an append that fails ends the streaming, counts nothing lost
// (the ring holds every record), and the dump written at stop is whole.
TEST_CASE("adaptive mode: a failing disk ends the baseline's streaming, loses nothing, and the dump at stop is whole") {
  WriteHook hook;
  const std::string out = testutil::temp_path("enospc-adaptive.iscope");
  Config c = config_for(out);
  c.mode = CaptureMode::kAdaptive;
  REQUIRE(start(c));
  RECORD("before", 3000);
  g_full = true;
  RECORD("while_full", 3000);
  g_full = false;
  RECORD("after", 3000);
  CHECK(stop());
  CHECK(g_failures > 0);
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK_FALSE(r.damage());
  auto all = testutil::read_all(r);
  CHECK(testutil::count_named(all.ranges, "before") == 3000);
  CHECK(testutil::count_named(all.ranges, "while_full") == 3000);
  CHECK(testutil::count_named(all.ranges, "after") == 3000);
  CHECK(drops_for(r, "write_failed") == 0);
  CHECK(r.total_dropped_records() == 0);
}

TEST_CASE("EINTR and short writes are retried: nothing is dropped") {
  WriteHook hook;
  g_interrupt = true;
  const std::string out = testutil::temp_path("eintr.iscope");
  REQUIRE(start(config_for(out)));
  RECORD("tick", 5000);
  CHECK(stop());
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "tick") == 5000);
  CHECK(drops_for(r, "write_failed") == 0);
}

TEST_CASE("the END chunk cannot be written: stop() returns false, and ring mode leaves no file") {
  WriteHook hook;
  const std::string out = testutil::temp_path("no-end.iscope");
  REQUIRE(start(config_for(out)));
  RECORD("tick", 100);
  g_full = true;
  CHECK_FALSE(stop());
  CHECK_FALSE(dump::DumpReader(out).complete());  // readable up to its last whole chunk, not marked complete
  const std::string ring = testutil::temp_path("no-end-ring.iscope");
  g_full = false;
  REQUIRE(start(config_for(ring, BufferMode::kRing)));
  RECORD("tick", 100);
  g_full = true;
  CHECK_FALSE(stop());
  CHECK_FALSE(fs::exists(ring));
  for (const auto& e : fs::directory_iterator(fs::path(ring).parent_path()))
    CHECK(e.path().filename().string().rfind("no-end-ring.iscope.tmp", 0) != 0);  // no temporary left
}

// The disk fills and is still full when the session stops: neither the drop table nor END reaches the file, so
// the file itself cannot say what was lost. The reports used to say "Dropped records: none." and --summary "none:
// every record reached the dump" while half of the ranges were missing; stop() says how many, and the reports
// say the counts are not known.
TEST_CASE("a disk still full at stop: the runtime says how many records were lost, the reports never say none") {
  WriteHook hook;
  const std::string out = testutil::temp_path("full-at-stop.iscope");
  const std::string said = testutil::temp_path("full-at-stop.err");
  REQUIRE(start(config_for(out)));
  RECORD("before", 3000);
  g_full = true;
  RECORD("while_full", 3000);
  {
    CaptureStderr capture(said);
    CHECK_FALSE(stop());
  }
  g_full = false;
  const std::string err = testutil::read_file(said);
  CAPTURE(err);
  const std::string counted = "is not complete (END could not be written): ";
  const size_t at = err.find(counted);
  REQUIRE(at != std::string::npos);
  const uint64_t lost = std::strtoull(err.c_str() + at + counted.size(), nullptr, 10);
  CHECK(lost > 0);
  CHECK(lost <= 3000);  // the ranges recorded while the disk was full, less any dropped as buffer_full
  CHECK(err.find(" records could not be written (write_failed)") != std::string::npos);
  dump::DumpReader r(out);
  CHECK_FALSE(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "before") == 3000);
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "while_full") == 0);
  const std::string analyze = "tools/iscope-analyze/iscope-analyze";
  const testutil::ToolRun report = testutil::run_tool(analyze, {out});
  CHECK(report.exit == 0);  // cut short, not corrupt: analysed, with a warning
  CHECK(report.out.find("Dropped records: none") == std::string::npos);
  CHECK(report.out.find("Dropped records: not known: the dump has no END chunk") != std::string::npos);
  const testutil::ToolRun summary = testutil::run_tool(analyze, {out, "--summary"});
  CHECK(summary.out.find("every record reached the dump") == std::string::npos);
  CHECK(summary.out.find("- not known in full: no end chunk") != std::string::npos);
}

// A file-size limit (ulimit -f, RLIMIT_FSIZE) smaller than the dump: the kernel raises SIGXFSZ on the write that
// reaches it, whose default action ended the program (exit 153 from a shell) with a torn last chunk. Our writes
// hold the signal back, so they fail with EFBIG like any failed append; the program's own writes still get it.
TEST_CASE("a file-size limit: our writes fail with EFBIG and the program runs on; its own writes still get SIGXFSZ") {
  // 256 blocks of 512 bytes (dash's unit; bash counts 1024): far below the dump of 50,000 ranges.
  auto limited = [](std::vector<std::string> argv) {
    // stderr joins stdout in the log: the runtime's "not complete" line is read from it when END did not fit.
    std::vector<std::string> a{"/bin/sh", "-c", "ulimit -f 256 && exec \"$@\" 2>&1", "sh"};
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  };
  for (const std::string mode : {"stream", "ring", "adaptive"}) {
    CAPTURE(mode);
    const std::string out = testutil::temp_path("fsize-" + mode + ".iscope");
    const std::string log = testutil::temp_path("fsize-" + mode + ".out");
    const std::string how = mode == "adaptive" ? "INFERSCOPE_MODE=adaptive"
                            : mode == "ring"   ? "INFERSCOPE_BUFFER_MODE=ring"
                                               : "INFERSCOPE_MODE=full";
    pid_t pid = testutil::spawn(limited({recorder(), "paced", "50000"}),
                                {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out, how,
                                 "INFERSCOPE_THREAD_BUFFER_KB=64",  // chunks small enough that some fit
                                 "INFERSCOPE_CUPTI=0", "INFERSCOPE_PYTHON=0", "INFERSCOPE_SYSTEM=0"},
                                log);
    const int st = testutil::wait_status_within(pid, 60000);
    REQUIRE(st != -1);
    CHECK_FALSE(WIFSIGNALED(st));
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(testutil::read_file(log).find("recorded 50000") != std::string::npos);
    if (mode == "ring") continue;  // the window is larger than the limit: no snapshot fits
    if (mode == "adaptive") {
      // The baseline streamed what fitted, in whole chunks; the snapshot at stop did not fit and left it there.
      dump::DumpReader r(out);
      CHECK_FALSE(r.damage());
      CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") > 0);
      CHECK(static_cast<uint64_t>(fs::file_size(out)) <= 256 * 1024);
      continue;
    }
    dump::DumpReader r(out);
    CHECK_FALSE(r.damage());  // no torn chunk: the failed append was cut back
    const uint64_t in_file = testutil::count_named(testutil::read_all(r).ranges, "counted");
    const uint64_t lost = drops_for(r, "write_failed");
    CAPTURE(in_file);
    CHECK(in_file > 0);   // the dump holds what fitted, in whole chunks
    // END is written when it fits: usually, once the large appends have failed, but the last whole chunk can
    // leave less room under the limit than END needs (the Debug/ASan build's chunks did). Readable either way.
    if (r.complete()) {
      CHECK(lost > 0);
      CHECK(in_file + lost + drops_for(r, "buffer_full") >= 50000);  // every range in the file or counted
    } else {
      // END did not fit: the losses after the last drop table are counted nowhere in the file, so the program's
      // last line gives the whole count instead, and every range is in the file or in that count.
      MESSAGE("END did not fit under the limit: the dump is readable up to its last whole chunk");
      const uint64_t said = count_said_not_written(testutil::read_file(log));
      CAPTURE(said);
      REQUIRE(said > 0);  // the line is there
      CHECK(said >= lost);
      CHECK(in_file + said + drops_for(r, "buffer_full") >= 50000);
    }
    CHECK(accounting(r).count("lost_in_file") == 0);
    CHECK(static_cast<uint64_t>(fs::file_size(out)) <= 256 * 1024);
  }
  // The program's own write past the limit ends it by SIGXFSZ, as without us.
  const std::string own = testutil::temp_path("fsize-own.bin");
  pid_t pid = testutil::spawn(limited({recorder(), "own-write", "1000", own, "1000000"}),
                              {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + testutil::temp_path("fsize-own.iscope"),
                               "INFERSCOPE_CUPTI=0", "INFERSCOPE_PYTHON=0", "INFERSCOPE_SYSTEM=0"});
  const int st = testutil::wait_status_within(pid, 60000);
  REQUIRE(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGXFSZ);
}

// --- what is at the output ------------------------------------------------------------------------------

TEST_CASE("special files, directories and symlinks at the output are refused in both modes, untouched") {
  const std::string victim = testutil::temp_path("victim.txt");
  { std::FILE* f = std::fopen(victim.c_str(), "w"); std::fputs("precious", f); std::fclose(f); }
  const std::string link = testutil::temp_path("link.iscope");
  fs::create_symlink(victim, link);
  const std::string fifo = testutil::temp_path("fifo.iscope");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string dir = testutil::temp_path("a-directory.iscope");
  fs::create_directories(dir);
  const std::string under_file = victim + "/x.iscope";  // its "directory" is a file: nothing can be made there
  for (BufferMode mode : {BufferMode::kStream, BufferMode::kRing}) {
    for (const std::string& out : {link, fifo, dir, std::string("/dev/null"), under_file}) {
      CAPTURE(out);
      CHECK_FALSE(start(config_for(out, mode)));
      CHECK_FALSE(is_active());
    }
  }
  CHECK(testutil::read_file(victim) == "precious");
  CHECK(fs::is_symlink(link));
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("a symlink or FIFO planted at <out>.tmp or <out>.lock is never followed") {
  const std::string victim = testutil::temp_path("victim2.txt");
  { std::FILE* f = std::fopen(victim.c_str(), "w"); std::fputs("precious", f); std::fclose(f); }
  for (BufferMode mode : {BufferMode::kStream, BufferMode::kRing}) {
    const std::string out = testutil::temp_path(mode == BufferMode::kRing ? "planted-ring.iscope" : "planted.iscope");
    fs::create_symlink(victim, out + ".tmp");
    REQUIRE(::mkfifo((out + ".tmpXXXXXX").c_str(), 0644) == 0);
    REQUIRE(start(config_for(out, mode)));
    RECORD("tick", 100);
    CHECK(stop());
    CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "tick") == 100);
    fs::remove(out);
    fs::create_symlink(victim, out + ".lock");
    CHECK_FALSE(start(config_for(out, mode)));  // the lock file is a symlink: refused, not followed
    CHECK_FALSE(fs::exists(out));
  }
  CHECK(testutil::read_file(victim) == "precious");
}

// --- a relative output and a program that changes its working directory ---------------------------------

namespace {

// The process's working directory while alive, then the one before (a failing check must not move the next
// test case).
struct InDirectory {
  fs::path before = fs::current_path();
  explicit InDirectory(const fs::path& dir) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(before); }
};

// The names of the files in `dir`, sorted, joined by spaces: what a session left there (a lock file, a
// temporary) shows in a failed check.
std::string files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : " ") + n;
  return joined;
}

}  // namespace

// A relative output is where it names from the directory the session started in: a program that calls chdir()
// afterwards used to leave a ring dump, or a stream dump replacing an earlier one, in its temporary (the rename
// at stop resolved the relative names from the new directory), stop() false and the lock file behind.
TEST_CASE("a relative output stays where it was named when the program changes its working directory") {
  for (const std::string mode : {"stream", "stream over an earlier dump", "ring"}) {
    CAPTURE(mode);
    const fs::path started = testutil::temp_path("chdir-from-" + std::to_string(mode.size()));
    const fs::path moved = testutil::temp_path("chdir-to-" + std::to_string(mode.size()));
    fs::create_directories(started);
    fs::create_directories(moved);
    if (mode == "stream over an earlier dump") testsupport::write(started / "rel.iscope", "earlier");
    {
      InDirectory in(started);
      REQUIRE(start(config_for("rel.iscope", mode == "ring" ? BufferMode::kRing : BufferMode::kStream)));
      fs::current_path(moved);
      RECORD("after_chdir", 100);
      CHECK(stop());
    }
    CHECK(files_in(started) == "rel.iscope");  // no lock file, no temporary left
    CHECK(files_in(moved) == "");
    dump::DumpReader r((started / "rel.iscope").string());
    CHECK(r.complete());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "after_chdir") == 100);
  }
}

TEST_CASE("INFERSCOPE_OUTPUT relative, then chdir(): the dump is where it was named from, in both modes") {
  for (const std::string mode : {"stream", "ring"}) {
    CAPTURE(mode);
    const fs::path started = testutil::temp_path("env-chdir-from-" + mode);
    const fs::path moved = testutil::temp_path("env-chdir-to-" + mode);
    fs::create_directories(started);
    fs::create_directories(moved);
    testsupport::write(started / "rel.iscope", "earlier");  // stream mode then writes beside it and renames
    pid_t pid = testutil::spawn({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" chdir \"$3\" 500", "sh", started.string(),
                                 recorder(), moved.string()},
                                {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=rel.iscope", "INFERSCOPE_BUFFER_MODE=" + mode,
                                 "INFERSCOPE_CUPTI=0", "INFERSCOPE_PYTHON=0", "INFERSCOPE_SYSTEM=0"});
    const int st = testutil::wait_status_within(pid, 20000);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(files_in(started) == "rel.iscope");  // no lock file, no temporary left
    CHECK(files_in(moved) == "");
    dump::DumpReader r((started / "rel.iscope").string());
    CHECK(r.complete());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 1000);
  }
}

// --- two runs, one output ----------------------------------------------------------------------------------

TEST_CASE("a second live session on the same output is refused; a lock left by a killed one is not") {
  const std::string out = testutil::temp_path("shared.iscope");
  pid_t first = testutil::spawn({recorder(), "loop"}, {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out});
  REQUIRE(first > 0);
  // Polls for the child's lock for up to 20 s: a loaded CI machine can take seconds to start it.
  for (int i = 0; i < 2000 && dump::output_lock_holder(out) != first; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(dump::output_lock_holder(out) == first);
  for (BufferMode mode : {BufferMode::kStream, BufferMode::kRing}) CHECK_FALSE(start(config_for(out, mode)));
  // iscope-run refuses before running the program (exit 2): the program would print "recorded 5".
  const std::string log = testutil::temp_path("shared-run.out");
  pid_t run = testutil::spawn({iscope_run(), "-q", "-o", out, "--", recorder(), "count", "5"}, {}, log);
  int st = testutil::wait_status_within(run, 20000);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  CHECK(testutil::read_file(log).find("recorded") == std::string::npos);
  ::kill(first, SIGKILL);  // its lock file stays behind, its flock does not
  testutil::wait_status(first);
  CHECK(fs::exists(out + ".lock"));
  CHECK(dump::output_lock_holder(out) == 0);
  REQUIRE(start(config_for(out)));
  RECORD("second", 100);
  CHECK(stop());
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "second") == 100);
  CHECK_FALSE(fs::exists(out + ".lock"));  // a session that stops removes its lock file
}

// Runs a program under iscope-run, which preloads the library: a sanitizer build's library cannot be preloaded
// ("ASan runtime does not come first"), so that build skips this case, as it skips the tests labelled `preload`.
TEST_CASE("a stale dump is replaced only by a complete new one; iscope-run says 'dump written' only for its own" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string out = testutil::temp_path("stale.iscope");
  REQUIRE(start(config_for(out)));
  RECORD("first", 100);
  REQUIRE(stop());
  // A second run killed mid-way leaves the first dump whole (its own is in a temporary beside it).
  pid_t killed = testutil::spawn({recorder(), "loop"}, {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(killed, SIGKILL);
  testutil::wait_status(killed);
  {
    dump::DumpReader r(out);
    CHECK(r.complete());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "first") == 100);
  }
  // A run that records nothing does not claim the earlier dump; a bad setting stops iscope-run before the
  // program runs (exit 2), the earlier dump untouched either way.
  const std::string log = testutil::temp_path("stale-run.err");
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"/bin/sh", "-c", "\"$@\" 2>&1", "sh", iscope_run(), "-o", out};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_t pid = testutil::spawn(argv, {}, log);
    return testutil::wait_status_within(pid, 20000);
  };
  int st = run({"--set", "trace_size_mb=lots", "--", recorder(), "count", "5"});
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "first") == 100);
  st = run({"--set", "enable=0", "--", recorder(), "count", "5"});
  REQUIRE(WIFEXITED(st));
  CHECK(testutil::read_file(log).find("no dump written to " + out + " by this run: the file there is from an earlier run") !=
        std::string::npos);
  CHECK(testutil::read_file(log).find("iscope-run: dump written to") == std::string::npos);
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "first") == 100);
  // A run that completes replaces it (by rename) and says so.
  st = run({"--", recorder(), "count", "7"});
  REQUIRE(WIFEXITED(st));
  CHECK(testutil::read_file(log).find("dump written to " + out) != std::string::npos);
  auto c = testutil::read_all(dump::DumpReader(out));
  CHECK(testutil::count_named(c.ranges, "counted") == 7);
  CHECK(testutil::count_named(c.ranges, "first") == 0);
}

// A run over an earlier dump writes beside it, in <out>.tmpXXXXXX, and renames only a complete dump over it. When
// that cannot happen (the program is killed; something that is not a regular file appeared at the output), the
// run's data stays in that temporary, and iscope-run said only "no dump written to OUT by this run": now it names
// the temporary, and the runtime's own message names it too.
// Runs a program under iscope-run, which preloads the library: a sanitizer build's library cannot be preloaded
// ("ASan runtime does not come first"), so that build skips this case, as it skips the tests labelled `preload`.
TEST_CASE("a run whose dump could not replace an earlier one names the temporary it was left in" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  for (const std::string how : {"killed", "fifo at the output"}) {
    CAPTURE(how);
    const std::string out = testutil::temp_path("left-" + std::to_string(how.size()) + ".iscope");
    REQUIRE(start(config_for(out)));
    RECORD("earlier", 100);
    REQUIRE(stop());
    const std::string log = testutil::temp_path("left-" + std::to_string(how.size()) + ".err");
    const pid_t run = testutil::spawn({"/bin/sh", "-c", "\"$@\" 2>&1", "sh", iscope_run(), "-o", out, "--", recorder(),
                                       "loop"}, {}, log);
    REQUIRE(run > 0);
    // The program's temporary, once its process info (the pid) is in it and the program runs main() (its
    // session's signal handlers are in place).
    std::string temp;
    pid_t program = 0;
    for (int i = 0; i < 3000 && testutil::read_file(log).find("ready") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int i = 0; i < 3000 && !program; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto temps = dump::temporaries_beside(out);
      if (temps.size() != 1) continue;
      if (const auto info = dump::leading_process_info(temps[0]))
        for (const auto& [k, v] : *info)
          if (k == "pid") temp = temps[0], program = std::atoi(v.c_str());
    }
    REQUIRE(program > 0);
    if (how == "killed") {
      ::kill(program, SIGKILL);
    } else {
      fs::remove(out);
      REQUIRE(::mkfifo(out.c_str(), 0644) == 0);
      ::kill(program, SIGTERM);  // the runtime completes the dump, then cannot rename it over a FIFO
    }
    const int st = testutil::wait_status_within(run, 20000);
    const std::string said = testutil::read_file(log);
    CAPTURE(said);
    REQUIRE(WIFEXITED(st));
    // Ended by a signal: iscope-run exits as the shell would and says so (it was 125, the signal unsaid).
    const int sig = how == "killed" ? SIGKILL : SIGTERM;
    CHECK(WEXITSTATUS(st) == 128 + sig);
    CHECK(said.find("iscope-run: the program was ended by signal " + std::to_string(sig)) != std::string::npos);
    CHECK(fs::exists(temp));
    if (how == "killed") {
      CHECK(said.find("no dump written to " + out + " by this run: the file there is from an earlier run") !=
            std::string::npos);
      CHECK(said.find("; this run's dump is left at " + temp + " (incomplete: no END chunk)") != std::string::npos);
      CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "earlier") == 100);
    } else {
      CHECK(said.find("the dump is left at " + temp) != std::string::npos);  // the runtime's line
      CHECK(said.find("; this run's dump is left at " + temp + " (complete, but it did not replace " + out + ")") !=
            std::string::npos);
      CHECK(dump::DumpReader(temp).complete());
    }
  }
}

// Two runs started together on one output both pass iscope-run's check (no session holds it yet); then one
// session takes the output and the other's runtime says "not recording". Here the order is forced: the program
// waits without recording (enable=0) until this test's session holds the output, then execs the recorder, which
// is refused. The file at the output is new since the run started, but it is this test's dump, not the run's.
// iscope-run preloads the library into /bin/sh here; a sanitizer build's library cannot be preloaded into an
// uninstrumented program (the runtime must come first), so that build skips this case, as it skips the tests
// labelled `preload`.
TEST_CASE("a run whose session lost the output to another session never claims that one's dump" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string out = testutil::temp_path("race.iscope");
  const std::string ready = testutil::temp_path("race.ready"), go = testutil::temp_path("race.go");
  const std::string log = testutil::temp_path("race-run.err");
  const std::string script = "touch '" + ready + "'; while [ ! -e '" + go +
                             "' ]; do sleep 0.01; done; exec env INFERSCOPE_ENABLE=1 \"$0\" count 5";
  pid_t run = testutil::spawn({"/bin/sh", "-c", "\"$@\" 2>&1", "sh", iscope_run(), "-o", out, "--set", "enable=0", "--",
                               "/bin/sh", "-c", script, recorder()},
                              {}, log);
  REQUIRE(run > 0);
  for (int i = 0; i < 2000 && !fs::exists(ready); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(fs::exists(ready));
  REQUIRE(start(config_for(out)));
  RECORD("other", 100);
  testsupport::write(go, "");
  const int st = testutil::wait_status_within(run, 20000);
  CHECK(stop());
  const std::string said = testutil::read_file(log);
  CAPTURE(said);
  CHECK(said.find("not recording") != std::string::npos);  // the run's session was refused
  CHECK(said.find("recorded 5") != std::string::npos);     // and its program ran to the end
  CHECK(said.find("iscope-run: dump written to") == std::string::npos);
  CHECK(said.find("no dump written to " + out + " by this run: the file there is the dump of another process, pid " +
                  std::to_string(::getpid())) != std::string::npos);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 125);
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "other") == 100);
}

// --- ring mode on abnormal exits ---------------------------------------------------------------------------

// In the sanitizer builds ASan handles SEGV/BUS itself and exits 1 instead of dying by the signal; these tests
// are about the program's own signal behaviour, so its handlers stay out of the way (harmless elsewhere).
const char* const kNoSanitizerSignals = "ASAN_OPTIONS=verify_asan_link_order=0:handle_segv=0:handle_sigbus=0:handle_abort=0:detect_leaks=0";

TEST_CASE("ring mode: abort, SIGSEGV and SIGBUS leave a readable dump, and the process still dies by its signal") {
  for (auto [how, sig] : {std::pair{"abort", SIGABRT}, std::pair{"segv", SIGSEGV}, std::pair{"bus", SIGBUS}}) {
    CAPTURE(how);
    const std::string out = testutil::temp_path(std::string("crash-") + how + ".iscope");
    pid_t pid = testutil::spawn({recorder(), how, "5000"},
                                {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out, "INFERSCOPE_BUFFER_MODE=ring",
                                 kNoSanitizerSignals});
    int st = testutil::wait_status_within(pid, 20000);
    REQUIRE(st != -1);
    REQUIRE(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == sig);
    REQUIRE(fs::exists(out));
    dump::DumpReader r(out);
    CHECK_FALSE(r.damage());
    CHECK(r.complete());
    CHECK(r.is_ring_snapshot());
    CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 5000);
    CHECK(accounting(r).count("lost_in_file") == 0);
  }
}

// Adaptive mode (the default) keeps its windows in memory as ring mode does, so a crash writes them: the
// baseline, open from the start, holds every range recorded before the abort.
TEST_CASE("adaptive and sampled modes: abort and SIGSEGV leave a readable sampled dump, and the process still dies") {
  for (const char* mode : {"adaptive", "sampled"})
    for (auto [how, sig] : {std::pair{"abort", SIGABRT}, std::pair{"segv", SIGSEGV}}) {
      CAPTURE(mode);
      CAPTURE(how);
      const std::string out = testutil::temp_path(std::string("crash-") + mode + "-" + how + ".iscope");
      pid_t pid = testutil::spawn({recorder(), how, "5000"},
                                  {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out,
                                   std::string("INFERSCOPE_MODE=") + mode, kNoSanitizerSignals});
      int st = testutil::wait_status_within(pid, 20000);
      REQUIRE(st != -1);
      REQUIRE(WIFSIGNALED(st));
      CHECK(WTERMSIG(st) == sig);
      REQUIRE(fs::exists(out));
      dump::DumpReader r(out);
      CHECK_FALSE(r.damage());
      CHECK(r.complete());
      CHECK(r.is_ring_snapshot());
      CHECK(r.is_sampled());
      REQUIRE(r.sampling().has_value());
      const auto all = testutil::read_all(r);
      if (std::string(mode) == "adaptive") {
        // The baseline: one window, open (no step ended), kept, holding all 5,000 ranges.
        const auto& windows = r.sampling()->windows;
        REQUIRE(windows.size() == 1);
        CHECK(windows[0].reason == static_cast<uint32_t>(dump::WindowReason::kBaseline));
        CHECK((windows[0].flags & dump::kWindowOpen) != 0);
        CHECK(testutil::count_named(all.ranges, "counted") == 5000);
      } else {
        // No window was due (no step ended, the first timed one comes after window_every_ms): the ranges were
        // sampled out, and the dump says so rather than being missing.
        CHECK(r.sampling()->windows.empty());
        CHECK(testutil::count_named(all.ranges, "counted") == 0);
        CHECK(r.sampling()->summary.records_outside > 0);
      }
      CHECK(accounting(r).count("lost_in_file") == 0);
      CHECK(r.process_value("mode") == mode);
      CHECK_FALSE(fs::exists(out + ".crash" + std::to_string(pid)));  // renamed over the output
    }
}

// A program that recovers from its own SIGSEGV (guard pages) goes on recording in the default mode: the crash
// dump is written once, at the first fault, and the writer is not left refusing every update afterwards.
TEST_CASE("adaptive mode: a program that handles SIGSEGV and goes on keeps recording, and its dump is complete") {
  const std::string out = testutil::temp_path("crash-recovered.iscope");
  const std::string log = testutil::temp_path("crash-recovered.out");
  pid_t pid = testutil::spawn({recorder(), "segv-recover", "2000", out}, {kNoSanitizerSignals}, log);
  int st = testutil::wait_status_within(pid, 20000);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(testutil::read_file(log).find("stopped 1") != std::string::npos);
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(r.process_value("mode") == "adaptive");
  const auto c = testutil::read_all(r);
  CHECK(testutil::count_named(c.ranges, "before") == 2000);
  CHECK(testutil::count_named(c.ranges, "after") == 2000);
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))  // the crash image's file was renamed
    CHECK(e.path().filename().string().find("crash-recovered.iscope.crash") == std::string::npos);
}

// A crash under a file-size limit: the image does not fit, and the streamed baseline at the output stays whole.
TEST_CASE("adaptive mode: a crash whose dump cannot be written leaves the streamed baseline whole at the output") {
  const std::string out = testutil::temp_path("crash-limited.iscope");
  // 20,000 ranges in the default thread buffers: one append of about 640 KB, over the 128 KiB limit, so the
  // streaming stops (EFBIG) and the crash image, larger still, cannot be written whole either.
  pid_t pid = testutil::spawn({"/bin/sh", "-c", "ulimit -f 256 && exec \"$@\"", "sh", recorder(), "abort", "20000"},
                              {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out, "INFERSCOPE_CUPTI=0",
                               "INFERSCOPE_PYTHON=0", "INFERSCOPE_SYSTEM=0", kNoSanitizerSignals});
  int st = testutil::wait_status_within(pid, 20000);
  REQUIRE(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGABRT);
  dump::DumpReader r(out);
  CHECK_FALSE(r.damage());
  CHECK_FALSE(r.is_ring_snapshot());  // the stream, not a torn image over it
  CHECK(r.process_value("mode") == "adaptive");
  const std::string torn = out + ".crash" + std::to_string(pid);  // the torn image stays beside it
  REQUIRE(fs::exists(torn));
  CHECK(fs::file_size(torn) <= 256 * 512);
}

TEST_CASE("ring mode: the program's own SIGSEGV handler still runs after the dump is written") {
  const std::string out = testutil::temp_path("crash-handled.iscope");
  const std::string log = testutil::temp_path("crash-handled.out");
  pid_t pid = testutil::spawn({recorder(), "segv-handled", "3000", out}, {kNoSanitizerSignals}, log);
  int st = testutil::wait_status_within(pid, 20000);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 42);
  CHECK(testutil::read_file(log).find("own handler") != std::string::npos);
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 3000);
}

TEST_CASE("stream mode: a crash leaves the dump readable up to its last whole chunk, with no handler of ours") {
  const std::string out = testutil::temp_path("crash-stream.iscope");
  pid_t pid = testutil::spawn({recorder(), "abort", "2000"},
                              {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out, "INFERSCOPE_MODE=full", kNoSanitizerSignals});
  int st = testutil::wait_status_within(pid, 20000);
  REQUIRE(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGABRT);
  dump::DumpReader r(out);
  CHECK_FALSE(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 2000);
}
