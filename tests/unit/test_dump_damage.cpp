// Dumps cut short, corrupted, foreign or from the future: the reader says what is wrong and where, keeps
// what is whole, and never crashes.
#include <doctest/doctest.h>

#include "test_util.hpp"

#include <inferscope/scope.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <chrono>
#include <random>
#include <thread>

using namespace inferscope;

namespace {

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& p, const std::vector<uint8_t>& b, size_t n) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
}

// A dump with several event chunks: the writer drains every millisecond while we record.
const std::string& sample_dump() {
  static const std::string path = [] {
    Config cfg;
    cfg.output = testutil::temp_path("damage-src.iscope");
    cfg.flush_period_ms = 1;
    cfg.cupti = cfg.system = cfg.python = false;
    REQUIRE(start(cfg));
    for (int i = 0; i < 3000; ++i) {
      ISCOPE_RANGE("piece");
      if (i % 300 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    REQUIRE(stop());
    return cfg.output;
  }();
  return path;
}

// Offsets of every chunk boundary.
std::vector<size_t> chunk_offsets(const std::vector<uint8_t>& b) {
  std::vector<size_t> offs;
  size_t off = sizeof(dump::FileHeader);
  while (off + sizeof(dump::ChunkHeader) <= b.size()) {
    offs.push_back(off);
    dump::ChunkHeader h;
    std::memcpy(&h, b.data() + off, sizeof(h));
    off += sizeof(h) + h.length;
  }
  return offs;
}

}  // namespace

TEST_CASE("a dump cut at any point reads up to its last whole chunk and says how much was lost") {
  auto full = slurp(sample_dump());
  auto offs = chunk_offsets(full);
  REQUIRE(offs.size() > 6);
  dump::DumpReader whole(sample_dump());
  const uint64_t all = testutil::read_all(whole).ranges.size();
  REQUIRE(all == 3000);
  std::string cut = testutil::temp_path("cut.iscope");
  uint64_t prev = 0;
  for (size_t k = 1; k < offs.size(); ++k) {
    for (size_t delta : {size_t(0), size_t(1), size_t(23), size_t(40)}) {
      size_t n = offs[k] + delta;
      if (n >= full.size()) continue;
      CAPTURE(n);
      spit(cut, full, n);
      dump::DumpReader r(cut);
      CHECK_FALSE(r.complete());
      uint64_t got = testutil::read_all(r).ranges.size();
      CHECK(got <= all);
      if (delta == 0) {
        CHECK_FALSE(r.damage());  // ends exactly on a boundary: nothing partial, just no END chunk
        CHECK(got >= prev);
        prev = got;
      } else {
        REQUIRE(r.damage());
        CHECK(r.damage()->truncated);
        // The damage starts at the chunk the cut falls in.
        size_t chunk = *std::prev(std::upper_bound(offs.begin(), offs.end(), n));
        CHECK(r.damage()->offset == chunk);
        CHECK(r.damage()->bytes_lost == n - chunk);
        CHECK(r.damage()->message.find(cut) != std::string::npos);
      }
    }
  }
}

TEST_CASE("corrupt bytes are reported as corruption with their chunk's offset, never a crash") {
  auto full = slurp(sample_dump());
  std::string bad = testutil::temp_path("corrupt.iscope");
  std::mt19937 rng(42);
  int detected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto b = full;
    size_t pos = sizeof(dump::FileHeader) + rng() % (b.size() - sizeof(dump::FileHeader));
    b[pos] ^= static_cast<uint8_t>(1 + rng() % 255);
    spit(bad, b, b.size());
    try {
      dump::DumpReader r(bad);
      testutil::read_all(r);
      if (r.damage()) {
        ++detected;
        CHECK(r.damage()->offset <= pos);
      }
    } catch (const dump::DumpError& e) {
      ++detected;
      CHECK(std::string(e.what()).find(bad) != std::string::npos);
    }
  }
  CHECK(detected == 300);  // CRC-32C catches every single-byte change
}

TEST_CASE("empty, foreign and future files are refused with a clear message") {
  std::string p = testutil::temp_path("empty.iscope");
  spit(p, {}, 0);
  CHECK_THROWS_WITH_AS(dump::DumpReader{p}, doctest::Contains("empty file"), dump::DumpError);
  std::vector<uint8_t> text{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!', '!'};
  spit(p, text, text.size());
  CHECK_THROWS_WITH_AS(dump::DumpReader{p}, doctest::Contains("not an InferScope dump"), dump::DumpError);
  auto b = slurp(sample_dump());
  b[8] = 99;  // major version 99
  spit(p, b, b.size());
  const std::string future = "version 99." + std::to_string(dump::kVersionMinor) + " is not supported";
  CHECK_THROWS_WITH_AS(dump::DumpReader{p}, doctest::Contains(future.c_str()), dump::DumpError);
  CHECK_THROWS_WITH_AS(dump::DumpReader{"/no/such/file.iscope"}, doctest::Contains("cannot open"), dump::DumpError);
}

TEST_CASE("a record whose size lies is reported at its offset") {
  // Hand-built dump: one events chunk holding a range whose size field claims more than the chunk has.
  std::vector<uint8_t> out;
  auto fh = dump::make_file_header();
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  dump::ChunkBuilder b(dump::ChunkType::kEvents);
  dump::EventsHeader eh{1, 0};
  b.append(&eh, sizeof(eh));
  RangeRecord rec{{RecordKind::kRange, 0, 200}, 1, 10, 20};
  b.append(&rec, sizeof(rec));
  b.add_count(1);
  b.finish_into(out);
  std::string p = testutil::temp_path("liar.iscope");
  spit(p, out, out.size());
  dump::DumpReader r(p);
  const uint64_t rec_off = sizeof(fh) + sizeof(dump::ChunkHeader) + sizeof(eh);
  CHECK_THROWS_WITH_AS(testutil::read_all(r), doctest::Contains(doctest::String(("offset " + std::to_string(rec_off)).c_str())), dump::DumpError);
}

TEST_CASE("iscope-analyze exits non-zero with the file named for bad input, zero for a dump cut short") {
  auto tool = testutil::binary("tools/iscope-analyze/iscope-analyze");
  auto run = [&](const std::string& file) {
    pid_t pid = testutil::spawn({tool, file, "--summary"}, {});
    int st = testutil::wait_status(pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string p = testutil::temp_path("tool-bad.iscope");
  spit(p, {'x'}, 1);
  CHECK(run(p) == 1);
  CHECK(run("/no/such.iscope") == 1);
  auto full = slurp(sample_dump());
  auto offs = chunk_offsets(full);
  // The EVENTS chunks (the default mode writes its windows after the tables, in a snapshot at stop).
  std::vector<size_t> events;
  for (size_t off : offs) {
    dump::ChunkHeader h;
    std::memcpy(&h, full.data() + off, sizeof(h));
    if (h.type == static_cast<uint32_t>(dump::ChunkType::kEvents)) events.push_back(off);
  }
  REQUIRE(!events.empty());
  const auto after_events = std::upper_bound(offs.begin(), offs.end(), events.back());
  REQUIRE(after_events != offs.end());
  spit(p, full, offs.back() + 7);  // cut in the END chunk: every record is there
  CHECK(run(p) == 0);
  spit(p, full, events.front() + 7);  // cut before the first record: nothing to describe as a run (issue 43)
  CHECK(run(p) == 1);
  auto b = full;
  b[*after_events + sizeof(dump::ChunkHeader) + 2] ^= 0xff;  // damage after the records: they are read
  spit(p, b, b.size());
  CHECK(run(p) == 3);
  CHECK(run(sample_dump()) == 0);
}

// A chunk whose checksums hold but whose contents contradict its header (issue 25, item 10): a 2-byte EVENTS
// chunk, a STRINGS chunk counting more entries than it holds, a thread table whose length is not its count of
// entries. Such a chunk used to reject the whole dump (exit 1); now it alone is skipped, named with its offset,
// and the rest is read and analysed (exit 3: partial).
namespace {

std::vector<uint8_t> inconsistent_chunk(const std::string& kind) {
  if (kind == "2-byte events") {
    dump::ChunkBuilder b(dump::ChunkType::kEvents);
    const uint8_t two[2] = {1, 0};
    b.append(two, sizeof(two));
    return b.finish();
  }
  if (kind == "strings count above its entries") {
    dump::ChunkBuilder b(dump::ChunkType::kStrings);
    b.add_string(1, "piece");
    b.add_count(4);  // says 5, holds 1
    return b.finish();
  }
  dump::ChunkBuilder b(dump::ChunkType::kThreads);  // 3 bytes: not a whole number of entries
  const uint8_t three[3] = {1, 2, 3};
  b.append(three, sizeof(three));
  b.add_count(1);
  return b.finish();
}

int analyze_exit(const std::vector<std::string>& args) {
  std::vector<std::string> argv{testutil::binary("tools/iscope-analyze/iscope-analyze")};
  argv.insert(argv.end(), args.begin(), args.end());
  const int st = testutil::wait_status(testutil::spawn(argv, {}));
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("one well-formed but inconsistent chunk is skipped, named by its offset; the rest is analysed with exit 3") {
  const auto full = slurp(sample_dump());
  const auto offs = chunk_offsets(full);
  const size_t all_pieces = testutil::read_all(dump::DumpReader(sample_dump())).ranges.size();
  REQUIRE(all_pieces == 3000);
  for (const std::string kind : {"2-byte events", "strings count above its entries", "thread table of 3 bytes"}) {
    CAPTURE(kind);
    const size_t at = offs[offs.size() / 2];  // between two whole chunks
    auto b = full;
    const auto bad = inconsistent_chunk(kind);
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), bad.begin(), bad.end());
    const std::string p = testutil::temp_path("inconsistent.iscope");
    spit(p, b, b.size());

    std::unique_ptr<dump::DumpReader> r;
    REQUIRE_NOTHROW(r = std::make_unique<dump::DumpReader>(p));
    REQUIRE(r->skipped_chunks().size() == 1);
    CHECK(r->skipped_chunks()[0].find(p + ": offset ") == 0);
    CHECK(testutil::read_all(*r).ranges.size() == all_pieces);  // every other chunk was read
    CHECK(analyze_exit({p, "--summary"}) == 3);
    const std::string report = testutil::temp_path("inconsistent.md");
    std::filesystem::remove(report);
    CHECK(analyze_exit({p, "-o", report}) == 3);
    CHECK(std::filesystem::exists(report));
  }
}
