// What is named as the config file must be a config file (issue 25, item 4; docs/reliability.md, "Settings"): a
// FIFO named by INFERSCOPE_CONFIG hung every tool and every program started with INFERSCOPE_ENABLE=1,
// /dev/zero was read until memory ran out, a directory was read as an empty config. Each tool is run with each
// such config under a deadline (a hang fails, it does not stall the suite) and an address-space limit (a read
// without end fails with bad_alloc instead of taking the machine's memory).
#include <doctest/doctest.h>

#include "test_util.hpp"
#include "tool_run.hpp"

#include "dump/builder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

struct BadConfig {
  std::string path, kind;
};

// A FIFO with no writer, /dev/zero, a directory, and a regular file larger than the limit (comments only, so
// that a reader without a limit would accept it as an empty config).
std::vector<BadConfig> bad_configs() {
  const std::string dir = testutil::temp_path("configs");
  fs::remove_all(dir);
  fs::create_directories(dir + "/a-directory.yaml");
  const std::string fifo = dir + "/fifo.yaml", big = dir + "/big.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  {
    std::ofstream f(big);
    const std::string line(99, '#');
    for (int i = 0; i < (1 << 20) / 100 + 2; ++i) f << line << '\n';
  }
  return {{fifo, "is a FIFO (named pipe), not a regular file"},
          {"/dev/zero", "is a character device, not a regular file"},
          {dir + "/a-directory.yaml", "is a directory, not a regular file"},
          {big, "larger than 1 MiB"}};
}

testutil::ToolRun run(const std::string& rel, const std::vector<std::string>& args, const std::vector<std::string>& env) {
  testutil::ToolLimits lim;
  lim.env = env;
  lim.deadline_s = 20;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // a sanitizer needs more address space
  lim.address_space = 1ull << 30;
#endif
  return testutil::run_tool(rel, args, lim);
}

std::string small_dump() {
  const std::string p = testutil::temp_path("config-sources.iscope");
  dump::DumpBuilder b(p);
  const uint32_t t = b.thread("main", 7), g = b.channel("gpu");
  for (int i = 0; i < 10; ++i) {
    const int64_t s = 1'000'000 + i * 100'000;
    b.api(t, "cudaLaunchKernel", 10 + i, s + 1'000, s + 6'000);
    b.kernel(g, "gemm", 10 + i, s + 8'000, s + 60'000);
    b.range(t, "step", 0, s, s + 90'000);
  }
  b.finish();
  return p;
}

bool said(const testutil::ToolRun& r, const std::string& s) { return r.err.find(s) != std::string::npos; }

}  // namespace

TEST_CASE("iscope-config validate and show: a FIFO, /dev/zero, a directory or a huge file is refused by name") {
  for (const auto& c : bad_configs()) {
    CAPTURE(c.path);
    const testutil::ToolRun v = run("tools/iscope-config/iscope-config", {"validate", c.path}, {});
    CHECK(v.exit == 1);  // -1: it hung (FIFO) or was killed; 134: bad_alloc (/dev/zero)
    CHECK(said(v, c.path + "': " + c.kind));
    const testutil::ToolRun shown = run("tools/iscope-config/iscope-config", {"show", "--config", c.path}, {});
    CHECK(shown.exit == 1);
    CHECK(said(shown, "(named by --config): " + c.kind));
    const testutil::ToolRun env = run("tools/iscope-config/iscope-config", {"show"}, {"INFERSCOPE_CONFIG=" + c.path});
    CHECK(env.exit == 1);
    CHECK(said(env, "(named by INFERSCOPE_CONFIG): " + c.kind));
  }
}

TEST_CASE("INFERSCOPE_CONFIG naming what is not a config file: no tool and no recorded program blocks or reads without end") {
  const std::string dump = small_dump();
  for (const auto& c : bad_configs()) {
    CAPTURE(c.path);
    const std::vector<std::string> env{"INFERSCOPE_CONFIG=" + c.path};
    // The analyzers record nothing: the problem is a warning, the analysis goes on.
    const testutil::ToolRun a = run("tools/iscope-analyze/iscope-analyze", {dump, "-o", testutil::temp_path("c.md")}, env);
    CHECK(a.exit == 0);
    CHECK(said(a, c.kind));
    const testutil::ToolRun d = run("tools/iscope-diff/iscope-diff", {dump, dump, "-o", testutil::temp_path("c-diff.md")}, env);
    CHECK(d.exit == 0);
    CHECK(said(d, c.kind));
    // iscope-run refuses before starting the program (it would record nothing).
    const testutil::ToolRun r = run("tools/iscope-run/iscope-run",
                                    {"-o", testutil::temp_path("c.iscope"), "--", testutil::binary("tests/unit/iscope_test_recorder"), "count", "10"},
                                    env);
    CHECK(r.exit == 2);
    CHECK(said(r, c.kind));
    // A program recording from the environment runs as without us: its own exit status, a message, no dump.
    const std::string out = testutil::temp_path("enabled.iscope");
    fs::remove(out);
    const testutil::ToolRun p = run("tests/unit/iscope_test_recorder", {"exit-code", "7"},
                                    {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + out, "INFERSCOPE_CONFIG=" + c.path});
    CHECK(p.exit == 7);
    CHECK(said(p, c.kind));
    CHECK_FALSE(fs::exists(out));
  }
}

// A session started in code (issue 25, item 9; docs/configuration.md, "Sessions started in code"): what the code
// set wins, every other setting comes from INFERSCOPE_* and .inferscope.yaml, so an operator redirects a deployed
// program without a rebuild. It used to take nothing from either: the dump went to ./inferscope-<pid>.iscope.
namespace {

// The recorder's `code-session OUT N` (OUT "-": the code sets no output) in a fresh working directory `cwd`.
testutil::ToolRun code_session(const std::string& cwd, const std::string& out, const std::vector<std::string>& env) {
  testutil::ToolLimits lim;
  lim.env = env;
  lim.cwd = cwd;
  lim.deadline_s = 20;
  return testutil::run_tool("tests/unit/iscope_test_recorder", {"code-session", out, "100"}, lim);
}

// The dumps a session left in `dir` (file names), so a test sees where it wrote and that it wrote nowhere else.
std::vector<std::string> dumps_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".iscope") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

size_t counted_ranges(const std::string& path) {
  dump::DumpReader reader(path);
  size_t n = 0;
  for (const auto& r : testutil::read_all(reader).ranges) n += r.name == "counted";
  return n;
}

}  // namespace

TEST_CASE("a session started in code: INFERSCOPE_OUTPUT redirects it when the code set no output") {
  const std::string dir = testutil::fresh_dir("code-env");
  const testutil::ToolRun r = code_session(dir, "-", {"INFERSCOPE_OUTPUT=" + dir + "/from-env.iscope"});
  CAPTURE(r.err);
  CHECK(r.exit == 0);
  CHECK(r.out == "session started " + dir + "/from-env.iscope\n");
  CHECK(dumps_in(dir) == std::vector<std::string>{"from-env.iscope"});
  CHECK(counted_ranges(dir + "/from-env.iscope") == 100);
}

TEST_CASE("a session started in code: an output the code set wins over INFERSCOPE_OUTPUT") {
  const std::string dir = testutil::fresh_dir("code-wins");
  const testutil::ToolRun r =
      code_session(dir, dir + "/from-code.iscope", {"INFERSCOPE_OUTPUT=" + dir + "/from-env.iscope"});
  CAPTURE(r.err);
  CHECK(r.exit == 0);
  CHECK(r.out == "session started " + dir + "/from-code.iscope\n");
  CHECK(dumps_in(dir) == std::vector<std::string>{"from-code.iscope"});
}

TEST_CASE("a session started in code: .inferscope.yaml's output applies when no variable sets it; the variable wins") {
  const std::string dir = testutil::fresh_dir("code-yaml");
  std::ofstream(dir + "/.inferscope.yaml") << "output: from-yaml.iscope\n";
  const testutil::ToolRun r = code_session(dir, "-", {});
  CAPTURE(r.err);
  CHECK(r.exit == 0);
  CHECK(r.out == "session started " + dir + "/from-yaml.iscope\n");
  CHECK(dumps_in(dir) == std::vector<std::string>{"from-yaml.iscope"});
  const testutil::ToolRun env = code_session(dir, "-", {"INFERSCOPE_OUTPUT=" + dir + "/from-env.iscope"});
  CHECK(env.out == "session started " + dir + "/from-env.iscope\n");
}

TEST_CASE("a session started in code: a bad INFERSCOPE_* value is refused as the tools refuse it; the program goes on") {
  const std::string dir = testutil::fresh_dir("code-bad-env");
  const std::vector<std::string> env{"INFERSCOPE_BUFFER_MODE=bogus", "INFERSCOPE_OUTPUT=" + dir + "/x.iscope"};
  const testutil::ToolRun r = code_session(dir, "-", env);
  CHECK(r.exit == 0);  // the program's own status
  CHECK(r.out.rfind("session not-started", 0) == 0);
  // The line iscope-config gives for the same environment, in the runtime's "configuration error" message.
  const testutil::ToolRun tool = run("tools/iscope-config/iscope-config", {"show"}, env);
  REQUIRE(tool.exit == 1);
  const std::string problem = tool.err.substr(0, tool.err.find('\n'));
  CHECK(problem == "environment variable INFERSCOPE_BUFFER_MODE: buffer_mode: 'bogus' is not an allowed value; "
                   "allowed: one of: stream, ring");
  CHECK(said(r, "inferscope: configuration error: " + problem + "; not recording"));
  CHECK(dumps_in(dir).empty());
}

TEST_CASE("a session started in code in a child of iscope-run: an output from outside gets the child's pid") {
  // iscope-run names the process it started (INFERSCOPE_ROOT_PID) and hands its output to the whole tree; a child
  // that starts a session in code must not write over the parent's dump.
  const std::string dir = testutil::fresh_dir("code-child");
  const testutil::ToolRun r =
      code_session(dir, "-", {"INFERSCOPE_ROOT_PID=1", "INFERSCOPE_OUTPUT=" + dir + "/family.iscope"});
  CAPTURE(r.err);
  const std::vector<std::string> dumps = dumps_in(dir);
  REQUIRE(dumps.size() == 1);
  CHECK(dumps[0].rfind("family.", 0) == 0);
  CHECK(dumps[0] != "family.iscope");
  CHECK(r.out == "session started " + dir + "/" + dumps[0] + "\n");
}

// yaml-cpp 0.7 never returns from LoadAll on a ',' outside a [ ] or { } collection: it adds an empty document per
// turn until memory runs out (found by fuzz_config, issue 25). A 1-byte config file hung every tool and every
// recorded program; now it is a syntax error naming its line and column.
TEST_CASE("a stray ',' in the config file is a syntax error naming its line, never a hang") {
  const std::string dir = testutil::fresh_dir("stray-comma");
  const std::vector<std::pair<std::string, std::string>> files{
      {",", ":1:1: YAML syntax error"}, {"- a\n,\n- b\n", ":2:1: YAML syntax error"},
      {"enable: true\n---\n,\n", ":3: a config file holds one YAML document"}};  // refused before the ','
  int n = 0;
  for (const auto& [text, where] : files) {
    const std::string path = dir + "/c" + std::to_string(n++) + ".yaml";
    std::ofstream(path) << text;
    CAPTURE(text);
    const testutil::ToolRun v = run("tools/iscope-config/iscope-config", {"validate", path}, {});
    CHECK(v.exit == 1);  // -1: it hung and was killed at the deadline, or ran out of address space
    CHECK(said(v, path + where));
    const testutil::ToolRun p = run("tests/unit/iscope_test_recorder", {"exit-code", "7"},
                                    {"INFERSCOPE_ENABLE=1", "INFERSCOPE_OUTPUT=" + dir + "/x.iscope", "INFERSCOPE_CONFIG=" + path});
    CHECK(p.exit == 7);
    CHECK(said(p, path + where));
  }
}
