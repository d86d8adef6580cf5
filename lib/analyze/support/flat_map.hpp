// FlatMap: the analyzer's map from ids read in a dump to values (a generic container, no analysis).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace inferscope::analyze::detail {

// An open-addressing map from 64-bit keys (never ~0) to values, for tables whose keys come from the file and
// may be sparse: one probe in a flat array instead of a node allocation per key, and memory that grows with the
// keys present (at most 4 slots per key), never with how large a key is. Iteration order is unspecified, like
// std::unordered_map's (its users break ties themselves).
template <class V>
class FlatMap {
 public:
  using Entry = std::pair<uint64_t, V>;
  V& operator[](uint64_t key) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    size_t i = hash(key) & (slots_.size() - 1);
    while (slots_[i].first != kEmpty && slots_[i].first != key) i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].first == kEmpty) {
      slots_[i] = {key, V{}};
      ++used_;
    }
    return slots_[i].second;
  }
  /// The value of `key`, or nullptr when absent (never inserts).
  const V* find(uint64_t key) const {
    if (slots_.empty() || key == kEmpty) return nullptr;
    size_t i = hash(key) & (slots_.size() - 1);
    while (slots_[i].first != kEmpty) {
      if (slots_[i].first == key) return &slots_[i].second;
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }
  template <class F>
  void for_each(F&& f) const {
    for (auto& e : slots_)
      if (e.first != kEmpty) f(e.first, e.second);
  }
  size_t size() const { return used_; }
  /// Bytes held by the table (its slots), for the tests that bound it.
  size_t bytes() const { return slots_.capacity() * sizeof(Entry); }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static size_t hash(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }
  void grow() {
    std::vector<Entry> old = std::move(slots_);
    slots_.assign(std::max<size_t>(8, old.size() * 2), Entry{kEmpty, V{}});
    used_ = 0;
    for (auto& e : old)
      if (e.first != kEmpty) (*this)[e.first] = e.second;
  }
  std::vector<Entry> slots_;
  size_t used_ = 0;
};

}  // namespace inferscope::analyze::detail
