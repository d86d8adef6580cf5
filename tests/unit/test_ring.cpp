// The single-producer ring on its own: wrap, padding, full-ring drops, and a consumer racing a producer.
#include <doctest/doctest.h>

#include <inferscope/internal/hot_path.hpp>

#include <thread>
#include <vector>

using namespace inferscope;
using detail::ThreadRing;

namespace {

struct TestRing {
  std::vector<uint8_t> buf;
  ThreadRing r;
  explicit TestRing(uint64_t cap) : buf(cap) {
    r.data = buf.data();
    r.capacity = cap;
    r.mask = cap - 1;
  }
  bool put(uint32_t id, uint32_t size = sizeof(RangeRecord)) {
    uint8_t* p = detail::ring_reserve(&r, size);
    if (!p) return false;
    RangeRecord rec{{RecordKind::kRange, 0, static_cast<uint16_t>(size)}, id, id, id + 1};
    std::memset(p, 0, size);
    std::memcpy(p, &rec, sizeof(rec));
    detail::ring_commit(&r, size);
    return true;
  }
  // Consumer: everything published since tail, in order; pads skipped.
  std::vector<uint32_t> take() {
    std::vector<uint32_t> ids;
    uint64_t pub = r.published.load(std::memory_order_acquire);
    uint64_t pos = r.tail.load();
    while (pos < pub) {
      const uint8_t* p = r.data + (pos & r.mask);
      RecordHeader h;
      std::memcpy(&h, p, sizeof(h));
      REQUIRE(h.size >= 4);
      if (h.kind == RecordKind::kRange) {
        RangeRecord rec;
        std::memcpy(&rec, p, sizeof(rec));
        ids.push_back(rec.name);
      }
      pos += h.size;
    }
    r.tail.store(pub, std::memory_order_release);
    return ids;
  }
};

}  // namespace

TEST_CASE("a record that does not fit before the end wraps behind a pad") {
  TestRing t(256);  // 10 records of 24 bytes fill 240; the 11th would straddle the end
  for (uint32_t i = 0; i < 10; ++i) REQUIRE(t.put(i));
  CHECK(t.take().size() == 10);
  REQUIRE(t.put(10));  // 16 bytes left at the end: a pad, then the record at offset 0
  CHECK(t.r.head == 256 + 24);
  RecordHeader pad;
  std::memcpy(&pad, t.buf.data() + 240, sizeof(pad));
  CHECK(pad.kind == RecordKind::kPad);
  CHECK(pad.size == 16);
  auto ids = t.take();
  REQUIRE(ids.size() == 1);
  CHECK(ids[0] == 10);
}

TEST_CASE("a full ring drops and counts exactly, and recovers once drained") {
  TestRing t(256);
  uint32_t ok = 0, dropped = 0;
  for (uint32_t i = 0; i < 25; ++i) (t.put(i) ? ok : dropped)++;
  CHECK(ok == 10);
  CHECK(dropped == 15);
  CHECK(t.r.dropped_records.load() == 15);
  CHECK(t.r.dropped_bytes.load() == 15 * sizeof(RangeRecord));
  auto ids = t.take();
  REQUIRE(ids.size() == 10);
  for (uint32_t i = 0; i < 10; ++i) CHECK(ids[i] == i);
  CHECK(t.put(99));
}

TEST_CASE("records of mixed sizes survive many wraps in order") {
  TestRing t(1024);
  uint32_t next = 0, expect = 0;
  for (int round = 0; round < 500; ++round) {
    for (int k = 0; k < 7; ++k) REQUIRE(t.put(next++, k % 2 ? 24 : 88));
    for (uint32_t id : t.take()) CHECK(id == expect++);
  }
  CHECK(expect == next);
  CHECK(t.r.dropped_records.load() == 0);
}

TEST_CASE("producer and consumer on two threads: every record is either delivered once or counted as dropped") {
  TestRing t(4096);
  constexpr uint32_t kN = 200000;
  std::atomic<bool> done{false};
  std::vector<uint32_t> got;
  std::thread consumer([&] {
    while (!done.load()) {
      auto ids = t.take();
      got.insert(got.end(), ids.begin(), ids.end());
    }
    auto ids = t.take();
    got.insert(got.end(), ids.begin(), ids.end());
  });
  for (uint32_t i = 0; i < kN; ++i) t.put(i);
  done = true;
  consumer.join();
  CHECK(got.size() + t.r.dropped_records.load() == kN);
  for (size_t i = 1; i < got.size(); ++i) REQUIRE(got[i] > got[i - 1]);  // in order, no duplicates
}
