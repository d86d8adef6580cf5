// Helpers the analyzer's stages use over durations: DurationStats (a bounded histogram with exact count, total,
// min and max) and SelfTimer (self time in one pass over ranges in the order they end).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace inferscope::analyze {

/// Durations with exact count, total, min, max and percentiles from a log-linear histogram (128 buckets per
/// power of two: a percentile is within 0.8 % of the true value, from 1 ns to 2^64 ns), so memory does not grow
/// with the count. Nor with the durations' size: the buckets are kept in pages of 32 (a quarter of a power of
/// two), made only where a duration falls, so a name holds kDirectoryBytes plus 256 bytes for each page its
/// durations touched, never more than the dense table of old at its largest (a dense table grew to 7,400
/// buckets, 58 KB, for one huge duration: a 960 KB dump of distinct names each with one asked for 3.3 GB).
/// docs/reliability.md ("Memory bounds") states the bound.
class DurationStats {
 public:
  void add(uint64_t ns) {  // inline: the analyzer calls it for most records
    ++bucket(bucket_of(ns));
    ++count_;
    total_ += ns;
    if (ns < min_) min_ = ns;
    if (ns > max_) max_ = ns;
  }
  /// Adds `n` durations of `ns` each (calls the tracer counted in aggregate, each taken at their mean).
  void add(uint64_t ns, uint64_t n) {
    if (n == 0) return;
    bucket(bucket_of(ns)) += n;
    count_ += n;
    total_ += ns * n;
    if (ns < min_) min_ = ns;
    if (ns > max_) max_ = ns;
  }
  /// Adds everything `o` counted (exact: the result does not depend on how the values were split).
  void merge(const DurationStats& o);
  uint64_t count() const { return count_; }
  uint64_t total() const { return total_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ ? double(total_) / double(count_) : 0; }
  /// q in [0, 1]
  double percentile(double q) const;
  /// Bytes the histogram holds on the heap (kDirectoryBytes + 256 per page touched), for the tests that bound it.
  size_t bytes() const { return page_of_.capacity() + counts_.capacity() * sizeof(uint64_t); }

  static constexpr size_t kPageBuckets = 32;
  /// Pages a duration up to 2^64 - 1 ns can fall in: the page directory never grows beyond this many bytes.
  static constexpr size_t kDirectoryBytes = (((64 - 7) * 128 + 127) / kPageBuckets) + 1;

 private:
  static constexpr int kSub = 128;
  static constexpr size_t bucket_of(uint64_t ns) {
    if (ns < kSub) return static_cast<size_t>(ns);
    const int e = std::bit_width(ns) - 1;  // ns in [2^e, 2^(e+1))
    const int shift = e - 7;               // 128 = 2^7 sub-buckets per power of two
    return static_cast<size_t>((e - 6) * kSub + static_cast<int>((ns >> shift) - kSub));
  }
  static double bucket_value(size_t b);
  uint64_t& bucket(size_t b) {
    const size_t p = b / kPageBuckets;
    if (page_of_.empty() || !page_of_[p]) add_page(p);
    return counts_[(page_of_[p] - 1) * kPageBuckets + b % kPageBuckets];
  }
  void add_page(size_t p);
  std::vector<uint8_t> page_of_;  // by page (bucket / 32): 1 + its place in counts_, 0 for none; empty until the
                                  // first duration, then kDirectoryBytes
  std::vector<uint64_t> counts_;  // the pages in the order they were first used, 32 counts each, no spare capacity
  uint64_t count_ = 0, total_ = 0, min_ = ~0ull, max_ = 0;
};

/// a += b, held at int64_t's largest value instead of overflowing: a crafted dump's ranges of ~2^61 ns each pass 2^63
/// in a few (signed overflow is undefined behaviour; UBSan found it in the sums of self time).
inline void add_saturating(int64_t& a, int64_t b) {
  int64_t sum;
  a = __builtin_add_overflow(a, b, &sum) ? (b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min())
                                         : sum;
}

/// Self time in one pass: a thread's ranges arrive in the order they end, so every child arrives before its
/// parent. children[d] accumulates the time of finished ranges at depth d whose parent is still open; the sum
/// saturates at T's largest value (a crafted dump's ranges of ~2^61 ns each overflowed a signed sum: UB).
template <class T>
struct SelfTimer {
  std::vector<T> children;
  T self(uint32_t depth, T dur) {
    if (children.size() < depth + 2) children.resize(depth + 2, 0);
    T kids = children[depth + 1];
    children[depth + 1] = 0;
    T sum;
    children[depth] = __builtin_add_overflow(children[depth], dur, &sum) ? std::numeric_limits<T>::max() : sum;
    return dur > kids ? dur - kids : 0;
  }
};

}  // namespace inferscope::analyze
