// The system sampler's parts, which a benchmark switches on and off within one session to measure what each costs
// the program (inferscope_system_set_parts; bench/gpu/overhead_table.py --decompose). Every part is on in a
// recording: the switch exists for measurement, not as a setting.
//
//   SamplerParts p = parse_sampler_parts("rounds,ticks", &err).value();  // no NVML, no blocked-in, no exact clock
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inferscope::sys {

enum SamplerPart : uint32_t {
  kPartRounds = 1u << 0,      ///< the rounds every sample_period_ms: process, threads, children, machine, NUMA
  kPartNvml = 1u << 1,        ///< GPU counters through NVML, in every tenth round (needs kPartRounds)
  kPartTicks = 1u << 2,       ///< the fast rounds between rounds (thread_sample_us): schedstat of busy threads
  kPartBlockedIn = 1u << 3,   ///< what the session's threads are blocked in (/proc/self/task/<tid>/syscall)
  kPartExactClock = 1u << 4,  ///< run time from each thread's CPU-time clock instead of schedstat's alone
};
constexpr uint32_t kAllSamplerParts = kPartRounds | kPartNvml | kPartTicks | kPartBlockedIn | kPartExactClock;

struct SamplerParts {
  uint32_t mask = kAllSamplerParts;
  uint32_t tick_us = 0;  ///< microseconds between fast rounds from now on; 0 keeps the session's thread_sample_us
};

/// A comma-separated list of part names (rounds, nvml, ticks, blocked_in, exact_clock), "all" or "none", and
/// optionally "tick_us=<1..1000000>". Empty or unknown names and bad numbers give nullopt and say why in `error`.
std::optional<SamplerParts> parse_sampler_parts(std::string_view spec, std::string* error);

/// The parts on, in the order of the list above ("none" when no part is).
std::string sampler_parts_text(uint32_t mask);

}  // namespace inferscope::sys
