// What a run hands on and what it says at its end (issue 43; docs/reliability.md, "exec", "Descriptors", "Files"):
// an exec chain leaves one dump and one live page; exec'd children of a recording started from the environment are
// recorded only with follow_children, which iscope-run takes from every source; the recorder leaves the program its
// descriptors; iscope-run says "dump written" only for a dump with its END chunk, and says when a signal ended the
// program. Programs are run under iscope-run, or with the library preloaded, which a sanitizer build cannot do
// (label preload): those cases skip there.
#include <doctest/doctest.h>

#include "support/files.hpp"
#include "support/sanitizers.hpp"
#include "dump/files.hpp"
#include "dump/reader.hpp"
#include "test_util.hpp"
#include "tool_run.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

std::string recorder() { return testutil::binary("tests/unit/iscope_test_recorder"); }
std::string iscope_run() { return testutil::binary("tools/iscope-run/iscope-run"); }

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `argv` with stdout and stderr into `log`; its wait status (-1: still running after 60 s, killed).
int run_logged(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> sh{"/bin/sh", "-c", "\"$@\" 2>&1", "sh"};
  sh.insert(sh.end(), argv.begin(), argv.end());
  const pid_t pid = testutil::spawn(sh, env, log);
  REQUIRE(pid > 0);
  return testutil::wait_status_within(pid, 60000);
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The status line of GET `path` on 127.0.0.1:`port` ("" when no answer came within 10 s).
std::string get_status(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    [[maybe_unused]] ssize_t w = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
  }
  ::close(fd);
  return got.substr(0, got.find("\r\n"));
}

}  // namespace

// A Python user's `python3` through a pyenv shim is env -> bash -> pyenv -> python: each image recorded, and each
// exec moved the dump before it aside, leaving six `*.pre-exec<N>.iscope` files of 0 ms beside the real dump.
TEST_CASE("an exec chain through shims leaves one dump: images that recorded nothing hand the output on" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string dir = testutil::fresh_dir("exec-chain");
  const std::string out = dir + "/run.iscope";
  const std::string chain = "exec /usr/bin/env /bin/sh -c 'exec \"$0\" count 7' \"$0\"";
  const int st = run_logged({iscope_run(), "-o", out, "--", "/bin/sh", "-c", chain, recorder()}, {},
                            dir + "/../exec-chain.log");
  const std::string said = testutil::read_file(dir + "/../exec-chain.log");
  CAPTURE(said);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(files_in(dir) == std::vector<std::string>{"run.iscope"});
  dump::DumpReader r(out);
  CHECK(r.complete());
  CHECK(testutil::count_named(testutil::read_all(r).ranges, "counted") == 7);
}

// An image that did record something of the program keeps it aside, as before (exec keeps what was recorded).
TEST_CASE("an image that recorded ranges before its exec still keeps them in <stem>.pre-exec1.iscope" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string dir = testutil::fresh_dir("exec-kept");
  const std::string out = dir + "/run.iscope";
  const int st = run_logged({iscope_run(), "-o", out, "--", recorder(), "exec-self", "7"}, {}, dir + "/../exec-kept.log");
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(files_in(dir) == std::vector<std::string>{"run.iscope", "run.pre-exec1.iscope"});
}

// With --live each image of the chain printed its own URL with its own token (seven for the pyenv chain), and the
// first one, the one a user clicks, answered "a token is required": that process had exec'd away.
TEST_CASE("an exec chain under --live prints one URL, and it serves the program the chain became" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string dir = testutil::fresh_dir("exec-live");
  const std::string out = dir + "/run.iscope", stop = dir + "/stop", log = dir + "/../exec-live.log";
  fs::remove(log);
  const std::string chain = "exec /usr/bin/env /bin/sh -c 'exec \"$0\" until-file \"$1\"' \"$0\" \"$1\"";
  std::vector<std::string> sh{"/bin/sh", "-c", "\"$@\" 2>&1", "sh", iscope_run(), "-o", out, "--live", "127.0.0.1:0",
                              "--", "/bin/sh", "-c", chain, recorder(), stop};
  const pid_t pid = testutil::spawn(sh, {}, log);
  REQUIRE(pid > 0);
  std::string said;
  for (int i = 0; i < 3000 && said.find("ready") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    said = testutil::read_file(log);
  }
  std::smatch m;
  const bool printed = std::regex_search(said, m, std::regex(R"(http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+))"));
  const int port = printed ? std::stoi(m[1]) : 0;
  const std::string token = printed ? m[2].str() : "";
  const std::string status = printed ? get_status(port, "/data?token=" + token) : "";
  testsupport::write(stop, "");
  const int st = testutil::wait_status_within(pid, 60000);
  said = testutil::read_file(log);
  CAPTURE(said);
  REQUIRE(printed);
  CHECK(count_of(said, "live page: http") == 1);
  CHECK(status == "HTTP/1.1 200 OK");
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(files_in(dir) == std::vector<std::string>{"run.iscope", "stop"});
}

// INFERSCOPE_ENABLE=1 without iscope-run: each exec'd child inherited INFERSCOPE_OUTPUT, found it locked by its parent
// and said "... is being written by another session; not recording"; with INFERSCOPE_FOLLOW_CHILDREN=1 they were not
// recorded at all (under iscope-run they are).
TEST_CASE("exec'd children of a recording started from the environment: silent by default, recorded with "
          "follow_children") {
  for (const bool follow : {false, true}) {
    CAPTURE(follow);
    const std::string dir = testutil::fresh_dir(follow ? "env-children-follow" : "env-children");
    const std::string out = dir + "/run.iscope", log = dir + "/../env-children.log";
    std::vector<std::string> env{"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out};
    if (follow) env.push_back("INFERSCOPE_FOLLOW_CHILDREN=1");
    const int st = run_logged({recorder(), "children", "5", "6"}, env, log);
    const std::string said = testutil::read_file(log);
    CAPTURE(said);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(said.find("being written by another session") == std::string::npos);
    CHECK(said.find("recorded 5") != std::string::npos);
    const std::vector<std::string> files = files_in(dir);
    CHECK(files.size() == (follow ? 3u : 1u));  // the root's dump, and one per child (no lock file left)
    long counted = 0;
    for (const std::string& f : files)
      if (f != "run.iscope") counted += testutil::count_named(testutil::read_all(dump::DumpReader(dir + "/" + f)).ranges, "counted");
    CHECK(counted == (follow ? 11 : 0));
  }
}

// iscope-run exported INFERSCOPE_FOLLOW_CHILDREN=0 whenever --follow-children was absent, so the setting from the
// environment or .inferscope.yaml was ignored while `iscope-config show` reported it.
TEST_CASE("iscope-run takes follow_children from INFERSCOPE_FOLLOW_CHILDREN and from the config file" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string config = testutil::temp_path("follow.yaml");
  testsupport::write(config, "follow_children: true\n");
  for (const std::string& source : std::vector<std::string>{"INFERSCOPE_FOLLOW_CHILDREN=1", "INFERSCOPE_CONFIG=" + config}) {
    CAPTURE(source);
    const std::string dir = testutil::fresh_dir("follow-source");
    const std::string out = dir + "/run.iscope";
    const int st = run_logged({iscope_run(), "-o", out, "--", recorder(), "children", "5"}, {source},
                              dir + "/../follow-source.log");
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(files_in(dir).size() == 2u);  // the program's dump and its child's run.<pid>.iscope
  }
  // The flag still wins over both.
  const std::string dir = testutil::fresh_dir("follow-source");
  const int st = run_logged({iscope_run(), "-o", dir + "/run.iscope", "--follow-children=false", "--", recorder(),
                             "children", "5"},
                            {"INFERSCOPE_FOLLOW_CHILDREN=1"}, dir + "/../follow-source.log");
  REQUIRE(WIFEXITED(st));
  CHECK(files_in(dir).size() == 1u);
}

// A program that opens files up to a limit of 64 got 47 instead of 60 while recorded (35 in Python): the writer's
// pipe, the /proc and /sys files the system collector held open, and a lock and a dump. Now the output's two (the
// dump and its lock) and at most limit/64 per-thread files (1 here) are held.
TEST_CASE("under a limit of 64 descriptors the recorder holds at most the dump, its lock and one more") {
  auto opened = [](bool recorded) {
    const std::string out = testutil::temp_path("fds.iscope");
    fs::remove(out);
    std::vector<std::string> env{"INFERSCOPE_OUTPUT=" + out};
    if (recorded) env.push_back("INFERSCOPE_ENABLE=1");
    const testutil::ToolRun r = testutil::run_tool("tests/unit/iscope_test_recorder", {"fill-fds", "100"},
                                                   {.env = env, .nofile = 64});
    CAPTURE(r.err);
    REQUIRE(r.exit == 0);
    const size_t at = r.out.find("opened ");
    REQUIRE(at != std::string::npos);
    if (recorded) {
      // The recorder wrote its whole dump at the end, with every other descriptor taken by the program.
      CHECK(dump::ends_with_end_chunk(out));
      CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "counted") == 100);
    }
    return std::atol(r.out.c_str() + at + 7);
  };
  const long alone = opened(false), recorded = opened(true);
  MESSAGE("descriptors a program could open under a limit of 64: ", alone, " alone, ", recorded, " recorded");
  CHECK(recorded >= alone - 3);
}

// With the final snapshot failing (no descriptor left, a full disk, a file-size limit) the dump was left without its
// END chunk, yet iscope-run printed "dump written" and exited 0. A program that ends with _exit() leaves such a dump
// every time (no atexit runs: the session never stops), and one killed by SIGKILL too.
TEST_CASE("iscope-run says 'dump written' only for a dump with its END chunk; otherwise it says what is missing" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string out = testutil::temp_path("no-end-run.iscope");
  fs::remove(out);
  testutil::ToolRun r = testutil::run_tool(
      "tools/iscope-run/iscope-run", {"-o", out, "--set", "mode=full", "--", recorder(), "underscore-exit", "1000"});
  CAPTURE(r.err);
  CHECK(r.exit == 125);
  CHECK(r.err.find("dump written") == std::string::npos);
  CHECK(r.err.find("the dump at " + out + " is incomplete: it has no END chunk") != std::string::npos);
  CHECK_FALSE(dump::ends_with_end_chunk(out));
  CHECK(testutil::count_named(testutil::read_all(dump::DumpReader(out)).ranges, "counted") == 1000);  // what it holds
  // Killed: the shell's status, 128+9, and both facts said.
  fs::remove(out);
  const std::string log = testutil::temp_path("no-end-run.log");
  const pid_t run = testutil::spawn({"/bin/sh", "-c", "\"$@\" 2>&1", "sh", iscope_run(), "-o", out, "--set", "mode=full",
                                     "--", recorder(), "work-for", "60000"}, {}, log);
  REQUIRE(run > 0);
  pid_t program = 0;
  for (int i = 0; i < 3000 && !program; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::string said = testutil::read_file(log);
    if (const size_t at = said.find("ready "); at != std::string::npos) program = std::atoi(said.c_str() + at + 6);
  }
  REQUIRE(program > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // some chunks are in the file
  ::kill(program, SIGKILL);
  const int st = testutil::wait_status_within(run, 60000);
  const std::string said = testutil::read_file(log);
  CAPTURE(said);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 128 + SIGKILL);
  CHECK(said.find("iscope-run: the program was ended by signal 9 (SIGKILL)") != std::string::npos);
  CHECK(said.find("the dump at " + out + " is incomplete: it has no END chunk") != std::string::npos);
  CHECK(said.find("dump written") == std::string::npos);
}

// A program that died by a signal ended iscope-run with 128+N and no word on why; its last line of output may be
// missing, so the shell's "Segmentation fault" was all a user could go by, and iscope-run swallowed it.
TEST_CASE("iscope-run says when a signal ended the program, and exits 128+N as the shell would" *
          doctest::skip(testsupport::kSanitizedBuild)) {
  const std::string out = testutil::temp_path("segv-run.iscope");
  fs::remove(out);
  const testutil::ToolRun r = testutil::run_tool("tools/iscope-run/iscope-run", {"-o", out, "--", recorder(), "segv", "100"},
                                                 {.env = {"ASAN_OPTIONS=handle_segv=0"}});
  CAPTURE(r.err);
  CHECK(r.exit == 128 + SIGSEGV);
  CHECK(r.err.find("iscope-run: the program was ended by signal 11 (SIGSEGV)") != std::string::npos);
  CHECK(r.err.find("dump written to " + out) != std::string::npos);  // the crash handler completed it
  CHECK(dump::ends_with_end_chunk(out));
}

TEST_CASE("ends_with_end_chunk: a whole dump yes; cut by one byte, empty or not a dump, no") {
  const std::string out = testutil::temp_path("end-check.iscope");
  fs::remove(out);
  const testutil::ToolRun r = testutil::run_tool("tests/unit/iscope_test_recorder", {"count", "10"},
                                                 {.env = {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out}});
  REQUIRE(r.exit == 0);
  CHECK(dump::ends_with_end_chunk(out));
  fs::resize_file(out, fs::file_size(out) - 1);
  CHECK_FALSE(dump::ends_with_end_chunk(out));
  testsupport::write(out, "");
  CHECK_FALSE(dump::ends_with_end_chunk(out));
  CHECK_FALSE(dump::ends_with_end_chunk("/proc/self/status"));
}
