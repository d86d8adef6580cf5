// Inline plumbing the public macros need: the session flag, the clock read and the per-thread ring.
// Nothing else belongs here (see include/inferscope/internal/README.md). Not part of the public API.
#pragma once

#include <inferscope/records.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define INFERSCOPE_API __attribute__((visibility("default")))
#define INFERSCOPE_LIKELY(x) __builtin_expect(!!(x), 1)
#define INFERSCOPE_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace inferscope::detail {

/// 0 while no session records; otherwise the running session's epoch (never 0). The fast path of every
/// annotation is one relaxed load of this.
extern INFERSCOPE_API std::atomic<uint32_t> g_session;
/// Config::nvtx_emit of the running session: ISCOPE ranges are also pushed as NVTX ranges. Read only by a
/// range that records, once at its beginning (one predictable branch); a stopped session never reads it.
extern INFERSCOPE_API std::atomic<bool> g_nvtx_emit;
/// Sampled mode: the string id of the step range's name, so the end of a step reaches the window scheduler;
/// ~0u (no name) otherwise. Read only by a range that records, at its end.
extern INFERSCOPE_API std::atomic<uint32_t> g_step_name;
/// Chosen once before the first session: TSC ticks where the TSC is invariant, else CLOCK_MONOTONIC_RAW ns.
extern INFERSCOPE_API bool g_clock_is_tsc;

inline uint64_t now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (INFERSCOPE_LIKELY(g_clock_is_tsc)) return __rdtsc();
#endif
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// A single-producer byte ring. The owning thread (or, for a collector channel, whoever holds the
/// channel's lock) writes whole records and publishes its head; the writer thread copies [tail, published)
/// out and advances tail. A record never straddles the end: the gap is filled with a kPad record. When the
/// ring is full the record is dropped and counted; the producer never waits.
struct alignas(64) ThreadRing {
  // Producer's cache line.
  uint8_t* data = nullptr;
  uint64_t capacity = 0;  // bytes, power of two, >= 64 KiB
  uint64_t mask = 0;
  uint64_t head = 0;        // producer-private write position (monotonic)
  uint64_t tail_cache = 0;  // last tail the producer saw
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> dropped_records{0};
  std::atomic<uint64_t> dropped_bytes{0};
  // Writer's cache line.
  alignas(64) std::atomic<uint64_t> tail{0};
};

/// Per-thread state, zero-initialised; initial-exec TLS so the inline fast path needs no TLS call.
struct ThreadState {
  ThreadRing* ring;
  uint32_t epoch;  // session epoch `ring` belongs to; != g_session means "bind first"
  uint32_t depth;  // open active ranges on this thread
  // The Python tracer's per-thread call stack (sys.monitoring callbacks get no per-thread argument). Here
  // rather than in the extension module: a dlopen'ed module's own thread-local costs a __tls_get_addr call per
  // access, this block is initial-exec.
  void* py_trace;
};
extern __thread ThreadState t_state __attribute__((tls_model("initial-exec")));

/// Slow path: gives the calling thread a ring for session `epoch`. False when no ring could be had.
INFERSCOPE_API bool bind_thread(uint32_t epoch) noexcept;

inline void count_drop(ThreadRing* r, uint32_t n) noexcept {
  r->dropped_records.store(r->dropped_records.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  r->dropped_bytes.store(r->dropped_bytes.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/// Room for an n-byte record (n multiple of 4, <= 65532), or nullptr when the ring is full.
inline uint8_t* ring_try_reserve(ThreadRing* r, uint32_t n) noexcept {
  uint64_t h = r->head;
  uint64_t off = h & r->mask;
  const uint64_t room = r->capacity - off;
  const uint64_t need = n <= room ? n : room + n;
  if (INFERSCOPE_UNLIKELY(h + need - r->tail_cache > r->capacity)) {
    r->tail_cache = r->tail.load(std::memory_order_acquire);
    if (h + need - r->tail_cache > r->capacity) return nullptr;
  }
  if (INFERSCOPE_UNLIKELY(n > room)) {
    const RecordHeader pad{RecordKind::kPad, 0, static_cast<uint16_t>(room)};
    std::memcpy(r->data + off, &pad, sizeof(pad));
    r->head = h + room;
    off = 0;
  }
  return r->data + off;
}

/// ring_try_reserve that counts a full ring as a dropped record: the producer never waits.
inline uint8_t* ring_reserve(ThreadRing* r, uint32_t n) noexcept {
  uint8_t* p = ring_try_reserve(r, n);
  if (INFERSCOPE_UNLIKELY(p == nullptr)) count_drop(r, n);
  return p;
}

inline void ring_commit(ThreadRing* r, uint32_t n) noexcept {
  r->head += n;
  r->published.store(r->head, std::memory_order_release);
}

/// Writes a range without attributes into `r` (depth saturates at 255); a full ring drops and counts.
inline void write_range(ThreadRing* r, RecordKind kind, uint32_t name, uint32_t depth, uint64_t start,
                        uint64_t end) noexcept {
  uint8_t* p = ring_reserve(r, sizeof(RangeRecord));
  if (INFERSCOPE_UNLIKELY(p == nullptr)) return;
  const RangeRecord rec{{kind, static_cast<uint8_t>(depth < 255 ? depth : 255), static_cast<uint16_t>(sizeof(RangeRecord))},
                        name, start, end};
  std::memcpy(p, &rec, sizeof(rec));
  ring_commit(r, sizeof(rec));
}

/// Slow path of note_step: a step range [start, end] ended on the calling thread (sampled mode).
INFERSCOPE_API void step_ended(uint64_t start, uint64_t end) noexcept;

/// Called where a range that records ends: in sampled mode the step range drives the window scheduler. One
/// relaxed load and a compare otherwise.
inline void note_step(uint32_t name, uint64_t start, uint64_t end) noexcept {
  if (INFERSCOPE_UNLIKELY(name == g_step_name.load(std::memory_order_relaxed))) step_ended(start, end);
}

/// Writes one complete record into the calling thread's ring (binding the thread if needed). Used by the
/// collectors that record on application threads (CUPTI callbacks, the Python tracer).
inline bool emit_record(const void* rec, uint32_t size) noexcept {
  const uint32_t e = g_session.load(std::memory_order_relaxed);
  if (e == 0) return false;
  ThreadState& ts = t_state;
  if (ts.epoch != e && !bind_thread(e)) return false;
  uint8_t* p = ring_reserve(ts.ring, size);
  if (!p) return false;
  std::memcpy(p, rec, size);
  ring_commit(ts.ring, size);
  return true;
}

/// A call site's name, interned on first use while a session records. Constant-initialised, so a
/// function-local static of this type costs no guard check.
struct StaticName {
  const char* text;
  bool is_function;  // text is __PRETTY_FUNCTION__: reduced to the qualified name when interned
  mutable std::atomic<uint32_t> id{0};
  constexpr StaticName(const char* t, bool f) noexcept : text(t), is_function(f) {}
};

INFERSCOPE_API uint32_t intern_static(const StaticName& n) noexcept;
/// Interns a key that is usually a literal: a small per-thread cache keyed by pointer avoids the lock.
INFERSCOPE_API uint32_t intern_cached(const char* s, size_t len) noexcept;

}  // namespace inferscope::detail
