// The session clock: raw TSC ticks where the TSC is invariant, else
// CLOCK_MONOTONIC_RAW nanoseconds. Ticks are converted late, from calibration pairs in the dump.
#include "runtime/runtime.hpp"

#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace inferscope::detail {
bool g_clock_is_tsc = false;
}

namespace inferscope::runtime {
namespace {

uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

/// Decides the clock once per process: INFERSCOPE_CLOCK=monotonic forces the fallback (tests use it).
void choose_clock() {
  static const bool tsc = [] {
    const char* forced = std::getenv("INFERSCOPE_CLOCK");
    if (forced && std::strcmp(forced, "monotonic") == 0) return false;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000007u) return false;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d & (1u << 8)) != 0;  // invariant TSC: constant rate across P-, C- and T-states
#else
    return false;
#endif
  }();
  detail::g_clock_is_tsc = tsc;
}

const char* clock_name() { return detail::g_clock_is_tsc ? "tsc" : "monotonic_raw"; }

dump::CalibrationPoint take_calibration_point() {
  // The tick read is bracketed by two CLOCK_MONOTONIC reads; the narrowest of several brackets wins.
  dump::CalibrationPoint best{};
  uint64_t best_window = ~0ull;
  for (int i = 0; i < 9; ++i) {
    uint64_t m0 = clock_ns(CLOCK_MONOTONIC);
    uint64_t t = detail::now();
    uint64_t m1 = clock_ns(CLOCK_MONOTONIC);
    uint64_t r = clock_ns(CLOCK_REALTIME);
    uint64_t m2 = clock_ns(CLOCK_MONOTONIC);
    if (m1 - m0 < best_window) {
      best_window = m1 - m0;
      best.ticks = t;
      best.monotonic_ns = m0 + (m1 - m0) / 2;
      // CLOCK_REALTIME was read right after: shift it back by its distance from the bracket's middle.
      best.realtime_ns = r - ((m1 + (m2 - m1) / 2) - best.monotonic_ns);
      best.uncertainty_ns = static_cast<uint32_t>((m1 - m0 + 1) / 2);
    }
  }
  return best;
}

}  // namespace inferscope::runtime
