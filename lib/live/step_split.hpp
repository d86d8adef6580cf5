// How one completed step's time divides (docs/live.md, "GPU busy share and bottleneck"): a pure function of the
// step's interval and the GPU, sync-call and launch-call intervals around it, in session clock ticks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferscope::live {

struct Interval {
  uint64_t start = 0, end = 0;
};

/// The categories of a step's time, in priority order: an instant of the step belongs to the first that holds.
enum class Category : uint8_t {
  kGpuBusy = 0,   ///< some kernel, copy or memset ran on a GPU
  kSyncWait = 1,  ///< no GPU work ran, and the step's thread was blocked in a synchronising CUDA call
  kLaunch = 2,    ///< no GPU work ran, and the step's thread was in a launch call (or an asynchronous copy/memset)
  kHost = 3,      ///< no GPU work ran, and the step's thread did anything else
};
inline constexpr size_t kCategories = 4;
/// "gpu_busy", "sync_wait", "launch", "host": the Prometheus label values and /data's names.
const char* category_name(Category c);

/// Ticks of the step in each category; they add up to the step's duration.
using StepSplit = std::array<uint64_t, kCategories>;

/// Splits [step.start, step.end) by the priority of Category: the union of `gpu` first, then the union of `sync`
/// where no GPU work ran, then `launch` where neither, the rest host. Intervals may overlap, be unsorted and reach
/// outside the step (they are clipped). Sorts copies; cost O(n log n) in the intervals given.
StepSplit split_step(Interval step, const std::vector<Interval>& gpu, const std::vector<Interval>& sync,
                     const std::vector<Interval>& launch);

}  // namespace inferscope::live
