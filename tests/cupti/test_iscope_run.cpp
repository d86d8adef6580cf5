// iscope-run on programs that use no CUDA: their output and exit status are untouched and the dump is whole;
// its options are checked before the program runs; a run that leaves no dump says so and exits 125.
// (That libinferscope.so has no link dependency on the CUDA libraries is check_no_cuda_needed.sh, a test of its
// own, so that a missing readelf skips that check alone.)
#include "dump/reader.hpp"
#include "run_util.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// ISCOPE_TEST_PYTHON: the interpreter CMake found; without one this case is not compiled and CMake registers
// test_iscope_run_python as a skip instead.
#ifdef ISCOPE_TEST_PYTHON
TEST_CASE("a Python program that ends with an exception: its status, its traceback, a complete dump") {
  const std::string dump = temp_path("py_exception");
  Result r = run(with_iscope_run(dump, {ISCOPE_TEST_PYTHON, "-c", "print('before'); raise RuntimeError('boom')"}));
  CHECK(r.status == 1);
  CHECK(r.out == "before\n");
  check_dump(dump);
  ::unlink(dump.c_str());
}
#endif

TEST_CASE("a program that cannot be started: 127") {
  Result r = run({ISCOPE_RUN, "-q", "-o", temp_path("none"), "--", "/nonexistent/program"});
  CHECK(r.status == 127);
}

TEST_CASE("--version prints the CMake project version") {
  // ISCOPE_PROJECT_VERSION comes from CMake directly, not through the header iscope-run prints.
  Result r = run({ISCOPE_RUN, "--version"});
  CHECK(r.status == 0);
  CHECK(r.out == std::string("iscope-run ") + ISCOPE_PROJECT_VERSION + "\n");
}

TEST_CASE("bad usage: 2, in the words of the other tools (cxxopts)") {
  Result bogus = run({ISCOPE_RUN, "--bogus-option", "--", "/bin/true"}, -1, 0, true);
  CHECK(bogus.status == 2);
  CHECK(bogus.err.find("bogus-option") != std::string::npos);
  CHECK(bogus.err.find("does not exist") != std::string::npos);
  CHECK(run({ISCOPE_RUN, "-o"}).status == 2);
  CHECK(run({ISCOPE_RUN}).status == 2);
  CHECK(run({ISCOPE_RUN, "--set", "novalue", "--", "/bin/true"}).status == 2);
}

TEST_CASE("options after the program are the program's (no \"--\" needed)") {
  const std::string dump = temp_path("no_dashdash");
  Result r = run({ISCOPE_RUN, "-q", "-o", dump, ISCOPE_RUN_CHILD, "--print", "-o", "--exit", "4"});
  CHECK(r.status == 4);
  CHECK(r.out == "-o\n");
  check_dump(dump);
  ::unlink(dump.c_str());
}

namespace {

// Runs iscope-run with `options` around a program that prints "ran": whether it ran, the status, stderr.
Result refused(std::vector<std::string> options) {
  std::vector<std::string> a{ISCOPE_RUN};
  a.insert(a.end(), options.begin(), options.end());
  a.insert(a.end(), {"--", ISCOPE_RUN_CHILD, "--print", "ran"});
  Result r = run(a, -1, 0, true);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.out == "");  // the program did not run
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one message, not one per process
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("bad flags are refused before the program runs, with one message naming the flag") {
  const std::string dump = temp_path("refused");
  Result report = refused({"-o", dump, "--report", "c.perfetto"});
  CHECK(has(report.err, "--report"));
  CHECK_FALSE(has(report.err, "INFERSCOPE_REPORT"));  // the user typed a flag, not a variable
  CHECK(has(report.err, ".md, .html or .json"));

  Result no_dir = refused({"-o", "/nonexistent/dir/a.iscope"});
  CHECK(has(no_dir.err, "-o /nonexistent/dir/a.iscope"));
  CHECK(has(no_dir.err, "does not exist"));

  const std::string dir = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti";
  Result is_dir = refused({"-o", dir});
  CHECK(has(is_dir.err, "-o " + dir));
  CHECK(has(is_dir.err, "is a directory"));

  Result option_as_file = refused({"-o", "--quiet"});
  CHECK(has(option_as_file.err, "-o --quiet: is an option"));
  CHECK(has(option_as_file.err, "./--quiet"));

  Result report_dir = refused({"-o", dump, "--report", "/nonexistent/dir/r.md"});
  CHECK(has(report_dir.err, "--report /nonexistent/dir/r.md"));

  Result size = refused({"-o", dump, "--trace-size-mb", "0"});
  CHECK(has(size.err, "--trace-size-mb"));
  CHECK_FALSE(has(size.err, "INFERSCOPE_"));

  Result mode = refused({"-o", dump, "--buffer-mode", "bogus"});
  CHECK(has(mode.err, "--buffer-mode"));

  Result key = refused({"-o", dump, "--set", "no_such_key=1"});
  CHECK(has(key.err, "--set no_such_key"));
  CHECK_FALSE(has(key.err, "INFERSCOPE_"));
  struct stat st{};
  CHECK(::stat(dump.c_str(), &st) != 0);  // nothing was written
}

TEST_CASE("a bad INFERSCOPE_* variable is refused before the program runs, naming the variable") {
  ::setenv("INFERSCOPE_BUFFER_MODE", "bogus", 1);
  Result r = run({ISCOPE_RUN, "-o", temp_path("bad_env"), "--", ISCOPE_RUN_CHILD, "--print", "ran"}, -1, 0, true);
  ::unsetenv("INFERSCOPE_BUFFER_MODE");
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.out == "");
  CHECK(has(r.err, "INFERSCOPE_BUFFER_MODE"));
  // The flag overrides the variable, as it does in the program: nothing to refuse.
  ::setenv("INFERSCOPE_BUFFER_MODE", "bogus", 1);
  const std::string dump = temp_path("env_overridden");
  Result ok = run({ISCOPE_RUN, "-q", "--buffer-mode", "stream", "-o", dump, "--", ISCOPE_RUN_CHILD, "--exit", "0"});
  ::unsetenv("INFERSCOPE_BUFFER_MODE");
  CHECK(ok.status == 0);
  check_dump(dump);
  ::unlink(dump.c_str());
}

TEST_CASE("the program ran but wrote no dump: 125, and an earlier file is not taken for this run's dump") {
  const std::string dump = temp_path("no_dump");
  {
    std::ofstream old(dump);
    old << "an earlier file\n";
  }
  // enable=0: the runtime is loaded but does not record, as when the program bypasses it.
  Result r = run({ISCOPE_RUN, "-o", dump, "--set", "enable=0", "--", ISCOPE_RUN_CHILD, "--print", "ran", "--exit", "0"},
                 -1, 0, true);
  CAPTURE(r.err);
  CHECK(r.status == 125);
  CHECK(r.out == "ran\n");
  CHECK(has(r.err, "no dump written to " + dump));
  CHECK_FALSE(has(r.err, "dump written to " + dump + "\n"));
  std::ifstream in(dump);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "an earlier file\n");
  ::unlink(dump.c_str());

  // The same run recording: the closing line names the dump, the status is the program's.
  Result ok = run({ISCOPE_RUN, "-o", dump, "--", ISCOPE_RUN_CHILD, "--exit", "0"}, -1, 0, true);
  CHECK(ok.status == 0);
  CHECK(has(ok.err, "iscope-run: dump written to " + dump));
  check_dump(dump);
  ::unlink(dump.c_str());
}

TEST_CASE("--follow-children: each child process writes <stem>.<pid>.iscope") {
  const std::string stem = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/follow" + std::to_string(::getpid());
  const std::string script = std::string(ISCOPE_RUN_CHILD) + " --exit 0; " + ISCOPE_RUN_CHILD + " --exit 0; true";
  // bash, not sh: dash ends with _exit(), so its own dump never gets its END chunk and iscope-run says so (exit 125).
  Result r = run({ISCOPE_RUN, "-q", "--follow-children", "-o", stem + ".iscope", "--", "/bin/bash", "-c", script});
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

TEST_CASE("a library under a path with a space is preloaded; an iscope-run away from the build tree never uses it") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "cupti" / ("my tools " + std::to_string(::getpid()));
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "lib");
  fs::copy_file(INFERSCOPE_LIB, dir / "lib" / "libinferscope.so", fs::copy_options::overwrite_existing);
  fs::copy_file(ISCOPE_RUN, dir / "bin" / "iscope-run", fs::copy_options::overwrite_existing);
  const std::string installed = (dir / "bin" / "iscope-run").string();
  const std::string dump = temp_path("space");
  // Installed layout with a space in the prefix: the library beside it is found and loaded.
  Result r = run({installed, "-o", dump, "--", ISCOPE_RUN_CHILD, "--print", "ok", "--exit", "0"}, -1, 0, true);
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out == "ok\n");
  check_dump(dump);
  ::unlink(dump.c_str());
  // The same copy without a library beside it: a clear error, never the build tree's library.
  fs::remove(dir / "lib" / "libinferscope.so");
  Result none = run({installed, "-o", dump, "--", ISCOPE_RUN_CHILD, "--exit", "0"}, -1, 0, true);
  CAPTURE(none.err);
  CHECK(none.status == 127);
  CHECK(none.err.find("cannot find libinferscope.so") != std::string::npos);
  CHECK_FALSE(fs::exists(dump));
  fs::remove_all(dir);
}

// An install or a copy that puts libinferscope beside iscope-run (one directory, as a relocatable bundle) or holds it
// by its soname alone (a wheel's lib/libinferscope.so.N) is found without --library; iscope-run looked only for
// ../lib*/libinferscope.so. A --library that is not a shared library (/bin/ls: the loader ignored it, the program ran
// unrecorded and iscope-run exited 125) is exit 127 with the reason, before the program runs.
TEST_CASE("the library beside iscope-run is found; a --library that is not a shared library is 127 with the reason") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "cupti" / ("beside-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "lib");
  fs::copy_file(ISCOPE_RUN, dir / "bin" / "iscope-run");
  const std::string installed = (dir / "bin" / "iscope-run").string();
  const std::string dump = temp_path("beside");
  const std::string soname = fs::path(fs::canonical(INFERSCOPE_LIB)).filename().string();  // libinferscope.so.X.Y.Z
  const std::string major = "libinferscope.so." + soname.substr(std::string("libinferscope.so.").size(), soname.find('.', 17) - 17);
  for (const fs::path& lib : {dir / "bin" / "libinferscope.so", dir / "lib" / major}) {
    CAPTURE(lib);
    fs::copy_file(INFERSCOPE_LIB, lib);
    Result r = run({installed, "-o", dump, "--", ISCOPE_RUN_CHILD, "--print", "ok", "--exit", "0"}, -1, 0, true);
    CAPTURE(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "ok\n");
    check_dump(dump);
    ::unlink(dump.c_str());
    fs::remove(lib);
  }
  const std::string text = (dir / "not-a-library.so").string();
  { std::ofstream(text) << "just text\n"; }
  for (const auto& [library, why] : std::vector<std::pair<std::string, std::string>>{
           {"/bin/ls", "executable, not a shared library"},  // a position-independent one, or a plain one
           {text, "not an ELF file"},
           {dir.string(), "a directory, not a shared library"}}) {
    CAPTURE(library);
    Result r = run({ISCOPE_RUN, "--library", library, "-o", dump, "--", ISCOPE_RUN_CHILD, "--print", "ran", "--exit", "0"},
                   -1, 0, true);
    CAPTURE(r.err);
    CHECK(r.status == 127);
    CHECK(has(r.err, "cannot inject " + library + ": "));
    CHECK(has(r.err, why));
    CHECK(r.out == "");  // the program did not run
    CHECK_FALSE(fs::exists(dump));
  }
  fs::remove_all(dir);
}
