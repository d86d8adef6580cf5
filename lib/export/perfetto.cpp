// The Perfetto / Chrome trace-event JSON writer. It streams: one pass over the records finds the time origin,
// which correlation ids have both a traced call and GPU work and which kernel names to shorten (and validates
// every record, so a malformed dump throws before a byte is written), a second pass writes each record as it
// comes. Memory holds a 64 KiB output buffer, a few bits per correlation id, the short kernel names, and per
// track a little state (named yet, a counter's last sample, a thread's current state), whatever the number of
// records.
//
// Tracks: the traced process holds the CPU threads (pid = the process id, tid = the OS thread id); each GPU is
// a pseudo-process "GPU N" (pid kGpuPidBase + N) with one thread per CUDA stream. Flows ("s" on the launch API
// call, "f" with bp "e" on the kernel/copy/memset/sync/graph, id = the correlation id) link them, one pair per
// id. Counters and thread states: perfetto_counters.hpp.
#include "dump/clock_model.hpp"
#include "dump/trace_bounds.hpp"
#include "dump/visit.hpp"
#include "export/perfetto.hpp"
#include "export/perfetto_counters.hpp"
#include "export/perfetto_json.hpp"
#include "text/escape.hpp"
#include "text/names.hpp"

#include <inferscope/counter_names.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferscope::exporter {
namespace {

using namespace inferscope;
using dump::DumpReader;
using perfetto::Args;
using perfetto::CounterSample;
using perfetto::CounterTracks;
using perfetto::EventWriter;
using perfetto::Name;
using text::append_json_escaped;
using text::json_quote;
using text::KernelNames;

constexpr int64_t kGpuPidBase = 1000000000;
constexpr uint32_t kTidDeviceWide = 0x7fffffff;  // GPU records that belong to no stream
constexpr uint32_t kTidMemory = 0x7ffffffe;      // allocations and frees
constexpr uint32_t kTidClockChecks = 0x7ffffffd;
constexpr uint32_t kNoStream = 0xffffffffu;
// A thread's state track: its tid plus this, clear of real tids (below 2^22) and of the tracks of channels and
// of threads without an OS id (0x40000000 + dump id).
constexpr int64_t kStateTidOffset = 0x20000000;
// The analysis's steps, a track of the traced process of their own (clear of real tids and of the above).
constexpr int64_t kTidSteps = 0x10000000;
// Correlation ids past this get no flow arrow (their events keep args.correlation): a bit per id below it
// bounds each set at 16 MiB against a hostile or corrupt dump.
constexpr uint32_t kMaxTrackedCorrelation = 1u << 27;

const char* copy_kind_name(uint8_t k) {
  switch (static_cast<CopyKind>(k)) {
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kHtoA: return "HtoA";
    case CopyKind::kAtoH: return "AtoH";
    case CopyKind::kAtoA: return "AtoA";
    case CopyKind::kAtoD: return "AtoD";
    case CopyKind::kDtoA: return "DtoA";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kHtoH: return "HtoH";
    case CopyKind::kPtoP: return "PtoP";
    default: return "unknown";
  }
}

const char* sync_kind_name(uint8_t k) {
  switch (static_cast<SyncKind>(k)) {
    case SyncKind::kEventSynchronize: return "Event synchronize";
    case SyncKind::kStreamWaitEvent: return "Stream wait event";
    case SyncKind::kStreamSynchronize: return "Stream synchronize";
    case SyncKind::kContextSynchronize: return "Context synchronize";
    default: return "Synchronize";
  }
}

/// Correlation ids, one bit each (ids from kMaxTrackedCorrelation on are never held).
class CorrelationSet {
 public:
  /// True when `id` was not held before.
  bool add(uint32_t id) {
    if (id == 0 || id >= kMaxTrackedCorrelation) return false;
    if (id / 64 >= bits_.size()) bits_.resize(id / 64 + 1, 0);
    const uint64_t bit = 1ull << (id % 64);
    const bool fresh = !(bits_[id / 64] & bit);
    bits_[id / 64] |= bit;
    return fresh;
  }
  bool contains(uint32_t id) const {
    return id != 0 && id < kMaxTrackedCorrelation && id / 64 < bits_.size() && (bits_[id / 64] >> (id % 64)) & 1;
  }

 private:
  std::vector<uint64_t> bits_;
};

/// Which launch flows the trace draws. A flow is one "s" inside the API call and one "f" inside the GPU work:
/// only where the dump holds both ends (a synchronization whose call was not traced has no start; a launch
/// whose work was dropped has no finish), and only once per correlation id (a second activity under the
/// same id keeps args.correlation but gets no arrow), so that every start has its finish.
class LaunchFlows {
 public:
  void saw_call(uint32_t id) { calls_.add(id); }
  void saw_activity(uint32_t id) { activities_.add(id); }
  /// True for the first call of a flow both ends of which are in the dump.
  bool start(uint32_t id) { return paired(id) && started_.add(id); }
  bool finish(uint32_t id) { return paired(id) && finished_.add(id); }

 private:
  bool paired(uint32_t id) const { return calls_.contains(id) && activities_.contains(id); }
  CorrelationSet calls_, activities_, started_, finished_;
};

/// Kernels by the name a person reads (names.hpp: base name, template arguments elided, unique within the trace)
/// instead of demangled signatures of up to thousands of characters repeated on every launch. The full name is
/// written once, in args.full_name of the kernel's first event in the file.
class KernelLabels {
 public:
  /// A kernel name's string id, in pass one. Ids beyond the string table (a damaged dump) keep their name.
  void saw(uint32_t id, size_t strings) {
    if (id >= strings) return;
    if (id >= seen_.size()) seen_.resize(strings, false);
    if (!seen_[id]) order_.push_back(id);
    seen_[id] = true;
  }
  /// Shortens every name seen, first seen first (the order that numbers names which shorten alike).
  void shorten(const dump::DumpReader& r) {
    std::vector<std::string> full;
    for (uint32_t id : order_) full.push_back(r.string_at(id));
    const KernelNames names(full);
    for (size_t i = 0; i < order_.size(); ++i) {
      const std::string s = names.short_of(full[i]);
      if (s == full[i]) continue;
      std::string escaped;
      append_json_escaped(escaped, s);
      short_.emplace(order_[i], std::move(escaped));
    }
    seen_.assign(seen_.size(), false);  // from here on: written once
    order_.clear();
  }
  /// The escaped short name, or nullptr where the name is short already.
  const std::string* short_name(uint32_t id) const {
    const auto it = short_.find(id);
    return it == short_.end() ? nullptr : &it->second;
  }
  /// True the first time it is asked for this id.
  bool first_use(uint32_t id) {
    if (id >= seen_.size() || seen_[id]) return false;
    seen_[id] = true;
    return true;
  }

 private:
  std::vector<bool> seen_;
  std::vector<uint32_t> order_;
  std::unordered_map<uint32_t, std::string> short_;
};

/// One entry per key, in the order keys first appear, each with its latest value: collectors rewrite a fact
/// when it changes (a thread renamed, the device mapping settled), and a JSON object must not repeat a key.
std::vector<std::pair<std::string, std::string>> latest_values(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unordered_map<std::string, size_t> at;
  for (const auto& [k, v] : entries) {
    auto [it, fresh] = at.try_emplace(k, out.size());
    if (fresh) out.emplace_back(k, v);
    else out[it->second].second = v;
  }
  return out;
}

/// The tick at which a record starts (or happens).
template <class Rec>
uint64_t record_time(const Rec& r) { return r.start; }  // the spans
uint64_t record_time(const MarkRecord& m) { return m.ts; }
uint64_t record_time(const ThreadNameRecord& t) { return t.ts; }
uint64_t record_time(const ThreadEndRecord& t) { return t.ts; }
uint64_t record_time(const GpuMemoryRecord& m) { return m.ts; }
uint64_t record_time(const ClockCheckRecord& c) { return c.cpu_before; }
uint64_t record_time(const CounterRecord& c) { return c.ts; }
uint64_t record_time(const PyElidedRecord& e) { return e.first; }

/// Pass one's visitor: the trace's time origin (dump/trace_bounds.hpp: the one every output shares), the first
/// record of any kind, the correlation ids that have a traced call or GPU work, the kernel names to shorten; and
/// every attribute list read once, so that a malformed one throws before a byte is written.
class Scan {
 public:
  Scan(const DumpReader& r, const dump::ClockModel& clock, LaunchFlows& flows, KernelLabels& kernels)
      : r_(r), bounds_{clock}, flows_(flows), kernels_(kernels) {}
  /// CLOCK_MONOTONIC ns of the trace's origin: the first of the program's activity, else of any record (0: none).
  int64_t origin_ns() const {
    return bounds_.any() ? bounds_.first_ns() : first_ == ~0ull ? 0 : bounds_.clock.to_ns(first_);
  }

  template <class Rec>
  void on(const Rec& rec, const dump::RecordContext& rc) {
    first_ = std::min(first_, record_time(rec));
    dump::see_bounds(bounds_, rec, rc);
    if (rc.has_attributes()) (void)r_.attributes(rc.bytes);
    saw(rec);
  }

 private:
  void saw(const CudaApiRecord& c) { flows_.saw_call(c.correlation); }
  void saw(const GpuKernelRecord& k) {
    flows_.saw_activity(k.correlation);
    kernels_.saw(k.name, r_.string_count());
  }
  void saw(const GpuMemcpyRecord& m) { flows_.saw_activity(m.correlation); }
  void saw(const GpuMemsetRecord& m) { flows_.saw_activity(m.correlation); }
  void saw(const GpuSyncRecord& s) { flows_.saw_activity(s.correlation); }
  void saw(const GpuGraphLaunchRecord& g) { flows_.saw_activity(g.correlation); }
  void saw(const auto&) {}

  const DumpReader& r_;
  dump::TraceBounds bounds_;
  LaunchFlows& flows_;
  KernelLabels& kernels_;
  uint64_t first_ = ~0ull;
};

/// One dump's share of a run's trace (write_perfetto_run): its events on a time origin shared by every dump,
/// its GPUs and flow ids in a range of their own, its process named with its rank; the envelope written once.
struct Part {
  bool alone = true;          ///< the whole trace: header and footer written here
  bool follows = false;       ///< events of earlier dumps precede these in the stream
  int64_t origin_ns = 0;      ///< shared origin (monotonic ns), when !alone
  int64_t gpu_pid_base = kGpuPidBase;
  uint64_t flow_id_base = 0;  ///< added to correlation ids: each process numbers its own from 1
  std::string label;          ///< "rank 1": put before the process's name
  int64_t pid = 0;            ///< the pid its CPU tracks use instead of the process's (another dump had it)
  const analyze::StepStats* steps = nullptr;  ///< its analysis's steps: the "Steps" track (none: no track)
  uint32_t representative_step = 0;           ///< the step its reports draw, marked on the track
};

class TraceWriter {
 public:
  TraceWriter(const DumpReader& r, std::ostream& out, Part part = {})
      : r_(r), clock_(r.calibration()), w_(out), counters_(w_), part_(std::move(part)) {
    if (part_.follows) w_.follow_earlier_events();
  }

  void run() {
    scan();
    if (part_.alone) header();
    name_cpu_threads();
    write_steps();
    dump::visit_records_past_damage(r_, *this, damage_);
    if (part_.alone) footer();
    else w_.flush();
  }

  /// The process id the CPU tracks use: the process info's, else the first thread's, else 1.
  static int64_t process_pid(const DumpReader& r) {
    int64_t pid = 1;
    for (const auto& [id, t] : r.threads())
      if (!t.is_channel() && t.pid) {
        pid = t.pid;
        break;
      }
    if (auto v = r.process_value("pid"); !v.empty()) {
      char* end = nullptr;
      long long p = std::strtoll(v.c_str(), &end, 10);
      if (end && *end == 0 && p > 0 && p < kGpuPidBase) pid = p;
    }
    return pid;
  }

  /// The monotonic ns of the dump's time origin (0: none), the origin a run's trace takes the earliest of.
  static int64_t first_record_ns(const DumpReader& r) {
    LaunchFlows flows;
    KernelLabels kernels;
    const dump::ClockModel clock(r.calibration());
    Scan scan(r, clock, flows, kernels);
    std::vector<std::string> damage;  // what a malformed record skips: the analysis names it
    dump::visit_records_past_damage(r, scan, damage);
    return scan.origin_ns();
  }

  // --- pass two: one writer per record kind (the visitor visit_records calls) -------------------------
  void on(const RangeRecord& r, const dump::RecordContext& rc) {
    const uint32_t thread = rc.thread;
    ensure_channel_named(thread);
    Args a;
    a.i("depth", rc.aux());
    if (rc.kind() == RecordKind::kRange) a.attrs(r_.attributes(rc.bytes));
    complete(nm(r.name), rc.kind() == RecordKind::kRange ? "range" : "nvtx", pid_of(thread), tid_of(thread), r.start,
             r.end, a);
  }
  void on(const MarkRecord& m, const dump::RecordContext& rc) {
    const uint32_t thread = rc.thread;
    ensure_channel_named(thread);
    Args a;
    if (rc.kind() == RecordKind::kMark) a.attrs(r_.attributes(rc.bytes));
    instant(nm(m.name), rc.kind() == RecordKind::kMark ? "mark" : "nvtx", pid_of(thread), tid_of(thread), m.ts, a);
  }
  void on(const ThreadNameRecord& t, const dump::RecordContext& rc) {
    metadata("thread_name", pid_of(rc.thread), tid_of(rc.thread), r_.string_at(t.name));
    named_.insert({pid_of(rc.thread), tid_of(rc.thread)});
  }
  void on(const ThreadEndRecord& t, const dump::RecordContext& rc) {
    ensure_channel_named(rc.thread);
    instant("thread exit", "thread", pid_of(rc.thread), tid_of(rc.thread), t.ts, Args{});
  }
  void on(const AsyncRangeRecord& r, const dump::RecordContext& rc) {
    ensure_channel_named(r.begin_thread);
    ensure_channel_named(r.end_thread);
    const Name name = nm(r.name);
    char id[24];
    std::snprintf(id, sizeof id, "\"0x%llx\"", static_cast<unsigned long long>(r.id));
    Args a;
    a.attrs(r_.attributes(rc.bytes));
    w_.begin('b', name, "async", pid_of(r.begin_thread), tid_of(r.begin_thread));
    w_.field_us("ts", std::max<int64_t>(0, rel_ns(r.start)));  // from the origin at the earliest, as complete()
    w_.field_raw("id", id);
    if (!a.empty()) w_.field_raw("args", a.json());
    w_.end();
    w_.begin('e', name, "async", pid_of(r.end_thread), tid_of(r.end_thread));
    w_.field_us("ts", std::max<int64_t>(0, rel_ns(std::max(r.start, r.end))));
    w_.field_raw("id", id);
    w_.end();
  }
  void on(const PyCallRecord& c, const dump::RecordContext& rc) {
    const uint32_t thread = rc.thread;
    ensure_channel_named(thread);
    Args a;
    std::string name;
    if (auto it = r_.code_table().find(c.code); it != r_.code_table().end()) {
      name = it->second.qualname;
      a.s("file", it->second.file).u("line", it->second.line);
    } else {
      name = "<code " + std::to_string(c.code) + ">";
    }
    a.i("depth", rc.aux());
    complete(name, "python", pid_of(thread), tid_of(thread), c.start, c.end, a);
  }
  void on(const CudaApiRecord& c, const dump::RecordContext& rc) {
    // API records may arrive through a collector's channel; os_tid names the calling thread.
    const uint32_t thread = rc.thread;
    int64_t pid = pid_of(thread), tid = c.os_tid ? int64_t(c.os_tid) : tid_of(thread);
    if (!c.os_tid) ensure_channel_named(thread);
    Args a;
    a.u("cbid", c.cbid).s("domain", rc.aux() == uint8_t(ApiDomain::kDriver) ? "driver" : "runtime");
    if (c.correlation) a.u("correlation", c.correlation);
    complete(nm(c.name), "cuda_api", pid, tid, c.start, c.end, a);
    if (flows_.start(c.correlation)) flow('s', c.correlation, pid, tid, c.start, c.end);
  }
  void on(const GpuKernelRecord& k, const dump::RecordContext&) {
    Args a;
    a.dims("grid", k.grid).dims("block", k.block).u("registers_per_thread", k.registers)
        .u("static_smem", k.static_smem).u("dynamic_smem", k.dynamic_smem).u("context", k.context);
    if (k.graph_id) a.u("graph_id", k.graph_id);
    const std::string* short_name = kernels_.short_name(k.name);
    if (short_name && kernels_.first_use(k.name)) a.s("full_name", r_.string_at(k.name));
    gpu_activity(short_name ? Name(*short_name, true) : nm(k.name), "kernel", k.device, k.stream, k.start, k.end,
                 k.correlation, a);
  }
  void on(const GpuMemcpyRecord& m, const dump::RecordContext& rc) {
    const std::string src = memory_kind_name(m.src_kind), dst = memory_kind_name(m.dst_kind);
    const std::string name = std::string("Memcpy ") + copy_kind_name(rc.aux()) + " (" + src + " -> " + dst + ")";
    Args a;
    a.u("bytes", m.bytes).s("kind", copy_kind_name(rc.aux())).s("src_kind", src).s("dst_kind", dst)
        .s("async", m.is_async ? "yes" : "no");
    const int64_t d = dur_ns(m.start, m.end);
    if (d > 0) a.d("bandwidth_gbps", static_cast<double>(m.bytes) / static_cast<double>(d));
    if (m.dst_device != m.device) a.u("dst_device", m.dst_device);
    if (m.graph_id) a.u("graph_id", m.graph_id);
    gpu_activity(name, "memcpy", m.device, m.stream, m.start, m.end, m.correlation, a);
  }
  void on(const GpuMemsetRecord& m, const dump::RecordContext& rc) {
    const char* kind = memory_kind_name(static_cast<MemoryKind>(rc.aux()));
    Args a;
    a.u("bytes", m.bytes).u("value", m.value).s("memory_kind", kind);
    gpu_activity(std::string("Memset (") + kind + ")", "memset", m.device, m.stream, m.start, m.end, m.correlation,
                 a);
  }
  void on(const GpuSyncRecord& s, const dump::RecordContext& rc) {
    Args a;
    if (s.event) a.u("event", s.event);
    gpu_activity(sync_kind_name(rc.aux()), "sync", s.device, s.stream, s.start, s.end, s.correlation, a);
  }
  void on(const GpuGraphLaunchRecord& g, const dump::RecordContext&) {
    Args a;
    a.u("graph_id", g.graph_id);
    gpu_activity("CUDA graph " + std::to_string(g.graph_id), "graph", g.device, g.stream, g.start, g.end,
                 g.correlation, a);
  }
  void on(const GpuMemoryRecord& m, const dump::RecordContext& rc) {
    const bool alloc = rc.aux() == 1;
    const int64_t pid = gpu_pid(m.device);
    const int64_t mem_tid = kTidMemory;
    if (named_.insert({pid, mem_tid}).second) metadata("thread_name", pid, mem_tid, "memory");
    char addr[24];
    std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(m.address));
    Args a;
    a.u("bytes", m.bytes).s("address", addr).s("memory_kind", memory_kind_name(m.memory_kind));
    if (m.correlation) a.u("correlation", m.correlation);
    if (m.stream != kNoStream) a.u("stream", m.stream);
    instant(alloc ? "alloc" : "free", "memory", pid, mem_tid, m.ts, a);
    // Net bytes allocated since the trace began (allocations made before it are unknown).
    int64_t& net = allocated_[m.device];
    // Unsigned arithmetic: corrupt byte counts wrap instead of overflowing.
    net = static_cast<int64_t>(static_cast<uint64_t>(net) + (alloc ? m.bytes : 0 - m.bytes));
    counters_.add({"device memory allocated in trace (bytes)", pid, {}, rel_ns(m.ts), false, net, 0});
  }
  void on(const OverheadRecord& o, const dump::RecordContext& rc) {
    ensure_channel_named(rc.thread);
    complete(nm(o.name), "overhead", pid_of(rc.thread), tid_of(rc.thread), o.start, o.end, Args{});
  }
  void on(const ClockCheckRecord& c, const dump::RecordContext&) {
    const int64_t pid = gpu_pid(c.device);
    if (named_.insert({pid, kTidClockChecks}).second) metadata("thread_name", pid, kTidClockChecks, "clock checks");
    Args a;
    a.d("cpu_before_us", us(rel_ns(c.cpu_before))).d("cpu_after_us", us(rel_ns(c.cpu_after)))
        .d("gpu_minus_cpu_before_us", us(rel_ns(c.gpu_ts) - rel_ns(c.cpu_before)));
    instant("clock check", "clock", pid, kTidClockChecks, c.gpu_ts, a);
  }
  // A thread state's code; a damaged dump may hold it as any double (NaN, 1e25): dump::thread_state_code.
  static int64_t state_code(const CounterSample& s) { return dump::thread_state_code(s.is_double, s.i, s.d); }
  void on(const CounterRecord& c, const dump::RecordContext& rc) {
    const std::string counter = r_.string_at(c.name);
    CounterSample s{counter, pid_, {}, rel_ns(c.ts), rc.aux() == uint8_t(AttrType::kDouble), c.value.i, c.value.d};
    std::string owner;
    switch (c.scope) {
      case CounterScope::kProcess: break;
      case CounterScope::kThread:
      case CounterScope::kOsThread: {
        const ThreadOwner t = thread_owner(c.scope, c.target);
        if (counter == counter_names::kThreadState)
          return counters_.add_state({t.pid, t.tid + kStateTidOffset, t.label + " · state"}, s.ts_ns, state_code(s));
        s.pid = t.pid;
        owner = t.label;
        break;
      }
      case CounterScope::kDevice: s.pid = gpu_pid(c.target); break;
      case CounterScope::kMachine: owner = "machine"; break;
      case CounterScope::kNumaNode: owner = "NUMA node " + std::to_string(c.target); break;
      case CounterScope::kChildProcess: owner = child_label(c.target); break;
      default: owner = "scope " + std::to_string(int(c.scope)) + " target " + std::to_string(c.target); break;
    }
    s.owner = owner;
    counters_.add(s);
  }

 private:
  // --- pass one ----------------------------------------------------------------------------------------
  void scan() {
    Scan scan(r_, clock_, flows_, kernels_);
    dump::visit_records_past_damage(r_, scan, damage_);
    origin_ns_ = !part_.alone ? part_.origin_ns : scan.origin_ns();
    pid_ = process_pid(r_);
    if (part_.pid) pid_ = part_.pid;
    name_os_threads();
    kernels_.shorten(r_);
  }

  /// Names of OS threads for the counter tracks: the session's own threads by their names, the others (which
  /// never recorded anything) by process info "os_thread.<tid>.name".
  void name_os_threads() {
    for (const auto& [k, v] : latest_values(r_.process_info())) {
      if (!k.starts_with("os_thread.") || !k.ends_with(".name")) continue;
      const std::string num = k.substr(10, k.size() - 15);
      char* end = nullptr;
      const unsigned long tid = std::strtoul(num.c_str(), &end, 10);
      if (!num.empty() && end && *end == 0 && tid < kStateTidOffset) os_names_[static_cast<int64_t>(tid)] = v;
    }
    for (const auto& [id, t] : r_.threads())
      if (!t.is_channel() && t.os_tid && !t.name.empty()) os_names_[t.os_tid] = t.name;
  }

  // --- helpers -----------------------------------------------------------------------------------------
  /// b - a in ns; unsigned arithmetic so that the corrupt far-off times of a damaged dump wrap, not overflow.
  static int64_t ns_between(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(b) - static_cast<uint64_t>(a));
  }
  /// ns from the trace's first event.
  int64_t rel_ns(uint64_t ticks) const { return ns_between(origin_ns_, clock_.to_ns(ticks)); }
  int64_t dur_ns(uint64_t start, uint64_t end) const {
    return end > start ? std::max<int64_t>(0, ns_between(clock_.to_ns(start), clock_.to_ns(end))) : 0;
  }
  static double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

  /// The name with this string id, escaped once and cached (the string table is bounded by the file's size).
  Name nm(uint32_t id) {
    if (id >= names_.size()) {
      if (id >= r_.string_count()) {
        scratch_.clear();
        append_json_escaped(scratch_, r_.string_at(id));
        return Name(scratch_, true);
      }
      names_.resize(r_.string_count());
      cached_.resize(r_.string_count(), false);
    }
    if (!cached_[id]) {
      append_json_escaped(names_[id], r_.string_at(id));
      cached_[id] = true;
    }
    return Name(names_[id], true);
  }

  /// tid of a dump thread: its OS thread id, or a number of its own for channels and unknown threads.
  int64_t tid_of(uint32_t thread) const {
    auto it = r_.threads().find(thread);
    if (it != r_.threads().end() && it->second.os_tid && !it->second.is_channel()) return it->second.os_tid;
    return int64_t(0x40000000) + thread;  // clear of real tids, which Linux keeps below 2^22
  }
  int64_t pid_of(uint32_t thread) const {
    if (part_.pid) return part_.pid;
    auto it = r_.threads().find(thread);
    return it != r_.threads().end() && it->second.pid && !it->second.is_channel() ? it->second.pid : pid_;
  }

  std::string labelled(const std::string& name) const { return part_.label.empty() ? name : part_.label + " · " + name; }

  void metadata(const char* what, int64_t pid, int64_t tid, std::string_view name) {
    w_.begin('M', what, "", pid, tid);
    Args a;
    a.s("name", name);
    w_.field_raw("args", a.json());
    w_.end();
  }
  void sort_index(const char* what, int64_t pid, int64_t tid, int64_t index) {
    w_.begin('M', what, "", pid, tid);
    Args a;
    a.i("sort_index", index);
    w_.field_raw("args", a.json());
    w_.end();
  }

  /// Names a channel's track the first time a CPU-side record lands on it.
  void ensure_channel_named(uint32_t thread) {
    auto it = r_.threads().find(thread);
    if (it == r_.threads().end() || it->second.is_channel()) {
      if (!named_.insert({pid_of(thread), tid_of(thread)}).second) return;
      std::string name = it == r_.threads().end() ? "thread " + std::to_string(thread)
                         : it->second.name.empty() ? "channel " + std::to_string(thread)
                                                   : it->second.name;
      metadata("thread_name", pid_of(thread), tid_of(thread), name);
    }
  }

  int64_t gpu_pid(uint32_t device) {
    const int64_t pid = part_.gpu_pid_base + device;
    if (named_.insert({pid, -1}).second) {
      metadata("process_name", pid, 0, labelled("GPU " + std::to_string(device)));
      sort_index("process_sort_index", pid, 0, 1000 + (part_.gpu_pid_base - kGpuPidBase) + int64_t(device));
    }
    return pid;
  }
  /// The GPU track of a stream (or of one of the pseudo-streams), named on first use.
  std::pair<int64_t, int64_t> gpu_track(uint32_t device, uint32_t stream) {
    const int64_t pid = gpu_pid(device);
    const int64_t tid = stream == kNoStream ? kTidDeviceWide : stream;
    if (named_.insert({pid, tid}).second) {
      std::string name = tid == kTidDeviceWide   ? "device-wide sync"
                         : tid == kTidMemory      ? "memory"
                         : tid == kTidClockChecks ? "clock checks"
                                                  : "stream " + std::to_string(stream);
      metadata("thread_name", pid, tid, name);
    }
    return {pid, tid};
  }

  void complete(const Name& name, std::string_view cat, int64_t pid, int64_t tid, uint64_t start, uint64_t end,
                const Args& args) {
    w_.begin('X', name, cat, pid, tid);
    // A span that began before the origin (an async range, a sync, before the program's first activity) starts
    // at it: trace viewers drop negative times.
    const int64_t ts = rel_ns(start);
    w_.field_us("ts", std::max<int64_t>(0, ts));
    w_.field_us("dur", std::max<int64_t>(0, dur_ns(start, end) + std::min<int64_t>(0, ts)));
    if (!args.empty()) w_.field_raw("args", args.json());
    w_.end();
  }
  void instant(const Name& name, std::string_view cat, int64_t pid, int64_t tid, uint64_t ts, const Args& args,
               const char* scope = "t") {
    w_.begin('i', name, cat, pid, tid);
    w_.field_us("ts", std::max<int64_t>(0, rel_ns(ts)));  // before the origin (a clock check): at it
    w_.field_str("s", scope);
    if (!args.empty()) w_.field_raw("args", args.json());
    w_.end();
  }
  /// One end of a launch flow, placed mid-span so it binds to that span and not to a neighbour starting at the
  /// same instant.
  void flow(char ph, uint32_t correlation, int64_t pid, int64_t tid, uint64_t start, uint64_t end) {
    w_.begin(ph, "launch", "launch", pid, tid);
    w_.field_us("ts", rel_ns(start) + dur_ns(start, end) / 2);
    w_.field_raw("id", std::to_string(part_.flow_id_base + correlation));
    if (ph == 'f') w_.field_str("bp", "e");
    w_.end();
  }
  void gpu_activity(const Name& name, std::string_view cat, uint32_t device, uint32_t stream, uint64_t start,
                    uint64_t end, uint32_t correlation, Args& args) {
    auto [pid, tid] = gpu_track(device, stream);
    if (correlation) args.u("correlation", correlation);
    args.u("device", device);
    if (stream != kNoStream) args.u("stream", stream);
    complete(name, cat, pid, tid, start, end, args);
    if (flows_.finish(correlation)) flow('f', correlation, pid, tid, start, end);
  }

  // --- pass two ----------------------------------------------------------------------------------------
  void header() {
    std::string& b = w_.raw();
    b += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"iscope-analyze\",\"source\":";
    b += json_quote(r_.path());
    char tmp[160];
    std::snprintf(tmp, sizeof tmp,
                  ",\"time_origin_monotonic_ns\":%lld,\"ns_per_tick\":%.9g,\"calibration_points\":%zu",
                  static_cast<long long>(origin_ns_), clock_.ns_per_tick(), clock_.points());
    b += tmp;
    for (const auto& [k, v] : latest_values(r_.process_info())) {
      b += ',';
      b += json_quote("process." + k);
      b += ':';
      b += json_quote(v);
    }
    if (r_.damage()) {
      b += ",\"damage\":";
      b += json_quote(r_.damage()->message);
    }
    b += "},\n\"traceEvents\":[";
  }

  void name_cpu_threads() {
    std::string pname = r_.process_value("name");
    if (pname.empty()) pname = r_.process_value("cmdline");
    if (pname.empty()) pname = "process " + std::to_string(pid_);
    metadata("process_name", pid_, 0, labelled(pname));
    sort_index("process_sort_index", pid_, 0, (part_.gpu_pid_base - kGpuPidBase) / 1000 * 2);
    named_.insert({pid_, -1});
    for (const auto& [id, t] : r_.threads()) {
      if (t.is_channel()) continue;  // named when something lands on their track
      std::string name = t.name.empty() ? "thread " + std::to_string(id) : t.name;
      metadata("thread_name", pid_of(id), tid_of(id), name);
      sort_index("thread_sort_index", pid_of(id), tid_of(id), id);
      named_.insert({pid_of(id), tid_of(id)});
    }
  }

  /// "warm-up", "slow" (one of the analysis's slow outliers, the steps its report counts as such) or "steady".
  /// Not "above the outlier bound": steps of two modes have no outliers (the slow mode is a state of the run),
  /// and a trace that called them slow would contradict the report.
  static const char* step_kind(const analyze::StepStats& st, size_t i) {
    if (i < st.warmup) return "warm-up";
    return std::binary_search(st.outlier_indexes.begin(), st.outlier_indexes.end(), uint32_t(i)) ? "slow" : "steady";
  }

  /// Each step the analysis found (warm-up included) as a slice "step N" on a "Steps" track at the top of the
  /// process, on the reports' time origin, so that a step a report names is found here at the time it gives.
  void write_steps() {
    if (!part_.steps || part_.steps->count == 0) return;
    const analyze::StepStats& st = *part_.steps;
    metadata("thread_name", pid_, kTidSteps, "Steps (" + st.name + ")");
    sort_index("thread_sort_index", pid_, kTidSteps, -1);
    const uint32_t rep = part_.representative_step;
    for (size_t i = 0; i < st.spans.size(); ++i) {
      const auto& sp = st.spans[i];
      const int64_t dur = std::max<int64_t>(0, sp.end_ns - sp.start_ns);
      const char* kind = step_kind(st, i);
      std::string name = "step " + std::to_string(i);
      if (kind[0] != 's' || kind[1] != 't') name += std::string(" (") + kind + ")";
      Args a;
      a.u("index", i).s("kind", kind).fixed("duration_ms", static_cast<double>(dur) / 1e6, 3);
      if (i == rep) a.s("representative", "yes");
      w_.begin('X', Name(name), "step", pid_, kTidSteps);
      w_.field_us("ts", std::max<int64_t>(0, ns_between(origin_ns_, sp.start_ns)));
      w_.field_us("dur", dur);
      w_.field_raw("args", a.json());
      w_.end();
    }
  }

  struct ThreadOwner {
    int64_t pid = 0, tid = 0;
    std::string label;  ///< "python3 3186"
  };
  /// The OS thread a thread-scope counter describes: a dump thread (kThread, by its os_tid) or an OS thread of
  /// the process (kOsThread), so that both series of one thread share its tracks.
  ThreadOwner thread_owner(CounterScope scope, uint32_t target) const {
    if (scope == CounterScope::kOsThread) return {pid_, target, os_thread_label(target)};
    ThreadOwner o{pid_of(target), tid_of(target), {}};
    const auto t = r_.threads().find(target);
    if (t != r_.threads().end() && t->second.os_tid && !t->second.is_channel()) {
      o.label = os_thread_label(o.tid);
    } else {  // no OS thread id to join on: the dump's thread
      const bool named = t != r_.threads().end() && !t->second.name.empty();
      o.label = (named ? t->second.name : std::string("thread")) + " (dump thread " + std::to_string(target) + ")";
    }
    return o;
  }
  /// "child pt_data_worker 4711": a child process's counters, named by its comm from process info.
  std::string child_label(uint32_t pid) const {
    const std::string name = r_.process_value("child." + std::to_string(pid) + ".name");
    return "child " + (name.empty() ? std::string("process") : name) + " " + std::to_string(pid);
  }
  /// "python3 3186": the thread's name and OS id.
  std::string os_thread_label(int64_t tid) const {
    const auto it = os_names_.find(tid);
    return (it != os_names_.end() ? it->second : std::string("thread")) + " " + std::to_string(tid);
  }

  void footer() {
    counters_.finish();
    w_.raw() += "\n]}\n";
    w_.flush();
  }

  const DumpReader& r_;
  dump::ClockModel clock_;
  EventWriter w_;
  LaunchFlows flows_;
  KernelLabels kernels_;
  CounterTracks counters_;
  std::map<int64_t, std::string> os_names_;  ///< OS tid -> thread name, for counter tracks
  Part part_;
  int64_t origin_ns_ = 0;
  int64_t pid_ = 1;
  std::set<std::pair<int64_t, int64_t>> named_;  ///< (pid, tid) tracks named so far; tid -1: the process
  std::map<uint32_t, int64_t> allocated_;        ///< device -> net bytes allocated within the trace
  std::vector<std::string> names_;               ///< escaped names by string id, filled on first use
  std::vector<bool> cached_;
  std::string scratch_;                          ///< an escaped name outside the table (damaged dump)
  std::vector<std::string> damage_;              ///< malformed records met (the analysis names them; exit 3)
};

}  // namespace

void write_perfetto(const DumpReader& reader, std::ostream& out, const analyze::Analysis* analysis) {
  Part part;
  if (analysis) {
    part.steps = &analysis->steps;
    part.representative_step = analysis->representative.step.index;
  }
  TraceWriter(reader, out, part).run();
}

void write_perfetto_run(const std::vector<RunTracePart>& parts, std::ostream& out) {
  if (parts.size() == 1 && parts.front().reader) {
    Part part;
    part.steps = parts.front().steps;
    part.representative_step = parts.front().representative_step;
    return TraceWriter(*parts.front().reader, out, part).run();
  }
  // One origin for all: the processes of one host share CLOCK_MONOTONIC, which every dump's calibration maps to;
  // another host's are moved onto the reference host's clock by their offset. `origin` is on the reference's.
  int64_t origin = 0;
  for (const RunTracePart& p : parts) {
    const int64_t first = TraceWriter::first_record_ns(*p.reader);
    if (first && (!origin || first - p.clock_offset_ns < origin)) origin = first - p.clock_offset_ns;
  }
  std::string head = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"iscope-analyze\",\"sources\":[";
  for (size_t i = 0; i < parts.size(); ++i) head += (i ? "," : "") + json_quote(parts[i].reader->path());
  head += "],\"time_origin_monotonic_ns\":" + std::to_string(origin) + "},\n\"traceEvents\":[";
  out << head;
  std::set<int64_t> pids;  // ranks on several hosts (or containers) may share a pid: the later ones get another
  for (size_t i = 0; i < parts.size(); ++i) {
    Part part;
    const int64_t pid = TraceWriter::process_pid(*parts[i].reader);
    if (!pids.insert(pid).second) {
      part.pid = kGpuPidBase - 1 - int64_t(i);
      pids.insert(part.pid);
    }
    part.alone = false;
    part.follows = i > 0;
    part.origin_ns = origin + parts[i].clock_offset_ns;  // the shared origin on this dump's own clock
    part.gpu_pid_base = kGpuPidBase + int64_t(i) * 1000;  // each process numbers its GPUs from 0
    part.flow_id_base = uint64_t(i) << 32;                 // and its correlation ids from 1
    part.label = parts[i].label;
    part.steps = parts[i].steps;  // each rank's own steps, on the shared origin
    part.representative_step = parts[i].representative_step;
    TraceWriter(*parts[i].reader, out, part).run();
  }
  out << "\n]}\n";
  out.flush();
}

}  // namespace inferscope::exporter
