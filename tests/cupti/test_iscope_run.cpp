// iscope-run on programs that use no CUDA: their output and exit status are untouched and the dump is whole;
// and libinferscope.so has no link dependency on the CUDA libraries.
#include "dump/reader.hpp"
#include "run_util.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using iscope_test::Result;
using iscope_test::run;

namespace {

std::string temp_path(const std::string& name) {
  return std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/" + name + "." + std::to_string(::getpid()) + ".iscope";
}

std::vector<std::string> with_iscope_run(const std::string& dump, std::vector<std::string> program) {
  std::vector<std::string> a{ISCOPE_RUN, "-q", "-o", dump, "--"};
  a.insert(a.end(), program.begin(), program.end());
  return a;
}

void check_dump(const std::string& path, bool must_be_complete = true) {
  inferscope::dump::DumpReader r(path);  // throws when unreadable
  if (must_be_complete) CHECK_MESSAGE(r.complete(), path);
  CHECK(r.process_value("pid") != "");
}

}  // namespace

TEST_CASE("stdout and exit status of a CPU-only program are untouched; the dump is complete") {
  const std::vector<std::string> prog{ISCOPE_RUN_CHILD, "--print", "hello from the child", "--exit", "0"};
  Result direct = run(prog);
  const std::string dump = temp_path("child_ok");
  Result traced = run(with_iscope_run(dump, prog));
  CHECK(traced.status == 0);
  CHECK(traced.out == direct.out);
  CHECK(traced.out == "hello from the child\n");
  check_dump(dump);
  ::unlink(dump.c_str());
}

TEST_CASE("a non-zero exit status passes through") {
  const std::string dump = temp_path("child_exit3");
  Result r = run(with_iscope_run(dump, {ISCOPE_RUN_CHILD, "--print", "x", "--exit", "3"}));
  CHECK(r.status == 3);
  CHECK(r.out == "x\n");
  check_dump(dump);
  ::unlink(dump.c_str());
  const std::string dump2 = temp_path("true");
  CHECK(run(with_iscope_run(dump2, {"/bin/true"})).status == 0);
  check_dump(dump2);
  ::unlink(dump2.c_str());
}

TEST_CASE("a child killed by a signal: iscope-run exits 128 + signal") {
  const std::string dump = temp_path("child_abort");
  Result r = run(with_iscope_run(dump, {ISCOPE_RUN_CHILD, "--raise", std::to_string(SIGABRT)}));
  CHECK(r.status == 128 + SIGABRT);
  ::unlink(dump.c_str());
}

TEST_CASE("SIGTERM to iscope-run reaches the program, which still leaves a complete dump") {
  const std::string dump = temp_path("child_term");
  Result r = run(with_iscope_run(dump, {ISCOPE_RUN_CHILD, "--print", "started", "--sleep-ms", "20000"}), 700, SIGTERM);
  CHECK(r.status == 128 + SIGTERM);
  CHECK(r.out == "started\n");
  check_dump(dump);
  ::unlink(dump.c_str());
}

TEST_CASE("a Python program that ends with an exception: its status, its traceback, a complete dump") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;  // nothing to check without a system Python
  const std::string dump = temp_path("py_exception");
  Result r = run(with_iscope_run(dump, {"/usr/bin/python3", "-c", "print('before'); raise RuntimeError('boom')"}));
  CHECK(r.status == 1);
  CHECK(r.out == "before\n");
  check_dump(dump);
  ::unlink(dump.c_str());
}

TEST_CASE("a program that cannot be started: 127") {
  Result r = run({ISCOPE_RUN, "-q", "-o", temp_path("none"), "--", "/nonexistent/program"});
  CHECK(r.status == 127);
}

TEST_CASE("bad usage: 2") {
  CHECK(run({ISCOPE_RUN, "--bogus-option", "--", "/bin/true"}).status == 2);
  CHECK(run({ISCOPE_RUN, "-o"}).status == 2);
  CHECK(run({ISCOPE_RUN}).status == 2);
}

TEST_CASE("--follow-children: each child process writes <stem>.<pid>.iscope") {
  const std::string stem = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/follow" + std::to_string(::getpid());
  const std::string script = std::string(ISCOPE_RUN_CHILD) + " --exit 0; " + ISCOPE_RUN_CHILD + " --exit 0; true";
  Result r = run({ISCOPE_RUN, "-q", "--follow-children", "-o", stem + ".iscope", "--", "/bin/sh", "-c", script});
  CHECK(r.status == 0);
  glob_t g{};
  ::glob((stem + ".*.iscope").c_str(), 0, nullptr, &g);
  CHECK(g.gl_pathc == 2);
  for (size_t i = 0; i < g.gl_pathc; ++i) {
    check_dump(g.gl_pathv[i]);
    ::unlink(g.gl_pathv[i]);
  }
  globfree(&g);
  ::unlink((stem + ".iscope").c_str());
}

#ifdef SAMPLE_CPP_SERVER
TEST_CASE("the C++ server sample under iscope-run: same output, ranges recorded") {
  const std::vector<std::string> prog{SAMPLE_CPP_SERVER, "--requests", "64"};
  Result direct = run(prog);
  const std::string dump = temp_path("cpp_server");
  Result traced = run(with_iscope_run(dump, prog));
  CHECK(traced.status == direct.status);
  CHECK(traced.out == direct.out);
  inferscope::dump::DumpReader r(dump);
  CHECK(r.complete());
  uint64_t ranges = 0;
  r.for_each_record([&](uint32_t, const inferscope::RecordHeader& h, const uint8_t*) {
    ranges += h.kind == inferscope::RecordKind::kRange;
  });
  CHECK(ranges > 0);
  ::unlink(dump.c_str());
}
#endif

TEST_CASE("libinferscope.so has no link dependency on libcupti, libcuda or libcudart") {
  FILE* p = ::popen((std::string("readelf -d '") + INFERSCOPE_LIB + "' 2>/dev/null").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0 || out.find("NEEDED") == std::string::npos) {
    std::printf("skipped: readelf is not available\n");
    std::exit(77);
  }
  CHECK(out.find("libcupti") == std::string::npos);
  CHECK(out.find("libcuda") == std::string::npos);
  CHECK(out.find("libcudart") == std::string::npos);
  CHECK(out.find("libnvToolsExt") == std::string::npos);
}
