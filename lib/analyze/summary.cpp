#include "analyze/summary.hpp"

#include "dump/clock_model.hpp"
#include "dump/visit.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace inferscope::analyze {

const char* record_kind_name(RecordKind k) {
  switch (k) {
    case RecordKind::kPad: return "pad";
    case RecordKind::kRange: return "range";
    case RecordKind::kMark: return "mark";
    case RecordKind::kThreadName: return "thread_name";
    case RecordKind::kAsyncRange: return "async_range";
    case RecordKind::kThreadEnd: return "thread_end";
    case RecordKind::kPyCall: return "python_call";
    case RecordKind::kNvtxRange: return "nvtx_range";
    case RecordKind::kNvtxMark: return "nvtx_mark";
    case RecordKind::kPyCoroutine: return "python_coroutine";
    case RecordKind::kPyElided: return "python_elided";
    case RecordKind::kGpuKernel: return "gpu_kernel";
    case RecordKind::kGpuMemcpy: return "gpu_memcpy";
    case RecordKind::kGpuMemset: return "gpu_memset";
    case RecordKind::kGpuSync: return "gpu_sync";
    case RecordKind::kGpuMemory: return "gpu_memory";
    case RecordKind::kCudaApi: return "cuda_api";
    case RecordKind::kGpuGraphLaunch: return "gpu_graph_launch";
    case RecordKind::kCollectorOverhead: return "collector_overhead";
    case RecordKind::kClockCheck: return "clock_check";
    case RecordKind::kCounter: return "counter";
  }
  return "unknown";
}

namespace {

// The summary's visitor: every record counted by kind and thread; ranges, Python calls, marks, async ranges,
// kernels and copies aggregated by name.
class Summarizer {
 public:
  Summarizer(const dump::DumpReader& r, Summary& s) : r(r), clock(r.calibration()), s(s) {}

  template <class Rec>
  void on(const Rec& rec, const dump::RecordContext& rc) {
    ++s.records;
    ++s.kinds[record_kind_name(rc.kind())];
    ++s.threads[rc.thread].records;
    add(rec, rc);
  }

 private:
  void add(const RangeRecord& rec, const dump::RecordContext& rc) {
    uint64_t d = ns(rec.start, rec.end);
    auto& st = s.ranges[name_of(rec.name)];
    st.duration.add(d);
    st.self_ns += rc.kind() == RecordKind::kRange ? range_self[rc.thread].self(rc.aux(), d) : d;
    span(rc.thread, rec.start, rec.end);
  }
  void add(const PyCallRecord& rec, const dump::RecordContext& rc) {
    uint64_t d = ns(rec.start, rec.end);
    auto& st = s.python[code_name(rec.code)];
    st.duration.add(d);
    st.self_ns += py_self[rc.thread].self(rc.aux(), d);
    span(rc.thread, rec.start, rec.end);
  }
  void add(const MarkRecord& rec, const dump::RecordContext& rc) {
    ++s.marks[name_of(rec.name)];
    span(rc.thread, rec.ts, rec.ts);
  }
  void add(const AsyncRangeRecord& rec, const dump::RecordContext& rc) {
    s.async[name_of(rec.name)].add(ns(rec.start, rec.end));
    span(rc.thread, rec.start, rec.end);
  }
  void add(const GpuKernelRecord& rec, const dump::RecordContext& rc) {
    auto& st = s.kernels[name_of(rec.name)];
    uint64_t d = ns(rec.start, rec.end);
    st.duration.add(d);
    st.self_ns += d;
    span(rc.thread, rec.start, rec.end);
  }
  void add(const GpuMemcpyRecord& rec, const dump::RecordContext& rc) {
    s.memcpy_bytes += rec.bytes;
    span(rc.thread, rec.start, rec.end);
  }
  void add(const auto&, const dump::RecordContext&) {}  // other kinds: counted only

  uint64_t ns(uint64_t a, uint64_t b) const {
    return b > a ? static_cast<uint64_t>(std::llround(clock.duration_ns(b - a))) : 0;
  }
  const std::string& name_of(uint32_t id) {  // string id -> name, cached
    auto it = names.find(id);
    if (it == names.end()) it = names.emplace(id, r.string_at(id)).first;
    return it->second;
  }
  const std::string& code_name(uint32_t code) {
    auto it = code_names.find(code);
    if (it == code_names.end()) {
      auto c = r.code_table().find(code);
      std::string n = c == r.code_table().end() ? "<code " + std::to_string(code) + ">" : c->second.qualname;
      it = code_names.emplace(code, std::move(n)).first;
    }
    return it->second;
  }
  void span(uint32_t thread, uint64_t a, uint64_t b) {
    auto& t = s.threads[thread];
    t.first_ts = std::min(t.first_ts, a);
    t.last_ts = std::max(t.last_ts, b);
    s.first_ts = std::min(s.first_ts, a);
    s.last_ts = std::max(s.last_ts, b);
  }

  const dump::DumpReader& r;
  const dump::ClockModel clock;
  Summary& s;
  std::unordered_map<uint32_t, SelfTimer<uint64_t>> range_self, py_self;
  std::unordered_map<uint32_t, std::string> names, code_names;
};

}  // namespace

Summary summarize(const dump::DumpReader& r) {
  Summary s;
  Summarizer v(r, s);
  dump::visit_records_past_damage(r, v, s.damage);
  return s;
}

}  // namespace inferscope::analyze
