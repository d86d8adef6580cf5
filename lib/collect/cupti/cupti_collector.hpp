// The GPU collector: CUPTI activities (kernels, copies, memsets, syncs, allocations, graph launches,
// CUPTI overhead) into the "gpu" channel, selected runtime/driver API calls as CudaApiRecord (CUPTI API
// activity records in the "gpu" channel naming the caller's OS thread id, or callbacks on the calling
// thread), timestamps on the session clock, and CPU/GPU clock checks. docs/gpu-collector.md explains it.
#pragma once

#include "collect/cupti/cupti_api.hpp"

#include <functional>
#include <memory>
#include <string>

namespace inferscope::cupti {

/// What to collect. Parsed from Config::cupti_activities: presets "default" (kernel, memcpy, memset, memory,
/// graph, runtime, driver), "minimal" (kernel, memcpy, graph, runtime, driver), "full" (default plus
/// sync, overhead and runtime_all, graph nodes one by one), "none", or a comma list (their union) of: kernel,
/// memcpy, memset, sync (CUPTI's own records of the synchronizations the sync calls' records already show),
/// memory, overhead (CUPTI's records of its own work: buffer flushes, instrumentation; no analysis reads them,
/// the Perfetto export draws them), graph (one record per CUDA graph launch with its GPU start and end; CUPTI then no longer reports
/// the graph's kernels, copies and memsets one by one), graph_nodes (the opposite, wherever it stands: every node
/// of every graph launch as its own record, as without graph),
/// runtime / driver (the selected runtime / driver API calls that explain a step: launches, copies,
/// memsets, synchronizations, waits, allocations, graph launches), api (both), runtime_all (every runtime
/// API call: measurably more expensive), api_activity / api_callbacks (how the API calls are recorded, see
/// below; api_callbacks wins wherever it stands), nvtx (accepted; NVTX capture follows Config::nvtx_capture).
struct ActivitySet {
  bool kernel = false, memcpy = false, memset = false, sync = false, memory = false, graph = false,
       overhead = false, runtime = false, driver = false, runtime_all = false;
  /// Record the selected runtime and driver calls as CUPTI API activity records instead of callbacks on the
  /// calling thread. The records reach the dump through the "gpu" channel with the caller's OS thread id
  /// (CUPTI's system thread ids), so the analyzer puts them on that thread; the collector falls back to
  /// callbacks when CUPTI cannot give system thread ids. Cheaper per launch only where a program makes few
  /// other CUDA calls: CUPTI then times every runtime call (docs/gpu-collector.md). runtime_all keeps callbacks.
  bool api_activity = false;
  /// API calls go through activity records (runtime_all keeps every call on callbacks).
  bool api_as_activity() const { return api_activity && !runtime_all; }
  bool runtime_as_activity() const { return runtime && api_as_activity(); }
  bool driver_as_activity() const { return driver && api_as_activity(); }
  /// Some API calls are recorded as activity records.
  bool any_api_as_activity() const { return runtime_as_activity() || driver_as_activity(); }
  bool any() const {
    return kernel || memcpy || memset || sync || memory || graph || overhead || runtime || driver || runtime_all;
  }
  bool operator==(const ActivitySet&) const = default;
};

/// Parses a specification; throws std::invalid_argument naming the unknown word.
ActivitySet parse_activity_set(const std::string& spec);

/// Whether CUPTI's graph-level tracing (one record per graph launch) should be on now (docs/gpu-collector.md,
/// "CUDA graphs"). CUPTI 13 crashes when a graph instantiated without it is launched with it on, so it is never
/// on once such a graph exists (`untraced_graph_exists`). Switching it off costs every launch of a graph
/// instantiated with it on (+4.5 % on a replayed graph of 1,500 kernels, measured on the H100), so it stays
/// on (`on_now`) whenever nothing recorded needs it off: while collection is idle, and in a session that
/// records none of a graph's nodes (no kernels, copies or memsets); that session's dump then holds the graph
/// launches' records. Only a request that records graph nodes one by one switches it off: kernels, copies or
/// memsets without `graph` (`kernel`, `graph_nodes`, `full`).
bool graph_level_wanted(bool untraced_graph_exists, bool on_now, bool session_wants_graphs, const ActivitySet& want,
                        bool idle);

/// Whether a runtime ("cuda...") or driver ("cu...") API function is one of the calls that explain an
/// inference step (launches, copies, memsets, synchronizations, waits, allocations, graph launches).
bool is_selected_api(const char* function_name);

/// Test hook: the factory the collector uses instead of load_cupti_api() (nullptr restores it).
void set_api_factory_for_test(std::function<std::unique_ptr<CuptiApi>()> factory);

/// The CUPTI buffer-completed entry point, exposed so tests can hand it a synthetic buffer.
void deliver_buffer_for_test(uint8_t* buffer, size_t valid_size);

}  // namespace inferscope::cupti

extern "C" {
/// Registers the GPU collector and the NVTX collector with the runtime (called by the runtime at start).
void inferscope_register_cupti_collector();
/// Switches what the running GPU collector records, at run time (e.g. from Python through ctypes for an
/// on/off A/B benchmark): a Config::cupti_activities specification, "none" for nothing. Returns 0 on
/// success, -1 for a bad specification, -2 when the GPU collector is not active.
int inferscope_cupti_set_activities(const char* spec);
/// How often CUPTI's worker hands over full buffers on its own, in ms (default 100; 0: only when a buffer is
/// full and at stop). A periodic flush returns only buffers that are full and whose records are all complete. For benchmarks that compare flush policies in one process. 0 on success.
int inferscope_cupti_set_flush_period(uint32_t ms);
/// How activity buffers are handed to CUPTI, for benchmarks that compare policies in one process: `kib` the
/// size of the buffers handed out from now on (0: keep), `prezeroed` 1 to hand out buffers zeroed off the
/// application's thread (the default), 0 for CUPTI's own way (it zeroes each buffer on the thread that asked
/// for it). 0 on success, -1 when CUPTI refused, -2 when the GPU collector is not active.
int inferscope_cupti_set_buffer_policy(uint32_t kib, int prezeroed);
/// Hands every buffered activity record to the session now (cuptiActivityFlushAll, forced). 0 on success.
int inferscope_cupti_flush();
/// Hands the buffered records that are complete to the session now (cuptiActivityFlushAll without the forced
/// flag: a kernel still running stays in CUPTI's buffer). The live page's writer calls it a few times a second,
/// since CUPTI's own periodic flush hands over only full buffers. 0 on success, -2 when nothing records.
int inferscope_cupti_deliver();
/// The collector's current one-line status ("on: ..." / "off: ...").
const char* inferscope_cupti_status();
/// The CUDA driver's injection entry point (CUDA_INJECTION64_PATH): activates GPU collection inside cuInit
/// when a session started at load time was waiting for CUDA. Returns 1.
int InitializeInjection();
}
