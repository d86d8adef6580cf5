// The analyzer's internal, compact form of a trace (not a public interface): what the passes over the dump
// keep, and the per-step measurements (StepMetrics) the later stages and the rules read. The stages' results are
// in stage_results.hpp. Memory: 24 bytes per GPU activity and 40 bytes per CUDA
// API call, 4 bytes per correlation id in the launch index; ranges, Python calls, marks and counters are
// aggregated while streaming and cost nothing per event.
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/what_if/replay.hpp"
#include "analyze/step_policy.hpp"
#include "analyze/summary.hpp"
#include "text/api_kind.hpp"

#include <cstdint>
#include <tuple>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferscope::analyze::detail {

// What a CUDA API call does, by its name (lib/text/api_kind.hpp), as every stage names it.
using text::ApiKind;
using text::classify_api;
using text::kAlloc;
using text::kCopyAsync;
using text::kCopySync;
using text::kFree;
using text::kLaunch;
using text::kOtherApi;
using text::kSync;

/// Host gaps shorter than this between two CUDA calls are dispatch overhead (Python and framework work per op),
/// not host work: the idle attribution gives them to the launch path and the graph what-if removes them.
/// docs/analysis.md gives the reason for the value.
inline constexpr int64_t kDispatchGapNs = 100'000;

/// kGraph: a whole CUDA graph launch traced at graph level (one record with the graph's GPU start and end, its
/// nodes not traced one by one); name_or_bytes holds the graph id. Counted as GPU compute, like a kernel.
/// kCollective: an NCCL kernel (ranks.hpp's is_collective_kernel). Launched like a kernel, but its time is
/// communication (moving data, or waiting for the other ranks), not compute: the breakdown's gpu_comm_ms.
enum GpuKind : uint8_t { kKernel = 0, kMemset = 1, kH2D = 2, kD2H = 3, kOtherCopy = 4, kGraph = 5, kCollective = 6 };
/// Kernels, collectives and whole graph launches: GPU work launched by a launch call.
inline bool is_compute_launch(uint8_t kind) { return kind == kKernel || kind == kGraph || kind == kCollective; }
/// A kernel of its own, compute or collective (not a graph, copy or memset).
inline bool is_kernel(uint8_t kind) { return kind == kKernel || kind == kCollective; }
/// The key a kernel or graph launch is tallied under by launcher: kernels by name id, graphs by id with the
/// top bit set (string ids stay far below it).
inline uint32_t launch_work_key(uint8_t kind, uint32_t name_or_bytes) {
  return kind == kGraph ? (0x80000000u | name_or_bytes) : name_or_bytes;
}
/// How a graph launch traced at graph level is named in the kernel table and the timeline.
inline std::string graph_work_name(uint32_t graph_id) { return "CUDA graph " + std::to_string(graph_id); }

// Naturally aligned (no packing): the fields are bound to references (std::min/std::max), and UBSan rightly
// rejects misaligned int64 references.
struct GpuOp {
  int64_t start;           ///< ns, CLOCK_MONOTONIC
  uint32_t dur;            ///< ns (saturating at 4.29 s)
  uint32_t corr;
  uint32_t name_or_bytes;  ///< kernel name id; graph id; copy/memset bytes (saturating)
  uint8_t kind;            ///< GpuKind
  uint8_t host_mem;        ///< MemoryKind of the host side of a copy
  uint16_t stream;
  uint8_t device = 0;      ///< the GPU it ran on (saturating at 255)
  int64_t end() const { return start + dur; }
};
struct ApiOp {
  int64_t start;
  uint32_t dur;
  uint32_t corr;
  uint32_t name;       ///< string id
  uint32_t py = 0;     ///< code id of the innermost Python function at the call (0 = none)
  uint32_t range = 0;  ///< string id of the innermost range
  uint32_t layer = 0;  ///< string id of the innermost layer range
  uint16_t thread;     ///< dump thread id (saturating)
  uint8_t kind;        ///< ApiKind
  uint8_t pad = 0;
  int64_t end() const { return start + dur; }
};
static_assert(sizeof(GpuOp) == 32);
static_assert(sizeof(ApiOp) == 40);

struct Span {
  int64_t start = 0, end = 0;
  uint32_t step = 0;
};

/// Measurements of one step, in ns. Breakdown parts add up to `dur`.
struct StepMetrics {
  int64_t start = 0, dur = 0;
  double compute = 0, h2d = 0, d2h = 0, sync_wait = 0, framework = 0, cpu = 0, idle = 0;
  double comm = 0;  ///< collectives running, no compute (a GPU-busy part, between compute and the copies)
  /// Each GPU's own busy time (several GPUs in one process): how many did work, the busiest one's time and
  /// which, and the sum over them (sum / the union of busy time: how much they work at once, 1 = in turns).
  uint32_t devices = 0;
  uint8_t busiest_device = 0;
  double device_busy_max = 0, device_busy_sum = 0;
  /// GPU idle, one cause per instant (idle_attribution.hpp): host code, launch path, syncs and their refill,
  /// allocations/frees and their refill. They add up to the step minus the GPU-busy parts.
  double idle_host = 0, idle_gaps = 0, idle_sync = 0, idle_memory = 0;
  /// idle_host split by the step thread's state (host_state.hpp); running + contention + wait = idle_host.
  double host_running = 0, host_contention = 0, host_gil = 0, host_wait = 0;
  bool host_state_measured = false;
  double host_out_api = 0; ///< step thread outside CUDA calls (wall)
  uint64_t kernels = 0, copies_h2d = 0, copies_d2h = 0, syncs = 0, allocs = 0;
  double kernel_ns = 0, launch_api_ns = 0, sync_api_ns = 0, alloc_api_ns = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0, h2d_pageable_bytes = 0, d2h_pageable_bytes = 0;
  Span worst_host_gap, worst_sync_gap, worst_alloc;
};

/// StepMetrics averaged: every field in ns (times), a count or bytes per step.
struct TypicalStep {
  size_t steps = 0;  ///< how many steps the mean covers
  double dur = 0, compute = 0, h2d = 0, d2h = 0, sync_wait = 0, framework = 0, cpu = 0, idle = 0;
  double comm = 0;
  double devices = 0, device_busy_max = 0, device_busy_sum = 0;  ///< StepMetrics' per-GPU busy time, averaged
  double idle_host = 0, idle_gaps = 0, idle_sync = 0, idle_memory = 0;
  double host_running = 0, host_contention = 0, host_gil = 0, host_wait = 0;
  double host_out_api = 0;
  double kernels = 0, copies_h2d = 0, copies_d2h = 0, syncs = 0, allocs = 0;
  double kernel_ns = 0, launch_api_ns = 0, sync_api_ns = 0, alloc_api_ns = 0;
  double h2d_bytes = 0, d2h_bytes = 0, h2d_pageable_bytes = 0, d2h_pageable_bytes = 0;
  bool host_state_measured = false;  ///< most of the covered steps had counters for the host-state split
};

/// What a TypicalStep averages, each number with the StepMetrics field it is the mean of: typical_step()'s sum and
/// division (aggregate.cpp) go over this one list. The assertion below fails when TypicalStep gains a number that the
/// list does not name, so a new measurement cannot be summed and left unscaled, or forgotten.
inline constexpr auto kAveragedStepFields = std::make_tuple(
    std::pair{&StepMetrics::dur, &TypicalStep::dur},
    std::pair{&StepMetrics::compute, &TypicalStep::compute},
    std::pair{&StepMetrics::comm, &TypicalStep::comm},
    std::pair{&StepMetrics::h2d, &TypicalStep::h2d},
    std::pair{&StepMetrics::d2h, &TypicalStep::d2h},
    std::pair{&StepMetrics::devices, &TypicalStep::devices},
    std::pair{&StepMetrics::device_busy_max, &TypicalStep::device_busy_max},
    std::pair{&StepMetrics::device_busy_sum, &TypicalStep::device_busy_sum},
    std::pair{&StepMetrics::sync_wait, &TypicalStep::sync_wait},
    std::pair{&StepMetrics::framework, &TypicalStep::framework},
    std::pair{&StepMetrics::cpu, &TypicalStep::cpu},
    std::pair{&StepMetrics::idle, &TypicalStep::idle},
    std::pair{&StepMetrics::idle_host, &TypicalStep::idle_host},
    std::pair{&StepMetrics::idle_gaps, &TypicalStep::idle_gaps},
    std::pair{&StepMetrics::idle_sync, &TypicalStep::idle_sync},
    std::pair{&StepMetrics::idle_memory, &TypicalStep::idle_memory},
    std::pair{&StepMetrics::host_running, &TypicalStep::host_running},
    std::pair{&StepMetrics::host_contention, &TypicalStep::host_contention},
    std::pair{&StepMetrics::host_gil, &TypicalStep::host_gil},
    std::pair{&StepMetrics::host_wait, &TypicalStep::host_wait},
    std::pair{&StepMetrics::host_out_api, &TypicalStep::host_out_api},
    std::pair{&StepMetrics::kernels, &TypicalStep::kernels},
    std::pair{&StepMetrics::copies_h2d, &TypicalStep::copies_h2d},
    std::pair{&StepMetrics::copies_d2h, &TypicalStep::copies_d2h},
    std::pair{&StepMetrics::syncs, &TypicalStep::syncs},
    std::pair{&StepMetrics::allocs, &TypicalStep::allocs},
    std::pair{&StepMetrics::kernel_ns, &TypicalStep::kernel_ns},
    std::pair{&StepMetrics::launch_api_ns, &TypicalStep::launch_api_ns},
    std::pair{&StepMetrics::sync_api_ns, &TypicalStep::sync_api_ns},
    std::pair{&StepMetrics::alloc_api_ns, &TypicalStep::alloc_api_ns},
    std::pair{&StepMetrics::h2d_bytes, &TypicalStep::h2d_bytes},
    std::pair{&StepMetrics::d2h_bytes, &TypicalStep::d2h_bytes},
    std::pair{&StepMetrics::h2d_pageable_bytes, &TypicalStep::h2d_pageable_bytes},
    std::pair{&StepMetrics::d2h_pageable_bytes, &TypicalStep::d2h_pageable_bytes});
static_assert(sizeof(TypicalStep) ==
                  sizeof(size_t) + std::tuple_size_v<decltype(kAveragedStepFields)> * sizeof(double) + alignof(double),
              "a number of TypicalStep is missing from kAveragedStepFields (or the struct gained a field of another kind)");

}  // namespace inferscope::analyze::detail
