// The analysing tools' outputs and statuses (issue 43; docs/cli.md, docs/reliability.md "Hostile inputs"): one rule
// for every output of iscope-analyze and iscope-diff; one status for one damaged input in every command; --summary
// that cannot drive the terminal; dumps with no events, and the tool's own JSON report, said so with exit 1; messages
// of iscope-diff that name iscope-diff; and iscope-run's checks of its -o and --report. Each tool runs as a child
// process with a deadline: an output that blocks fails the case instead of hanging it.
#include <doctest/doctest.h>

#include "dump/builder.hpp"
#include "dump/format.hpp"
#include "dump/reader.hpp"
#include "support/files.hpp"
#include "test_util.hpp"
#include "tool_run.hpp"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

const char* const kAnalyze = "tools/iscope-analyze/iscope-analyze";
const char* const kDiff = "tools/iscope-diff/iscope-diff";
const char* const kRun = "tools/iscope-run/iscope-run";

testutil::ToolRun run(const char* tool, const std::vector<std::string>& args) {
  return testutil::run_tool(tool, args, {.env = {"INFERSCOPE_ANALYZE_THREADS=2"}, .deadline_s = 60});
}

// A small dump of 20 steps with a kernel each: enough for every tool to say something.
void write_small(dump::DumpBuilder& b, const std::string& cmdline = "small") {
  b.process("cmdline", cmdline);
  const uint32_t t = b.thread("main", 7), g = b.channel("gpu");
  for (int i = 0; i < 20; ++i) {
    const int64_t s = 1'000'000 + int64_t(i) * 100'000;
    b.api(t, "cudaLaunchKernel", uint32_t(i + 1), s + 1'000, s + 5'000);
    b.kernel(g, "gemm", uint32_t(i + 1), s + 6'000, s + 60'000);
    b.range(t, "step", 0, s, s + 90'000);
  }
}

std::string small_dump(const std::string& path) {
  dump::DumpBuilder b(path);
  write_small(b);
  b.finish();
  return path;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The small dump with one more EVENTS chunk, CRC-valid, whose second record is malformed (a range 4 bytes long):
// the chunk holds one good range, then the damage.
std::string dump_with_malformed_record(const std::string& path) {
  dump::DumpBuilder b(path);
  write_small(b);
  const uint32_t thread = b.thread("damaged", 8), name = b.str("good");
  b.finish(/*end_chunk=*/false);
  std::string bytes = slurp(path);
  dump::ChunkBuilder ev(dump::ChunkType::kEvents);
  const dump::EventsHeader eh{thread, 0};
  ev.append(&eh, sizeof(eh));
  const RangeRecord good{{RecordKind::kRange, 0, sizeof(RangeRecord)}, name, b.ticks(10'000), b.ticks(20'000)};
  ev.append(&good, sizeof(good));
  const RecordHeader bad{RecordKind::kRange, 0, 4};
  ev.append(&bad, sizeof(bad));
  ev.add_count(2);
  const std::vector<uint8_t> chunk = ev.finish();
  bytes.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
  dump::ChunkBuilder end(dump::ChunkType::kEnd);
  end.add(dump::EndEntry{b.ticks(3'000'000), 62, 0});
  const std::vector<uint8_t> e = end.finish();
  bytes.append(reinterpret_cast<const char*>(e.data()), e.size());
  testsupport::write(path, bytes);
  return path;
}

bool has_byte(const std::string& s, unsigned char c) { return s.find(char(c)) != std::string::npos; }

}  // namespace

// Report outputs onto a FIFO with no reader blocked for ever (-o, --md, --html, --json, --perfetto and iscope-diff's
// outputs); --sqlite already refused, after the analysis. Every output now follows its rule, before anything is read.
TEST_CASE("every output of iscope-analyze and iscope-diff refuses a FIFO and a device, before anything is written") {
  const std::string dir = testutil::fresh_dir("outputs-rule");
  const std::string dump = small_dump(dir + "/run.iscope"), other = small_dump(dir + "/other.iscope");
  const std::string fifo = dir + "/pipe.md";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const char* flag : {"-o", "--md", "--html", "--json", "--perfetto", "--sqlite"})
    for (const std::string target : {fifo, std::string("/dev/null")}) {
      CAPTURE(flag);
      CAPTURE(target);
      const testutil::ToolRun r = run(kAnalyze, {dump, flag, target});
      CHECK(r.exit == 2);  // -1: it blocked on the FIFO until the deadline
      CHECK(r.err.find(std::string(flag) + " " + target + ": is a " +
                       (target == fifo ? "FIFO (named pipe)" : "character device")) != std::string::npos);
    }
  for (const char* flag : {"-o", "--md", "--html", "--json"}) {
    CAPTURE(flag);
    const testutil::ToolRun r = run(kDiff, {dump, other, flag, fifo});
    CHECK(r.exit == 2);
    CHECK(r.err.find(std::string(flag) + " " + fifo + ": is a FIFO (named pipe)") != std::string::npos);
  }
  struct stat st{};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));  // left as it was
}

// `--json mp_producer.2006.iscope` replaced a child's dump beside an input of iscope-diff.
TEST_CASE("iscope-diff refuses an output over a child's dump beside an input, as iscope-analyze does") {
  const std::string dir = testutil::fresh_dir("diff-child");
  const std::string parent = small_dump(dir + "/run.iscope"), other = small_dump(dir + "/other.iscope");
  const std::string child = small_dump(dir + "/run.2006.iscope");
  const std::string before = slurp(child);
  const testutil::ToolRun r = run(kDiff, {parent, other, "--json", child});
  CHECK(r.exit == 2);
  CHECK(r.err.find("--json " + child + ": is the input " + child + " (a child process's dump, read with " + parent) !=
        std::string::npos);
  CHECK(slurp(child) == before);
}

TEST_CASE("--sqlite - is refused: a database is a file, and no file named '-' is made") {
  const std::string dir = testutil::fresh_dir("sqlite-dash");
  const std::string dump = small_dump(dir + "/run.iscope");
  const testutil::ToolRun r = testutil::run_tool(kAnalyze, {dump, "--sqlite", "-"}, {.cwd = dir});
  CHECK(r.exit == 2);
  CHECK(r.err.find("--sqlite -: a database cannot be written to standard output") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/-"));
}

// One malformed record, three answers: --summary exited 1 with nothing on stdout, the report read the rest and exited
// 3, --perfetto exited 3 and wrote nothing (69 of 650 mutants of an adversarial pass).
TEST_CASE("one malformed record gets one answer: every command reads the rest, writes, names the damage, exit 3") {
  const std::string dir = testutil::fresh_dir("damage-status");
  const std::string dump = dump_with_malformed_record(dir + "/damaged.iscope");
  const testutil::ToolRun summary = run(kAnalyze, {dump, "--summary"});
  CHECK(summary.exit == 3);
  CHECK(summary.out.find("# InferScope dump summary") == 0);
  CHECK(summary.out.find("the rest of that chunk was skipped") != std::string::npos);
  const testutil::ToolRun report = run(kAnalyze, {dump, "-o", dir + "/r.md"});
  CHECK(report.exit == 3);
  CHECK(fs::exists(dir + "/r.md"));
  const testutil::ToolRun trace = run(kAnalyze, {dump, "--perfetto", dir + "/t.json"});
  CHECK(trace.exit == 3);
  REQUIRE(fs::exists(dir + "/t.json"));
  CHECK(slurp(dir + "/t.json").find("\"gemm\"") != std::string::npos);  // the undamaged records are in it
  for (const testutil::ToolRun* r : {&summary, &report, &trace})
    CHECK(r->err.find("the rest of that chunk was skipped") != std::string::npos);
}

// --summary printed raw terminal control sequences from the dump (the command line, the host name, names), which the
// reports escape.
TEST_CASE("--summary writes no control character from the dump: C0, DEL and C1 are dropped") {
  const std::string dir = testutil::fresh_dir("summary-escape");
  const std::string path = dir + "/evil.iscope";
  {
    dump::DumpBuilder b(path);
    write_small(b, "python serve.py\x1b[2J\x1b]0;owned\x07");
    b.process("hostname", "box\x1b[31m\x7f");
    const uint32_t t = b.thread("t\x1b[1m\xc2\x9b" "31m", 9);
    b.range(t, "r\x1b[0m\xc2\x9b" "2J", 0, 10, 20);
    b.mark(t, "m\x1b" "c", 15);
    b.finish();
  }
  const testutil::ToolRun r = run(kAnalyze, {path, "--summary"});
  CHECK(r.exit == 0);
  CHECK(r.out.find("python serve.py") != std::string::npos);
  CHECK_FALSE(has_byte(r.out, 0x1b));
  CHECK_FALSE(has_byte(r.out, 0x07));
  CHECK_FALSE(has_byte(r.out, 0x7f));
  CHECK(r.out.find("\xc2\x9b") == std::string::npos);  // U+009B, a terminal's CSI
}

// A dump truncated to 0 events exited 0 with "Primary cause: Host work 0.000 ms (100 %)".
TEST_CASE("a dump with no events says so and exits 1 in every tool; no report is written") {
  const std::string dir = testutil::fresh_dir("no-events");
  const std::string whole = small_dump(dir + "/whole.iscope");
  const std::string empty = dir + "/empty.iscope";
  {
    dump::DumpBuilder b(empty);
    b.thread("main", 1);
    b.finish();
  }
  // Cut short before its first events: the head alone (file header and process info).
  const std::string cut = dir + "/cut.iscope";
  {
    const std::string bytes = slurp(whole);
    dump::ChunkHeader h{};
    std::memcpy(&h, bytes.data() + sizeof(dump::FileHeader), sizeof(h));
    testsupport::write(cut, bytes.substr(0, sizeof(dump::FileHeader) + sizeof(h) + h.length));
  }
  for (const std::string& p : {empty, cut}) {
    CAPTURE(p);
    const testutil::ToolRun a = run(kAnalyze, {p, "-o", dir + "/r.md"});
    CHECK(a.exit == 1);
    CHECK(a.err.find(p + ": holds no events") != std::string::npos);
    CHECK_FALSE(fs::exists(dir + "/r.md"));
    const testutil::ToolRun d = run(kDiff, {whole, p});
    CHECK(d.exit == 1);
    CHECK(d.err.find("iscope-diff: " + p + ": holds no events") != std::string::npos);
    const testutil::ToolRun s = run(kAnalyze, {p, "--summary"});
    CHECK(s.exit == 1);
    CHECK(s.out.find("# InferScope dump summary") == 0);  // what it holds is still said
  }
}

// The tool's own JSON report fed back in read as "'events' is not an array".
TEST_CASE("iscope-analyze's own JSON report given as input is named for what it is") {
  const std::string dir = testutil::fresh_dir("report-as-input");
  const std::string dump = small_dump(dir + "/run.iscope");
  REQUIRE(run(kAnalyze, {dump, "--json", dir + "/r.json"}).exit == 0);
  for (const char* tool : {kAnalyze, kDiff}) {
    CAPTURE(tool);
    const testutil::ToolRun r = tool == kAnalyze ? run(kAnalyze, {dir + "/r.json"}) : run(kDiff, {dir + "/r.json", dump});
    CHECK(r.exit == 1);
    CHECK(r.err.find(dir + "/r.json: an InferScope JSON report (written by iscope-analyze or iscope-diff), not a trace") !=
          std::string::npos);
  }
}

// iscope-diff's errors named iscope-analyze ("iscope-analyze reads dumps and JSON traces from regular files only").
TEST_CASE("iscope-diff's messages name iscope-diff, never iscope-analyze") {
  const std::string dir = testutil::fresh_dir("diff-names");
  const std::string dump = small_dump(dir + "/run.iscope");
  const std::string fifo = dir + "/in.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {fifo, dump}, {dir, dump}, {dump, dir + "/missing.iscope"}, {dump, dump, "-o", fifo}}) {
    const testutil::ToolRun r = run(kDiff, args);
    CAPTURE(r.err);
    CHECK(r.exit != 0);
    CHECK(r.err.find("iscope-diff: ") == 0);
    CHECK(r.err.find("iscope-analyze") == std::string::npos);
  }
}

// /proc/self/mem passed iscope-run's check of -o (stat() calls it a regular file).
TEST_CASE("iscope-run refuses an -o or --report on /proc or /sys before the program runs") {
  const std::string marker = testutil::temp_path("proc-out.ran");
  fs::remove(marker);
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"-o", "/proc/self/mem"}, {"--report", "/proc/self/mem.md"}, {"-o", "/sys/x.iscope"}}) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"--", "/usr/bin/touch", marker});
    const testutil::ToolRun r = testutil::run_tool(kRun, args);
    CAPTURE(r.err);
    CHECK(r.exit == 2);
    CHECK(r.err.find(", which holds no data") != std::string::npos);
    CHECK_FALSE(fs::exists(marker));
  }
}

// A --report that is a symlink loop was refused only when the program ended, and the run still exited 0.
TEST_CASE("iscope-run refuses a --report that is a symlink loop before the program runs") {
  const std::string dir = testutil::fresh_dir("report-loop");
  fs::create_symlink(dir + "/b.md", dir + "/a.md");
  fs::create_symlink(dir + "/a.md", dir + "/b.md");
  const std::string marker = dir + "/ran";
  const testutil::ToolRun r =
      testutil::run_tool(kRun, {"-o", dir + "/run.iscope", "--report", dir + "/a.md", "--", "/usr/bin/touch", marker});
  CAPTURE(r.err);
  CHECK(r.exit == 2);
  CHECK(r.err.find("--report " + dir + "/a.md: is a symbolic link loop") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
}

// `output: "a\0b.iscope"` in .inferscope.yaml wrote the dump to `a`.
TEST_CASE("a setting holding a NUL character is refused, naming it") {
  const std::string config = testutil::temp_path("nul.yaml");
  testsupport::write(config, "output: \"a\\0b.iscope\"\n");
  const testutil::ToolRun v = testutil::run_tool("tools/iscope-config/iscope-config", {"validate", config});
  CHECK(v.exit == 1);
  CHECK((v.out + v.err).find("holds a NUL character") != std::string::npos);
  const std::string marker = testutil::temp_path("nul.ran");
  fs::remove(marker);
  const testutil::ToolRun r = testutil::run_tool(kRun, {"--", "/usr/bin/touch", marker}, {.env = {"INFERSCOPE_CONFIG=" + config}});
  CHECK(r.exit == 2);
  CHECK(r.err.find("holds a NUL character") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
}
