#include "analyze/duration_stats.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::analyze {

double DurationStats::bucket_value(size_t b) {
  if (b < kSub) return static_cast<double>(b);
  const size_t e = b / kSub + 6;
  const size_t sub = b % kSub;
  const double lo = std::ldexp(static_cast<double>(kSub + sub), static_cast<int>(e) - 7);
  const double width = std::ldexp(1.0, static_cast<int>(e) - 7);
  return lo + width / 2;
}

void DurationStats::add_page(size_t p) {
  static_assert(bucket_of(~0ull) / kPageBuckets + 1 == kDirectoryBytes, "the directory covers every duration");
  static_assert(kDirectoryBytes <= 255, "a page's place fits in a byte");
  if (page_of_.empty()) page_of_.assign(kDirectoryBytes, 0);
  // Exactly one page more: a doubling vector would hold up to twice the pages in use. A name makes at most 232
  // pages, so the copies this costs stay small.
  counts_.reserve(counts_.size() + kPageBuckets);
  counts_.resize(counts_.size() + kPageBuckets, 0);
  page_of_[p] = static_cast<uint8_t>(counts_.size() / kPageBuckets);  // <= kDirectoryBytes (232) pages
}

void DurationStats::merge(const DurationStats& o) {
  if (!o.count_) return;
  for (size_t p = 0; p < o.page_of_.size(); ++p) {
    if (!o.page_of_[p]) continue;
    const uint64_t* from = &o.counts_[(o.page_of_[p] - 1) * kPageBuckets];
    for (size_t k = 0; k < kPageBuckets; ++k)
      if (from[k]) bucket(p * kPageBuckets + k) += from[k];
  }
  count_ += o.count_;
  total_ += o.total_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

double DurationStats::percentile(double q) const {
  if (!count_) return 0;
  if (q <= 0) return double(min());
  if (q >= 1) return double(max_);
  const uint64_t rank = static_cast<uint64_t>(std::ceil(q * double(count_)));
  uint64_t seen = 0;
  for (size_t p = 0; p < page_of_.size(); ++p) {  // pages in the order of their durations
    if (!page_of_[p]) continue;
    const uint64_t* c = &counts_[(page_of_[p] - 1) * kPageBuckets];
    for (size_t k = 0; k < kPageBuckets; ++k) {
      seen += c[k];
      if (seen >= rank) return std::clamp(bucket_value(p * kPageBuckets + k), double(min()), double(max_));
    }
  }
  return double(max_);
}

}  // namespace inferscope::analyze
