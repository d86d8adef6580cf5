// Stage "ingest": pass 1 over the dump and its fix-ups (docs/analysis.md, "Analyzer stages"). Every record is
// visited once: ranges, Python calls, marks and counters are aggregated on the fly; CUDA API calls and GPU
// activities are kept in compact arrays (model.hpp). Attribution needs no sort: a thread's records arrive in
// the order they END, so the first range (or Python frame) to arrive that contains a pending API call's start
// is the innermost one around it; each thread keeps a stack of API calls still waiting for their innermost
// Python frame, range and layer.
#include "analyze/run/rank_types.hpp"
#include "analyze/stages.hpp"

#include <unordered_map>

namespace inferscope::analyze::detail {
namespace {

// What one pass-1 worker gathers over its run of chunks.
struct Part {
  size_t begin = 0, end = 0;  // chunk indexes
  size_t api_at = 0, gpu_at = 0;  // next slot of the shared arrays (each worker owns a contiguous block)
  std::vector<ThreadState> ts;
  std::vector<NameAgg> range_agg, py_agg;
  std::vector<uint64_t> kernel_count;
  std::vector<int64_t> kernel_ns;
  std::vector<int8_t> kernel_collective;  // by name id: -1 not yet classified, 1 an NCCL kernel
  std::map<uint32_t, GraphRuns> graph_runs;  // by graph id
  std::vector<int8_t> dotted, api_kind;  // lazily classified names
  std::vector<Cand> top, asked;
  std::map<CopyKey, CopyAgg> copies;
  std::map<std::pair<std::string, std::string>, AllocRow> allocs;
  std::vector<std::pair<int64_t, bool>> mem_events;
  std::vector<CounterSample> counters;
  std::map<uint32_t, uint64_t> layer_count;
  std::map<uint32_t, double> layer_cpu;
  uint64_t marks = 0, clock_checks = 0, clock_bad = 0;
  dump::VisitTally seen;  // records read (the analysis's event count)
  double clock_worst_ns = 0;
  int64_t gpu_max_dur = 0;
  uint32_t cmin = UINT32_MAX, cmax = 0;  // correlation ids of the calls
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  std::vector<std::string> app_warnings, channel_warnings;
  bool partial = false;
  void seen_time(int64_t s, int64_t e) {
    if (s < first) first = s;
    if (e > last) last = e;
  }
  // A record's [start, end] in ns (an end before its start is read as the start), counted in the trace span.
  std::pair<int64_t, int64_t> span_ns(const dump::ClockModel& clock, uint64_t start, uint64_t end) {
    const int64_t s = clock.to_ns(start), e = std::max(s, clock.to_ns(end));
    seen_time(s, e);
    return std::pair{s, e};
  }
  ThreadState& T(uint32_t t) {
    if (t >= ts.size()) ts.resize(size_t(t) + 1);
    ts[t].seen = true;
    return ts[t];
  }
};

// Calls CUPTI recorded itself (API activity records, the api_activity option) arrive in the "gpu" channel,
// long after the call, naming the caller by OS thread id. They belong to that thread's entry: the newest one
// that had started by the time of the call (Linux reuses thread ids), else the first one.
class CallerMap {
 public:
  explicit CallerMap(const dump::DumpReader& r) {
    for (auto& [id, t] : r.threads()) {
      if (id >= (1u << 20)) continue;
      if (t.is_channel()) {
        if (id >= channel_slot.size()) channel_slot.resize(size_t(id) + 1, 0);
        channel_slot[id] = 1;
      } else if (t.os_tid) {
        by_os_tid[t.os_tid].emplace_back(t.first_ts, id);
      }
    }
    for (auto& [tid, v] : by_os_tid) std::sort(v.begin(), v.end());
  }
  bool is_channel(uint32_t thread) const { return thread < channel_slot.size() && channel_slot[thread]; }
  uint32_t caller_of(uint32_t os_tid, uint64_t ticks) const {
    auto it = by_os_tid.find(os_tid);
    if (it == by_os_tid.end()) return UINT32_MAX;
    const auto& v = it->second;
    auto after = std::upper_bound(v.begin(), v.end(), std::pair{ticks, UINT32_MAX});
    return after == v.begin() ? v.front().second : std::prev(after)->second;
  }

 private:
  std::vector<uint8_t> channel_slot;  // by dump thread id: 1 = a channel
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> by_os_tid;  // os_tid -> (first_ts, id)
};

NameAgg& name_agg(std::vector<NameAgg>& v, uint32_t i) {
  if (i >= v.size()) v.resize(size_t(i) + 1);
  return v[i];
}

// Pass 1's visitor for one worker: each record into that worker's Part and its block of the shared arrays.
class Pass1 {
 public:
  Pass1(const Context& cx, const CallerMap& callers, Slab<ApiOp>& apis, Slab<GpuOp>& gpu, Part& P)
      : cx(cx), clock(cx.clock), nstr(cx.nstr), code_limit(cx.code_limit), step_name(cx.step_name),
        step_codes(cx.step_codes), callers(callers), apis(apis), gpu(gpu), P(P) {}

  void on(const RangeRecord& rec, const dump::RecordContext& rc) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    const uint32_t thread = rc.thread;
    auto& t = P.T(Context::thread_slot(thread));
    ++t.ranges;
    uint32_t nm = rec.name < nstr ? rec.name : 0;
    auto& agg = name_agg(P.range_agg, nm);
    agg.d.add(uint64_t(e - s));
    add_saturating(agg.self, t.range_self.self(rc.aux(), e - s, nm));
    if (rc.aux() == 0) {
      t.busy_range += double(e - s);
      P.top.push_back({thread, rc.kind() == RecordKind::kNvtxRange ? (nm | kNvtxCand) : nm, s, e});
    }
    if (step_name[nm]) P.asked.push_back({thread, nm, s, e});
    const bool layer = cx.range_is_layer(rc, nm, P.dotted);
    while (!t.pend_range.empty() && apis[t.pend_range.back()].start >= s) {
      apis[t.pend_range.back()].range = nm;
      t.pend_range.pop_back();
    }
    if (layer) {
      ++P.layer_count[nm];
      P.layer_cpu[nm] += double(e - s);
      while (!t.pend_layer.empty() && apis[t.pend_layer.back()].start >= s) {
        apis[t.pend_layer.back()].layer = nm;
        t.pend_layer.pop_back();
      }
    }
    // Nothing before an outermost range can be inside a later one.
    if (rc.aux() == 0 && rc.kind() == RecordKind::kRange) {
      t.pend_range.clear();
      t.pend_layer.clear();
    }
  }
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    const uint32_t thread = rc.thread;
    auto& t = P.T(Context::thread_slot(thread));
    ++t.py_calls;
    const uint32_t code = rec.code >= code_limit ? 0 : rec.code;  // never size a table by a damaged id
    auto& agg = name_agg(P.py_agg, code);
    agg.d.add(uint64_t(e - s));
    add_saturating(agg.self, t.py_self.self(rc.aux(), e - s, code));
    if (rc.aux() == 0) t.busy_py += double(e - s);
    if (!step_codes.empty() && step_codes.count(code)) P.asked.push_back({thread, 0x80000000u | code, s, e});
    if (rc.aux() <= 3) {  // step candidates when no range repeats
      auto& calls = t.shallow_py[code];
      ++calls.first;
      calls.second += e - s;
    }
    while (!t.pend_py.empty() && apis[t.pend_py.back()].start >= s) {
      apis[t.pend_py.back()].py = code;
      t.pend_py.pop_back();
    }
    if (rc.aux() == 0) t.pend_py.clear();
  }
  // Short calls the tracer counted instead of recording: their count and time join their function's totals (their time
  // is also inside their callers' recorded calls, as their callers' self time).
  void on(const PyElidedRecord& rec, const dump::RecordContext&) {
    if (rec.calls == 0) return;
    const uint32_t code = rec.code >= code_limit ? 0 : rec.code;
    const double ns = clock.duration_ns(rec.total);
    NameAgg& agg = name_agg(P.py_agg, code);
    agg.d.add(uint64_t(ns / double(rec.calls)), rec.calls);
    add_saturating(agg.self, int64_t(ns));  // short calls are leaves, or nearly
  }
  void on(const PyCoroutineRecord& rec, const dump::RecordContext& rc) {
    auto& t = P.T(Context::thread_slot(rc.thread));
    ++t.coroutine_runs;
    ++t.coroutine_codes[rec.code >= code_limit ? 0 : rec.code];
  }
  void on(const CudaApiRecord& rec, const dump::RecordContext& rc) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    const uint32_t thread = rc.thread;
    // From a channel with a known caller: re-homed, and its frames are found after pass 1 (fix-up 3).
    uint32_t caller = UINT32_MAX;
    if (callers.is_channel(thread) && rec.os_tid) caller = callers.caller_of(rec.os_tid, rec.start);
    auto& t = P.T(Context::thread_slot(caller == UINT32_MAX ? thread : caller));
    ++t.apis;
    uint32_t nm = rec.name < nstr ? rec.name : 0;
    if (nm >= P.api_kind.size()) P.api_kind.resize(size_t(nm) + 1, -1);
    if (P.api_kind[nm] < 0) P.api_kind[nm] = static_cast<int8_t>(classify_api(cx.name_of(nm)));
    ApiOp op{};
    op.start = s;
    op.dur = sat32(e - s);
    op.corr = rec.correlation;
    op.name = nm;
    op.thread = static_cast<uint16_t>(std::min<uint32_t>(caller == UINT32_MAX ? thread : caller, 0xffff));
    op.kind = static_cast<uint8_t>(P.api_kind[nm]);
    uint32_t idx = static_cast<uint32_t>(P.api_at++);
    if (caller != UINT32_MAX)
      op.pad = kApiRehomed | (rc.aux() == static_cast<uint8_t>(ApiDomain::kDriver) ? kApiDriver : 0);
    apis[idx] = op;
    if (op.corr) {
      P.cmin = std::min(P.cmin, op.corr);
      P.cmax = std::max(P.cmax, op.corr);
    }
    if (caller != UINT32_MAX) return;
    t.pend_py.push_back(idx);
    t.pend_range.push_back(idx);
    t.pend_layer.push_back(idx);
  }
  void on(const GpuKernelRecord& rec, const dump::RecordContext&) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    uint32_t nm = rec.name < nstr ? rec.name : 0;
    if (nm >= P.kernel_count.size()) {
      P.kernel_count.resize(size_t(nm) + 1, 0);
      P.kernel_ns.resize(size_t(nm) + 1, 0);
      P.kernel_collective.resize(size_t(nm) + 1, -1);
    }
    ++P.kernel_count[nm];
    P.kernel_ns[nm] += e - s;
    int8_t& collective = P.kernel_collective[nm];
    if (collective < 0) collective = nm < cx.sname.size() && is_collective_kernel(cx.sname[nm]) ? 1 : 0;
    gpu[P.gpu_at++] = GpuOp{s, sat32(e - s), rec.correlation, nm, collective ? detail::kCollective : detail::kKernel, 0,
                            static_cast<uint16_t>(rec.stream), device_of(rec.device)};
    P.gpu_max_dur = std::max<int64_t>(P.gpu_max_dur, sat32(e - s));
  }
  void on(const GpuGraphLaunchRecord& rec, const dump::RecordContext&) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    auto& g = P.graph_runs[rec.graph_id];
    ++g.count;
    g.ns += e - s;
    gpu[P.gpu_at++] = GpuOp{s, sat32(e - s), rec.correlation, rec.graph_id, detail::kGraph, 0, static_cast<uint16_t>(rec.stream),
                            device_of(rec.device)};
    P.gpu_max_dur = std::max<int64_t>(P.gpu_max_dur, sat32(e - s));
  }
  void on(const GpuMemcpyRecord& rec, const dump::RecordContext& rc) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    std::string dir = copy_direction_name(static_cast<CopyKind>(rc.aux()));
    uint8_t kind = dir == "h2d" ? detail::kH2D : dir == "d2h" ? detail::kD2H : detail::kOtherCopy;
    uint8_t host = kind == detail::kH2D ? uint8_t(rec.src_kind) : kind == detail::kD2H ? uint8_t(rec.dst_kind) : 0;
    auto& c = P.copies[{dir, memory_name(uint8_t(rec.src_kind)), memory_name(uint8_t(rec.dst_kind))}];
    ++c.count;
    c.bytes += rec.bytes;
    c.ns += e - s;
    gpu[P.gpu_at++] = GpuOp{s, sat32(e - s), rec.correlation, sat32(int64_t(std::min<uint64_t>(rec.bytes, UINT32_MAX))),
                            kind, host, static_cast<uint16_t>(rec.stream), device_of(rec.device)};
    P.gpu_max_dur = std::max<int64_t>(P.gpu_max_dur, sat32(e - s));
  }
  void on(const GpuMemsetRecord& rec, const dump::RecordContext&) {
    const auto [s, e] = P.span_ns(clock, rec.start, rec.end);
    gpu[P.gpu_at++] = GpuOp{s, sat32(e - s), rec.correlation, sat32(int64_t(std::min<uint64_t>(rec.bytes, UINT32_MAX))),
                            detail::kMemset, 0, static_cast<uint16_t>(rec.stream), device_of(rec.device)};
    P.gpu_max_dur = std::max<int64_t>(P.gpu_max_dur, sat32(e - s));
  }
  void on(const GpuMemoryRecord& rec, const dump::RecordContext& rc) {
    int64_t s = clock.to_ns(rec.ts);
    P.seen_time(s, s);
    bool alloc = rc.aux() == 1;
    auto& row = P.allocs[{alloc ? "alloc" : "free", memory_name(uint8_t(rec.memory_kind))}];
    row.op = alloc ? "alloc" : "free";
    row.memory = memory_name(uint8_t(rec.memory_kind));
    ++row.count;
    row.bytes += rec.bytes;
    P.mem_events.emplace_back(s, alloc);
  }
  void on(const CounterRecord& rec, const dump::RecordContext& rc) {
    double v = rc.aux() == uint8_t(AttrType::kDouble) ? rec.value.d : double(rec.value.i);
    P.counters.push_back({rec.name, uint8_t(rec.scope), rec.target, clock.to_ns(rec.ts), v});
  }
  void on(const ClockCheckRecord& rec, const dump::RecordContext&) {
    ++P.clock_checks;
    double viol = double(clock.to_ns(rec.cpu_before) - clock.to_ns(rec.gpu_ts));
    if (viol > P.clock_worst_ns) P.clock_worst_ns = viol;
    if (viol > 1000) ++P.clock_bad;
  }
  void on(const MarkRecord& rec, const dump::RecordContext& rc) {
    int64_t s = clock.to_ns(rec.ts);
    P.seen_time(s, s);
    ++P.marks;
    P.T(Context::thread_slot(rc.thread));
  }

 private:
  const Context& cx;
  const dump::ClockModel& clock;
  const size_t nstr;
  const uint32_t code_limit;
  const std::vector<uint8_t>& step_name;
  const std::set<uint32_t>& step_codes;
  const CallerMap& callers;
  Slab<ApiOp>& apis;
  Slab<GpuOp>& gpu;
  Part& P;
};

// The records pass 1 puts into the shared arrays, counted before it so each worker gets its own block.
struct SlotCount {
  uint64_t api = 0, gpu = 0;
  void on(const CudaApiRecord&, const dump::RecordContext&) { ++api; }
  void on(const GpuKernelRecord&, const dump::RecordContext&) { ++gpu; }
  void on(const GpuGraphLaunchRecord&, const dump::RecordContext&) { ++gpu; }
  void on(const GpuMemcpyRecord&, const dump::RecordContext&) { ++gpu; }
  void on(const GpuMemsetRecord&, const dump::RecordContext&) { ++gpu; }
};

// Pass 1 runs on `W` workers, each over a run of consecutive chunks (all threads and channels in it) with
// its own aggregates; joined in file order afterwards, so the result is the same for any W (sums of
// integers, concatenations in order, and two fix-ups where a thread's state crosses from one run into the
// next: self times and calls waiting for their enclosing frame).
std::vector<Part> read_parts(const Context& cx, Ingested& in) {
  const auto& r = cx.r;
  const auto& chunks = cx.chunks;
  const auto& chunk_channel = cx.chunk_channel;
  auto& prog = cx.prog;
  const unsigned W = cx.W;
  auto& apis = in.apis;
  auto& gpu = in.gpu;
  const CallerMap callers(r);
  auto runs = split_chunks(chunks, W, [](size_t) { return true; });
  std::vector<Part> parts(runs.size());
  prog.total = 0;
  for (size_t i = 0; i < chunks.size(); ++i)
    if (!chunk_channel[i]) prog.total += chunks[i].count;
  // First a light walk counting the records that go into the shared arrays, so that every worker writes its
  // own block of them in place (no copies; the arrays' pages are touched by the workers, in parallel). A
  // malformed record ends its chunk at the same place in both walks.
  std::vector<SlotCount> slots(runs.size());
  run_parallel(runs.size(), [&](size_t w) {
    for (size_t c = runs[w].first; c < runs[w].second; ++c) {
      try {
        dump::visit_records(r, chunks[c], slots[w]);
      } catch (const dump::DumpError&) {
      }
    }
  });
  uint64_t api_total = 0, gpu_total = 0;
  for (size_t w = 0; w < runs.size(); ++w) {
    parts[w].begin = runs[w].first;
    parts[w].end = runs[w].second;
    parts[w].api_at = api_total;
    parts[w].gpu_at = gpu_total;
    api_total += slots[w].api;
    gpu_total += slots[w].gpu;
  }
  if (api_total >= UINT32_MAX) throw dump::DumpError(r.path() + ": more than 2^32 CUDA calls: not supported", 0);
  apis.allocate(api_total);
  gpu.allocate(gpu_total);
  run_parallel(runs.size(), [&](size_t w) {
    Part& P = parts[w];
    Pass1 visitor(cx, callers, apis, gpu, P);
    for (size_t c = P.begin; c < P.end; ++c) {
      try {
        dump::visit_records(r, chunks[c], visitor, &P.seen);
      } catch (const dump::DumpError& e) {
        (chunk_channel[c] ? P.channel_warnings : P.app_warnings)
            .push_back(std::string(e.what()) + "; the rest of that chunk was skipped");
        P.partial = true;
      }
      if (!chunk_channel[c]) prog.step(chunks[c].count, "reading");
    }
  });
  return parts;
}

// A part's per-thread counts into the joined ones (self times and waiting calls are the fix-ups' work).
void join_threads(const Part& P, std::vector<ThreadState>& ts) {
  if (P.ts.size() > ts.size()) ts.resize(P.ts.size());
  for (size_t t = 0; t < P.ts.size(); ++t) {
    const ThreadState& x = P.ts[t];
    if (!x.seen) continue;
    ThreadState& y = ts[t];
    y.seen = true;
    y.apis += x.apis;
    y.py_calls += x.py_calls;
    y.ranges += x.ranges;
    y.busy_range += x.busy_range;
    y.busy_py += x.busy_py;
    x.shallow_py.for_each([&](uint64_t code, const std::pair<uint64_t, int64_t>& c) {
      auto& sum = y.shallow_py[code];
      sum.first += c.first;
      sum.second += c.second;
    });
    y.coroutine_runs += x.coroutine_runs;
    x.coroutine_codes.for_each([&](uint64_t code, uint64_t n) { y.coroutine_codes[code] += n; });
  }
}

// Joins the parts in file order.
void join_parts(std::vector<Part>& parts, Ingested& in) {
  IngestFacts& a = in.facts;
  auto& ts = in.ts;
  auto& range_agg = in.range_agg;
  auto& py_agg = in.py_agg;
  auto& kernel_count = in.kernel_count;
  auto& kernel_ns = in.kernel_ns;
  auto& top = in.top;
  auto& asked = in.asked;
  auto& copies = in.copies;
  auto& allocs = in.allocs;
  auto& mem_events = in.mem_events;
  auto& counters = in.counters;
  auto& layer_count = in.layer_count;
  auto& layer_cpu = in.layer_cpu;
  auto& marks = in.marks;
  auto& clock_checks = in.clock_checks;
  auto& clock_bad = in.clock_bad;
  auto& clock_worst_ns = in.clock_worst_ns;
  auto& gpu_max_dur = in.gpu_max_dur;
  auto& cmin = in.cmin;
  auto& cmax = in.cmax;
  // Join in file order.
  for (auto& P : parts) {
    a.events += P.seen.records;
    in.t_first = std::min(in.t_first, P.first);
    in.t_last = std::max(in.t_last, P.last);
    a.partial |= P.partial;
    top.insert(top.end(), P.top.begin(), P.top.end());
    asked.insert(asked.end(), P.asked.begin(), P.asked.end());
    for (auto& [k, c] : P.copies) {
      auto& x = copies[k];
      x.count += c.count;
      x.bytes += c.bytes;
      x.ns += c.ns;
    }
    for (auto& [k, row] : P.allocs) {
      auto& x = allocs[k];
      x.op = row.op;
      x.memory = row.memory;
      x.count += row.count;
      x.bytes += row.bytes;
    }
    mem_events.insert(mem_events.end(), P.mem_events.begin(), P.mem_events.end());
    counters.insert(counters.end(), P.counters.begin(), P.counters.end());
    for (auto& [n, c] : P.layer_count) layer_count[n] += c;
    for (auto& [n, v] : P.layer_cpu) layer_cpu[n] += v;
    for (size_t n = 0; n < P.kernel_count.size(); ++n) {
      kernel_count[n] += P.kernel_count[n];
      kernel_ns[n] += P.kernel_ns[n];
    }
    for (auto& [id, g] : P.graph_runs) {
      auto& x = in.graph_runs[id];
      x.count += g.count;
      x.ns += g.ns;
    }
    for (size_t n = 0; n < P.range_agg.size(); ++n) {
      range_agg[n].d.merge(P.range_agg[n].d);
      add_saturating(range_agg[n].self, P.range_agg[n].self);
    }
    if (P.py_agg.size() > py_agg.size()) py_agg.resize(P.py_agg.size());
    for (size_t n = 0; n < P.py_agg.size(); ++n) {
      py_agg[n].d.merge(P.py_agg[n].d);
      add_saturating(py_agg[n].self, P.py_agg[n].self);
    }
    marks += P.marks;
    clock_checks += P.clock_checks;
    clock_bad += P.clock_bad;
    clock_worst_ns = std::max(clock_worst_ns, P.clock_worst_ns);
    gpu_max_dur = std::max(gpu_max_dur, P.gpu_max_dur);
    cmin = std::min(cmin, P.cmin);
    cmax = std::max(cmax, P.cmax);
    join_threads(P, ts);
  }
  for (auto& P : parts) a.warnings.insert(a.warnings.end(), P.app_warnings.begin(), P.app_warnings.end());
  for (auto& P : parts) a.warnings.insert(a.warnings.end(), P.channel_warnings.begin(), P.channel_warnings.end());
}

// Fix-up 1: self times of frames whose children arrived in the previous run.
void fix_self_times(std::vector<Part>& parts, Ingested& in) {
  auto& range_agg = in.range_agg;
  auto& py_agg = in.py_agg;
  const auto& ts = in.ts;
  // Fix-up 1: self times of frames whose children arrived in the previous run.
  {
    std::vector<std::vector<int64_t>> carry_range(ts.size()), carry_py(ts.size());
    for (auto& P : parts)
      for (size_t t = 0; t < P.ts.size(); ++t) {
        if (!P.ts[t].seen) continue;
        P.ts[t].range_self.join_after(carry_range[t], [&](uint32_t nm, int64_t d) { add_saturating(range_agg[nm].self, d); });
        P.ts[t].py_self.join_after(carry_py[t], [&](uint32_t code, int64_t d) { add_saturating(py_agg[code].self, d); });
      }
  }
}

// A thread's calls still waiting for their innermost Python frame, range or layer at the end of a run.
struct Waiting {
  std::vector<uint32_t> py, range, layer;
  bool empty() const { return py.empty() && range.empty() && layer.empty(); }
};

// Fix-up 2's visitor: one thread's records of the next run, replayed to give the calls carried into it (`C`) the
// frames one pass would have given them. A frame reaches the older calls only once the newer ones (that run's
// own, kept here by their starts) are all taken.
class WaitingReplay {
 public:
  WaitingReplay(const Context& cx, Slab<ApiOp>& apis, Waiting& carried, std::vector<int8_t>& dotted)
      : cx(cx), apis(apis), C(carried), dotted(dotted) {}

  void on(const RangeRecord& rec, const dump::RecordContext& rc) {
    if (C.empty()) return;
    const int64_t s = cx.clock.to_ns(rec.start);
    const uint32_t nm = rec.name < cx.nstr ? rec.name : 0;
    const bool layer = cx.range_is_layer(rc, nm, dotted);
    take(lrange, C.range, s, [&](ApiOp& x) { x.range = nm; });
    if (layer) take(llayer, C.layer, s, [&](ApiOp& x) { x.layer = nm; });
    if (rc.aux() == 0 && rc.kind() == RecordKind::kRange) {
      lrange.clear(); llayer.clear(); C.range.clear(); C.layer.clear();
    }
  }
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    if (C.empty()) return;
    const int64_t s = cx.clock.to_ns(rec.start);
    const uint32_t code = rec.code >= cx.code_limit ? 0 : rec.code;
    take(lpy, C.py, s, [&](ApiOp& x) { x.py = code; });
    if (rc.aux() == 0) { lpy.clear(); C.py.clear(); }
  }
  void on(const CudaApiRecord& rec, const dump::RecordContext&) {
    if (C.empty()) return;
    const int64_t s = cx.clock.to_ns(rec.start);
    lpy.push_back(s);
    lrange.push_back(s);
    llayer.push_back(s);
  }

 private:
  template <class Set>
  void take(std::vector<int64_t>& local, std::vector<uint32_t>& carried, int64_t s, Set&& set) {
    while (!local.empty() && local.back() >= s) local.pop_back();
    if (!local.empty()) return;
    while (!carried.empty() && apis[carried.back()].start >= s) {
      set(apis[carried.back()]);
      carried.pop_back();
    }
  }

  const Context& cx;
  Slab<ApiOp>& apis;
  Waiting& C;
  std::vector<int8_t>& dotted;
  std::vector<int64_t> lpy, lrange, llayer;  // this run's own waiting calls: their starts
};

// Fix-up 2: calls still waiting for their innermost Python frame, range or layer at the end of a run get
// them from the next runs, exactly as one pass would. Replays that thread's records in the next run until none
// waits.
void fix_waiting_calls(const Context& cx, std::vector<Part>& parts, Ingested& in) {
  const auto& chunks = cx.chunks;
  std::vector<Waiting> waiting(in.ts.size());
  std::vector<int8_t> dotted;
  for (Part& P : parts) {
    for (uint32_t t = 0; t < P.ts.size(); ++t) {
      if (!P.ts[t].seen) continue;
      Waiting& C = waiting[t];
      if (!C.empty()) {
        WaitingReplay replay(cx, in.apis, C, dotted);
        for (size_t c = P.begin; c < P.end && !C.empty(); ++c) {
          if (Context::thread_slot(chunks[c].thread_id) != t) continue;
          try {
            dump::visit_records(cx.r, chunks[c], replay);
          } catch (const dump::DumpError&) {  // reported above; the run stopped at the same record
          }
        }
      }
      const ThreadState& x = P.ts[t];
      C.py.insert(C.py.end(), x.pend_py.begin(), x.pend_py.end());
      C.range.insert(C.range.end(), x.pend_range.begin(), x.pend_range.end());
      C.layer.insert(C.layer.end(), x.pend_layer.begin(), x.pend_layer.end());
    }
  }
}

// Fix-up 3 (after pass 1): calls re-homed from a channel (op.pad & kApiRehomed). A runtime call's nested
// driver call shares its correlation id and is dropped (its host time is the runtime call's; the kernel links
// to one launch). Then each remaining call gets the innermost Python frame, range and layer of its thread that
// contains its start: that thread's records come in the order they ended, so the first one containing the
// start is the innermost, as in pass 1. One walk over each such thread's chunks, threads in parallel.
// Returns whether there were any such calls.
bool drop_nested_driver_calls(Ingested& in) {
  auto& apis = in.apis;
  auto& ts = in.ts;
  std::vector<uint32_t> by_corr;
  for (uint32_t i = 0; i < apis.size(); ++i)
    if (apis[i].pad & kApiRehomed) by_corr.push_back(i);
  if (by_corr.empty()) return false;
  std::sort(by_corr.begin(), by_corr.end(), [&](uint32_t x, uint32_t y) {
    return apis[x].corr != apis[y].corr ? apis[x].corr < apis[y].corr : x < y;
  });
  size_t dropped = 0;
  for (size_t b = 0, e; b < by_corr.size(); b = e) {
    const uint32_t corr = apis[by_corr[b]].corr;
    bool runtime = false;
    for (e = b; e < by_corr.size() && apis[by_corr[e]].corr == corr; ++e) runtime |= !(apis[by_corr[e]].pad & kApiDriver);
    if (!runtime || !corr) continue;
    for (size_t k = b; k < e; ++k)
      if (apis[by_corr[k]].pad & kApiDriver) apis[by_corr[k]].pad |= kApiDropped, ++dropped;
  }
  if (dropped) {  // compact in place, order kept (no index into `apis` is held past pass 1)
    size_t k = 0;
    for (size_t i = 0; i < apis.size(); ++i) {
      if (apis[i].pad & kApiDropped) {
        const uint32_t t = apis[i].thread;
        if (t < ts.size() && ts[t].apis) --ts[t].apis;
        continue;
      }
      apis[k++] = apis[i];
    }
    apis.shrink(k);
  }
  return true;
}

// Fix-up 3's visitor: one thread's ranges and Python frames, each giving the re-homed calls `ops` (sorted by
// start) inside it their innermost frame of its kind, the first to arrive (records come in the order they end).
class RehomedFrames {
 public:
  RehomedFrames(const Context& cx, Slab<ApiOp>& apis, const std::vector<uint32_t>& ops)
      : cx(cx), apis(apis), ops(ops), m(ops.size()), starts(m), next_py(m + 1), next_range(m + 1), next_layer(m + 1),
        open_py(m), open_range(m), open_layer(m) {
    for (size_t k = 0; k < m; ++k) starts[k] = apis[ops[k]].start;
    for (uint32_t k = 0; k <= m; ++k) next_py[k] = next_range[k] = next_layer[k] = k;
  }
  bool any_open() const { return open_py || open_range || open_layer; }

  void on(const RangeRecord& rec, const dump::RecordContext& rc) {
    const int64_t s = cx.clock.to_ns(rec.start), e = std::max(s, cx.clock.to_ns(rec.end));
    const uint32_t nm = rec.name < cx.nstr ? rec.name : 0;
    take(next_range, open_range, s, e, [&](ApiOp& x) { x.range = nm; });
    if (open_layer && cx.range_is_layer(rc, nm, dotted))
      take(next_layer, open_layer, s, e, [&](ApiOp& x) { x.layer = nm; });
  }
  void on(const PyCallRecord& rec, const dump::RecordContext&) {
    const int64_t s = cx.clock.to_ns(rec.start), e = std::max(s, cx.clock.to_ns(rec.end));
    const uint32_t code = rec.code >= cx.code_limit ? 0 : rec.code;
    take(next_py, open_py, s, e, [&](ApiOp& x) { x.py = code; });
  }

 private:
  static uint32_t find(std::vector<uint32_t>& nx, uint32_t k) {
    while (nx[k] != k) k = nx[k] = nx[nx[k]];
    return k;
  }
  // A frame [s, e] takes the open calls inside it. A call that starts where the frame ends but ends later was
  // written after the frame on its thread, so pass 1 would not give it this frame either.
  template <class Set>
  void take(std::vector<uint32_t>& nx, size_t& open, int64_t s, int64_t e, Set&& set) {
    uint32_t k = find(nx, uint32_t(std::lower_bound(starts.begin(), starts.end(), s) - starts.begin()));
    while (k < m && starts[k] <= e) {
      if (apis[ops[k]].end() > e) {
        k = find(nx, k + 1);
        continue;
      }
      set(apis[ops[k]]);
      nx[k] = k + 1;
      --open;
      k = find(nx, k + 1);
    }
  }

  const Context& cx;
  Slab<ApiOp>& apis;
  const std::vector<uint32_t>& ops;
  const size_t m;
  std::vector<int64_t> starts;
  std::vector<uint32_t> next_py, next_range, next_layer;  // next call not yet given a frame of each kind
                                                          // (path-halving skip lists)
  size_t open_py, open_range, open_layer;
  std::vector<int8_t> dotted;
};

void frames_of_rehomed_calls(const Context& cx, Ingested& in) {
  const auto& chunks = cx.chunks;
  auto& apis = in.apis;
  // Per thread, by start.
  std::map<uint32_t, std::vector<uint32_t>> per_thread;
  for (uint32_t i = 0; i < apis.size(); ++i)
    if (apis[i].pad & kApiRehomed) per_thread[apis[i].thread].push_back(i);
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> work(per_thread.begin(), per_thread.end());
  run_parallel(work.size(), [&](size_t w) {
    const uint32_t t = work[w].first;
    auto& ops = work[w].second;
    std::stable_sort(ops.begin(), ops.end(), [&](uint32_t x, uint32_t y) { return apis[x].start < apis[y].start; });
    RehomedFrames frames(cx, apis, ops);
    for (size_t c = 0; c < chunks.size() && frames.any_open(); ++c) {
      if (cx.chunk_channel[c] || Context::thread_slot(chunks[c].thread_id) != t) continue;
      try {
        dump::visit_records(cx.r, chunks[c], frames);
      } catch (const dump::DumpError&) {  // reported by pass 1; the rest of that chunk was skipped there too
      }
    }
  });
}

}  // namespace

Ingested ingest(const Context& cx) {
  Ingested in;
  in.range_agg.resize(cx.nstr);
  in.kernel_count.assign(cx.nstr, 0);
  in.kernel_ns.assign(cx.nstr, 0);
  std::vector<Part> parts = read_parts(cx, in);
  join_parts(parts, in);
  fix_self_times(parts, in);
  fix_waiting_calls(cx, parts, in);
  if (drop_nested_driver_calls(in)) frames_of_rehomed_calls(cx, in);
  if (in.facts.events == 0 || in.t_first > in.t_last) {
    in.t_first = in.t_last = 0;
    in.facts.warnings.push_back(cx.r.path() + ": the dump holds no events");
  }
  in.facts.trace_ms = ms(double(in.t_last - in.t_first));
  return in;
}

}  // namespace inferscope::analyze::detail
