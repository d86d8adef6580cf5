// Boolean flags written with a value mean that value (issue 25, item 5; docs/cli.md): `--follow-children=false`
// recorded the children, `--no-cupti=false` disabled CUPTI, `--quiet=false` was quiet, and `=no` was refused.
// iscope-run is observed through what it hands the program (the INFERSCOPE_* variables /usr/bin/env prints),
// iscope-analyze through what it writes.
#include <doctest/doctest.h>

#include "test_util.hpp"
#include "tool_run.hpp"

#include "dump/builder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

// iscope-run FLAGS -o DUMP -- /usr/bin/env: the program's environment as iscope-run set it.
struct Launched {
  testutil::ToolRun run;
  std::map<std::string, std::string> env;
};

Launched launch(const std::vector<std::string>& flags) {
  std::vector<std::string> args = flags;
  args.insert(args.end(), {"-o", testutil::temp_path("flags.iscope"), "--", "/usr/bin/env"});
  testutil::ToolLimits lim;
  lim.env = {"INFERSCOPE_CUPTI=0"};  // what a flag written with a value must override (flags win over the environment)
  Launched l{testutil::run_tool("tools/iscope-run/iscope-run", args, lim), {}};
  std::istringstream lines(l.run.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("INFERSCOPE_", 0) == 0) l.env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  return l;
}

}  // namespace

TEST_CASE("iscope-run: a boolean flag written with a value means that value, spelt as any setting's boolean") {
  const std::string written = "dump written to";
  SUBCASE("bare: on") {
    Launched l = launch({"--follow-children", "--no-cupti", "--no-python", "--nvtx-emit", "--quiet"});
    CHECK(l.run.exit == 0);
    CHECK(l.env["INFERSCOPE_FOLLOW_CHILDREN"] == "1");
    CHECK(l.env["INFERSCOPE_CUPTI"] == "0");
    CHECK(l.env["INFERSCOPE_PYTHON"] == "0");
    CHECK(l.env["INFERSCOPE_NVTX_EMIT"] == "1");
    CHECK(l.run.err.find(written) == std::string::npos);
  }
  SUBCASE("=false, =0: off") {
    Launched l = launch({"--follow-children=false", "--no-cupti=false", "--no-python=0", "--nvtx-emit=false", "--quiet=false"});
    CHECK(l.run.exit == 0);
    CHECK(l.env["INFERSCOPE_FOLLOW_CHILDREN"] == "0");  // it recorded the children
    CHECK(l.env["INFERSCOPE_CUPTI"] == "1");            // it disabled CUPTI, over INFERSCOPE_CUPTI=0 too
    CHECK(l.env["INFERSCOPE_PYTHON"] == "1");
    CHECK(l.env["INFERSCOPE_NVTX_EMIT"] == "0");
    CHECK(l.run.err.find(written) != std::string::npos);  // it was quiet
  }
  SUBCASE("=no, =off, =NO: off, as in the config file (it was refused)") {
    Launched l = launch({"--follow-children=no", "--no-cupti=off", "--no-python=NO", "--quiet=off"});
    CHECK(l.run.exit == 0);
    CHECK(l.env["INFERSCOPE_FOLLOW_CHILDREN"] == "0");
    CHECK(l.env["INFERSCOPE_CUPTI"] == "1");
    CHECK(l.env["INFERSCOPE_PYTHON"] == "1");
    CHECK(l.run.err.find(written) != std::string::npos);
  }
  SUBCASE("=yes, =ON, =1, =True: on; the later of two flags wins") {
    Launched l = launch({"--follow-children=yes", "--no-cupti=ON", "--no-python=1", "--nvtx-emit=True",
                               "-q", "--quiet=no", "--no-cupti=false"});
    CHECK(l.run.exit == 0);
    CHECK(l.env["INFERSCOPE_FOLLOW_CHILDREN"] == "1");
    CHECK(l.env["INFERSCOPE_CUPTI"] == "1");
    CHECK(l.env["INFERSCOPE_PYTHON"] == "0");
    CHECK(l.env["INFERSCOPE_NVTX_EMIT"] == "1");
    CHECK(l.run.err.find(written) != std::string::npos);
  }
  SUBCASE("anything else is refused, naming the flag, and nothing runs") {
    Launched l = launch({"--follow-children=maybe"});
    CHECK(l.run.exit == 2);
    CHECK(l.run.err.find("--follow-children=maybe: 'maybe' is not a boolean") != std::string::npos);
    CHECK(l.env.empty());
  }
  SUBCASE("a bare flag never takes the next argument as its value: the program starts there") {
    testutil::ToolRun r = testutil::run_tool("tools/iscope-run/iscope-run",
                                             {"-o", testutil::temp_path("flags2.iscope"), "--quiet", "/usr/bin/env"});
    CHECK(r.exit == 0);
    CHECK(r.out.find("INFERSCOPE_ENABLE=1") != std::string::npos);
  }
}

TEST_CASE("iscope-analyze: --no-children=false reads the children, --summary=no writes the report, =maybe is refused") {
  const std::string dir = testutil::temp_path("flags-children");
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (auto [name, pid, ppid] : {std::tuple{"run.iscope", "100", "1"}, std::tuple{"run.205.iscope", "205", "100"}}) {
    dump::DumpBuilder b(dir + "/" + name);
    b.process("pid", pid);
    b.process("ppid", ppid);
    const uint32_t t = b.thread("main", 7);
    for (int i = 0; i < 5; ++i) b.range(t, "step", 0, 1'000'000 + i * 100'000, 1'090'000 + i * 100'000);
    b.finish();
  }
  const std::string parent = dir + "/run.iscope", report = dir + "/r.json";
  const std::string tool = "tools/iscope-analyze/iscope-analyze";
  for (auto& [flag, children] : std::vector<std::pair<std::string, bool>>{
           {"--no-children", false}, {"--no-children=false", true}, {"--no-children=no", true}, {"--no-children=1", false}}) {
    CAPTURE(flag);
    fs::remove(report);
    CHECK(testutil::run_tool(tool, {parent, flag, "--json", report}).exit == 0);
    CHECK((testutil::read_file(report).find("run.205.iscope") != std::string::npos) == children);
  }
  // --summary=no is no summary: the report is written (it printed the summary and wrote nothing).
  fs::remove(report);
  testutil::ToolRun s = testutil::run_tool(tool, {parent, "--summary=no", "--json", report});
  CHECK(s.exit == 0);
  CHECK(fs::exists(report));
  CHECK(testutil::run_tool(tool, {parent, "--summary"}).out.find("run.iscope") != std::string::npos);
  testutil::ToolRun bad = testutil::run_tool(tool, {parent, "--progress=maybe"});
  CHECK(bad.exit == 2);
  CHECK(bad.err.find("--progress=maybe: 'maybe' is not a boolean") != std::string::npos);
}

// The dump and the report at exit are two files: `-o x.json --report x.json` (however spelt) would have the report
// written over the dump it is made from. Refused before the program runs, naming both flags.
TEST_CASE("iscope-run: --report naming the dump's own file is refused before the program runs") {
  const std::string dump = testutil::temp_path("same.json");
  const std::string dir = dump.substr(0, dump.rfind('/'));
  for (const std::string& report : {dump, dir + "/./same.json"}) {
    CAPTURE(report);
    testutil::ToolLimits lim;
    const testutil::ToolRun run =
        testutil::run_tool("tools/iscope-run/iscope-run", {"-o", dump, "--report", report, "--", "/usr/bin/env"}, lim);
    CHECK(run.exit == 2);
    CHECK(run.err.find("--report " + report + ": is the dump's own file (-o " + dump + ")") != std::string::npos);
    CHECK(run.out.find("INFERSCOPE_") == std::string::npos);  // the program did not run
    CHECK_FALSE(fs::exists(dump));
  }
}

TEST_CASE("iscope-run: --cupti-activities naming nothing is refused, '' and ',,,' alike, naming the flag") {
  // ',,,' (only commas and spaces) used to be accepted and '' refused: both name no activity to record.
  for (const std::string& value : {std::string(""), std::string(",,,"), std::string(" , ")}) {
    CAPTURE(value);
    Launched l = launch({"--cupti-activities", value});
    CHECK(l.run.exit == 2);
    CHECK(l.run.err.find("flag --cupti-activities: cupti_activities: the list is empty") != std::string::npos);
    CHECK(l.env.empty());  // the program did not run
  }
}

TEST_CASE("iscope-run: -o given an empty file name is refused before the program runs") {
  // `-o ""` (a script's unset variable) wrote the dump to ./<program>.<pid>.iscope as if -o were not given.
  const std::string marker = testutil::temp_path("empty-o.ran");
  for (const std::vector<std::string>& o : {std::vector<std::string>{"-o", ""}, {"--output="}}) {
    std::vector<std::string> args = o;
    args.insert(args.end(), {"--", "/usr/bin/touch", marker});
    const testutil::ToolRun r = testutil::run_tool("tools/iscope-run/iscope-run", args);
    CHECK(r.exit == 2);
    CHECK(r.err.find("-o/--output: the file name is empty") != std::string::npos);
    CHECK_FALSE(fs::exists(marker));  // the program was not run
  }
}

TEST_CASE("iscope-run: --report onto a FIFO, or with an empty name, is refused before the program runs") {
  // The report is written as the program ends: a FIFO nobody read held the program's exit, and iscope-run, for ever.
  // An empty name said "its directory  does not exist".
  const std::string fifo = testutil::temp_path("report-fifo.md"), marker = testutil::temp_path("report-fifo.ran");
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string link = testutil::temp_path("report-fifo-link.md");
  fs::remove(link);
  fs::create_symlink(fifo, link);
  for (const auto& [report, said] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "is a FIFO (named pipe)"}, {link, "is a FIFO (named pipe)"}, {"", "the file name is empty"}}) {
    CAPTURE(report);
    const testutil::ToolRun r = testutil::run_tool(
        "tools/iscope-run/iscope-run",
        {"-o", testutil::temp_path("report-fifo.iscope"), "--report", report, "--", "/usr/bin/touch", marker},
        {.deadline_s = 30});
    CHECK(r.exit == 2);
    CHECK(r.err.find(said) != std::string::npos);
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("iscope-run: --report onto a pipe that something reads (/dev/stdout into `| tee`) is written, not refused") {
  const std::string fifo = testutil::temp_path("report-read-fifo.md");
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A reader holds the FIFO open for the whole run, as `tee` holds the pipe behind /dev/stdout.
  std::string got;
  std::thread reader([&] {
    std::ifstream in(fifo);
    got.assign(std::istreambuf_iterator<char>(in), {});
  });
  const int keep = ::open(fifo.c_str(), O_WRONLY);  // returns once the reader has it open; keeps it from seeing EOF
  REQUIRE(keep >= 0);
  const testutil::ToolRun r = testutil::run_tool(
      "tools/iscope-run/iscope-run",
      {"-o", testutil::temp_path("report-read-fifo.iscope"), "--report", fifo, "--", "/bin/true"}, {.deadline_s = 120});
  ::close(keep);
  reader.join();
  CHECK(r.exit == 0);
  CHECK(r.err.find("FIFO") == std::string::npos);
  CHECK(got.find("# InferScope report") != std::string::npos);
}

TEST_CASE("iscope-analyze: an output flag given an empty file name is refused by flag, exit 2, nothing written") {
  const std::string dump = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope";
  for (const char* flag : {"--sqlite=", "--json=", "--html=", "--perfetto="}) {
    CAPTURE(flag);
    const testutil::ToolRun r = testutil::run_tool("tools/iscope-analyze/iscope-analyze", {dump, flag});
    CHECK(r.exit == 2);  // --sqlite "" used to do nothing and exit 0
    CHECK(r.err.find(std::string(flag).substr(0, std::string(flag).size() - 1) + ": an empty file name") != std::string::npos);
  }
}

TEST_CASE("iscope-analyze: a report to standard output that cannot be written is exit 1 with a message, not 0") {
  const std::string tool = testutil::binary("tools/iscope-analyze/iscope-analyze");
  const std::string dump = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope";
  const std::string err = testutil::temp_path("stdout.err");
  // /dev/full: every write fails with ENOSPC; >&-: stdout closed. Both used to exit 0 with nothing written.
  for (const char* redirect : {"> /dev/full", ">&-"}) {
    CAPTURE(redirect);
    const int rc = std::system((tool + " " + dump + " --summary " + redirect + " 2> " + err).c_str());
    REQUIRE(WIFEXITED(rc));
    CHECK(WEXITSTATUS(rc) == 1);
    CHECK(testutil::read_file(err).find("iscope-analyze: cannot write to standard output") != std::string::npos);
  }
  CHECK(std::system((tool + " " + dump + " --summary > /dev/null 2> " + err).c_str()) == 0);
}

// iscope-diff -o - and iscope-config wrote into a full disk or a closed descriptor and exited 0, as iscope-analyze used
// to: the same check now ends every tool (tools/common/tool_common.hpp).
TEST_CASE("iscope-diff and iscope-config: standard output that cannot be written is exit 1 with a message, not 0") {
  const std::string dump = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope";
  const std::string err = testutil::temp_path("stdout-tools.err");
  const std::string diff = testutil::binary("tools/iscope-diff/iscope-diff") + " " + dump + " " + dump;
  const std::string config = testutil::binary("tools/iscope-config/iscope-config");
  for (const auto& [tool, command] : std::vector<std::pair<std::string, std::string>>{
           {"iscope-diff", diff + " -o -"}, {"iscope-diff", diff}, {"iscope-config", config + " show"},
           {"iscope-config", config + " keys --markdown"}}) {
    for (const char* redirect : {"> /dev/full", ">&-"}) {
      CAPTURE(command);
      CAPTURE(redirect);
      const int rc = std::system((command + " " + redirect + " 2> " + err).c_str());
      REQUIRE(WIFEXITED(rc));
      CHECK(WEXITSTATUS(rc) == 1);
      CHECK(testutil::read_file(err).find(tool + ": cannot write to standard output") != std::string::npos);
    }
    CHECK(std::system((command + " > /dev/null 2> " + err).c_str()) == 0);
  }
}

// A number with anything after it (5abc, 20ms, 1e3x) was taken for its leading digits by iscope-analyze's
// --launch-bound-max-kernel-us (cxxopts' double). Every numeric option of every tool now goes through the settings'
// own parser, which reads the value whole: refused, naming the option and the value.
TEST_CASE("numeric options with trailing garbage are refused, naming the option and the value") {
  const std::string dump = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope";
  const std::string out = testutil::temp_path("numeric.iscope");
  struct Case {
    std::string tool;
    std::vector<std::string> args;
    std::string option, value;
    int exit;
  };
  const std::vector<Case> cases{
      {"tools/iscope-analyze/iscope-analyze", {dump, "--launch-bound-max-kernel-us=5abc"}, "--launch-bound-max-kernel-us", "5abc", 2},
      {"tools/iscope-analyze/iscope-analyze", {dump, "--launch-bound-max-kernel-us", "1e3x"}, "--launch-bound-max-kernel-us", "1e3x", 2},
      {"tools/iscope-analyze/iscope-analyze", {dump, "--launch-bound-max-kernel-us=20 "}, "--launch-bound-max-kernel-us", "20 ", 2},
      {"tools/iscope-analyze/iscope-analyze", {dump, "--skip-steps=3x"}, "--skip-steps", "3x", 2},
      {"tools/iscope-diff/iscope-diff", {dump, dump, "--skip-steps=3x"}, "--skip-steps", "3x", 2},
      {"tools/iscope-run/iscope-run", {"--trace-size-mb=5abc", "-o", out, "--", "/usr/bin/env"}, "--trace-size-mb", "5abc", 2},
      {"tools/iscope-run/iscope-run", {"--set", "flush_period_ms=20ms", "-o", out, "--", "/usr/bin/env"}, "--set flush_period_ms", "20ms", 2},
      {"tools/iscope-run/iscope-run", {"--set", "launch_bound_max_kernel_us=5abc", "-o", out, "--", "/usr/bin/env"},
       "--set launch_bound_max_kernel_us", "5abc", 2},
      // iscope-config's --set is what it checks: a bad value is "the configuration is invalid", its exit 1.
      {"tools/iscope-config/iscope-config", {"show", "--set", "trace_size_mb=5abc"}, "--set trace_size_mb", "5abc", 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.tool);
    CAPTURE(c.option);
    const testutil::ToolRun r = testutil::run_tool(c.tool, c.args);
    CHECK(r.exit == c.exit);
    CHECK(r.err.find(c.option) != std::string::npos);
    CHECK(r.err.find("'" + c.value + "'") != std::string::npos);
    CHECK(r.out.find("INFERSCOPE_") == std::string::npos);  // iscope-run: the program did not run
  }
  CHECK(testutil::run_tool("tools/iscope-analyze/iscope-analyze", {dump, "--launch-bound-max-kernel-us=5", "--findings"}).exit == 0);
}

// The report written over the dump through a link: `--report r.json` where r.json is a symlink to the dump's path, not
// there yet (the report writer follows links, dangling ones too), or the dump's path reached through a linked
// directory. Refused before the program runs, like `-o x.json --report x.json`; it used to run the program.
TEST_CASE("iscope-run: --report reaching the dump's file through a link is refused before the program runs") {
  const std::string dir = testutil::temp_path("report-links");
  fs::create_directories(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/linked");
  fs::create_symlink(dir + "/real/d.json", dir + "/to-dump.json");  // dangling: the dump is not there yet
  fs::create_symlink("real/d.json", dir + "/relative.json");
  const std::string dump = dir + "/real/d.json";
  for (const std::string& report : {dir + "/to-dump.json", dir + "/relative.json", dir + "/linked/d.json"}) {
    CAPTURE(report);
    const testutil::ToolRun run =
        testutil::run_tool("tools/iscope-run/iscope-run", {"-o", dump, "--report", report, "--", "/usr/bin/env"});
    CHECK(run.exit == 2);
    CHECK(run.err.find("--report " + report + ": is the dump's own file (-o " + dump + ")") != std::string::npos);
    CHECK(run.out.find("INFERSCOPE_") == std::string::npos);  // the program did not run
    CHECK_FALSE(fs::exists(dump));
  }
  // The dump's path through the linked directory, the report at the real one.
  const testutil::ToolRun run = testutil::run_tool(
      "tools/iscope-run/iscope-run", {"-o", dir + "/linked/d.json", "--report", dump, "--", "/usr/bin/env"});
  CHECK(run.exit == 2);
  CHECK(run.err.find("is the dump's own file") != std::string::npos);
}

// Without -o the runtime writes where the setting 'output' says (INFERSCOPE_OUTPUT, .inferscope.yaml, --set output):
// iscope-run set INFERSCOPE_OUTPUT to ./<program>.<pid>.iscope over them and looked there. Now it takes the output
// from the same settings model, hands it to the program, checks it before the program runs and names it at the end.
TEST_CASE("iscope-run without -o: the dump goes where INFERSCOPE_OUTPUT or .inferscope.yaml says, and is named") {
  const std::string dir = testutil::temp_path("output-setting");
  fs::create_directories(dir + "/cwd");
  auto run_env = [&](const std::vector<std::string>& env, const std::vector<std::string>& args = {}) {
    testutil::ToolLimits lim;
    lim.env = env;
    lim.cwd = dir + "/cwd";
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--", "/usr/bin/env"});
    return testutil::run_tool("tools/iscope-run/iscope-run", a, lim);
  };
  auto program_output = [](const testutil::ToolRun& r) {
    const size_t at = r.out.find("INFERSCOPE_OUTPUT=");
    return at == std::string::npos ? std::string() : r.out.substr(at + 18, r.out.find('\n', at) - at - 18);
  };
  SUBCASE("INFERSCOPE_OUTPUT") {
    const std::string want = dir + "/from-env.iscope";
    const testutil::ToolRun r = run_env({"INFERSCOPE_OUTPUT=" + want});
    CHECK(r.exit == 0);
    CHECK(program_output(r) == want);
    CHECK(r.err.find("dump written to " + want) != std::string::npos);
    CHECK(fs::exists(want));
  }
  SUBCASE(".inferscope.yaml's output, relative to the working directory") {
    { std::ofstream(dir + "/cwd/.inferscope.yaml") << "output: from-yaml.iscope\n"; }
    const testutil::ToolRun r = run_env({});
    fs::remove(dir + "/cwd/.inferscope.yaml");
    CHECK(r.exit == 0);
    CHECK(program_output(r) == dir + "/cwd/from-yaml.iscope");
    CHECK(r.err.find("dump written to " + dir + "/cwd/from-yaml.iscope") != std::string::npos);
  }
  SUBCASE("--set output wins over INFERSCOPE_OUTPUT, -o over both") {
    const testutil::ToolRun set = run_env({"INFERSCOPE_OUTPUT=" + dir + "/env.iscope"}, {"--set", "output=" + dir + "/set.iscope"});
    CHECK(set.exit == 0);
    CHECK(program_output(set) == dir + "/set.iscope");
    const testutil::ToolRun o = run_env({"INFERSCOPE_OUTPUT=" + dir + "/env.iscope"}, {"-o", dir + "/o.iscope"});
    CHECK(o.exit == 0);
    CHECK(program_output(o) == dir + "/o.iscope");
    CHECK_FALSE(fs::exists(dir + "/env.iscope"));
  }
  SUBCASE("an output setting that cannot be written is refused before the program runs, naming where it came from") {
    const testutil::ToolRun r = run_env({"INFERSCOPE_OUTPUT=/nonexistent/dir/x.iscope"});
    CHECK(r.exit == 2);
    CHECK(r.err.find("INFERSCOPE_OUTPUT=/nonexistent/dir/x.iscope: its directory /nonexistent/dir does not exist") !=
          std::string::npos);
    CHECK(program_output(r).empty());  // the program did not run
  }
}
