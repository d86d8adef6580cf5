// DurationStats (lib/analyze/summary.hpp), the duration histogram the analyzer keeps per range name, Python
// function and kernel: its memory is bounded by a small constant plus the pages its durations touch, whatever
// their size (a dense table grew to 58 KB for one huge duration: issue 25), and its percentiles stay within
// 0.8 % of the exact ones.
#include <doctest/doctest.h>

#include "analyze/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using inferscope::analyze::DurationStats;

namespace {
constexpr size_t kPageBytes = DurationStats::kPageBuckets * sizeof(uint64_t);

// The exact q-th percentile as DurationStats defines it: the value of rank ceil(q * n).
double exact(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * double(v.size())));
  return double(v[std::max<size_t>(rank, 1) - 1]);
}
}  // namespace

TEST_CASE("one huge duration costs a page and the directory, not a table up to its bucket") {
  CHECK(DurationStats::kDirectoryBytes == 232);
  for (uint64_t ns : {uint64_t(1) << 40, uint64_t(1) << 62, ~uint64_t(0)}) {
    CAPTURE(ns);
    DurationStats d;
    d.add(ns);
    CHECK(d.bytes() == DurationStats::kDirectoryBytes + kPageBytes);  // was (bucket + 1) x 8 bytes: 58 KB
    CHECK(d.count() == 1);
    CHECK(d.max() == ns);
    CHECK(d.percentile(0.5) == double(ns));
  }
}

TEST_CASE("memory: the directory plus one page per page of buckets touched, never more") {
  DurationStats none;
  CHECK(none.bytes() == 0);
  DurationStats d;
  for (int e = 0; e < 64; ++e) {  // one duration per power of two: 1 ... 16 share page 0, then one page each
    d.add(uint64_t(1) << e);
    const size_t pages = e < 5 ? 1 : size_t(e) - 3;
    CHECK(d.bytes() == DurationStats::kDirectoryBytes + pages * kPageBytes);
  }
  // Every bucket of every page touched: the most a name can ever hold, about the dense table of old at its largest.
  DurationStats all;
  for (uint64_t ns = 0; ns < 128; ++ns) all.add(ns);
  for (int e = 7; e < 64; ++e)
    for (uint64_t sub = 0; sub < 128; ++sub) all.add((uint64_t(128) + sub) << (e - 7));
  CHECK(all.bytes() == DurationStats::kDirectoryBytes + DurationStats::kDirectoryBytes * kPageBytes);
  CHECK(all.count() == 58 * 128);
}

TEST_CASE("percentiles within 0.8 % of the exact value, from nanoseconds to hours; merge is exact") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(2e6), 3.0);  // around 2 ms, spanning ns to hours
  std::vector<uint64_t> v;
  DurationStats whole, a, b;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t ns = std::max<uint64_t>(1, uint64_t(std::min(dist(rng), 1e13)));
    v.push_back(ns);
    whole.add(ns);
    (i % 3 ? a : b).add(ns);
  }
  a.merge(b);
  for (double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    CAPTURE(q);
    const double want = exact(v, q);
    CHECK(std::abs(whole.percentile(q) - want) <= 0.008 * want);
    CHECK(a.percentile(q) == whole.percentile(q));
  }
  CHECK(a.count() == whole.count());
  CHECK(a.total() == whole.total());
  CHECK(a.min() == whole.min());
  CHECK(a.max() == whole.max());
  CHECK(whole.percentile(0) == double(whole.min()));
  CHECK(whole.percentile(1) == double(whole.max()));
}

// UBSan found a signed overflow in SelfTimer (a 0.9 MB crafted dump: ranges of ~2^61 ns at one depth under an open
// parent, issue 43). The children's sum saturates; a parent shorter than its children has no self time.
TEST_CASE("SelfTimer: the children's sum saturates instead of overflowing") {
  using inferscope::analyze::SelfTimer;
  SelfTimer<int64_t> t;
  const int64_t huge = int64_t(1) << 61;
  for (int i = 0; i < 8; ++i) CHECK(t.self(1, huge) == huge);  // eight children of 2^61 ns: 2^64 in all
  CHECK(t.children[1] == INT64_MAX);
  CHECK(t.self(0, INT64_MAX) == 0);  // the parent: every instant of it is a child's
  CHECK(t.children[1] == 0);
}

TEST_CASE("add_saturating: a function's summed self time holds at the largest value instead of overflowing") {
  // The fuzz regression self-time-overflow: eight ranges of 2^61 ns, each all self time, summed into their name's
  // total (ingest.cpp) passed 2^63 after SelfTimer itself was fixed; UBSan stopped the replay there.
  int64_t total = 0;
  const int64_t huge = int64_t(1) << 61;
  for (int i = 0; i < 3; ++i) inferscope::analyze::add_saturating(total, huge);
  CHECK(total == 3 * huge);
  for (int i = 0; i < 5; ++i) inferscope::analyze::add_saturating(total, huge);
  CHECK(total == INT64_MAX);
  inferscope::analyze::add_saturating(total, -huge);  // a sum held at the top still moves down
  CHECK(total == INT64_MAX - huge);
  int64_t low = INT64_MIN + 1;
  inferscope::analyze::add_saturating(low, -2);
  CHECK(low == INT64_MIN);
}
