// What-if replay: the saving of a fix for one recorded step, from its dependency graph replayed with the
// cause removed or shrunk (docs/analysis.md, "What-if replay"). Self-contained: the analyzer builds the
// StepGraph from the trace; this file knows nothing about traces.
//
// Usage:
//   replay::StepGraph g = ...;                       // one step: host ops in call order, the GPU work they queued
//   replay::Change c;
//   c.remove_syncs = true;                           // "what if the step stopped waiting for the GPU mid-step"
//   int64_t saved = replay::saving_ns(g, c);         // in the recorded step's time scale, never negative
//   double pct = 100.0 * saved / g.recorded_ns;
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferscope::analyze::replay {

enum class OpKind : uint8_t {
  kLaunch,     // kernel/memset launch or async copy: host cost, queues its GPU work, never waits
  kCopySync,   // blocking copy (cudaMemcpy, .item(), .cpu()): queues its copy, returns when that copy ended
  kSync,       // cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize: waits for queued work
  kAlloc,      // cudaMalloc & co: host cost only
  kFree,       // cudaFree & co: host cost, and it synchronizes the device (waits for all queued work)
  kOther       // any other CUDA call: host cost only
};

struct GpuWork {          // one kernel, memset or copy on the GPU
  int64_t dur_ns = 0;     // as recorded
  uint16_t stream = 0;
  bool copy = false;      // a host<->device copy (for kPinCopies)
  bool pageable = false;  // host side is pageable memory
  bool h2d = false;       // host to device (for remove_h2d)
  bool d2h = false;       // device to host (for merge_reads)
  uint64_t bytes = 0;
};

struct HostOp {                 // one CUDA call of the step's host thread, in call order
  int64_t gap_before_ns = 0;    // host time outside CUDA calls since the previous op ended (or the step began)
  int64_t dur_ns = 0;           // the call's recorded duration (for blocking ops it includes the wait)
  int64_t wait_ns = 0;          // of dur_ns, the recorded time spent waiting for the GPU (0 for non-blocking
                                // ops); dur_ns - wait_ns is the call's own cost
  OpKind kind = OpKind::kOther;
  int32_t sync_stream = -1;     // kSync on one stream: that stream; -1: the whole device
  std::vector<uint32_t> work;   // indexes into StepGraph::gpu of the GPU work this call queued (launch order)
};

struct StepGraph {
  std::vector<HostOp> host;
  std::vector<GpuWork> gpu;
  int64_t tail_ns = 0;          // host time after the last op until the step ended
  int64_t gpu_busy_at_start_ns = 0;  // the GPU was still busy this long after the step began (previous step's work)
  int64_t recorded_ns = 0;      // the step's recorded duration
};

struct Change {
  bool remove_syncs = false;     // every kSync/kCopySync except the LAST blocking op of the step stops waiting
                                 // (its copy is still queued; the value is read later); the last one still waits
  bool collapse_launches = false;// CUDA graph: every kLaunch's host cost becomes 0, the host gap between two
                                 // launches becomes 0 unless the later one copies between host and device,
                                 // one graph launch of graph_launch_ns is paid at the first launch, kernels
                                 // run back to back; allocations go as with remove_allocs (a graph's memory
                                 // is allocated at capture)
  int64_t graph_launch_ns = 0;
  bool remove_allocs = false;    // kAlloc/kFree cost nothing and do not synchronize (served from a cache)
  bool pin_copies = false;       // pageable copies run at pinned_gbps (never slower than recorded) and their
  double pinned_gbps = 0;        //   calls lose the staging cost beyond their wait
  int64_t pinned_call_ns = 0;    //   (what such a call still costs on the host, at most its recorded own cost)
  double host_gap_scale = 1.0;   // every host gap (and the tail) at least min_scaled_gap_ns long is multiplied by
  int64_t min_scaled_gap_ns = 0; //   this (contention or a wait removed: < 1; host work moved off the path: 0)
  int moved_work_workers = 0;    // the host time host_gap_scale took away is still work, done ahead by this many
                                 //   workers in parallel: the step cannot be shorter than that time / workers
                                 //   (their throughput). 0: the time is gone (a wait or contention removed)
  bool keep_launching_code = false;  // host_gap_scale leaves the gaps gap_inside_graph finds alone: the code that
                                     //   issues the step's launches stays on the step thread (no worker runs it)
  bool remove_h2d = false;       // host-to-device copies are gone, their calls cost nothing (the data stays on the GPU)
  bool merge_reads = false;      // the step's reads made one: every blocking op but the step's last, and every call that
                                 //   queues only device-to-host copies (the copy of an .item()), costs nothing, waits for
                                 //   nothing and queues nothing; the last read still waits (it now reads everything)
  bool only_after_read = false;  // host_gap_scale applies only to the gaps after a blocking op of the step and before a
                                 //   launch: host work that needs the step's own results (sampling the next token from
                                 //   the logits just read), done on the GPU instead
  int64_t min_step_ns = 0;       // saving_ns: the changed step lasts at least this long, in the recorded step's time:
                                 //   another party (DataLoader workers, a producer) delivers one step's input at this
                                 //   pace, measured from its CPU time (0: no floor)
};

/// Replays the step: host ops one after another (gap, then the call), GPU work in stream order, each piece
/// ready when the call that queued it returns (kLaunch) — a stream runs its work in order, one piece at a time;
/// the streams run concurrently. Blocking ops return at max(own cost end, completion of what they wait for).
/// Returns the modelled step duration: max(host end incl. tail, end of the GPU work queued in the step, and with
/// moved_work_workers the moved host time divided among the workers).
///
/// Details the comment above leaves open: a kCopySync pays its own cost first and then queues its copy (ready at
/// own cost end); a kFree waits first and pays its own cost after the wait (cudaFree unmaps after the device went
/// idle); every stream is busy until gpu_busy_at_start_ns; a kCopySync that queued no work waits for
/// the whole device; GPU work queued by no op (or queued a second time) is not replayed; indexes out of range
/// are ignored; negative durations and gaps count as 0, a wait above the call's duration as the duration.
int64_t simulate(const StepGraph& g, const Change& c = {});

/// Whether the host gap before op i is code a captured CUDA graph no longer runs (collapse_launches): past any
/// allocation calls on either side (a graph allocates nothing), the ops around the gap are launches, and the
/// later one moves no data between host and device (host work whose result the GPU reads arrives through such
/// a copy, so the gap before one stays).
bool gap_inside_graph(const StepGraph& g, std::size_t i);

/// Estimated saving of `c` for this step in ns: (simulate(g) - simulate(g, c)) scaled by
/// recorded_ns / simulate(g) so a model that is off by a factor on the whole step is off by the same factor on
/// the saving (0 when simulate(g) is 0), with the changed step no shorter than c.min_step_ns. Never negative.
/// recorded_ns <= 0 (unknown) leaves the difference unscaled.
int64_t saving_ns(const StepGraph& g, const Change& c);

}  // namespace inferscope::analyze::replay
