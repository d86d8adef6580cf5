// Hostile inputs to iscope-analyze (docs/reliability.md, "Hostile inputs to iscope-analyze"): outputs that are
// the input, dumps that shrink while read, non-regular files, ids that would size tables, a BOM before JSON,
// unusable settings, and END counts that disagree with the file. Each case asserts what the tool does.
#include <doctest/doctest.h>

#include "test_util.hpp"
#include "tool_run.hpp"

#include "analyze/analyzer.hpp"
#include "analyze/children.hpp"
#include "dump/builder.hpp"
#include "dump/files.hpp"
#include "dump/reader.hpp"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void spit(const std::string& p, const std::string& s) { spit(p, std::vector<uint8_t>(s.begin(), s.end())); }

// A small ordinary dump: one thread with steps that launch kernels.
std::string small_dump(const std::string& name, bool drops = false) {
  const std::string p = testutil::temp_path(name);
  dump::DumpBuilder b(p);
  b.set_chunk_bytes(256);  // several EVENTS chunks
  const uint32_t t = b.thread("main", 77), g = b.channel("gpu");
  for (int i = 0; i < 40; ++i) {
    const int64_t s = 1'000'000 + i * 100'000;
    b.api(t, "cudaLaunchKernel", 10 + i, s + 1'000, s + 6'000);
    b.kernel(g, "gemm", 10 + i, s + 8'000, s + 60'000);
    b.range(t, "step", 0, s, s + 90'000);
  }
  if (drops) b.drop(t, "buffer_full", 3);
  b.finish();
  return p;
}

using testutil::ToolRun;

// Runs iscope-analyze with `args` in `cwd`; `fsize` > 0 limits the size of files it writes (writes past it
// fail with EFBIG). Kills it after 20 s.
ToolRun run_tool(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                 const std::string& cwd = "", long fsize = 0) {
  testutil::ToolLimits lim;
  lim.env = env;
  lim.cwd = cwd;
  lim.fsize = fsize;
  lim.deadline_s = 20;
  return testutil::run_tool("tools/iscope-analyze/iscope-analyze", args, lim);
}

bool has_warning(const analyze::Analysis& a, const std::string& text) {
  for (auto& w : a.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

// The shape that made the analyzer allocate 2.6 GB from 4.5 KB, CRC-valid: thread ids near 2^20 and 2^32, a
// code-table entry with id 2^24 - 1, and Python calls naming code ids up to 2^24 - 1. make_seeds writes the
// same shape for the fuzzers (fuzz/make_seeds.cpp, hostile_ids.iscope).
std::vector<uint8_t> hostile_ids_dump() {
  std::vector<uint8_t> out;
  auto fh = dump::make_file_header();
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  dump::ChunkBuilder s(dump::ChunkType::kStrings);
  s.add_string(1, "main");
  s.add_string(2, "f");
  s.add_string(3, "a.py");
  s.finish_into(out);
  dump::ChunkBuilder code(dump::ChunkType::kCodeTable);
  code.add(dump::CodeEntry{1, 2, 3, 1});
  code.add(dump::CodeEntry{0x00ffffffu, 2, 3, 2});
  code.finish_into(out);
  const uint32_t big_thread = 0x000ffffeu, huge_thread = 0xfffffff0u;
  dump::ChunkBuilder th(dump::ChunkType::kThreads);
  th.add(dump::ThreadEntry{big_thread, 7, 42, 1, 1000, 0, 0, 0});
  th.add(dump::ThreadEntry{huge_thread, 8, 42, 1, 1000, 0, 0, 0});
  th.finish_into(out);
  dump::ChunkBuilder cal(dump::ChunkType::kCalibration);
  cal.add(dump::CalibrationPoint{1000, 1000, 1000, 1, 0});
  cal.add(dump::CalibrationPoint{1'000'000'000, 1'000'000'000, 1'000'000'000, 1, 0});
  cal.finish_into(out);
  uint32_t records = 0;
  for (uint32_t thread : {big_thread, huge_thread}) {
    dump::ChunkBuilder ev(dump::ChunkType::kEvents);
    dump::EventsHeader eh{thread, 0};
    ev.append(&eh, sizeof(eh));
    for (uint64_t i = 0; i < 40; ++i) {
      RangeRecord r{{RecordKind::kRange, 0, sizeof(RangeRecord)}, 1, 2000 + i * 100, 2050 + i * 100};
      ev.add(r);
    }
    ev.finish_into(out);
    records += ev.count();
  }
  for (uint32_t c : {0x00ffffffu, 0xffffu}) {  // each its own chunk: the first bad record ends a chunk
    dump::ChunkBuilder ev(dump::ChunkType::kEvents);
    dump::EventsHeader eh{big_thread, 0};
    ev.append(&eh, sizeof(eh));
    ev.add(PyCallRecord{{RecordKind::kPyCall, 0, sizeof(PyCallRecord)}, c, 3000, 3100});
    ev.finish_into(out);
    records += ev.count();
  }
  dump::ChunkBuilder end(dump::ChunkType::kEnd);
  end.add(dump::EndEntry{10'000, records, 0});
  end.finish_into(out);
  return out;
}

// Chunk boundaries of a dump: (offset, header).
std::vector<std::pair<size_t, dump::ChunkHeader>> chunks_of(const std::vector<uint8_t>& b) {
  std::vector<std::pair<size_t, dump::ChunkHeader>> v;
  size_t off = sizeof(dump::FileHeader);
  while (off + sizeof(dump::ChunkHeader) <= b.size()) {
    dump::ChunkHeader h;
    std::memcpy(&h, b.data() + off, sizeof(h));
    v.emplace_back(off, h);
    off += sizeof(h) + h.length;
  }
  return v;
}

// The dump without its `k`-th chunk of `type` (a write that failed with the disk full, later ones succeeding).
std::vector<uint8_t> without_chunk(std::vector<uint8_t> b, dump::ChunkType type, int k, uint32_t* count = nullptr) {
  for (auto& [off, h] : chunks_of(b))
    if (h.type == uint32_t(type) && k-- == 0) {
      if (count) *count = h.count;
      b.erase(b.begin() + off, b.begin() + off + sizeof(h) + h.length);
      return b;
    }
  FAIL("no such chunk");
  return b;
}

}  // namespace

TEST_CASE("an output that is the input is refused with exit 2 before anything is written") {
  const std::string dump_path = small_dump("self.iscope");
  const auto before = slurp(dump_path);
  const std::string dir = fs::path(dump_path).parent_path().string();
  const std::string link = testutil::temp_path("self-link.iscope"), hard = testutil::temp_path("self-hard.iscope");
  fs::remove(link);
  fs::remove(hard);
  fs::create_symlink(dump_path, link);
  fs::create_hard_link(dump_path, hard);
  const std::string relative = "./" + fs::path(dump_path).filename().string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {dump_path, "-o", dump_path},
           {dump_path, "--perfetto", link},
           {dump_path, "--html", hard},
           {relative, "--json", dump_path},
           {dump_path, "-o", testutil::temp_path("fine.md"), "--json", relative},
           {dump_path, "--sqlite", hard},  // the database too, with the same status (it was exit 1)
           {dump_path, "--sqlite", dump_path},
           {relative, "--sqlite", relative},  // `iscope-analyze d.iscope --sqlite d.iscope`
           {relative, "--sqlite", link},
           {dump_path, "-o", testutil::temp_path("fine.md"), "--sqlite", dump_path},
       }) {
    CAPTURE(args.back());
    ToolRun r = run_tool(args, {}, dir);
    CHECK(r.exit == 2);
    CHECK(r.err.find("is the input") != std::string::npos);
    CHECK(slurp(dump_path) == before);
  }
  CHECK_FALSE(fs::exists(testutil::temp_path("fine.md")));  // refused before the first output was written
  CHECK(run_tool({dump_path, "-o", testutil::temp_path("fine.md")}).exit == 0);
}

TEST_CASE("a report that fails half-way leaves the previous file whole and no temporary behind") {
  const std::string dump_path = small_dump("atomic.iscope");
  const std::string dir = testutil::temp_path("atomic-out");
  fs::create_directories(dir);
  const std::string report = dir + "/report.html";
  spit(report, std::string("previous report\n"));
  // Files this process writes may not exceed 2 KB: the HTML report does, so its write fails with EFBIG.
  ToolRun r = run_tool({dump_path, "--html", report}, {}, "", 2048);
  CHECK(r.exit == 1);
  CHECK(r.err.find("report.html") != std::string::npos);
  CHECK(testutil::read_file(report) == "previous report\n");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  // Without the limit it is replaced by the whole report.
  CHECK(run_tool({dump_path, "--html", report}).exit == 0);
  CHECK(testutil::read_file(report).find("<html") != std::string::npos);
}

TEST_CASE("a dump cut short after it was opened gives an error at its offset or a partial analysis, never a crash") {
  const std::string p = testutil::temp_path("shrinks.iscope");
  {
    dump::DumpBuilder b(p);
    b.set_chunk_bytes(64 << 10);
    const uint32_t t = b.thread("main");
    for (int i = 0; i < 100'000; ++i) b.range(t, "r", 0, i * 1000, i * 1000 + 500);
    b.finish();
  }
  const uint64_t size = fs::file_size(p);
  {
    dump::DumpReader r(p);
    fs::resize_file(p, size / 3);  // what a mapping would have answered with SIGBUS
    CHECK_THROWS_WITH_AS(testutil::read_all(r), doctest::Contains("cut short or replaced while being read"), dump::DumpError);
  }
  spit(p, std::vector<uint8_t>{});
  {
    dump::DumpBuilder b(p);
    b.set_chunk_bytes(64 << 10);
    const uint32_t t = b.thread("main");
    for (int i = 0; i < 100'000; ++i) b.range(t, "r", 0, i * 1000, i * 1000 + 500);
    b.finish();
  }
  dump::DumpReader r(p);
  fs::resize_file(p, size / 2);
  analyze::AnalyzeOptions o;
  o.threads = 2;
  analyze::Analysis a = analyze::analyze_dump(r, o);
  CHECK(a.partial);
  CHECK(has_warning(a, "cut short or replaced while being read"));
  CHECK(a.events > 0);
  CHECK(a.events < 100'000);
}

TEST_CASE("directories, FIFOs, devices and sockets are refused by name and kind, without blocking") {
  const std::string dir = testutil::temp_path("a-directory.iscope");
  fs::create_directories(dir);
  const std::string fifo = testutil::temp_path("a-fifo.iscope");
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string sock = testutil::temp_path("a-socket.iscope");
  fs::remove(sock);
  int sfd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(::bind(sfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const std::vector<std::pair<std::string, std::string>> cases{
      {dir, "is a directory"}, {fifo, "is a FIFO"}, {"/dev/null", "is a character device"}, {sock, "is a socket"}};
  for (auto& [path, kind] : cases) {
    CAPTURE(path);
    CHECK_THROWS_WITH_AS(dump::DumpReader{path}, doctest::Contains(doctest::String((path + ": " + kind).c_str())), dump::DumpError);
    CHECK_THROWS_WITH_AS(analyze::input_format(path), doctest::Contains(doctest::String(kind.c_str())), analyze::InputError);
    for (auto& args : std::vector<std::vector<std::string>>{{path}, {path, "--summary"}, {path, "--perfetto", testutil::temp_path("x.json")}}) {
      ToolRun r = run_tool(args);
      CHECK(r.exit == 1);  // -1 would mean it hung on the FIFO and was killed
      CHECK(r.err.find(path + ": " + kind) != std::string::npos);
      CHECK(r.err.find("empty file") == std::string::npos);
    }
  }
  ::close(sfd);
}

TEST_CASE("ids beyond what the file declares never size a table: the crafted 4.5 KB dump analyses in a few MB") {
  const auto bytes = hostile_ids_dump();
  const std::string p = testutil::temp_path("hostile-ids.iscope");
  spit(p, bytes);
  dump::DumpReader r(p);
  CHECK_FALSE(r.damage());
  // Thread ids renumbered 1..2 in their order; the code entry beyond the 2 declared is left out.
  REQUIRE(r.threads().size() == 2);
  CHECK(r.threads().rbegin()->first == 2);
  for (auto& c : r.event_chunks()) CHECK(c.thread_id <= 2);
  CHECK(r.code_table().size() == 1);
  CHECK(r.code_table().count(0x00ffffffu) == 0);
  CHECK(r.id_warnings().size() == 2);
  // Python calls naming code ids beyond the table are malformed records, named with their offset.
  CHECK_THROWS_WITH_AS(testutil::read_all(r), doctest::Contains("code id 16777215 beyond the 2 code-table entries"), dump::DumpError);
  analyze::AnalyzeOptions o;
  o.threads = 3;
  analyze::Analysis a = analyze::analyze_dump(r, o);
  CHECK(a.events == 80);
  CHECK(a.partial);
  CHECK(has_warning(a, "thread ids reach 4294967280 for 2 threads"));
  // The tool with 3 workers: its peak resident set stays near that of a small ordinary dump (it was 2.6 GB,
  // 5.2 GB with 3 workers).
  const ToolRun small = run_tool({small_dump("baseline.iscope"), "-o", testutil::temp_path("b.md")}, {"INFERSCOPE_ANALYZE_THREADS=3"});
  const ToolRun hostile = run_tool({p, "-o", testutil::temp_path("h.md")}, {"INFERSCOPE_ANALYZE_THREADS=3"});
  CHECK(small.exit == 0);
  CHECK(hostile.exit == 3);
  MESSAGE("peak RSS: ordinary ", small.maxrss_kb, " KB, hostile ", hostile.maxrss_kb, " KB");
  CHECK(hostile.maxrss_kb < small.maxrss_kb + 8 * 1024);
}

TEST_CASE("a UTF-8 BOM before a JSON trace is accepted") {
  const std::string json = testutil::read_file(std::string(INFERSCOPE_SOURCE_DIR) + "/fuzz/seeds/json/launch_bound.json");
  REQUIRE(!json.empty());
  const std::string plain = testutil::temp_path("plain.json"), bom = testutil::temp_path("bom.json");
  spit(plain, json);
  spit(bom, "\xEF\xBB\xBF" + json);
  CHECK(analyze::input_format(bom) == analyze::InputFormat::kJsonTrace);
  analyze::Analysis a = analyze::analyze_file(plain, {}), b = analyze::analyze_file(bom, {});
  CHECK(b.events == a.events);
  CHECK(b.events > 0);
  CHECK(run_tool({bom}).exit == 0);
}

TEST_CASE("settings iscope-analyze cannot use are warned about once and skipped; its own bad flags still stop it") {
  const std::string dump_path = small_dump("settings.iscope");
  const std::string dir = testutil::temp_path("settings-cwd");
  fs::create_directories(dir);
  spit(dir + "/.inferscope.yaml", std::string("trace_size: 64\nbuffer_mode: sideways\n"));
  ToolRun r = run_tool({dump_path, "-o", testutil::temp_path("s.md")},
                       {"INFERSCOPE_TRACE_SIZE_MB=lots", "INFERSCOPE_NOT_A_SETTING=1"}, dir);
  CHECK(r.exit == 0);
  size_t warnings = 0;
  for (size_t at = 0; (at = r.err.find("ignoring settings it cannot use", at)) != std::string::npos; ++at) ++warnings;
  CHECK(warnings == 1);
  CHECK(r.err.find("4 problems") != std::string::npos);
  CHECK(run_tool({dump_path, "--launch-bound-max-kernel-us", "-1"}, {}, dir).exit == 2);
}

TEST_CASE("the END chunk's counts are compared with the file: missing records and unlisted drops are reported") {
  const auto full = slurp(small_dump("end-counts.iscope", /*drops=*/true));
  const std::string p = testutil::temp_path("torn.iscope");
  {
    spit(p, full);
    analyze::Analysis a = analyze::analyze_file(p, {});
    CHECK(a.drops.count("lost_in_file") == 0);
    CHECK(a.drops.count("dropped_unlisted") == 0);
    CHECK_FALSE(has_warning(a, "END chunk"));
  }
  uint32_t lost = 0;
  spit(p, without_chunk(full, dump::ChunkType::kEvents, 1, &lost));
  REQUIRE(lost > 0);
  {
    analyze::Analysis a = analyze::analyze_file(p, {});
    CHECK(a.drops["lost_in_file"] == lost);
    CHECK(has_warning(a, std::to_string(lost) + " records are missing from the file"));
    CHECK_FALSE(a.partial);
  }
  spit(p, without_chunk(full, dump::ChunkType::kDrops, 0));
  {
    analyze::Analysis a = analyze::analyze_file(p, {});
    CHECK(a.drops["dropped_unlisted"] == 3);
    CHECK(has_warning(a, "the END chunk says 3 records were dropped but the drop table lists 0"));
  }
}

namespace {

// What is at `p` without following a link: S_IFREG, S_IFLNK, S_IFIFO, ...; 0 when nothing.
unsigned kind_at(const std::string& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

bool is_sqlite(const std::string& p) { return testutil::read_file(p).rfind("SQLite format 3", 0) == 0; }

// A parent dump (pid 100) and its child (ppid 100) in `dir`, named as the runtime names them: `parent`, and the
// child's pid before its extension (run.iscope, run.205.iscope; run.dump, run.205.dump; run, run.205).
void parent_and_child(const std::string& dir, const std::string& parent = "run.iscope",
                      const std::string& child = "run.205.iscope") {
  for (auto [name, pid, ppid] : {std::tuple{parent, "100", "1"}, std::tuple{child, "205", "100"}}) {
    dump::DumpBuilder b(dir + "/" + name);
    b.process("pid", pid);
    b.process("ppid", ppid);
    const uint32_t t = b.thread("main", 77), g = b.channel("gpu");
    for (int i = 0; i < 10; ++i) {
      const int64_t s = 1'000'000 + i * 100'000;
      b.api(t, "cudaLaunchKernel", 10 + i, s + 1'000, s + 6'000);
      b.kernel(g, "gemm", 10 + i, s + 8'000, s + 60'000);
      b.range(t, "step", 0, s, s + 90'000);
    }
    b.finish();
  }
}

}  // namespace

TEST_CASE("--sqlite never replaces a FIFO, a device node or a symlink: the rule of every output") {
  const std::string dump_path = small_dump("sqlite-targets.iscope");
  const std::string dir = testutil::temp_path("sqlite-targets");
  fs::remove_all(dir);  // each subcase runs the case from the top
  fs::create_directories(dir);
  const std::string fifo = dir + "/fifo.db", real = dir + "/real.db", link = dir + "/link.db",
                    dangling = dir + "/dangling.db", to_fifo = dir + "/to-fifo.db", to_null = dir + "/to-null.db";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  spit(real, std::string("old"));
  fs::create_symlink(real, link);
  fs::create_symlink("new.db", dangling);  // relative, to a file not yet there
  fs::create_symlink(fifo, to_fifo);
  // A character device reached through a link: if the rule were broken, the link (not /dev/null) is replaced.
  fs::create_symlink("/dev/null", to_null);

  // Refused before anything is read, as every output now is (issue 43): exit 2, and no other output written.
  SUBCASE("a FIFO, and a link to a FIFO or to a character device: refused and left alone; nothing is written") {
    for (auto& [target, kind] : std::vector<std::pair<std::string, std::string>>{
             {fifo, "a FIFO"}, {to_fifo, "a FIFO"}, {to_null, "a character device"}}) {
      CAPTURE(target);
      const unsigned before = kind_at(target);
      ToolRun r = run_tool({dump_path, "-o", dir + "/report.md", "--sqlite", target});
      CHECK(r.exit == 2);  // -1 would mean it blocked on the FIFO
      CHECK(r.err.find("--sqlite " + target + ": is " + kind) != std::string::npos);
      CHECK(kind_at(target) == before);
      CHECK(kind_at(dir + "/report.md") == 0);
    }
    CHECK(kind_at(fifo) == S_IFIFO);
    CHECK(kind_at("/dev/null") == S_IFCHR);
  }
  SUBCASE("a character device of our own (mknod as /dev/null's twin, where this user may make one)") {
    const std::string dev = dir + "/null-twin";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
      MESSAGE("SKIPPED (this subcase): cannot make a device node here (" << std::strerror(errno)
              << "); the link to /dev/null above checks the same refusal");
    } else {
      ToolRun r = run_tool({dump_path, "--sqlite", dev});
      CHECK(r.exit == 2);
      CHECK(r.err.find("--sqlite " + dev + ": is a character device") != std::string::npos);
      CHECK(kind_at(dev) == S_IFCHR);
    }
  }
  SUBCASE("through a link the file it points to is replaced; the link stays a link") {
    CHECK(run_tool({dump_path, "--sqlite", link}).exit == 0);
    CHECK(kind_at(link) == S_IFLNK);
    CHECK(is_sqlite(real));
    CHECK(run_tool({dump_path, "--sqlite", dangling}).exit == 0);
    CHECK(kind_at(dangling) == S_IFLNK);
    CHECK(is_sqlite(dir + "/new.db"));
    for (auto& e : fs::directory_iterator(dir))  // no temporary left behind
      CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  }
}

TEST_CASE("child dumps the analysis reads are inputs too: an output over one is refused with exit 2") {
  const std::string dir = testutil::temp_path("children-out");
  fs::create_directories(dir);
  parent_and_child(dir);
  const std::string parent = dir + "/run.iscope", child = dir + "/run.205.iscope";
  const auto before = slurp(child);
  fs::create_symlink(child, dir + "/child-link.json");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {parent, "--json", child},
           {parent, "--html", child},
           {parent, "--perfetto", child},
           {parent, "--sqlite", child},
           {parent, "-o", dir + "/fine.md", "--json", dir + "/child-link.json"},
           {"run.iscope", "--json", "run.205.iscope"},  // relative, from the dump's directory
       }) {
    CAPTURE(args.back());
    ToolRun r = run_tool(args, {}, dir);
    CHECK(r.exit == 2);
    CHECK(r.err.find("is the input") != std::string::npos);
    CHECK(r.err.find("a child process's dump") != std::string::npos);
    CHECK(slurp(child) == before);
    CHECK(kind_at(dir + "/child-link.json") == S_IFLNK);
  }
  CHECK_FALSE(fs::exists(dir + "/fine.md"));  // refused before the first output was written
  // The analysis still reads the child, and writes elsewhere.
  ToolRun ok = run_tool({parent, "--json", dir + "/report.json"});
  CHECK(ok.exit == 0);
  CHECK(testutil::read_file(dir + "/report.json").find("205") != std::string::npos);
}

// --summary's tables hold names from the program (ranges, Python functions, kernels, marks, threads): a '|' split a
// row into more cells and a newline began a row of its own. They are code spans now, pipes escaped, on one line,
// as the Markdown report writes them (text/escape.hpp).
TEST_CASE("--summary: hostile names stay in their cells") {
  const std::string p = testutil::temp_path("hostile-names.iscope");
  {
    dump::DumpBuilder b(p);
    const uint32_t t = b.thread("main|x\n| forged | 1 |", 7), g = b.channel("gpu");
    const uint32_t code = b.code("fn|a\nb");
    for (int i = 0; i < 4; ++i) {
      const int64_t s = 1'000'000 + i * 100'000;
      b.range(t, "step|1\n| forged | 99 |", 0, s, s + 90'000);
      b.pycall(t, code, 1, s + 1'000, s + 2'000);
      b.mark(t, "mark|`x`\r\n", s + 3'000);
      b.kernel(g, "gemm|k\n", 10 + i, s + 8'000, s + 60'000);
    }
    b.finish();
  }
  ToolRun r = run_tool({p, "--summary"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("forged") != std::string::npos);  // the names are there
  // Every table row has as many cells as its header: unescaped pipes counted per line.
  auto cells = [](const std::string& line) {
    size_t n = 0;
    for (size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    return n;
  };
  std::istringstream lines(r.out);
  size_t header = 0, rows = 0;
  for (std::string line; std::getline(lines, line);) {
    CAPTURE(line);
    if (line.rfind("|", 0) != 0) {
      header = 0;
      continue;
    }
    if (!header) {
      header = cells(line);
      continue;
    }
    CHECK(cells(line) == header);
    ++rows;
  }
  CHECK(rows >= 9);  // threads, ranges, Python functions, kernels, marks (and their separator lines)
  CHECK(r.out.find("| forged | 99 |") == std::string::npos);
}

// `iscope-run --follow-children -o run.dump` writes its children as run.<pid>.dump (dump::insert_suffix), and
// `-o run` as run.<pid>. The analyzer looked for <stem>.<pid>.iscope only: it did not find these children, and
// `--json run.<pid>.dump` overwrote one. Now children are found for any name the recorder uses, and each is an input.
TEST_CASE("children of a dump not named .iscope are found, and an output over one is refused") {
  for (auto [parent, child] : {std::pair{"run.dump", "run.205.dump"}, std::pair{"run", "run.205"},
                               std::pair{"a.b.trace", "a.b.205.trace"}}) {
    CAPTURE(parent);
    const std::string dir = testutil::temp_path(std::string("children-named-") + parent);
    fs::create_directories(dir);
    parent_and_child(dir, parent, child);
    const auto before = slurp(dir + "/" + child);
    ToolRun over = run_tool({parent, "--json", child}, {}, dir);
    CHECK(over.exit == 2);
    CHECK(over.err.find("a child process's dump") != std::string::npos);
    CHECK(slurp(dir + "/" + child) == before);
    ToolRun ok = run_tool({dir + "/" + parent, "--json", dir + "/report.json"});
    CHECK(ok.exit == 0);
    CHECK(testutil::read_file(dir + "/report.json").find(child) != std::string::npos);  // listed as a child
  }
}

// A file beside a parent named like its child (s7.66666.iscope) is not a child because of its name: the dump must
// say it is one (ppid the parent's pid, pid the one in its name, the parent's host, a session started after the
// parent's), and a file that cannot be read is listed only when the parent's dump names that pid among its
// children (the system collector's child.<pid>.* process info).
TEST_CASE("only the children a parent's dump records are its children; a stray file named like one is not") {
  const std::string dir = testutil::temp_path("stray-children");
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::vector<std::pair<std::string, std::string>>& info) {
    dump::DumpBuilder b(dir + "/" + name);
    for (auto& [k, v] : info) b.process(k, v);
    const uint32_t t = b.thread("main", 7);
    for (int i = 0; i < 5; ++i) b.range(t, "step", 0, 1'000'000 + i * 100'000, 1'090'000 + i * 100'000);
    b.finish();
  };
  const std::string later = "1700000000000000000", earlier = "1600000000000000000";
  write("s7.iscope", {{"pid", "100"}, {"ppid", "1"}, {"hostname", "h"}, {"start_realtime_ns", "1650000000000000000"},
                      {"child.301.name", "worker"}});
  write("s7.205.iscope", {{"pid", "205"}, {"ppid", "100"}, {"hostname", "h"}, {"start_realtime_ns", later}});  // a child
  write("s7.66666.iscope", {{"pid", "205"}, {"ppid", "100"}, {"hostname", "h"}, {"start_realtime_ns", later}});  // a copy
  write("s7.207.iscope", {{"pid", "207"}, {"ppid", "100"}, {"hostname", "h"}, {"start_realtime_ns", earlier}});  // older
  write("s7.208.iscope", {{"pid", "208"}, {"ppid", "100"}, {"hostname", "other"}, {"start_realtime_ns", later}});
  spit(dir + "/s7.300.iscope", std::string("not a dump"));  // unreadable, not named by the parent
  spit(dir + "/s7.301.iscope", std::string("not a dump"));  // unreadable, a child the parent's dump names
  analyze::AnalyzeOptions o;
  const analyze::Analysis parent = analyze::analyze_file(dir + "/s7.iscope", o);
  std::vector<uint64_t> pids;
  for (const auto& c : analyze::find_children(dir + "/s7.iscope", parent, o)) pids.push_back(c.pid);
  CHECK(pids == std::vector<uint64_t>{205, 301});
  // The tool reports the same.
  ToolRun r = run_tool({dir + "/s7.iscope", "--json", dir + "/r.json"});
  CHECK(r.exit == 0);
  const std::string json = testutil::read_file(dir + "/r.json");
  CHECK(json.find("s7.205.iscope") != std::string::npos);
  for (const char* stray : {"s7.66666.iscope", "s7.207.iscope", "s7.208.iscope", "s7.300.iscope"}) {
    CAPTURE(stray);
    CHECK(json.find(stray) == std::string::npos);
  }
}

// With few descriptors left, --sqlite could not open the dump a second time: the InputError escaped main and ended
// iscope-analyze by std::terminate (exit 134 under `ulimit -n 4`). Any limit must end in a result or a message.
TEST_CASE("under any limit on open files the tools end with their result or a message, never a signal") {
  const std::string d = small_dump("nofile.iscope");
  const std::string md = testutil::temp_path("nofile.md"), db = testutil::temp_path("nofile.db");
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs{
      {"tools/iscope-analyze/iscope-analyze", {d, "-o", md, "--sqlite", db, "--json", md + ".json"}},
      {"tools/iscope-analyze/iscope-analyze", {d, "--summary"}},
      {"tools/iscope-diff/iscope-diff", {d, d, "-o", md}},
      {"tools/iscope-config/iscope-config", {"show"}}};
  for (long n = 3; n <= 16; ++n) {
    CAPTURE(n);
    testutil::ToolLimits lim;
    lim.nofile = n;
    for (const auto& [tool, args] : runs) {
      CAPTURE(tool);
      fs::remove(db);
      const testutil::ToolRun r = testutil::run_tool(tool, args, lim);
      CAPTURE(r.err);
      CHECK(r.exit >= 0);  // -1: ended by a signal
      if (r.exit != 0) CHECK_FALSE(r.err.empty());
    }
  }
}
