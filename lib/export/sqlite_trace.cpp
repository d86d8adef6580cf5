// The dump's records as rows. Three passes over the mapped dump: the trace's bounds (so that every row can
// carry its trace-relative time), the host records (ranges, Python calls, marks, counters written at once; CUDA
// calls kept until their context is known), then the GPU records, each linked to its launch call. Between the
// two, each CUDA call gets the innermost Python call, range and layer around its start on its thread
// (docs/analysis.md section 2), and the steps are found again from the analysis's step name.
#include "analyze/analyzer.hpp"
#include "dump/clock_model.hpp"
#include "dump/trace_bounds.hpp"
#include "dump/visit.hpp"
#include "export/sqlite_internal.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <set>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace inferscope::exporter::detail {
namespace {

enum FrameFlags : uint8_t { kPython = 1, kRange = 2, kNvtx = 4, kLayer = 8 };

/// A Python call or range on an application thread, kept to give CUDA calls their context and to find steps.
struct Frame {
  int64_t start = 0, end = 0;
  int64_t row = 0;    ///< id in python_calls or ranges
  uint32_t name = 0;  ///< code id (Python) or string id (range)
  uint8_t depth = 0;
  uint8_t flags = 0;
};

struct Call {
  int64_t start = 0, end = 0;
  int64_t row = 0;  ///< id in cuda_api, given once the calls are final
  uint32_t corr = 0, name = 0, cbid = 0, os_tid = 0, thread = 0;
  uint8_t domain = 0;
  bool cupti = false;  ///< recorded by CUPTI in a channel, re-homed to its caller
  bool dropped = false;
  const Frame* py = nullptr;
  const Frame* range = nullptr;
  const Frame* layer = nullptr;
  uint32_t label = 0;  ///< index into labels
};

struct Step {
  int64_t start = 0, end = 0;
  uint32_t thread = 0;
  const Frame* frame = nullptr;
  int64_t gpu_busy = 0, kernels = 0, kernel_ns = 0;
};

const char* sync_kind(uint8_t k) {  // as SyncRow::kind names them
  switch (static_cast<SyncKind>(k)) {
    case SyncKind::kEventSynchronize: return "event";
    case SyncKind::kStreamWaitEvent: return "stream_wait_event";
    case SyncKind::kStreamSynchronize: return "stream";
    case SyncKind::kContextSynchronize: return "device";
    default: return "unknown";
  }
}

const char* counter_scope(CounterScope s) {
  switch (s) {
    case CounterScope::kProcess: return "process";
    case CounterScope::kThread: return "thread";
    case CounterScope::kDevice: return "device";
    case CounterScope::kMachine: return "machine";
    case CounterScope::kNumaNode: return "numa_node";
    case CounterScope::kOsThread: return "os_thread";
    case CounterScope::kChildProcess: return "child_process";
  }
  return "unknown";
}

std::string base_name(const std::string& file) {
  const size_t slash = file.find_last_of('/');
  return file.substr(slash == std::string::npos ? 0 : slash + 1);
}

/// For calls sorted by start, the innermost frame among `frames` (sorted by start, then longest first) that
/// holds the call: starts by its start and ends no earlier than its end (a frame ending exactly where the call
/// starts was written before it, so it is not the call's, as in the analyzer). Frames nest on one thread, so a
/// stack of open frames suffices.
template <class Set>
void innermost(const std::vector<const Frame*>& frames, const std::vector<Call*>& calls, Set set) {
  std::vector<const Frame*> open;
  size_t next = 0;
  for (Call* c : calls) {
    for (; next < frames.size() && frames[next]->start <= c->start; ++next) {
      while (!open.empty() && open.back()->end < frames[next]->start) open.pop_back();
      open.push_back(frames[next]);
    }
    while (!open.empty() && open.back()->end < c->start) open.pop_back();
    for (size_t k = open.size(); k-- > 0;)
      if (open[k]->end >= c->end) {
        set(*c, open[k]);
        break;
      }
  }
}

class TraceWriter {
 public:
  TraceWriter(Db& db, const dump::DumpReader& r, const analyze::Analysis& a, TraceInfo& info)
      : db_(db), r_(r), a_(a), info_(info), clock_(r.calibration()) {
    names_.resize(r.string_count() + 1);
    for (uint32_t i = 1; i < names_.size(); ++i) names_[i] = r.string_at(i);
    info_.ns_per_tick = clock_.ns_per_tick();
  }

  void run() {
    find_bounds();
    write_threads();
    write_host_records();
    rehome_duplicates();
    resolve_context();
    find_steps();
    write_calls();
    write_gpu_records();
    write_steps();
  }

 private:
  const std::string& name(uint32_t id) const {
    static const std::string none;
    return id < names_.size() ? names_[id] : none;
  }
  const std::string& qualname(uint32_t code) {
    auto [it, added] = qualnames_.try_emplace(code);
    if (added) {
      auto c = r_.code_table().find(code);
      it->second = c == r_.code_table().end() ? "<code " + std::to_string(code) + ">" : c->second.qualname;
    }
    return it->second;
  }
  double rel_ms(int64_t ns) const { return double(ns - info_.first_ns) / 1e6; }
  std::pair<int64_t, int64_t> span(uint64_t start, uint64_t end) const {
    const int64_t s = clock_.to_ns(start);
    return {s, std::max(s, clock_.to_ns(end))};
  }
  /// Visits every record, chunk by chunk; a malformed record ends its chunk with a note (the analyzer does the same).
  template <class V>
  void each_record(V& visitor) {
    for (const auto& c : r_.event_chunks()) {
      try {
        dump::visit_records(r_, c, visitor);
      } catch (const dump::DumpError& e) {
        if (!bad_chunk_noted_) info_.notes.push_back(std::string("records skipped: ") + e.what());
        bad_chunk_noted_ = true;
      }
    }
    bad_chunk_noted_ = true;  // one note per dump, from the first pass
  }

  void find_bounds();
  void write_threads();
  void write_host_records();
  struct HostRows;
  struct GpuRows;
  void add_range(Stmt& st, const RangeRecord& rec, const dump::RecordContext& rc);
  void add_python_call(Stmt& st, const PyCallRecord& rec, const dump::RecordContext& rc);
  void add_mark(Stmt& st, int64_t row, const MarkRecord& rec, const dump::RecordContext& rc);
  void add_counter(Stmt& st, int64_t row, const CounterRecord& rec, const dump::RecordContext& rc);
  void add_call(const CudaApiRecord& rec, const dump::RecordContext& rc);
  std::optional<std::string> attrs_json(const dump::RecordContext& rc) const;
  bool is_layer(const dump::RecordContext& rc, uint32_t nm);
  void write_python_functions();
  void rehome_duplicates();
  void resolve_context();
  uint32_t label_of(const Call& c);
  void find_steps();
  std::vector<const Frame*> frames_by_start(uint32_t thread) const;
  bool names_step(const Frame& f);
  std::optional<int64_t> step_of(int64_t ns) const;
  void write_calls();
  void write_gpu_records();
  Stmt& bind_launcher(Stmt& st, uint32_t corr);
  void write_steps();

  Db& db_;
  const dump::DumpReader& r_;
  const analyze::Analysis& a_;
  TraceInfo& info_;
  const dump::ClockModel clock_;
  std::vector<std::string> names_;
  std::unordered_map<uint32_t, std::string> qualnames_;
  std::unordered_map<uint32_t, int8_t> dotted_;  ///< string id -> looks like a module path
  std::map<uint32_t, std::vector<Frame>> frames_;  ///< by thread; never resized after the host pass
  std::vector<Call> calls_;
  std::unordered_map<uint32_t, const Call*> launch_;  ///< correlation id -> launch call (the last in file order)
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> label_ids_;
  std::vector<std::string> labels_{"-"};
  std::vector<Step> steps_;
  std::vector<std::pair<int64_t, int64_t>> gpu_busy_;  ///< kernels, memsets and copies, for the steps' idle time
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> by_os_tid_;  ///< (first_ts, id)
  bool bad_chunk_noted_ = false;
  int64_t range_rows_ = 0, py_rows_ = 0;  ///< ids given so far
};

void TraceWriter::find_bounds() {
  // The one definition of the trace's origin (dump/trace_bounds.hpp), so that *_ms here equal the analysis's.
  dump::TraceBounds b{clock_};
  each_record(b);
  info_.first_ns = b.first_ns();
  info_.last_ns = b.last_ns();
}

void TraceWriter::write_threads() {
  std::map<uint32_t, const analyze::ThreadRow*> rows;
  for (auto& t : a_.threads) rows[t.id] = &t;
  Stmt st(db_, "INSERT INTO threads VALUES (?,?,?,?,?,?,?,?,?,?)");
  for (auto& [id, t] : r_.threads()) {
    auto it = rows.find(id);
    const analyze::ThreadRow* row = it == rows.end() ? nullptr : it->second;
    st << id << t.os_tid << t.pid << t.name << t.is_channel() << clock_.to_ns(t.first_ts)
       << (t.end_ts ? std::optional<int64_t>(clock_.to_ns(t.end_ts)) : std::nullopt)
       << (row ? std::optional<double>(row->busy_ms) : std::nullopt)
       << (row ? std::optional<double>(row->cpu_ms) : std::nullopt)
       << (row ? std::optional<uint64_t>(row->involuntary_switches) : std::nullopt);
    st.row();
    ++info_.rows;
  }
  Stmt drops(db_, "INSERT INTO drops VALUES (?,?,?,?)");
  for (auto& d : r_.drops()) {
    drops << (d.thread_id == dump::kNoThread ? std::nullopt : std::optional<uint32_t>(d.thread_id)) << d.reason
          << d.records << d.bytes;
    drops.row();
    ++info_.rows;
  }
}

std::optional<std::string> TraceWriter::attrs_json(const dump::RecordContext& rc) const {
  if (!rc.has_attributes()) return std::nullopt;
  boost::json::object o;
  for (auto& at : r_.attributes(rc.bytes)) {
    switch (at.type) {
      case AttrType::kInt: o[at.key] = at.i; break;
      case AttrType::kBool: o[at.key] = at.i != 0; break;
      case AttrType::kDouble: o[at.key] = at.d; break;
      case AttrType::kString: o[at.key] = at.s; break;
      default: o[at.key] = nullptr; break;
    }
  }
  return boost::json::serialize(o);
}

// The analyzer's rule (docs/analysis.md, "Layers"): attribute layer, else no attributes and a dotted path.
bool TraceWriter::is_layer(const dump::RecordContext& rc, uint32_t nm) {
  if (rc.kind() == RecordKind::kRange && rc.header.size > sizeof(RangeRecord)) {
    for (auto& at : r_.attributes(rc.bytes))
      if (at.key == "layer" && (at.i != 0 || at.type == AttrType::kString)) return true;
    return false;
  }
  auto [it, added] = dotted_.try_emplace(nm, 0);
  if (added) it->second = analyze::looks_like_module_path(name(nm)) ? 1 : 0;
  return it->second == 1;
}

void TraceWriter::add_range(Stmt& st, const RangeRecord& rec, const dump::RecordContext& rc) {
  auto [s, e] = span(rec.start, rec.end);
  const uint32_t nm = rec.name < names_.size() ? rec.name : 0;
  const bool nvtx = rc.kind() == RecordKind::kNvtxRange;
  const bool layer = is_layer(rc, nm);
  const Frame f{s, e, ++range_rows_, nm, rc.aux(), uint8_t(kRange | (nvtx ? kNvtx : 0) | (layer ? kLayer : 0))};
  frames_[rc.thread].push_back(f);
  st << f.row << rc.thread << (nvtx ? "nvtx" : "iscope") << name(nm) << int(rc.aux()) << s << e << (e - s)
     << rel_ms(s) << layer << attrs_json(rc);
  st.row();
}

void TraceWriter::add_python_call(Stmt& st, const PyCallRecord& rec, const dump::RecordContext& rc) {
  auto [s, e] = span(rec.start, rec.end);
  const Frame f{s, e, ++py_rows_, rec.code, rc.aux(), kPython};
  frames_[rc.thread].push_back(f);
  st << f.row << rc.thread << rec.code << qualname(rec.code) << int(rc.aux()) << s << e << (e - s) << rel_ms(s);
  st.row();
}

void TraceWriter::add_mark(Stmt& st, int64_t row, const MarkRecord& rec, const dump::RecordContext& rc) {
  const int64_t s = clock_.to_ns(rec.ts);
  st << row << rc.thread << (rc.kind() == RecordKind::kNvtxMark ? "nvtx" : "iscope") << name(rec.name) << s
     << rel_ms(s) << attrs_json(rc);
  st.row();
}

void TraceWriter::add_counter(Stmt& st, int64_t row, const CounterRecord& rec, const dump::RecordContext& rc) {
  const int64_t s = clock_.to_ns(rec.ts);
  const double v = rc.aux() == uint8_t(AttrType::kDouble) ? rec.value.d : double(rec.value.i);
  st << row << name(rec.name) << counter_scope(rec.scope) << rec.target
     << (rec.scope == CounterScope::kThread ? std::optional<uint32_t>(rec.target) : std::nullopt) << s << rel_ms(s)
     << v;
  st.row();
}

// Calls CUPTI recorded itself arrive in a channel naming the caller's OS thread id: they belong to that
// thread's entry, the newest that had started by the call (Linux reuses thread ids), as in the analyzer.
void TraceWriter::add_call(const CudaApiRecord& rec, const dump::RecordContext& rc) {
  const uint32_t thread = rc.thread;
  auto [s, e] = span(rec.start, rec.end);
  Call c;
  c.start = s;
  c.end = e;
  c.corr = rec.correlation;
  c.name = rec.name < names_.size() ? rec.name : 0;
  c.cbid = rec.cbid;
  c.os_tid = rec.os_tid;
  c.domain = rc.aux();
  c.thread = thread;
  auto t = r_.threads().find(thread);
  if (t != r_.threads().end() && t->second.is_channel() && rec.os_tid) {
    if (by_os_tid_.empty())
      for (auto& [id, info] : r_.threads())
        if (!info.is_channel() && info.os_tid) by_os_tid_[info.os_tid].emplace_back(info.first_ts, id);
    auto it = by_os_tid_.find(rec.os_tid);
    if (it != by_os_tid_.end()) {
      auto& v = it->second;
      if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
      auto after = std::upper_bound(v.begin(), v.end(), std::pair{rec.start, UINT32_MAX});
      c.thread = after == v.begin() ? v.front().second : std::prev(after)->second;
      c.cupti = true;
    }
  }
  calls_.push_back(c);
}

// The host records' visitor: ranges, Python calls, marks and counters written as they come; CUDA calls kept.
struct TraceWriter::HostRows {
  TraceWriter& w;
  Stmt ranges, py, marks, counters;
  int64_t mark_rows = 0, counter_rows = 0;
  explicit HostRows(TraceWriter& w)
      : w(w), ranges(w.db_, "INSERT INTO ranges VALUES (?,?,?,?,?,?,?,?,?,?,?)"),
        py(w.db_, "INSERT INTO python_calls VALUES (?,?,?,?,?,?,?,?,?)"),
        marks(w.db_, "INSERT INTO marks VALUES (?,?,?,?,?,?,?)"),
        counters(w.db_, "INSERT INTO counters VALUES (?,?,?,?,?,?,?,?)") {}
  void on(const RangeRecord& r, const dump::RecordContext& rc) { w.add_range(ranges, r, rc); }
  void on(const PyCallRecord& r, const dump::RecordContext& rc) { w.add_python_call(py, r, rc); }
  void on(const CudaApiRecord& r, const dump::RecordContext& rc) { w.add_call(r, rc); }
  void on(const MarkRecord& r, const dump::RecordContext& rc) { w.add_mark(marks, ++mark_rows, r, rc); }
  void on(const CounterRecord& r, const dump::RecordContext& rc) { w.add_counter(counters, ++counter_rows, r, rc); }
};

void TraceWriter::write_host_records() {
  int64_t mark_rows = 0, counter_rows = 0;
  {
    HostRows rows(*this);
    each_record(rows);
    mark_rows = rows.mark_rows;
    counter_rows = rows.counter_rows;
  }
  info_.rows += uint64_t(range_rows_ + py_rows_ + mark_rows + counter_rows);
  write_python_functions();
}

void TraceWriter::write_python_functions() {
  Stmt st(db_, "INSERT INTO python_functions VALUES (?,?,?,?)");
  for (auto& [id, c] : r_.code_table()) {
    st << id << c.qualname << c.file << c.line;
    st.row();
    ++info_.rows;
  }
}

// A runtime call CUPTI recorded comes with its own driver call (cuLaunchKernel inside cudaLaunchKernel) under
// the same correlation id: the driver call's time is the runtime call's, so it is left out, as the analyzer does.
void TraceWriter::rehome_duplicates() {
  std::unordered_map<uint32_t, bool> runtime;  // correlation id -> a re-homed runtime call has it
  for (auto& c : calls_)
    if (c.cupti && c.corr && c.domain != uint8_t(ApiDomain::kDriver)) runtime[c.corr] = true;
  size_t dropped = 0;
  for (auto& c : calls_)
    if (c.cupti && c.corr && c.domain == uint8_t(ApiDomain::kDriver) && runtime.count(c.corr)) c.dropped = true, ++dropped;
  if (dropped)
    calls_.erase(std::remove_if(calls_.begin(), calls_.end(), [](const Call& c) { return c.dropped; }), calls_.end());
}

void TraceWriter::resolve_context() {
  std::map<uint32_t, std::vector<Call*>> by_thread;
  for (auto& c : calls_) by_thread[c.thread].push_back(&c);
  for (auto& [thread, calls] : by_thread) {
    auto f = frames_.find(thread);
    if (f == frames_.end()) continue;
    std::stable_sort(calls.begin(), calls.end(), [](const Call* x, const Call* y) { return x->start < y->start; });
    std::vector<const Frame*> py, range, layer;
    for (const Frame& fr : f->second) {
      if (fr.flags & kPython) py.push_back(&fr);
      if (fr.flags & kRange) range.push_back(&fr);
      if (fr.flags & kLayer) layer.push_back(&fr);
    }
    for (auto* v : {&py, &range, &layer})
      std::stable_sort(v->begin(), v->end(), [](const Frame* x, const Frame* y) {
        return x->start != y->start ? x->start < y->start : x->end > y->end;
      });
    innermost(py, calls, [](Call& c, const Frame* fr) { c.py = fr; });
    innermost(range, calls, [](Call& c, const Frame* fr) { c.range = fr; });
    innermost(layer, calls, [](Call& c, const Frame* fr) { c.layer = fr; });
  }
}

// The analyzer's launcher label: "<qualname> (<file>:<line>) / range <name> / layer <path>" with the parts that
// exist; the step range itself is left out, and so is a range that is the layer.
uint32_t TraceWriter::label_of(const Call& c) {
  const uint32_t py = c.py ? c.py->name : 0, range = c.range ? c.range->name : 0, layer = c.layer ? c.layer->name : 0;
  auto [it, added] = label_ids_.try_emplace({py, range, layer}, 0);
  if (!added) return it->second;
  std::string s;
  auto part = [&](const std::string& x) { s += (s.empty() ? "" : " / ") + x; };
  if (py) {
    auto code = r_.code_table().find(py);
    if (code == r_.code_table().end() || code->second.file.empty()) {
      part(qualname(py));
    } else {
      const auto& ci = code->second;
      part(ci.qualname + " (" + base_name(ci.file) + (ci.line ? ":" + std::to_string(ci.line) : std::string()) + ")");
    }
  }
  if (range && range != layer && name(range) != a_.steps.name) part("range " + name(range));
  if (layer) part("layer " + name(layer));
  if (!s.empty()) {
    it->second = uint32_t(labels_.size());
    labels_.push_back(std::move(s));
  }
  return it->second;
}

// True when the frame's range name or Python qualname is the step's name; with --step, a Python qualname may
// also end with ".name" (as the analyzer matches it).
bool TraceWriter::names_step(const Frame& f) {
  const std::string& want = a_.steps.name;
  if (!(f.flags & kPython)) return name(f.name) == want;
  const std::string& q = qualname(f.name);
  if (q == want) return true;
  return !a_.steps.detected && q.size() > want.size() && q.ends_with(want) && q[q.size() - want.size() - 1] == '.';
}

// The thread's ranges and Python calls by start, the longest first where several start together.
std::vector<const Frame*> TraceWriter::frames_by_start(uint32_t thread) const {
  std::vector<const Frame*> v;
  if (auto fr = frames_.find(thread); fr != frames_.end())
    for (const Frame& f : fr->second) v.push_back(&f);
  std::stable_sort(v.begin(), v.end(), [](const Frame* x, const Frame* y) {
    return x->start != y->start ? x->start < y->start : x->end > y->end;
  });
  return v;
}

// The analysis's steps as it found them (StepStats::spans, warm-up included), each with the range or Python
// call of the step's name that starts it on its thread: the step itself, or the call that opens a loop
// iteration. A C++ loop's iterations (ending at a sync) have none.
void TraceWriter::find_steps() {
  if (a_.steps.count == 0) return;  // the whole trace is one step: nothing to list
  std::map<uint32_t, std::vector<const Frame*>> by_start;  // per thread, filled on first use
  for (const auto& sp : a_.steps.spans) {
    auto [it, added] = by_start.try_emplace(sp.thread);
    if (added) it->second = frames_by_start(sp.thread);
    const Frame* opener = nullptr;
    auto f = std::lower_bound(it->second.begin(), it->second.end(), sp.start_ns,
                              [](const Frame* x, int64_t t) { return x->start < t; });
    for (; f != it->second.end() && (*f)->start == sp.start_ns && !opener; ++f)
      if (names_step(**f)) opener = *f;
    steps_.push_back({sp.start_ns, sp.end_ns, sp.thread, opener});
  }
  info_.steps_found = steps_.size();
}

std::optional<int64_t> TraceWriter::step_of(int64_t ns) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), ns, [](int64_t t, const Step& s) { return t < s.start; });
  if (it == steps_.begin()) return std::nullopt;
  --it;
  if (ns >= it->end) return std::nullopt;
  return int64_t(it - steps_.begin());
}

void TraceWriter::write_calls() {
  Stmt st(db_, "INSERT INTO cuda_api VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  int64_t row = 0;
  for (auto& c : calls_) {
    c.row = ++row;
    c.label = label_of(c);
    if (c.corr) launch_[c.corr] = &c;  // the last call in file order, as the analyzer links them
    st << c.row << c.thread << c.os_tid
       << (c.domain == uint8_t(ApiDomain::kDriver) ? "driver" : c.domain == uint8_t(ApiDomain::kRuntime) ? "runtime" : "unknown")
       << c.cbid << name(c.name) << c.corr << c.start << c.end << (c.end - c.start) << rel_ms(c.start) << c.cupti
       << step_of(c.start);
    st << (c.py ? std::optional<int64_t>(c.py->row) : std::nullopt)
       << (c.py ? std::optional<std::string_view>(qualname(c.py->name)) : std::nullopt)
       << (c.range ? std::optional<int64_t>(c.range->row) : std::nullopt)
       << (c.range ? std::optional<std::string_view>(name(c.range->name)) : std::nullopt)
       << (c.layer ? std::optional<std::string_view>(name(c.layer->name)) : std::nullopt) << labels_[c.label];
    st.row();
  }
  info_.rows += calls_.size();
}

// The launcher columns of every GPU table: api_id, launch_thread_id, py_call_id, py_function, range_id,
// range_name, layer, launched_by (NULL when no call has the correlation id).
Stmt& TraceWriter::bind_launcher(Stmt& st, uint32_t corr) {
  auto it = corr ? launch_.find(corr) : launch_.end();
  if (it == launch_.end()) {
    for (int i = 0; i < 8; ++i) st << std::nullopt;
    return st;
  }
  const Call& c = *it->second;
  return st << c.row << c.thread << (c.py ? std::optional<int64_t>(c.py->row) : std::nullopt)
            << (c.py ? std::optional<std::string_view>(qualname(c.py->name)) : std::nullopt)
            << (c.range ? std::optional<int64_t>(c.range->row) : std::nullopt)
            << (c.range ? std::optional<std::string_view>(name(c.range->name)) : std::nullopt)
            << (c.layer ? std::optional<std::string_view>(name(c.layer->name)) : std::nullopt) << labels_[c.label];
}

// The GPU records' visitor: each written as it comes, with its launch call's context and its step.
struct TraceWriter::GpuRows {
  TraceWriter& w;
  Stmt kernels, copies, memsets, syncs, allocs, graphs;
  int64_t n[6] = {0, 0, 0, 0, 0, 0};
  explicit GpuRows(TraceWriter& w)
      : w(w), kernels(w.db_, "INSERT INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        copies(w.db_, "INSERT INTO copies VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        memsets(w.db_, "INSERT INTO memsets VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        syncs(w.db_, "INSERT INTO syncs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        allocs(w.db_, "INSERT INTO allocations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        graphs(w.db_, "INSERT INTO graph_launches VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)") {}

  void on(const GpuKernelRecord& k, const dump::RecordContext&) {
    auto [s, e] = w.span(k.start, k.end);
    const auto step = w.step_of(s);
    if (step) ++w.steps_[size_t(*step)].kernels, w.steps_[size_t(*step)].kernel_ns += e - s;
    w.gpu_busy_.emplace_back(s, e);
    kernels << ++n[0] << k.correlation << w.name(k.name) << s << e << (e - s) << w.rel_ms(s) << step << k.device
            << k.context << k.stream << k.grid[0] << k.grid[1] << k.grid[2] << k.block[0] << k.block[1]
            << k.block[2] << k.registers << k.static_smem << k.dynamic_smem << k.graph_id;
    w.bind_launcher(kernels, k.correlation).row();
  }
  void on(const GpuMemcpyRecord& c, const dump::RecordContext& rc) {
    auto [s, e] = w.span(c.start, c.end);
    w.gpu_busy_.emplace_back(s, e);
    copies << ++n[1] << c.correlation << copy_direction_name(static_cast<CopyKind>(rc.aux()))
           << memory_kind_name(c.src_kind) << memory_kind_name(c.dst_kind) << c.bytes << s << e << (e - s)
           << w.rel_ms(s) << w.step_of(s) << c.device << c.dst_device << c.context << c.stream << int(c.is_async)
           << c.graph_id;
    w.bind_launcher(copies, c.correlation).row();
  }
  void on(const GpuMemsetRecord& m, const dump::RecordContext& rc) {
    auto [s, e] = w.span(m.start, m.end);
    w.gpu_busy_.emplace_back(s, e);
    memsets << ++n[2] << m.correlation << memory_kind_name(MemoryKind(rc.aux())) << m.bytes << m.value << s << e
            << (e - s) << w.rel_ms(s) << w.step_of(s) << m.device << m.context << m.stream;
    w.bind_launcher(memsets, m.correlation).row();
  }
  void on(const GpuSyncRecord& y, const dump::RecordContext& rc) {
    auto [s, e] = w.span(y.start, y.end);
    syncs << ++n[3] << y.correlation << sync_kind(rc.aux()) << s << e << (e - s) << w.rel_ms(s) << w.step_of(s)
          << y.device << y.context << stream(y.stream) << y.event;
    w.bind_launcher(syncs, y.correlation).row();
  }
  void on(const GpuMemoryRecord& m, const dump::RecordContext& rc) {
    const int64_t s = w.clock_.to_ns(m.ts);
    allocs << ++n[4] << m.correlation << (rc.aux() == 1 ? "alloc" : "free") << memory_kind_name(m.memory_kind)
           << int64_t(m.address) << m.bytes << s << w.rel_ms(s) << w.step_of(s) << m.device << stream(m.stream);
    w.bind_launcher(allocs, m.correlation).row();
  }
  void on(const GpuGraphLaunchRecord& g, const dump::RecordContext&) {
    auto [s, e] = w.span(g.start, g.end);
    graphs << ++n[5] << g.correlation << g.graph_id << s << e << (e - s) << w.rel_ms(s) << w.step_of(s) << g.device
           << g.context << g.stream;
    w.bind_launcher(graphs, g.correlation).row();
  }
  static std::optional<uint32_t> stream(uint32_t s) {
    return s == UINT32_MAX ? std::nullopt : std::optional<uint32_t>(s);
  }
};

void TraceWriter::write_gpu_records() {
  GpuRows rows(*this);
  each_record(rows);
  for (int64_t k : rows.n) info_.rows += uint64_t(k);
}

// Per step: the time some kernel, memset or copy ran (their union, clipped to the step) and its complement,
// the GPU's idle time, which the analysis splits into its causes (Breakdown::gpu_idle_*).
void TraceWriter::write_steps() {
  std::sort(gpu_busy_.begin(), gpu_busy_.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (auto& iv : gpu_busy_) {
    if (!merged.empty() && iv.first <= merged.back().second) merged.back().second = std::max(merged.back().second, iv.second);
    else merged.push_back(iv);
  }
  std::set<uint32_t> slow;
  for (const auto& o : a_.steps.outliers) slow.insert(o.index);
  Stmt st(db_, "INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    auto it = std::lower_bound(merged.begin(), merged.end(), s.start,
                               [](const std::pair<int64_t, int64_t>& iv, int64_t t) { return iv.second <= t; });
    for (; it != merged.end() && it->first < s.end; ++it) s.gpu_busy += std::min(it->second, s.end) - std::max(it->first, s.start);
    const bool py = s.frame && (s.frame->flags & kPython), range = s.frame && !py;
    st << int64_t(i) << s.thread << (range ? std::optional<int64_t>(s.frame->row) : std::nullopt)
       << (py ? std::optional<int64_t>(s.frame->row) : std::nullopt) << s.start << s.end << (s.end - s.start)
       << rel_ms(s.start) << double(s.end - s.start) / 1e6 << s.gpu_busy << (s.end - s.start - s.gpu_busy) << s.kernels
       << s.kernel_ns
       << std::string(i < a_.steps.warmup ? "warmup" : slow.count(uint32_t(i)) ? "slow" : "steady");
    st.row();
  }
  info_.rows += steps_.size();
}

}  // namespace

void write_trace(Db& db, const dump::DumpReader& reader, const analyze::Analysis& analysis, TraceInfo& info) {
  TraceWriter(db, reader, analysis, info).run();
}

}  // namespace inferscope::exporter::detail
