// The GPU side of the live tap (docs/live.md, "GPU busy share and bottleneck"): fixed-size rings of the newest GPU
// activities and of the step threads' sync and launch calls, the steps waiting for their GPU records, and what each
// settled step's time was spent on (step_split.hpp). Not thread-safe: the Tap calls it under its lock.
//
// GPU records arrive late: while the page is served the writer asks CUPTI for its complete records every 250 ms
// (lib/runtime/live.cpp; CUPTI itself hands over only full buffers, docs/gpu-collector.md), and drains the `gpu`
// channel one flush period later, so when a step's range arrives the kernels it ran are mostly not there yet. A
// step is therefore *pending* until it is settled by the first of:
//   - the watermark: a GPU record ending at or after the step's end has arrived. A stream runs its work in order and
//     CUPTI hands records over as they complete, so every activity that ended before it has arrived too. (One
//     watermark for all streams and buffers: a record held back in another buffer, or a kernel still running on
//     another stream across the step's end, arrives later and is missed. The estimate then undercounts, never
//     overcounts; the step's own work usually ends in a synchronisation before the step does.)
//   - the bound: the session clock is kSettleWait past the step's end. Four deliveries without a GPU record reaching
//     past the step mean the GPU went idle before the step ended, and what arrived is all there is.
// Nothing settles before the first GPU record: a session with no GPU activity shows none (no fake zeros).
//
// Only the feeding thread (the writer) touches it, and the Tap calls settle() outside its lock: the scans over the
// rings never hold up the server, which reads what the Tap publishes (copies) after each cycle. settle() measures
// every step it settles in one pass over each ring (steps sorted by start, each entry matched by binary search),
// so a cycle costs one scan of the rings however many steps settle in it.
#pragma once

#include "live/step_split.hpp"
#include "live/tap_types.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

namespace inferscope::live {

/// The bound on a step's wait for its GPU records, in ns: four of the page's deliveries (250 ms each, lib/runtime/
/// live.cpp) plus the writer's drain (20 ms), so a delivery that comes late once still lands in time.
inline constexpr uint64_t kSettleWaitNs = 1'000'000'000;
/// GPU activities kept: 1.5 MiB, allocated with the first one. Steps settle about 270 ms after they end when the GPU
/// is busy (a delivery, then a drain); this holds that long for a program running up to ~240 000 kernels a second.
/// A step whose activities were overwritten before it settled is counted as incomplete and left out (never a low
/// share passed as real).
inline constexpr size_t kGpuSpanCapacity = 65536;
/// Sync and launch calls kept, from every thread (a step's calls are picked by thread when it settles): as many as
/// the GPU activities, since a launch-bound program makes about one launch call per kernel. 1 MiB.
inline constexpr size_t kApiSpanCapacity = 65536;
/// Steps that may wait at once: a second of steps at 1 ms each, the shortest step the page's histogram resolves
/// (its first bucket), through the full 1 s bound. Past it the oldest waiting step is given up: counted as
/// incomplete and left out of every figure, since its GPU records may not have come yet.
inline constexpr size_t kPendingCapacity = 1024;
/// Settled steps the Tap keeps (the window the page summarises is the newest of them); also the most that settle()
/// hands over at once.
inline constexpr size_t kSettledCapacity = 1024;

class StepSettler {
 public:
  explicit StepSettler(double ticks_per_ns)
      : ticks_per_ns_(ticks_per_ns), wait_ticks_(uint64_t(double(kSettleWaitNs) * ticks_per_ns)) {}

  void add_gpu(const GpuSpan& g);
  /// A call on dump thread `thread`; only kSync/kCopySync (blocking) and kLaunch/kCopyAsync (queuing) are kept.
  void add_api(uint32_t thread, uint8_t api_kind, uint64_t start, uint64_t end);
  void add_step(const Span& step);
  /// Settles the pending steps the rule above allows, `clock` being the session clock now (ticks); returns them,
  /// with any that add_step settled early since the last call (oldest first, at most kSettledCapacity).
  std::vector<SettledStep> settle(uint64_t clock);

  bool gpu_seen() const { return gpu_total_ > 0; }
  uint64_t gpu_records() const { return gpu_total_; }
  uint64_t watermark() const { return watermark_; }
  size_t pending() const { return pending_.size(); }
  uint64_t incomplete() const { return incomplete_; }
  uint64_t settled_total() const { return settled_total_; }
  /// Seconds of the complete settled steps in each category, since the session began.
  const std::array<double, kCategories>& seconds_total() const { return seconds_total_; }
  /// GPU activities ending at or after `from` and starting at or before `to`, at most `max` of the newest to arrive.
  std::vector<GpuSpan> gpu_between(uint64_t from, uint64_t to, size_t max) const;

 private:
  struct ApiSpan {
    uint32_t thread;
    bool blocking;  // a sync call (else a launch)
    uint64_t start, end;
  };
  /// Each of `steps`' split, from one pass over each ring.
  std::vector<SettledStep> measure(const std::vector<Span>& steps) const;
  void publish(const SettledStep& s);
  void give_up(const Span& step);

  const double ticks_per_ns_;
  const uint64_t wait_ticks_;
  std::vector<GpuSpan> gpu_;  // fixed-size rings, allocated on first use
  std::vector<ApiSpan> api_;
  size_t gpu_next_ = 0, api_next_ = 0;
  uint64_t gpu_total_ = 0, api_total_ = 0;
  uint64_t gpu_evicted_end_ = 0, api_evicted_end_ = 0;  // newest end among overwritten entries
  uint64_t watermark_ = 0;
  std::deque<Span> pending_;  // at most kPendingCapacity
  std::vector<SettledStep> ready_;  // settled since the last settle() call
  uint64_t settled_total_ = 0, incomplete_ = 0;
  std::array<double, kCategories> seconds_total_{};
};

}  // namespace inferscope::live
