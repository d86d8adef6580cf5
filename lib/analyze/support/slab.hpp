// Slab: the analyzer's arrays of records, filled in parallel (a generic container, no analysis).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

namespace inferscope::analyze::detail {

// A fixed-size array whose pages are first touched by the worker that fills them (a std::vector would zero it
// all on one thread first). Only for implicit-lifetime types. No MADV_HUGEPAGE: measured on the development VM
// (THP "madvise" mode), direct compaction for the huge pages tripled the system time of a 50 M-event analysis.
template <class T>
class Slab {
 public:
  Slab() = default;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  Slab(Slab&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  Slab& operator=(Slab&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~Slab() { release(); }
  void allocate(size_t n) {
    release();
    if (!n) return;
    bytes_ = n * sizeof(T);
    void* m = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    p_ = static_cast<T*>(m);
    n_ = n;
  }
  T* begin() const { return p_; }
  T* end() const { return p_ + n_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) const { return p_[i]; }
  /// Keeps the first n elements (the mapping stays until destruction).
  void shrink(size_t n) { n_ = std::min(n, n_); }

 private:
  void release() {
    if (p_) ::munmap(p_, bytes_);
    p_ = nullptr;
    n_ = bytes_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0, bytes_ = 0;
};

}  // namespace inferscope::analyze::detail
