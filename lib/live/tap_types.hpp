// What the live tap keeps and hands out (docs/live.md): plain values, in session clock ticks.
#pragma once

#include "live/step_split.hpp"

#include <cstdint>

namespace inferscope::live {

/// One complete range (a step or any other).
struct Span {
  uint32_t thread = 0;  ///< dump thread id
  uint32_t name = 0;    ///< string id
  uint32_t depth = 0;
  uint64_t start = 0, end = 0;
};

/// What a GPU activity record is.
enum class GpuKind : uint8_t { kKernel = 0, kMemcpy = 1, kMemset = 2 };
/// "kernel", "memcpy", "memset".
const char* gpu_kind_name(GpuKind k);

/// One GPU activity (kernel, copy or memset) on a device's stream.
struct GpuSpan {
  uint64_t start = 0, end = 0;
  uint32_t device = 0, stream = 0;
  GpuKind kind = GpuKind::kKernel;
};

/// A step whose GPU records have arrived (step_settler.hpp): how its time divided.
struct SettledStep {
  Span step;
  StepSplit ticks{};      ///< per Category
  bool complete = true;   ///< false: some of its GPU activities or calls were overwritten before it settled
};

}  // namespace inferscope::live
