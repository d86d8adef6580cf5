// The writer thread's wake-up: a word of pending commands and a futex on it. It was a pipe, which held two of the
// program's descriptors for the life of the process (docs/reliability.md, "Descriptors"); this holds none. Ringing
// is async-signal-safe (an atomic OR and one system call), so the signal handlers ring it.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace inferscope::runtime {

class Doorbell {
 public:
  enum Bit : uint32_t { kWake = 1, kFinish = 2, kSnapshot = 4, kSigInt = 8, kSigTerm = 16 };

  void ring(uint32_t bits) {
    pending_.fetch_or(bits, std::memory_order_release);
    ::syscall(SYS_futex, &pending_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  /// Waits at most `ms` for a ring; returns what was rung since the last call (0: none) and forgets it.
  uint32_t wait(int ms) {
    if (pending_.load(std::memory_order_acquire) == 0) {
      const timespec timeout{ms / 1000, (ms % 1000) * 1'000'000L};
      ::syscall(SYS_futex, &pending_, FUTEX_WAIT_PRIVATE, 0u, &timeout, nullptr, 0);
    }
    return pending_.exchange(0, std::memory_order_acq_rel);
  }
  /// Forgets what was rung (a new session; a forked child).
  void clear() { pending_.store(0, std::memory_order_relaxed); }

 private:
  // The futex is the atomic's own 32-bit word.
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  std::atomic<uint32_t> pending_{0};
};

}  // namespace inferscope::runtime
