// lib/import: a JSON trace becomes the dump's records in memory, read by the same DumpReader as a file, without a
// temporary file; the importers' warnings are typed and name the file only when rendered.
#include "dump/builder.hpp"
#include "dump/reader.hpp"
#include "dump/visit.hpp"
#include "import/import.hpp"
#include "import/trace_text.hpp"
#include "import/warnings.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

// A directory of its own under the system's temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("iscope-test-import-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The same records built into a file and into memory.
template <class F>
void build_both(const fs::path& file, std::string& bytes, F&& records) {
  {
    dump::DumpBuilder b(file.string());
    records(b);
    b.finish();
  }
  dump::DumpBuilder m{dump::DumpBuilder::InMemory{}};
  records(m);
  m.finish();
  bytes = m.take_bytes();
}

void some_records(dump::DumpBuilder& b) {
  const uint32_t t = b.thread("main", 7), gpu = b.channel("GPU 0");
  b.process("source", "x.json");
  b.api(t, "cudaLaunchKernel", 3, 100, 110);
  b.range(t, "step", 0, 0, 1000, {{"step", int64_t(1)}});
  b.kernel(gpu, "gemm", 3, 120, 900);
}

size_t records_in(const dump::DumpReader& r) {
  size_t n = 0;
  r.for_each_record([&](uint32_t, const RecordHeader&, const uint8_t*) { ++n; });
  return n;
}

}  // namespace

TEST_CASE("import: a dump built in memory has the bytes of the same dump built into a file") {
  TempDir d;
  std::string bytes;
  build_both(d.path / "a.iscope", bytes, some_records);
  CHECK(bytes == testsupport::read(d.path / "a.iscope"));
}

TEST_CASE("import: a dump read from memory reads as its file does, named as given, and is no file") {
  TempDir d;
  std::string bytes;
  build_both(d.path / "a.iscope", bytes, some_records);
  dump::DumpReader file((d.path / "a.iscope").string());
  dump::DumpReader mem(dump::DumpReader::InMemory{"trace.json", bytes});
  CHECK(mem.path() == "trace.json");
  CHECK(file.is_file());
  CHECK_FALSE(mem.is_file());
  CHECK(mem.complete());
  CHECK(mem.file_size() == file.file_size());
  CHECK(mem.process_value("source") == "x.json");
  CHECK(mem.threads().size() == file.threads().size());
  CHECK(records_in(mem) == 3);
  CHECK(records_in(mem) == records_in(file));
}

TEST_CASE("import: a dump in memory cut short is damage at its offset, named by the name given") {
  std::string bytes;
  TempDir d;
  build_both(d.path / "a.iscope", bytes, some_records);
  bytes.resize(bytes.size() - 5);
  dump::DumpReader mem(dump::DumpReader::InMemory{"cut.json", bytes});
  REQUIRE(mem.damage());
  CHECK(mem.damage()->truncated);
  CHECK(mem.damage()->message.rfind("cut.json: offset ", 0) == 0);
  CHECK_THROWS_AS(dump::DumpReader(dump::DumpReader::InMemory{"empty.json", ""}), dump::DumpError);
}

TEST_CASE("import: the seeds' JSON events become records in memory, and no temporary file is made") {
  TempDir d;
  const fs::path trace = d.path / "events.json";
  testsupport::write(trace, R"([{"event_type": "cpu_call", "name": "step", "start_us": 1.5, "end_us": 10, "thread_id": 2},
    {"event_type": "gpu_kernel", "name": "k", "start_us": 2, "end_us": 3.25, "correlation_id": 9},
    {"event_type": "teleport", "name": "x", "start_us": 2, "end_us": 3}])");
  const fs::path tmp = d.path / "tmp";
  fs::create_directories(tmp);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  import::Input in = import::open_input(trace.string());
  if (before) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  CHECK(fs::is_empty(tmp));
  CHECK(in.format == import::InputFormat::kJsonTrace);
  REQUIRE(in.reader);
  CHECK_FALSE(in.reader->is_file());
  CHECK(in.reader->path() == trace.string());
  CHECK(in.reader->process_value("source_format") == "json");
  CHECK(in.reader->process_value("source") == trace.string());
  CHECK(records_in(*in.reader) == 2);
  REQUIRE(in.warnings.size() == 1);
  CHECK(in.warnings[0].issue == import::ImportIssue::kUnknownEventType);
  CHECK(in.warnings[0].count == 1);
  CHECK(in.warnings[0].name == "teleport");
  CHECK(import::message(in.warnings[0], "t.json") == "t.json: 1 event(s) of unknown type 'teleport' were skipped");
}

TEST_CASE("import: a torch.profiler trace is imported with its typed warnings; a dump is opened from its file") {
  const fs::path kineto = testsupport::fixtures() / "kineto_sync_bound.json";
  import::Input in = import::open_input(kineto.string());
  REQUIRE(in.reader);
  CHECK(in.reader->process_value("source_format") == "kineto");
  CHECK(records_in(*in.reader) > 0);
  REQUIRE_FALSE(in.warnings.empty());
  CHECK(in.warnings.front().issue == import::ImportIssue::kNoHostCounters);
  CHECK(import::message(in.warnings.front(), "k.json").rfind("k.json: a torch.profiler (Kineto) trace records no per-thread CPU time", 0) == 0);

  const fs::path dump = testsupport::fixtures() / "real_io_wait.iscope";
  import::Input d = import::open_input(dump.string());
  CHECK(d.format == import::InputFormat::kDump);
  CHECK(d.reader->is_file());
  CHECK(d.warnings.empty());
}

TEST_CASE("import: bad traces are InputErrors naming the file and the place") {
  TempDir d;
  const fs::path bad = d.path / "bad.json";
  testsupport::write(bad, "{\"events\": [\n  {\"event_type\": \"mark\"}\n]}");
  CHECK_THROWS_WITH_AS(import::import_json_trace(bad.string()),
                       doctest::Contains(doctest::String((bad.string() + ": event 0: missing field 'name'").c_str())),
                       import::InputError);
  testsupport::write(bad, "{\"events\": [1,");
  CHECK_THROWS_WITH_AS(import::import_json_trace(bad.string()), doctest::Contains("JSON syntax error at line 1"),
                       import::InputError);
  testsupport::write(bad, "plain text");
  CHECK_THROWS_AS(import::input_format(bad.string()), import::InputError);
}

TEST_CASE("import: every warning renders naming the file, with its figures") {
  using import::ImportIssue;
  auto msg = [](import::ImportWarning w) { return import::message(w, "p"); };
  CHECK(msg({ImportIssue::kNoEvents}) == "p: the trace holds no events");
  CHECK(msg({ImportIssue::kHostMemoryKindUnknown, 2, 5}).rfind("p: 2 of 5 host copies do not say", 0) == 0);
  CHECK(msg({ImportIssue::kCopyDirectionUnknown, 3}) == "p: 3 copies name no direction (HtoD, DtoH, ...): counted as unknown");
  CHECK(msg({ImportIssue::kGpuAnnotationsSkipped, 4}).rfind("p: 4 GPU-side annotation(s) (gpu_user_annotation) were skipped", 0) == 0);
  CHECK(msg({ImportIssue::kUncorrelatedGpuWork, 6}).rfind("p: 6 GPU activities carry no correlation id", 0) == 0);
  CHECK(msg({ImportIssue::kNegativeDuration, 1}) == "p: 1 event(s) with a negative duration were kept as instants");
  import::ImportWarning s{ImportIssue::kCategoriesSkipped};
  s.skipped = {{"counter", 2}, {"ac2g", 1}};
  CHECK(msg(s) == "p: events of categories not analysed were skipped: counter x2, ac2g x1");
  s.from_perfetto_export = true;
  CHECK(msg(s).ends_with(" (analyse the dump itself for counters, allocations and GPU syncs)"));
}

TEST_CASE("import: the gunzip limit is 64 times the compressed size, at least 256 MiB") {
  CHECK(import::gunzip_limit(1000) == import::kGunzipFloorBytes);
  CHECK(import::gunzip_limit(uint64_t(1) << 30) == (uint64_t(1) << 30) * 64);
}
