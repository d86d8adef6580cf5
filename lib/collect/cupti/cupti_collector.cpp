// The GPU collector. One process-wide CUPTI state (CUPTI allows one subscriber
// per process and one set of buffer callbacks), started and stopped with sessions.
//
// Threads: CUPTI calls on_callback on application threads (API records of the callback path go into that
// thread's ring), buffer_completed on its worker thread or on whoever calls cuptiActivityFlushAll (records,
// API activity records included, go into the "gpu" channel; a caller new to the session joins its thread
// table from there), and the writer thread calls flush() (clock checks). `mu` guards the state; it is never
// held across cuptiActivityFlushAll, which calls buffer_completed.
#include "collect/cupti/cupti_collector.hpp"

#include "collect/cupti/activity_translator.hpp"
#include "collect/cupti/nvtx_hooks.hpp"
#include "runtime/session.hpp"

#include <inferscope/internal/hot_path.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace inferscope::cupti {

ActivitySet parse_activity_set(const std::string& spec) {
  ActivitySet s;
  // No CUPTI sync records by default: the sync calls' callbacks already give each one's thread, start and end,
  // which is what the analyzer reads (sync_bound, the causality check), and the second copy costs on a PyTorch
  // step (docs/history/benchmarks-2026-11.md, "Sixth run").
  // CUDA graphs at graph level by default: one record per graph launch instead of one per kernel node, which
  // on a decode step replayed as a graph of a thousand small kernels is most of the tracing cost
  // (docs/history/benchmarks-2026-11.md, "CUDA graphs"); graph_nodes asks for the nodes one by one.
  // CUPTI's own overhead records are not in it: no analysis reads them (the Perfetto export draws them), and they
  // are host-side records made on the profiled thread. "full" and the word "overhead" still ask for them.
  auto def = [&] { s.kernel = s.memcpy = s.memset = s.memory = s.runtime = s.driver = s.graph = true; };
  std::stringstream in(spec);
  std::string w;
  bool any_word = false, callbacks = false, graph_nodes = false;
  while (std::getline(in, w, ',')) {
    while (!w.empty() && w.front() == ' ') w.erase(w.begin());
    while (!w.empty() && w.back() == ' ') w.pop_back();
    if (w.empty()) continue;
    any_word = true;
    // The presets record the selected API calls through callbacks: CUPTI's API activity records (api_activity)
    // cost less per launch on a program that makes only those calls, but CUPTI then times every runtime call
    // and drops the unselected ones, which on a PyTorch step costs more than the callbacks
    // (docs/history/benchmarks-2026-11.md, "Fifth run").
    if (w == "default") def();
    else if (w == "minimal") s.kernel = s.memcpy = s.runtime = s.driver = s.graph = true;
    else if (w == "full") def(), s.sync = s.overhead = s.runtime_all = true, graph_nodes = true;
    else if (w == "none") {}
    else if (w == "kernel") s.kernel = true;
    else if (w == "memcpy") s.memcpy = true;
    else if (w == "memset") s.memset = true;
    else if (w == "sync") s.sync = true;
    else if (w == "memory") s.memory = true;
    else if (w == "graph") s.graph = true;
    else if (w == "graph_nodes") graph_nodes = true;
    else if (w == "overhead") s.overhead = true;
    else if (w == "api") s.runtime = s.driver = true;
    else if (w == "runtime") s.runtime = true;
    else if (w == "driver") s.driver = true;
    else if (w == "runtime_all") s.runtime_all = true;
    else if (w == "api_activity") s.api_activity = true;
    else if (w == "api_callbacks") callbacks = true;
    else if (w == "nvtx") {}  // NVTX capture follows Config::nvtx_capture
    else
      throw std::invalid_argument("cupti_activities: unknown activity '" + w +
                                  "' (expected default, minimal, full, none or a comma list of kernel, memcpy, "
                                  "memset, sync, memory, graph, graph_nodes, overhead, runtime, driver, api, runtime_all, "
                                  "api_activity, api_callbacks, nvtx)");
  }
  if (!any_word) def();
  if (callbacks) s.api_activity = false;
  if (graph_nodes) s.graph = false;  // wherever it stands, as api_callbacks
  return s;
}

bool is_selected_api(const char* name) {
  static const char* const kPrefixes[] = {
      // runtime
      "cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaDeviceSynchronize", "cudaStreamSynchronize",
      "cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaGraphLaunch",
      // driver
      "cuLaunch", "cuMemcpy", "cuMemset", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
      "cuStreamWaitEvent", "cuMemAlloc", "cuMemFree", "cuMemHostAlloc", "cuGraphLaunch"};
  if (!name) return false;
  for (const char* p : kPrefixes)
    if (std::strncmp(name, p, std::strlen(p)) == 0) return true;
  return false;
}

namespace {

constexpr uint32_t kRuntimeCbids = CUPTI_RUNTIME_TRACE_CBID_SIZE;
constexpr uint32_t kDriverCbids = CUPTI_DRIVER_TRACE_CBID_SIZE;
constexpr size_t kMaxPooledBuffers = 16;
constexpr int kClockChecksPerRound = 5;

struct ContextInfo {
  CUcontext ctx = nullptr;
  uint32_t id = 0;
  uint32_t device = 0;
  CUstream stream = nullptr;
  CUdeviceptr marker = 0;
};

struct State {
  std::mutex mu;
  std::function<std::unique_ptr<CuptiApi>()> factory;
  std::unique_ptr<CuptiApi> api;  // never destroyed once loaded: CUPTI may call back at any time
  std::vector<std::unique_ptr<CuptiApi>> replaced;  // earlier APIs a test swapped out, kept alive for the same reason
  bool activated = false;         // subscribed and callbacks registered
  bool session = false;
  bool waiting_for_cuda = false;
  ActivitySet wanted, enabled;
  // Sampled mode: `wanted` is enabled only while `detail` is on (inside windows); subscribed all along, so a
  // window starts with activity enabling only.
  bool sampled = false;
  bool detail = true;
  std::string spec;
  std::string status = "off: no session";
  // Buffers have their own lock: CUPTI may request or complete a buffer inside any CUPTI call made with
  // `mu` held (enable, disable), on the same thread.
  std::mutex pool_mu;
  size_t buffer_bytes = 8u << 20;
  std::vector<uint8_t*> pool;
  // Buffers go out zeroed and CUPTI is told so (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER): see
  // buffer_requested. False only where CUPTI refused the attribute, or a benchmark asked for CUPTI's way.
  bool prezeroed = false;
  std::vector<ContextInfo> contexts;
  bool device_info_written = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  // Selected callback ids per domain (built once from CUPTI's names).
  std::vector<uint8_t> runtime_selected, driver_selected;
  // cuptiSetThreadIdType(SYSTEM) succeeded: API activity records name their caller by OS thread id. Without
  // it api_activity falls back to callbacks; `no_system_tids` says why (for the status line).
  bool system_tids = false;
  std::string no_system_tids;
  // The API activity kinds (RUNTIME, DRIVER) are on, with the unselected calls off (guarded by mu).
  bool runtime_records_on = false, driver_records_on = false;
  // CUDA graphs at graph level (see graph_trace_wanted): whether CUPTI's graph-level tracing is on now, and
  // whether a graph may exist that was instantiated while it was off (then it must never be switched on).
  std::atomic<bool> graph_trace_on{false};
  std::atomic<bool> untraced_graph_exec{false};
  std::string untraced_graph_why;  // guarded by mu
  std::string graph_note;          // guarded by mu: why graphs asked for at graph level are traced node by node

  std::atomic<bool> need_clock_check{false};
  std::atomic<bool> exiting{false};  // the process is exiting: no more CUDA calls of ours
  bool exit_flushed = false;         // gpu_at_exit handed everything over (guarded by mu)
  std::mutex check_mu;               // one clock-check round at a time; exit waits for it
  std::atomic<bool> buffers_registered{false};
  uint32_t flush_period_ms = 100;  // cuptiActivityFlushPeriod; 0 = only when a buffer fills (and at stop)
  std::atomic<bool> record_api{false};
  // Bumped whenever the recorded callbacks change: an EXIT may then never come, so each thread's count of
  // open runtime calls starts again from zero.
  std::atomic<uint32_t> record_gen{0};
  // Which callback ids produce records (the internal ones only feed the clock checks).
  std::atomic<uint8_t> record_runtime[kRuntimeCbids] = {};
  std::atomic<uint8_t> record_driver[kDriverCbids] = {};
  std::atomic<uint32_t> api_names[2][kDriverCbids > kRuntimeCbids ? kDriverCbids : kRuntimeCbids] = {};

  // The channel and translator for the running session; guarded by chan_mu (buffer_completed may run on
  // any thread, also after the session stopped).
  std::mutex chan_mu;
  runtime::Channel* channel = nullptr;  // opened with the first GPU record: no GPU records, no channel
  bool channel_allowed = false;         // a session runs that this collector started in
  std::unique_ptr<ActivityTranslator> translator;
  uint64_t dropped = 0;
};

State& S() {
  static State* s = new State;  // never destroyed: CUPTI threads may call in while the process exits
  return *s;
}

// Per-thread state of the callbacks, in one initial-exec TLS block like the hot path's (no TLS call per
// callback).
struct CallbackTls {
  bool internal;             // this thread is running the collector's own CUDA calls (clock checks)
  int runtime_depth;         // recorded runtime calls open on this thread
  uint32_t record_gen;       // State::record_gen the depth belongs to
  uint64_t check_before;     // clock check in progress: host ticks before the marker memset
  uint32_t check_device;
  uint32_t check_correlation;
  uint32_t os_tid;
};
__thread CallbackTls t_cb __attribute__((tls_model("initial-exec")));

// The calling thread's OS id, read once per thread.
inline uint32_t os_tid_of(CallbackTls& tls) {
  if (tls.os_tid == 0) tls.os_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tls.os_tid;
}

uint64_t CUPTIAPI session_timestamp() { return detail::now(); }

// The session's "gpu" channel, opened on first use (chan_mu held).
runtime::Channel* channel_locked(State& s) {
  if (!s.channel && s.channel_allowed) s.channel = runtime::open_channel("gpu");
  return s.channel;
}

void write_to_channel(const void* rec, uint32_t size) {
  // chan_mu is held by the caller (buffer_completed, clock checks).
  if (runtime::Channel* ch = channel_locked(S())) ch->write(rec, size);
}

// --- buffers -----------------------------------------------------------------------------------------------

// CUPTI asks for a buffer on the thread that has a record to write: with its per-thread activity buffers (its
// default) that is the application's thread whenever the thread makes host-side records (syncs, allocations,
// overhead, API records), again after every periodic flush took the last one. Unless told the buffer is
// zeroed already, CUPTI then clears all of it there, 8 MB on the thread being profiled every flush period.
// So buffers go out zeroed: a new one from calloc (zero pages from the kernel), a returned one cleared up
// to what CUPTI filled by the thread that delivered it (CUPTI's worker, or whoever flushes), off that path.
uint8_t* new_buffer(size_t bytes, bool zeroed) {
  return static_cast<uint8_t*>(zeroed ? std::calloc(1, bytes) : std::aligned_alloc(8, bytes));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  State& s = S();
  uint8_t* b = nullptr;
  size_t bytes;
  bool zeroed;
  {
    std::lock_guard lk(s.pool_mu);
    bytes = s.buffer_bytes;
    zeroed = s.prezeroed;
    if (!s.pool.empty()) {
      b = s.pool.back();
      s.pool.pop_back();
    }
  }
  if (!b) b = new_buffer(bytes, zeroed);
  *buffer = b;
  *size = b ? bytes : 0;
  *max_records = 0;
}

// `size` is what the buffer was handed out with: one of another size (the setting changed meanwhile) is freed.
void release_buffer(uint8_t* buffer, size_t size, size_t valid) {
  State& s = S();
  std::unique_lock lk(s.pool_mu);
  if (s.pool.size() >= kMaxPooledBuffers || size != s.buffer_bytes || valid > size) {
    lk.unlock();
    std::free(buffer);
    return;
  }
  if (s.prezeroed) {
    // CUPTI wrote nothing past `valid`; clear outside the lock (buffer_requested may be waiting on it).
    lk.unlock();
    std::memset(buffer, 0, valid);
    lk.lock();
  }
  s.pool.push_back(buffer);
}

// Frees the pooled buffers (pool_mu held): their size or zeroing no longer fits.
void drain_pool_locked(State& s) {
  for (uint8_t* b : s.pool) std::free(b);
  s.pool.clear();
}

// Sets how buffers are handed out (mu held, before CUPTI asks for the next one). A few zeroed buffers are
// made and touched here, at start, so that the first requests on the application's thread neither zero nor
// fault in 8 MB.
void set_buffer_policy_locked(State& s, size_t bytes, bool want_zeroed) {
  bool zeroed = false;
  if (s.api) {
    uint8_t v = want_zeroed ? 1 : 0;
    size_t n = sizeof(v);
    zeroed = s.api->cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &n, &v) == CUPTI_SUCCESS &&
             want_zeroed;
  }
  std::lock_guard pl(s.pool_mu);
  if (s.buffer_bytes != bytes || s.prezeroed != zeroed) drain_pool_locked(s);
  s.buffer_bytes = bytes;
  s.prezeroed = zeroed;
  constexpr size_t kPrefilled = 2;
  while (zeroed && s.pool.size() < kPrefilled) {
    uint8_t* b = new_buffer(bytes, true);
    if (!b) break;
    std::memset(b, 0, bytes);  // fault the pages in now
    s.pool.push_back(b);
  }
}

void translate_buffer(uint8_t* buffer, size_t valid) {
  State& s = S();
  std::lock_guard lk(s.chan_mu);
  if (!s.translator || !s.api) return;
  CUpti_Activity* rec = nullptr;
  while (valid > 0 && s.api->cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
    s.translator->translate(rec);
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  State& s = S();
  translate_buffer(buffer, valid);
  size_t dropped = 0;
  if (s.api && s.api->cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
    std::lock_guard lk(s.chan_mu);
    s.dropped += dropped;
    if (runtime::Channel* ch = channel_locked(s)) runtime::add_drops(ch->thread_id(), "cupti_dropped", dropped, 0);
  }
  release_buffer(buffer, size, valid);
}

// --- callbacks ---------------------------------------------------------------------------------------------

uint32_t api_name(int domain_index, CUpti_CallbackId cbid, const char* name) {
  std::atomic<uint32_t>& slot = S().api_names[domain_index][cbid];
  uint32_t id = slot.load(std::memory_order_relaxed);
  if (id == 0) {
    id = runtime::intern(name ? name : "<cuda api>");
    slot.store(id, std::memory_order_relaxed);
  }
  return id;
}

void on_resource(CUpti_CallbackId cbid, const void* data) {
  State& s = S();
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
    // Instantiated without graph-level tracing: launching it with that tracing on would crash CUPTI.
    if (!s.graph_trace_on.load()) s.untraced_graph_exec.store(true);
    return;
  }
  const auto* rd = static_cast<const CUpti_ResourceData*>(data);
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // Never touch a destroyed context again (the clock checks at stop use the live ones).
    std::lock_guard lk(s.mu);
    std::erase_if(s.contexts, [&](const ContextInfo& c) { return c.ctx == rd->context; });
    return;
  }
  if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) return;
  ContextInfo c;
  c.ctx = rd->context;
  {
    std::lock_guard lk(s.mu);
    if (!s.api) return;
    s.api->cuptiGetContextId(c.ctx, &c.id);
    s.api->cuptiGetDeviceId(c.ctx, &c.device);
    s.contexts.push_back(c);
  }
  {
    std::lock_guard lk(s.chan_mu);
    if (s.translator) s.translator->set_context_device(c.id, c.device);
  }
  s.need_clock_check.store(true);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) return on_resource(cbid, data);
  const bool runtime_api = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime_api && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  State& s = S();
  CallbackTls& tls = t_cb;
  if (const uint32_t g = s.record_gen.load(std::memory_order_relaxed); INFERSCOPE_UNLIKELY(tls.record_gen != g)) {
    tls.runtime_depth = 0;
    tls.record_gen = g;
  }
  if (tls.internal) {
    // The collector's own calls (clock checks): remember their correlation, record nothing.
    if (cb->callbackSite != CUPTI_API_EXIT) return;
    std::lock_guard lk(s.chan_mu);
    if (!s.translator) return;
    if (!runtime_api && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async) {
      s.translator->expect_clock_check(cb->correlationId, tls.check_device, tls.check_before);
      tls.check_correlation = cb->correlationId;
    } else {
      s.translator->ignore_correlation(cb->correlationId);
    }
    return;
  }
  const bool recorded = runtime_api ? cbid < kRuntimeCbids && s.record_runtime[cbid].load(std::memory_order_relaxed)
                                    : cbid < kDriverCbids && s.record_driver[cbid].load(std::memory_order_relaxed);
  if (!recorded) return;
  // A driver call made inside a recorded runtime call (cudaLaunchKernel -> cuLaunchKernel) shares its
  // correlation id: the runtime record already explains it.
  if (!runtime_api && tls.runtime_depth > 0) return;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (runtime_api) ++tls.runtime_depth;
    if (cb->correlationData) *cb->correlationData = detail::now();
    return;
  }
  const uint64_t end = detail::now();
  if (runtime_api && tls.runtime_depth > 0) --tls.runtime_depth;
  const uint64_t start = cb->correlationData ? *cb->correlationData : end;
  if (start == 0) return;  // entered before recording was switched on
  CudaApiRecord r{};
  r.h = RecordHeader{RecordKind::kCudaApi, static_cast<uint8_t>(runtime_api ? ApiDomain::kRuntime : ApiDomain::kDriver),
                     static_cast<uint16_t>(sizeof(CudaApiRecord))};
  r.cbid = cbid;
  r.start = start;
  r.end = end;
  r.correlation = cb->correlationId;
  r.name = api_name(runtime_api ? 0 : 1, cbid, cb->functionName);
  r.os_tid = os_tid_of(tls);
  detail::emit_record(&r, sizeof(r));
}

// --- enabling ------------------------------------------------------------------------------------------------

std::string err(CuptiApi& api, CUptiResult r) { return api.result_string(r); }

// Whether CUPTI's graph-level tracing (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) should be on for `want` (mu held): the
// rule is graph_level_wanted's (cupti_collector.hpp).
bool graph_trace_wanted(const State& s, const ActivitySet& want, bool idle) {
  return graph_level_wanted(s.untraced_graph_exec.load(), s.graph_trace_on.load(), s.wanted.graph, want, idle);
}

// Whether CUDA was in use before CUPTI subscribed (a session started in-process after the program initialised
// CUDA): graphs instantiated then went unseen, so graph-level tracing must stay off.
bool cuda_in_use(CuptiApi& api) {
  CUcontext cur = nullptr;
  if (api.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) return true;
  int n = 0;
  if (api.cuDeviceGetCount(&n) != CUDA_SUCCESS) return false;  // not initialised: no context, no graph
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    unsigned flags = 0;
    int active = 0;
    if (api.cuDeviceGet(&d, i) == CUDA_SUCCESS && api.cuDevicePrimaryCtxGetState(d, &flags, &active) == CUDA_SUCCESS &&
        active)
      return true;
  }
  return false;
}

void build_selection(State& s) {
  if (!s.runtime_selected.empty()) return;
  s.runtime_selected.assign(kRuntimeCbids, 0);
  s.driver_selected.assign(kDriverCbids, 0);
  const char* name = nullptr;
  for (uint32_t i = 1; i < kRuntimeCbids; ++i)
    if (s.api->cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, i, &name) == CUPTI_SUCCESS && is_selected_api(name))
      s.runtime_selected[i] = 1;
  for (uint32_t i = 1; i < kDriverCbids; ++i)
    if (s.api->cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, i, &name) == CUPTI_SUCCESS && is_selected_api(name))
      s.driver_selected[i] = 1;
}

// Brings CUPTI from `s.enabled` to `wanted` (mu held). Returns "" or what failed. `idle`: collection pauses
// (a session ends, a sampled window closes) rather than being asked for less.
std::string apply_locked(State& s, const ActivitySet& wanted, bool idle = false) {
  CuptiApi& api = *s.api;
  // API activity records that cannot name their caller would lose every call's thread: callbacks instead.
  ActivitySet want = wanted;
  if (!s.system_tids) want.api_activity = false;
  s.record_gen.fetch_add(1, std::memory_order_relaxed);
  std::string failed;
  auto kind = [&](bool on, bool was, CUpti_ActivityKind k, const char* what) {
    if (on == was) return;
    CUptiResult r = on ? api.cuptiActivityEnable(k) : api.cuptiActivityDisable(k);
    if (r != CUPTI_SUCCESS && on) failed += std::string(failed.empty() ? "" : "; ") + what + ": " + err(api, r);
  };
  const ActivitySet& was = s.enabled;
  kind(want.kernel, was.kernel, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel");
  kind(want.memcpy, was.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy");
  kind(want.memcpy, was.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY2, "memcpy peer");
  kind(want.memset, was.memset, CUPTI_ACTIVITY_KIND_MEMSET, "memset");
  kind(want.sync, was.sync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "sync");
  kind(want.memory, was.memory, CUPTI_ACTIVITY_KIND_MEMORY2, "memory");
  const bool graph_on = graph_trace_wanted(s, want, idle);
  if (graph_on != s.graph_trace_on.load()) {
    // Marked off before it goes off, on only once it is on: a graph instantiated while it switches counts as
    // instantiated without it (the safe side).
    if (!graph_on) s.graph_trace_on.store(false);
    CUptiResult r = graph_on ? api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
                             : api.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (graph_on && r == CUPTI_SUCCESS) s.graph_trace_on.store(true);
    else if (graph_on) failed += std::string(failed.empty() ? "" : "; ") + "graph: " + err(api, r);
  }
  if (want.graph && !s.graph_trace_on.load()) {
    // Not a failure of the request: the graphs' kernels are recorded instead, and the status says why.
    if (s.untraced_graph_exec.load() && want.kernel)
      s.graph_note = "CUDA graphs node by node, not at graph level: " +
                     (s.untraced_graph_why.empty() ? std::string("a graph was instantiated while graph-level tracing was off")
                                                   : s.untraced_graph_why) +
                     ", and CUPTI crashes when such a graph is launched with graph-level tracing on";
    want.graph = false;
  }
  kind(want.overhead, was.overhead, CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead");
  kind(want.any(), was.any(), CUPTI_ACTIVITY_KIND_CONTEXT, "context");

  // Callbacks: the selected calls (api), every runtime call (runtime_all), and the collector's own driver
  // calls for the clock checks whenever memsets are recorded.
  build_selection(s);
  const bool internal = want.memset;
  // api_activity: the selected calls become CUPTI activity records (no callback on the calling thread).
  // Every call's activity records on with the kind, then the calls that explain nothing off again (the kind
  // overrides per-call settings made before it, not after). Off: the kind and the selected calls one by one,
  // so no per-call setting outlives the kind whichever way CUPTI combines them. A kind CUPTI refuses leaves
  // those calls on callbacks. Returns whether the kind is on now.
  auto api_records = [&](bool on, bool& is_on, CUpti_ActivityKind k, const std::vector<uint8_t>& selected,
                         uint32_t n, CUptiResult (CuptiApi::*per_call)(CUpti_CallbackId, uint8_t), const char* what) {
    if (on == is_on) return is_on;
    if (on) {
      if (CUptiResult r = api.cuptiActivityEnable(k); r != CUPTI_SUCCESS) {
        failed += std::string(failed.empty() ? "" : "; ") + what + ": " + err(api, r) + " (callbacks instead)";
        return is_on;
      }
    } else {
      api.cuptiActivityDisable(k);
    }
    for (uint32_t i = 1; i < n; ++i)
      if (on ? !selected[i] : bool(selected[i])) (api.*per_call)(i, 0);
    return is_on = on;
  };
  const bool rt_act = api_records(want.runtime_as_activity(), s.runtime_records_on, CUPTI_ACTIVITY_KIND_RUNTIME,
                                  s.runtime_selected, kRuntimeCbids, &CuptiApi::cuptiActivityEnableRuntimeApi,
                                  "runtime api_activity");
  const bool drv_act = api_records(want.driver_as_activity(), s.driver_records_on, CUPTI_ACTIVITY_KIND_DRIVER,
                                   s.driver_selected, kDriverCbids, &CuptiApi::cuptiActivityEnableDriverApi,
                                   "driver api_activity");
  for (uint32_t i = 1; i < kRuntimeCbids; ++i) {
    const bool rec = want.runtime_all || (want.runtime && !rt_act && s.runtime_selected[i]);
    const bool was_on = s.record_runtime[i].load();
    if (rec != bool(was_on)) api.cuptiEnableCallback(rec, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, i);
    s.record_runtime[i].store(rec);
  }
  for (uint32_t i = 1; i < kDriverCbids; ++i) {
    const bool rec = want.driver && !drv_act && s.driver_selected[i];
    const bool need = rec || (internal && (i == CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async ||
                                           i == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
    const bool had = s.record_driver[i].load() ||
                     (s.enabled.memset && (i == CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async ||
                                           i == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
    if (need != had) api.cuptiEnableCallback(need, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, i);
    s.record_driver[i].store(rec);
  }
  s.record_api.store(want.runtime || want.driver || want.runtime_all);
  s.enabled = want;
  return failed;
}

std::string describe(const ActivitySet& a) {
  std::string out;
  auto add = [&](bool on, const char* w) {
    if (on) out += std::string(out.empty() ? "" : ",") + w;
  };
  add(a.kernel, "kernel"), add(a.memcpy, "memcpy"), add(a.memset, "memset"), add(a.sync, "sync");
  add(a.memory, "memory"), add(a.graph, "graph"), add(a.overhead, "overhead"), add(a.runtime, "runtime");
  add(a.driver, "driver"), add(a.runtime_all, "runtime_all");
  add(a.any_api_as_activity(), "api_activity");
  return out.empty() ? "none" : out;
}

// The collector's status while it records (mu held): what is enabled, and what was asked for but is not.
std::string status_line(State& s, const std::string& failed) {
  std::string line = "on: CUPTI " + (s.api->origin.empty() ? std::string("(test)") : s.api->origin) + "; activities " +
                     (s.sampled ? describe(s.wanted) + (s.detail ? " in full now, inside sampled windows later"
                                                                          : " inside sampled windows only")
                                : describe(s.enabled));
  if (s.wanted.any_api_as_activity() && !s.system_tids)
    line += "; API calls on callbacks: CUPTI gives no OS thread ids (" + s.no_system_tids + ")";
  if (!s.graph_note.empty()) line += "; " + s.graph_note;
  if (!failed.empty()) line += "; not available: " + failed;
  return line;
}

void gpu_at_exit();

// Subscribes and registers the callbacks (mu held). Returns the status line. `inside_cuinit`: called by the
// driver's injection entry point, before any context exists.
std::string activate_locked(State& s, bool inside_cuinit) {
  CuptiApi& api = *s.api;
  if (!s.activated) {
    CUptiResult r;
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
    if (api.has_subscribe_v2()) {
      CUpti_SubscriberParams p{};
      p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      p.subscriberName = "InferScope";
      p.oldSubscriberName = other;
      p.oldSubscriberSize = sizeof(other);
      r = api.cuptiSubscribe_v2(&s.subscriber, on_callback, nullptr, &p);
    } else {
      r = api.cuptiSubscribe(&s.subscriber, on_callback, nullptr);
    }
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return std::string("off: another CUPTI subscriber is already attached to this process (") +
             (other[0] ? other : "e.g. Nsight Systems, Nsight Compute, torch.profiler/Kineto or DCGM") +
             "); CUPTI allows one at a time, so GPU collection is off";
    if (r != CUPTI_SUCCESS) return "off: CUPTI could not start (" + err(api, r) + "); no GPU or no driver?";
    // API activity records name their caller by OS thread id (gettid), as the thread table does; set before
    // any activity kind is enabled. Without it api_activity falls back to callbacks.
    r = api.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    s.system_tids = r == CUPTI_SUCCESS;
    s.no_system_tids = s.system_tids ? "" : "cuptiSetThreadIdType(SYSTEM): " + err(api, r);
    // The session clock for every activity timestamp.
    if ((r = api.cuptiActivityRegisterTimestampCallback(session_timestamp)) != CUPTI_SUCCESS) {
      api.cuptiUnsubscribe(s.subscriber);
      return "off: CUPTI cannot use the session clock (" + err(api, r) + ")";
    }
    if (!s.buffers_registered.load()) {
      if ((r = api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
        api.cuptiUnsubscribe(s.subscriber);
        return "off: CUPTI buffer callbacks refused (" + err(api, r) + ")";
      }
      s.buffers_registered.store(true);
    }
    // Larger device-side buffers so bursts of tiny kernels are not dropped between flushes.
    size_t v = 32u << 20, n = sizeof(v);
    api.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &n, &v);
    size_t pool = 16;
    api.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &n, &pool);
    set_buffer_policy_locked(s, s.buffer_bytes, true);
    api.cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE);
    // From here on every graph instantiation is reported; one made before may exist only if CUDA was in use.
    if (!inside_cuinit && cuda_in_use(api)) {
      s.untraced_graph_exec.store(true);
      s.untraced_graph_why = "CUDA was in use before GPU collection attached, so graphs may predate it";
    }
    s.activated = true;
    static bool exit_hook = false;
    if (!exit_hook) exit_hook = std::atexit(gpu_at_exit) == 0;
  }
  // CUPTI's worker hands over buffers on its own every flush_period_ms (the writer never waits on CUPTI).
  api.cuptiActivityFlushPeriod(s.flush_period_ms);
  {
    std::lock_guard cl(s.chan_mu);
    if (s.translator) s.translator->set_system_thread_ids(s.system_tids);
  }
  return status_line(s, s.detail ? apply_locked(s, s.wanted) : apply_locked(s, ActivitySet{}, /*idle=*/true));
}

void load_api_locked(State& s) {
  if (s.api) return;
  s.api = s.factory ? s.factory() : load_cupti_api();
}

std::string start_locked(State& s, bool inside_cuinit = false) {
  load_api_locked(s);
  if (!s.api->load_error.empty()) return "off: " + s.api->load_error;
  return activate_locked(s, inside_cuinit);
}

// Returns false when the driver cannot say yet (a session started in-process before the program initialised
// CUDA): the next round tries again.
bool write_device_info(State& s) {
  CuptiApi& api = *s.api;
  int n = 0, ver = 0;
  if (api.cuDeviceGetCount(&n) != CUDA_SUCCESS || n <= 0) return false;
  runtime::set_process_info("gpu.count", std::to_string(n));
  if (api.cuDriverGetVersion(&ver) == CUDA_SUCCESS)
    runtime::set_process_info("cuda.driver_version", std::to_string(ver / 1000) + "." + std::to_string(ver % 1000 / 10));
  // Where each ordinal sits on the PCI bus: NVML numbers devices otherwise (all of the machine's, in bus
  // order, whatever CUDA_VISIBLE_DEVICES says), and the system collector maps its counters onto these.
  std::vector<std::string> locations(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    if (api.cuDeviceGet(&d, i) != CUDA_SUCCESS) continue;
    int domain = 0, bus = 0, dev = 0;
    if (api.cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d) == CUDA_SUCCESS &&
        api.cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d) == CUDA_SUCCESS &&
        api.cuDeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d) == CUDA_SUCCESS) {
      locations[size_t(i)] = runtime::format_pci_location(uint32_t(domain), uint32_t(bus), uint32_t(dev));
      runtime::set_process_info("gpu." + std::to_string(i) + ".pci_location", locations[size_t(i)]);
    }
    char name[256] = {};
    api.cuDeviceGetName(name, sizeof(name) - 1, d);
    int major = 0, minor = 0;
    api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    size_t mem = 0;
    api.cuDeviceTotalMem_v2(&mem, d);
    const std::string k = "gpu." + std::to_string(i) + ".";
    runtime::set_process_info(k + "name", name);
    runtime::set_process_info(k + "compute_capability", std::to_string(major) + "." + std::to_string(minor));
    runtime::set_process_info(k + "memory_bytes", std::to_string(mem));
    // How many SMs: the share an NCCL kernel's blocks take from compute beside it (ranks.cpp, overlap).
    int sms = 0;
    if (api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) == CUDA_SUCCESS && sms > 0)
      runtime::set_process_info(k + "sm_count", std::to_string(sms));
  }
  runtime::set_cuda_device_locations(std::move(locations));
  return true;
}

// Round trips against every context the program created (see ClockCheckRecord). Runs on the writer
// thread (first time a context appears) and in stop(); never holds mu across CUDA calls.
void run_clock_checks(State& s) {
  std::vector<ContextInfo> ctxs;
  {
    std::lock_guard lk(s.mu);
    if (!s.api) return;
    if (!s.device_info_written) s.device_info_written = write_device_info(s);
    if (!s.enabled.memset) return;
    ctxs = s.contexts;
  }
  std::string used;
  for (auto& c : ctxs) used += (used.empty() ? "" : ",") + std::to_string(c.device);
  if (!used.empty()) runtime::set_process_info("gpu.devices_used", used);
  CuptiApi& api = *s.api;
  CallbackTls& tls = t_cb;
  // API activity records of these calls name this thread: the translator leaves this window of it out.
  {
    std::lock_guard lk(s.chan_mu);
    if (s.translator) s.translator->begin_internal(os_tid_of(tls), detail::now());
  }
  tls.internal = true;
  for (auto& c : ctxs) {
    if (api.cuCtxPushCurrent_v2(c.ctx) != CUDA_SUCCESS) continue;
    bool ok = true;
    if (!c.stream) ok = api.cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    if (ok && !c.marker) ok = api.cuMemAlloc_v2(&c.marker, 4) == CUDA_SUCCESS;
    for (int i = 0; ok && i < kClockChecksPerRound; ++i) {
      tls.check_device = c.device;
      tls.check_correlation = 0;
      tls.check_before = detail::now();
      if (api.cuMemsetD8Async(c.marker, 0, 1, c.stream) != CUDA_SUCCESS) break;
      if (api.cuStreamSynchronize(c.stream) != CUDA_SUCCESS) break;
      const uint64_t after = detail::now();
      std::lock_guard lk(s.chan_mu);
      if (s.translator && tls.check_correlation) s.translator->complete_clock_check(tls.check_correlation, after);
    }
    CUcontext popped;
    api.cuCtxPopCurrent_v2(&popped);
    std::lock_guard lk(s.mu);
    for (auto& k : s.contexts)
      if (k.ctx == c.ctx) k.stream = c.stream, k.marker = c.marker;
  }
  tls.internal = false;
  std::lock_guard lk(s.chan_mu);
  if (s.translator) s.translator->end_internal(tls.os_tid, detail::now());
}

// Hands everything CUPTI holds to the session and switches collection off (mu not held).
void flush_and_disable(State& s) {
  s.api->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard lk(s.mu);
    apply_locked(s, ActivitySet{}, /*idle=*/true);
  }
  s.api->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

// Registered with atexit right after CUPTI is subscribed, so it runs before the exit handlers CUPTI and the
// CUDA runtime registered later (handlers run in reverse order). The session's own exit handler may have
// been registered earlier (a session started at load, CUPTI attached later by the injection): it would run
// after CUPTI is torn down, so the GPU side is handed over here. No CUDA calls: the runtime may be gone.
void gpu_at_exit() {
  State& s = S();
  s.exiting.store(true);
  std::lock_guard ck(s.check_mu);  // a clock check the writer is running finishes first
  {
    std::lock_guard lk(s.mu);
    // Sampled mode between windows: nothing enabled, but the last window's records may still be buffered.
    if (!s.session || !s.activated || s.exit_flushed || (!s.enabled.any() && !s.sampled)) return;
    s.exit_flushed = true;
  }
  flush_and_disable(s);
}

std::string stats_line(State& s) {
  std::lock_guard lk(s.chan_mu);
  if (!s.translator) return {};
  TranslateStats t = s.translator->stats();
  return "; recorded " + std::to_string(t.kernels) + " kernels, " + std::to_string(t.memcpys) + " copies, " +
         std::to_string(t.memsets) + " memsets, " + std::to_string(t.syncs) + " syncs, " + std::to_string(t.memory) +
         " allocations, " + std::to_string(t.graphs) + " graph launches, " + std::to_string(t.clock_checks) +
         " clock checks, " + std::to_string(s.dropped) + " dropped by CUPTI";
}

class CuptiCollector final : public runtime::Collector {
 public:
  const char* name() const override { return "cupti"; }
  bool wanted(const Config& c) const override { return c.cupti; }

  std::string start(const Config& c) override {
    State& s = S();
    ActivitySet want;
    try {
      want = parse_activity_set(c.cupti_activities + (c.graph_nodes ? ",graph_nodes" : ""));
    } catch (const std::exception& e) {
      return std::string("off: ") + e.what();
    }
    {
      std::lock_guard lk(s.chan_mu);
      s.channel = nullptr;
      s.channel_allowed = true;
      s.dropped = 0;
      s.translator = std::make_unique<ActivityTranslator>(write_to_channel);
      s.translator->set_api_namer([](bool runtime, uint32_t cbid) -> uint32_t {
        State& st = S();
        const uint32_t n = runtime ? kRuntimeCbids : kDriverCbids;
        if (cbid >= n) return 0;
        if (uint32_t id = st.api_names[runtime ? 0 : 1][cbid].load(std::memory_order_relaxed)) return id;
        const char* name = nullptr;
        if (st.api) st.api->cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
        return api_name(runtime ? 0 : 1, cbid, name);
      });
      // Callers seen only in API activity records join the thread table (the analyzer puts their calls there).
      s.translator->set_thread_hook([](uint32_t os_tid) { runtime::thread_for_os_tid(os_tid); });
    }
    std::lock_guard lk(s.mu);
    s.session = true;
    s.exit_flushed = false;
    s.graph_note.clear();
    s.sampled = records_in_windows(c.mode);
    s.detail = detail_at_start(c.mode);
    s.device_info_written = false;  // each session's dump says which devices there are
    s.wanted = want;
    s.spec = c.cupti_activities;
    if (c.cupti_buffer_kb >= 64) {
      std::lock_guard pl(s.pool_mu);
      if (s.buffer_bytes != size_t(c.cupti_buffer_kb) * 1024) {
        drain_pool_locked(s);
        s.buffer_bytes = size_t(c.cupti_buffer_kb) * 1024;
      }
    }
    // Started at load time (LD_PRELOAD by iscope-run) before the program touched CUDA: wait for the driver
    // to call InitializeInjection inside cuInit, so a program that never uses CUDA never loads it.
    const char* inj = std::getenv("CUDA_INJECTION64_PATH");
    if (!s.api && !s.factory && inj && *inj && !driver_already_loaded()) {
      s.waiting_for_cuda = true;
      s.status = "on: waiting for the program to initialise CUDA (injection)";
      return s.status;
    }
    s.status = start_locked(s);
    if (s.status.rfind("off", 0) == 0) runtime::log(LogLevel::kWarn, "GPU collection is off: " + s.status.substr(5));
    if (s.activated) {
      // CUDA may be initialised already (a session started in-process): the contexts created before the
      // subscription produced no resource callback, so take the calling thread's current one.
      CUcontext cur = nullptr;
      if (s.api->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) {
        bool known = false;
        for (auto& k : s.contexts) known |= k.ctx == cur;
        if (!known) {
          ContextInfo c;
          c.ctx = cur;
          s.api->cuptiGetContextId(cur, &c.id);
          s.api->cuptiGetDeviceId(cur, &c.device);
          s.contexts.push_back(c);
        }
      }
      s.need_clock_check.store(true);
    }
    for (auto& ctx : s.contexts) {
      std::lock_guard cl(s.chan_mu);
      s.translator->set_context_device(ctx.id, ctx.device);
    }
    return s.status;
  }

  void flush() override {
    State& s = S();
    if (!s.need_clock_check.load() || s.exiting.load()) return;
    std::lock_guard ck(s.check_mu);
    if (!s.exiting.load() && s.need_clock_check.exchange(false)) run_clock_checks(s);
  }

  // Sampled mode: a window starts with the activity kinds enabled and ends with them disabled; the records
  // CUPTI still holds arrive when a buffer fills or at stop (the writer places them by time). A clock check runs in
  // each window, since outside them nothing is enabled to check with.
  void set_detail(bool on) override {
    State& s = S();
    std::lock_guard lk(s.mu);
    if (!s.sampled) return;
    s.detail = on;
    if (!s.session || !s.activated || s.exit_flushed) return;
    apply_locked(s, on ? s.wanted : ActivitySet{}, /*idle=*/!on);
    if (on) s.need_clock_check.store(true);
  }

  void stop() override {
    State& s = S();
    bool active, enabled;
    {
      std::lock_guard lk(s.mu);
      enabled = s.enabled.any();
      active = s.activated && (enabled || s.sampled) && !s.exit_flushed;
      // The writer may still be switching windows: from here on set_detail changes nothing, so no window
      // enables the kinds again after they are disabled below.
      s.sampled = false;
    }
    if (active && enabled && !s.exiting.load()) {
      std::lock_guard ck(s.check_mu);
      run_clock_checks(s);
    }
    if (active) flush_and_disable(s);
    {
      std::lock_guard lk(s.mu);
      s.session = false;
      s.sampled = false;
      s.detail = true;
      if (s.waiting_for_cuda) {
        s.waiting_for_cuda = false;
        s.status = "off: CUDA was never initialised in this process (no driver, no GPU, or the program does not use CUDA)";
      }
    }
    std::string final_status;
    {
      std::lock_guard lk(s.mu);
      final_status = s.status;
      // Graphs met later in the session (a sampled window, a switch of activities) are said at its end too.
      if (final_status.rfind("on", 0) == 0 && !s.graph_note.empty() && final_status.find(s.graph_note) == std::string::npos)
        final_status += "; " + s.graph_note;
    }
    if (final_status.rfind("on", 0) == 0) final_status += stats_line(s);
    runtime::set_collector_status("cupti", final_status);
    std::lock_guard lk(s.chan_mu);
    s.channel = nullptr;
    s.channel_allowed = false;
  }
};

}  // namespace

void set_api_factory_for_test(std::function<std::unique_ptr<CuptiApi>()> factory) {
  State& s = S();
  std::lock_guard lk(s.mu);
  s.factory = std::move(factory);
  // A fake replaces whatever was loaded; the old one is kept alive (CUPTI may still hold its callbacks).
  if (s.api) s.replaced.push_back(std::move(s.api));
  s.activated = false;
  s.enabled = ActivitySet{};
  s.buffers_registered.store(false);
  for (auto& r : s.record_runtime) r.store(0);
  for (auto& r : s.record_driver) r.store(0);
  s.runtime_selected.clear();
  s.driver_selected.clear();
  s.contexts.clear();
  s.system_tids = false;
  s.runtime_records_on = s.driver_records_on = false;
  s.graph_trace_on.store(false);
  s.untraced_graph_exec.store(false);
  s.untraced_graph_why.clear();
}

void deliver_buffer_for_test(uint8_t* buffer, size_t valid_size) { translate_buffer(buffer, valid_size); }

bool graph_level_wanted(bool untraced_graph_exists, bool on_now, bool session_wants_graphs, const ActivitySet& want,
                        bool idle) {
  if (untraced_graph_exists) return false;
  const bool records_nodes = want.kernel || want.memcpy || want.memset;
  if (idle || (!want.graph && !records_nodes)) return on_now || session_wants_graphs;
  return want.graph;
}

}  // namespace inferscope::cupti

using namespace inferscope;

extern "C" INFERSCOPE_API void inferscope_register_cupti_collector() {
  static const bool done = [] {
    runtime::register_collector([] { return std::unique_ptr<runtime::Collector>(new cupti::CuptiCollector); });
    cupti::register_nvtx_collector();
    return true;
  }();
  (void)done;
}

extern "C" INFERSCOPE_API int inferscope_cupti_set_activities(const char* spec) {
  cupti::ActivitySet want;
  try {
    want = cupti::parse_activity_set(spec ? spec : "");
  } catch (const std::exception& e) {
    runtime::log(LogLevel::kError, e.what());
    return -1;
  }
  cupti::State& s = cupti::S();
  std::lock_guard lk(s.mu);
  if (!s.session || !s.activated) return -2;
  s.wanted = want;
  std::string failed = cupti::apply_locked(s, s.detail ? want : cupti::ActivitySet{});
  s.status = cupti::status_line(s, failed);
  return failed.empty() ? 0 : -1;
}

extern "C" INFERSCOPE_API int inferscope_cupti_set_flush_period(uint32_t ms) {
  cupti::State& s = cupti::S();
  std::lock_guard lk(s.mu);
  s.flush_period_ms = ms;
  if (!s.activated || !s.api) return -2;
  return s.api->cuptiActivityFlushPeriod(ms) == CUPTI_SUCCESS ? 0 : -1;
}

extern "C" INFERSCOPE_API int inferscope_cupti_set_buffer_policy(uint32_t kib, int prezeroed) {
  cupti::State& s = cupti::S();
  std::lock_guard lk(s.mu);
  if (!s.activated || !s.api) return -2;
  size_t bytes;
  {
    std::lock_guard pl(s.pool_mu);
    bytes = kib >= 64 ? size_t(kib) * 1024 : s.buffer_bytes;
  }
  cupti::set_buffer_policy_locked(s, bytes, prezeroed != 0);
  std::lock_guard pl(s.pool_mu);
  return s.prezeroed == (prezeroed != 0) ? 0 : -1;
}

extern "C" INFERSCOPE_API int inferscope_cupti_flush() {
  cupti::State& s = cupti::S();
  {
    std::lock_guard lk(s.mu);
    if (!s.activated) return -2;
  }
  return s.api->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS ? 0 : -1;
}

extern "C" INFERSCOPE_API int inferscope_cupti_deliver() {
  cupti::State& s = cupti::S();
  // check_mu, as a clock check holds it: the process's exit (gpu_at_exit) waits for the delivery to end before it
  // flushes and tears CUPTI down. buffer_completed, which CUPTI calls back from inside the flush, never takes it.
  std::lock_guard ck(s.check_mu);
  if (s.exiting.load()) return -2;
  {
    std::lock_guard lk(s.mu);  // not held across the flush: buffer_completed takes it
    if (!s.activated || !s.session || s.exit_flushed || !s.enabled.any()) return -2;
  }
  return s.api->cuptiActivityFlushAll(0) == CUPTI_SUCCESS ? 0 : -1;
}

extern "C" INFERSCOPE_API const char* inferscope_cupti_status() {
  static thread_local std::string copy;
  cupti::State& s = cupti::S();
  std::lock_guard lk(s.mu);
  copy = s.status;
  return copy.c_str();
}

extern "C" INFERSCOPE_API int InitializeInjection() {
  cupti::State& s = cupti::S();
  std::string status;
  {
    std::lock_guard lk(s.mu);
    if (!s.session || !s.waiting_for_cuda) return 1;  // a session started later activates CUPTI itself
    s.waiting_for_cuda = false;
    s.status = status = cupti::start_locked(s, /*inside_cuinit=*/true);
  }
  if (status.rfind("off", 0) == 0) runtime::log(LogLevel::kWarn, "GPU collection is off: " + status.substr(5));
  runtime::set_collector_status("cupti", status);
  return 1;
}
