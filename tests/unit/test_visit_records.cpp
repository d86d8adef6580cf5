// dump::visit_records (lib/dump/visit.hpp): every record kind reaches its handler decoded, with its thread,
// header and bytes; a malformed record stops the visit with a DumpError naming the file and its offset after the
// records before it were handed over; pads and unknown kinds are skipped, unknown kinds counted.
#include <doctest/doctest.h>

#include "test_util.hpp"

#include "dump/builder.hpp"
#include "dump/visit.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace inferscope;

namespace {

// Every kind a reader knows: RecordKind's values with a fixed size, pads aside.
std::vector<RecordKind> known_kinds() {
  std::vector<RecordKind> out;
  for (int k = 1; k < 256; ++k)
    if (fixed_record_size(RecordKind(k)) != 0) out.push_back(RecordKind(k));
  return out;
}

// Records which struct each kind was decoded as, by its size.
struct EveryKind {
  std::map<RecordKind, size_t> decoded_as;
  void on(const auto& rec, const dump::RecordContext& cx) { decoded_as[cx.kind()] = sizeof(rec); }
};

// One handler per struct, each keeping a field that only a correct decoding gives.
struct Fields {
  const dump::DumpReader& r;
  std::vector<std::string> seen;
  void on(const RangeRecord& x, const dump::RecordContext& cx) {
    seen.push_back((cx.kind() == RecordKind::kNvtxRange ? "nvtx " : "range ") + r.string_at(x.name) + " depth " +
                   std::to_string(cx.aux()));
  }
  void on(const MarkRecord& x, const dump::RecordContext&) { seen.push_back("mark " + r.string_at(x.name)); }
  void on(const PyCallRecord& x, const dump::RecordContext&) {
    seen.push_back("py " + r.code_table().at(x.code).qualname);
  }
  void on(const AsyncRangeRecord& x, const dump::RecordContext&) { seen.push_back("async " + std::to_string(x.id)); }
  void on(const CudaApiRecord& x, const dump::RecordContext&) {
    seen.push_back("api " + std::to_string(x.correlation));
  }
  void on(const GpuKernelRecord& x, const dump::RecordContext&) {
    seen.push_back("kernel " + std::to_string(x.stream));
  }
  void on(const GpuMemcpyRecord& x, const dump::RecordContext& cx) {
    seen.push_back("memcpy " + std::to_string(x.bytes) + " " + copy_direction_name(CopyKind(cx.aux())));
  }
  void on(const GpuMemsetRecord& x, const dump::RecordContext&) { seen.push_back("memset " + std::to_string(x.bytes)); }
  void on(const GpuSyncRecord& x, const dump::RecordContext&) { seen.push_back("sync " + std::to_string(x.stream)); }
  void on(const GpuMemoryRecord& x, const dump::RecordContext&) {
    seen.push_back("memory " + std::to_string(x.address));
  }
  void on(const ClockCheckRecord& x, const dump::RecordContext&) {
    seen.push_back("clock " + std::to_string(x.gpu_ts > x.cpu_before));
  }
  void on(const CounterRecord& x, const dump::RecordContext&) {
    seen.push_back("counter " + r.string_at(x.name) + " " + std::to_string(x.value.i));
  }
};

// Every record's thread, and the attributes of those that carry some.
struct Where {
  const dump::DumpReader& r;
  std::vector<uint32_t> threads;
  std::vector<std::vector<dump::Attr>> attrs;
  void on(const auto&, const dump::RecordContext& cx) {
    threads.push_back(cx.thread);
    if (cx.has_attributes()) attrs.push_back(r.attributes(cx.bytes));
  }
};

// Only marks: the other kinds are passed over.
struct Marks {
  std::vector<uint32_t> names;
  void on(const MarkRecord& m, const dump::RecordContext&) { names.push_back(m.name); }
};

// A visitor whose handler takes the record without const: it would see nothing, so visit_records refuses it.
struct NonConstHandler {
  void on(RangeRecord&, const dump::RecordContext&) {}
};
static_assert(!dump::visit_detail::kHandlesAny<NonConstHandler>);
static_assert(dump::visit_detail::kHandlesAny<Marks>);

template <class T>
void put(dump::DumpBuilder& b, uint32_t t, T rec) {
  b.raw(t, &rec, sizeof(rec));
}

}  // namespace

TEST_CASE("every kind a reader knows reaches the visitor as the struct of its size") {
  const std::string path = testutil::temp_path("visit_every_kind.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t t = b.thread("main");
    for (RecordKind k : known_kinds()) {
      std::vector<uint8_t> rec(fixed_record_size(k), 0);
      const RecordHeader h{k, 0, fixed_record_size(k)};
      std::memcpy(rec.data(), &h, sizeof(h));
      b.raw(t, rec.data(), rec.size());
    }
    b.finish();
  }
  dump::DumpReader r(path);
  EveryKind v;
  dump::VisitTally tally;
  dump::visit_records(r, v, &tally);
  CHECK(tally.records == known_kinds().size());
  CHECK(tally.unknown == 0);
  for (RecordKind k : known_kinds()) {
    CAPTURE(int(k));
    REQUIRE(v.decoded_as.count(k) == 1);
    CHECK(v.decoded_as[k] == fixed_record_size(k));
  }
}

TEST_CASE("each record's fields, thread and header arrive decoded; attributes are read through its bytes") {
  const std::string path = testutil::temp_path("visit_fields.iscope");
  uint32_t main = 0, gpu = 0;
  {
    dump::DumpBuilder b(path);
    main = b.thread("main");
    gpu = b.channel("gpu");
    const uint32_t code = b.code("Model.forward");
    b.api(main, "cudaLaunchKernel", 42, 100, 200);
    b.pycall(main, code, 2, 90, 300);
    b.range(main, "layer", 1, 80, 400, {{"layer", 1}});
    b.range(main, "push", 3, 410, 420, {}, RecordKind::kNvtxRange);
    b.mark(main, "tick", 430);
    b.async_range(main, "request", 9, 50, 500, main, main);
    b.kernel(gpu, "gemm", 42, 210, 290, /*stream=*/5);
    b.memcpy(gpu, CopyKind::kDtoH, 4096, 43, 300, 310);
    b.memset(gpu, 512, 44, 320, 330);
    b.sync(gpu, SyncKind::kStreamSynchronize, 45, 340, 350, /*stream=*/5);
    b.memory(gpu, true, 64, 46, 360, /*address=*/0xbeef);
    b.clock_check(gpu, 10, 20, 30);
    b.counter(gpu, "mem.rss_bytes", CounterScope::kProcess, 0, 370, 123456);
    b.finish();
  }
  dump::DumpReader r(path);
  Fields v{r, {}};
  Where where{r, {}, {}};
  dump::visit_records(r, v);
  dump::visit_records(r, where);
  const auto& threads = where.threads;
  const auto& attrs = where.attrs;
  CHECK(v.seen == std::vector<std::string>{"api 42", "py Model.forward", "range layer depth 1", "nvtx push depth 3",
                                           "mark tick", "async 9", "kernel 5", "memcpy 4096 d2h", "memset 512",
                                           "sync 5", "memory 48879", "clock 1", "counter mem.rss_bytes 123456"});
  CHECK(threads == std::vector<uint32_t>{main, main, main, main, main, main, gpu, gpu, gpu, gpu, gpu, gpu, gpu});
  REQUIRE(attrs.size() == 1);
  REQUIRE(attrs[0].size() == 1);
  CHECK(attrs[0][0].key == "layer");
}

TEST_CASE("a record that runs past its chunk stops the visit with a DumpError naming the file and its offset") {
  const std::string path = testutil::temp_path("visit_truncated.iscope");
  uint32_t t = 0, mark = 0;
  {
    dump::DumpBuilder b(path);
    t = b.thread("main");
    b.mark(t, "before", 10);
    mark = b.str("before");
    RangeRecord bad{{RecordKind::kRange, 0, 200}, b.str("cut"), b.ticks(20), b.ticks(30)};  // 200 > the 24 left
    put(b, t, bad);
    b.finish();
  }
  dump::DumpReader r(path);
  REQUIRE(r.event_chunks().size() == 1);
  const uint64_t at = r.event_chunks()[0].offset + sizeof(MarkRecord);  // the bad record follows the mark
  Marks v;
  dump::VisitTally tally;
  try {
    dump::visit_records(r, v, &tally);
    FAIL("no error");
  } catch (const dump::DumpError& e) {
    CHECK(e.offset() == at);
    CHECK(std::string(e.what()) == path + ": offset " + std::to_string(at) + ": record size out of bounds");
  }
  CHECK(v.names == std::vector<uint32_t>{mark});  // what came before was handed over
  CHECK(tally.records == 1);
}

TEST_CASE("a record shorter than its kind is an error at its offset, not a read past its end") {
  const std::string path = testutil::temp_path("visit_short.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t t = b.thread("main");
    MarkRecord m{{RecordKind::kRange, 0, sizeof(MarkRecord)}, b.str("short"), b.ticks(10)};  // a range needs 24
    put(b, t, m);
    b.finish();
  }
  dump::DumpReader r(path);
  Marks v;
  const uint64_t at = r.event_chunks().at(0).offset;
  CHECK_THROWS_WITH_AS(dump::visit_records(r, v),
                       (path + ": offset " + std::to_string(at) + ": record shorter than its kind").c_str(),
                       dump::DumpError);
}

TEST_CASE("pads and unknown kinds are skipped by their size; unknown kinds are counted") {
  const std::string path = testutil::temp_path("visit_unknown.iscope");
  std::vector<uint32_t> want;
  {
    dump::DumpBuilder b(path);
    const uint32_t t = b.thread("main");
    auto unknown = [&](uint8_t kind, uint16_t size) {
      std::vector<uint8_t> rec(size, 0xab);  // bytes that would not decode as anything
      const RecordHeader h{RecordKind(kind), 0, size};
      std::memcpy(rec.data(), &h, sizeof(h));
      b.raw(t, rec.data(), rec.size());
    };
    b.mark(t, "a", 10);
    unknown(99, 12);
    unknown(200, 64);
    uint8_t pad[8] = {};  // kind 0, with a body: the filler at the end of a ring segment
    pad[2] = sizeof(pad);
    b.raw(t, pad, sizeof(pad));
    b.mark(t, "b", 20);
    unknown(11, 4);  // a kind just past today's host kinds (python_elided is 10), header only
    b.mark(t, "c", 30);
    want = {b.str("a"), b.str("b"), b.str("c")};
    b.finish();
  }
  dump::DumpReader r(path);
  Marks v;
  dump::VisitTally tally;
  dump::visit_records(r, v, &tally);
  CHECK(v.names == want);
  CHECK(tally.records == 3);
  CHECK(tally.unknown == 3);  // the pad is not a kind unknown to the reader
}
