// The merge: two streaming passes over the memory-mapped dump, then one linear sweep per step.
//
// Pass 1 visits every record once. Ranges, Python calls, marks and counters are aggregated on the fly; CUDA
// API calls and GPU activities are kept in compact arrays (model.hpp). Attribution needs no sort: a thread's
// records arrive in the order they END, so the first range (or Python frame) to arrive that contains a
// pending API call's start is the innermost one around it; each thread keeps a stack of API calls still
// waiting for their innermost Python frame, range and layer.
//
// Pass 2 visits only application threads again (cheap: the file is mapped) to measure host work inside the
// chosen steps and to cut out the representative step's timeline, both of which need the steps from pass 1.
#include "analyze/analyzer.hpp"

#include "analyze/model.hpp"
#include "analyze/summary.hpp"
#include "dump/clock_model.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_map>

namespace inferscope::analyze {

std::vector<Finding> run_rules(const Analysis& a, const detail::Model& m);  // rules.cpp

using detail::ApiOp;
using detail::GpuOp;
using detail::Model;
using detail::Span;
using detail::StepMetrics;

bool looks_like_module_path(std::string_view name) {
  if (name.empty() || name.find('.') == std::string_view::npos) return false;
  if (name.front() == '.' || name.back() == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  if (std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return name.find("..") == std::string_view::npos;
}

namespace {

constexpr int64_t kBetweenKernelsGapNs = 100'000;  // docs/analysis.md: "gaps between kernels"

uint32_t sat32(int64_t v) { return v <= 0 ? 0 : v >= int64_t(UINT32_MAX) ? UINT32_MAX : uint32_t(v); }
double ms(double ns) { return ns / 1e6; }

uint8_t classify_api(const std::string& n) {
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("Synchronize")) return detail::kSync;
  if (has("Launch")) return detail::kLaunch;
  if (has("Memcpy") || has("Memset")) return has("Async") ? detail::kCopyAsync : (has("Memcpy") ? detail::kCopySync : detail::kCopyAsync);
  if (has("Free")) return detail::kFree;
  if (has("Malloc") || has("MemAlloc") || has("MemCreate")) return detail::kAlloc;
  return detail::kOtherApi;
}

const char* memory_name(uint8_t k) { return memory_kind_name(static_cast<MemoryKind>(k)); }
const char* copy_name(uint8_t k) {
  switch (static_cast<CopyKind>(k)) {
    case CopyKind::kHtoD: case CopyKind::kHtoA: return "h2d";
    case CopyKind::kDtoH: case CopyKind::kAtoH: return "d2h";
    case CopyKind::kDtoD: case CopyKind::kAtoA: case CopyKind::kAtoD: case CopyKind::kDtoA: return "d2d";
    case CopyKind::kHtoH: return "h2h";
    case CopyKind::kPtoP: return "peer";
    default: return "unknown";
  }
}

struct ThreadState {
  std::vector<uint32_t> pend_py, pend_range, pend_layer;
  SelfTimer<int64_t> range_self, py_self;
  double busy_range = 0, busy_py = 0;  // depth-0 frame time
  std::vector<std::pair<uint64_t, int64_t>> shallow_py;  // Python calls at depth <= 3 by code: (count, total ns)
  uint64_t apis = 0, py_calls = 0, ranges = 0;
  bool seen = false;
};

struct NameAgg {
  DurationStats d;
  int64_t self = 0;
};

struct Cand {
  uint32_t thread, name;
  int64_t start, end;
};

struct CopyKey {
  std::string dir, src, dst;
  bool operator<(const CopyKey& o) const { return std::tie(dir, src, dst) < std::tie(o.dir, o.src, o.dst); }
};
struct CopyAgg {
  uint64_t count = 0, bytes = 0;
  int64_t ns = 0;
};

struct CounterSample {
  uint32_t name;
  uint8_t scope;
  uint32_t target;
  int64_t ts;
  double v;
};

struct Progress {
  bool on = false;
  uint64_t total = 0, done = 0, next = 0;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  void step(uint64_t n, const char* what) {
    done += n;
    if (!on || done < next) return;
    next = done + std::max<uint64_t>(total / 20, 1);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "iscope-analyze: %s %3.0f%% (%llu of %llu records, %.1f s)\n", what,
                 total ? 100.0 * double(done) / double(total) : 100.0, (unsigned long long)done,
                 (unsigned long long)total, s);
  }
};

// Union length of intervals fed in start order, clipped to a window.
struct Union {
  int64_t cs = 0, ce = 0;
  bool open = false;
  int64_t total = 0;
  void add(int64_t s, int64_t e) {
    if (!open) { cs = s; ce = e; open = true; return; }
    if (s > ce) { total += ce - cs; cs = s; ce = e; }
    else ce = std::max(ce, e);
  }
  int64_t finish() { if (open) { total += ce - cs; open = false; } return total; }
};

// |[a,b) ∩ list| for a sorted disjoint list; `i` is a cursor that only moves forward over calls with
// increasing a.
int64_t overlap(const std::vector<Span>& list, size_t& i, int64_t a, int64_t b) {
  while (i < list.size() && list[i].end <= a) ++i;
  int64_t t = 0;
  for (size_t j = i; j < list.size() && list[j].start < b; ++j)
    t += std::max<int64_t>(0, std::min(b, list[j].end) - std::max(a, list[j].start));
  return t;
}

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t r = static_cast<size_t>(std::ceil(q * double(v.size())));
  r = std::clamp<size_t>(r, 1, v.size());
  return v[r - 1];
}

}  // namespace

Analysis analyze_dump(const dump::DumpReader& r, const AnalyzeOptions& opt) {
  Analysis a;
  Model m;
  a.source = r.path();
  a.source_format = "dump";
  for (auto& [k, v] : r.process_info()) a.process[k] = v;  // later values win
  if (r.damage()) {
    a.warnings.push_back((r.damage()->truncated ? "the dump was cut short: " : "the dump is corrupt: ") +
                         r.damage()->message + "; the analysis covers the data before that point");
    if (!r.damage()->truncated) a.partial = true;
  } else if (!r.complete()) {
    a.warnings.push_back(r.path() + ": no end chunk (the process did not stop cleanly); the analysis covers what was written");
  }
  for (auto& d : r.drops()) a.drops[d.reason] += d.records;
  if (uint64_t dropped = r.total_dropped_records())
    a.warnings.push_back(std::to_string(dropped) + " records were dropped while recording (see drops); totals are lower bounds");

  const dump::ClockModel clock(r.calibration());
  const size_t nstr = r.string_count() + 1;
  // All names up front: the passes below run on two threads and only read them.
  std::vector<std::string> sname(nstr);
  for (uint32_t i = 1; i < nstr; ++i) sname[i] = r.string_at(i);
  auto name_of = [&](uint32_t id) -> const std::string& {
    static const std::string none;
    return id < nstr ? sname[id] : none;
  };
  auto code_name = [&](uint32_t code) -> std::string {
    auto it = r.code_table().find(code);
    return it == r.code_table().end() ? "<code " + std::to_string(code) + ">" : it->second.qualname;
  };

  // "Model.generate (model.py:42)": the function and where it is, as a launcher label names it.
  auto code_where = [&](uint32_t code) -> std::string {
    auto it = r.code_table().find(code);
    if (it == r.code_table().end()) return code_name(code);
    const auto& c = it->second;
    if (c.file.empty()) return c.qualname;
    const size_t slash = c.file.find_last_of('/');
    return c.qualname + " (" + c.file.substr(slash == std::string::npos ? 0 : slash + 1) +
           (c.line ? ":" + std::to_string(c.line) : std::string()) + ")";
  };

  // Step names asked for.
  std::vector<uint8_t> step_name(nstr, 0);
  std::set<uint32_t> step_codes;
  if (!opt.step.empty()) {
    for (uint32_t i = 1; i < nstr; ++i)
      if (r.has_string(i) && name_of(i) == opt.step) step_name[i] = 1;
    for (auto& [id, c] : r.code_table())
      if (c.qualname == opt.step || (c.qualname.size() > opt.step.size() &&
                                     c.qualname.compare(c.qualname.size() - opt.step.size(), opt.step.size(), opt.step) == 0 &&
                                     c.qualname[c.qualname.size() - opt.step.size() - 1] == '.'))
        step_codes.insert(id);
  }
  std::vector<int8_t> dotted(nstr, -1), api_kind(nstr, -1);

  std::vector<ThreadState> ts;
  auto T = [&](uint32_t t) -> ThreadState& {
    if (t >= (1u << 20)) t = 0;  // never size a table by a nonsense id
    if (t >= ts.size()) ts.resize(t + 1);
    ts[t].seen = true;
    return ts[t];
  };
  std::vector<NameAgg> range_agg(nstr);
  std::vector<NameAgg> py_agg;  // by code id (small, dense)
  std::vector<uint64_t> kernel_count(nstr, 0);
  std::vector<int64_t> kernel_ns(nstr, 0);
  std::vector<ApiOp> apis;
  std::vector<GpuOp> gpu;
  std::vector<Cand> top, asked;
  std::map<CopyKey, CopyAgg> copies;
  std::map<std::pair<std::string, std::string>, AllocRow> allocs;
  std::vector<std::pair<int64_t, bool>> mem_events;  // (ts, alloc)
  std::vector<CounterSample> counters;
  std::map<uint32_t, uint64_t> layer_count;
  std::map<uint32_t, double> layer_cpu;
  uint64_t marks = 0;
  int64_t t_first = std::numeric_limits<int64_t>::max(), t_last = std::numeric_limits<int64_t>::min();
  // What each pass-1 worker counts on its own (merged after the join).
  struct Local {
    uint64_t events = 0;
    int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
    std::vector<std::pair<uint32_t, const uint8_t*>> deferred;  // records of the other worker's kinds
    std::vector<std::string> warnings;
    bool partial = false;
  };
  Local L_app, L_gpu;
  uint64_t clock_checks = 0, clock_bad = 0;
  double clock_worst_ns = 0;

  // Reserving address space for every record costs no memory until it is touched and saves the copies and
  // page faults of repeated growth.
  // Capped: a heuristic-overcommit kernel refuses a single reservation far beyond RAM + swap.
  // The chunk headers' record counts are only claims: a GPU or API record takes at least 36 bytes of the
  // file, which bounds what a corrupt or hostile dump can make us reserve.
  const uint64_t claimed = std::min<uint64_t>(r.record_count(), r.file_size() / 36);
  const size_t reserve = static_cast<size_t>(std::min<uint64_t>(claimed / 2 + 1024, uint64_t(1) << 26));
  apis.reserve(reserve);
  gpu.reserve(reserve);
  Progress prog;
  prog.on = opt.progress;
  prog.total = r.record_count() * 2;

  auto is_channel = [&](uint32_t t) {
    auto it = r.threads().find(t);
    return it != r.threads().end() && it->second.is_channel();
  };
  // Visits the chunks of application threads (channels = false) or of collector channels (true).
  auto visit_chunks = [&](bool channels, Local& L, bool report, const char* what, auto&& fn) {
    for (const auto& c : r.event_chunks()) {
      if (is_channel(c.thread_id) != channels) continue;
      try {
        r.for_each_record_in(c, fn);
      } catch (const dump::DumpError& e) {
        L.warnings.push_back(std::string(e.what()) + "; the rest of that chunk was skipped");
        L.partial = true;
      }
      if (report) prog.step(c.count, what);
    }
  };

  // INFERSCOPE_ANALYZE_TIMING=1 prints how long each phase took (for bench/analyze).
  const bool timing = std::getenv("INFERSCOPE_ANALYZE_TIMING") != nullptr;
  auto phase_t0 = std::chrono::steady_clock::now();
  auto phase = [&](const char* name) {
    if (!timing) return;
    auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "iscope-analyze: phase %-22s %.3f s\n", name, std::chrono::duration<double>(now - phase_t0).count());
    phase_t0 = now;
  };

  // ---------------------------------------------------------------- pass 1
  // Application kinds (ranges, Python calls, API calls, marks) and GPU/collector kinds touch disjoint state,
  // so one worker takes the application threads' chunks and another the channels'; a record of the other
  // side's kinds (none in dumps the runtime writes) is deferred and handled after the join.
  auto app_kind = [](RecordKind k) {
    return k == RecordKind::kRange || k == RecordKind::kNvtxRange || k == RecordKind::kPyCall ||
           k == RecordKind::kCudaApi || k == RecordKind::kMark || k == RecordKind::kNvtxMark;
  };
  auto handle = [&](Local& L, uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    ++L.events;
    auto seen_time = [&L](int64_t s, int64_t e) {
      if (s < L.first) L.first = s;
      if (e > L.last) L.last = e;
    };
    switch (h.kind) {
      case RecordKind::kRange:
      case RecordKind::kNvtxRange: {
        auto rec = dump::load<RangeRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        auto& t = T(thread);
        ++t.ranges;
        uint32_t nm = rec.name < nstr ? rec.name : 0;
        auto& agg = range_agg[nm];
        agg.d.add(uint64_t(e - s));
        agg.self += t.range_self.self(h.aux, e - s);
        if (h.aux == 0) {
          t.busy_range += double(e - s);
          top.push_back({thread, nm, s, e});
        }
        if (step_name[nm]) asked.push_back({thread, nm, s, e});
        // Layer: attribute layer=1, or no attributes and a dotted module path.
        bool layer = false;
        if (h.size > sizeof(RangeRecord) && h.kind == RecordKind::kRange) {
          for (auto& at : r.attributes(p))
            if (at.key == "layer" && (at.i != 0 || at.type == AttrType::kString)) layer = true;
        } else {
          if (dotted[nm] < 0) dotted[nm] = looks_like_module_path(name_of(nm)) ? 1 : 0;
          layer = dotted[nm] == 1;
        }
        while (!t.pend_range.empty() && apis[t.pend_range.back()].start >= s) {
          apis[t.pend_range.back()].range = nm;
          t.pend_range.pop_back();
        }
        if (layer) {
          ++layer_count[nm];
          layer_cpu[nm] += double(e - s);
          while (!t.pend_layer.empty() && apis[t.pend_layer.back()].start >= s) {
            apis[t.pend_layer.back()].layer = nm;
            t.pend_layer.pop_back();
          }
        }
        if (h.aux == 0 && h.kind == RecordKind::kRange) {  // nothing before an outermost range can be inside a later one
          t.pend_range.clear();
          t.pend_layer.clear();
        }
        break;
      }
      case RecordKind::kPyCall: {
        auto rec = dump::load<PyCallRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        auto& t = T(thread);
        ++t.py_calls;
        if (rec.code >= (1u << 24)) rec.code = 0;  // code ids are small and dense; never size a table by nonsense
        if (rec.code >= py_agg.size()) py_agg.resize(size_t(rec.code) + 1);
        auto& agg = py_agg[rec.code];
        agg.d.add(uint64_t(e - s));
        agg.self += t.py_self.self(h.aux, e - s);
        if (h.aux == 0) t.busy_py += double(e - s);
        if (!step_codes.empty() && step_codes.count(rec.code)) asked.push_back({thread, 0x80000000u | rec.code, s, e});
        if (h.aux <= 3) {  // step candidates when no range repeats
          if (rec.code >= t.shallow_py.size()) t.shallow_py.resize(size_t(rec.code) + 1);
          ++t.shallow_py[rec.code].first;
          t.shallow_py[rec.code].second += e - s;
        }
        while (!t.pend_py.empty() && apis[t.pend_py.back()].start >= s) {
          apis[t.pend_py.back()].py = rec.code;
          t.pend_py.pop_back();
        }
        if (h.aux == 0) t.pend_py.clear();
        break;
      }
      case RecordKind::kCudaApi: {
        auto rec = dump::load<CudaApiRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        auto& t = T(thread);
        ++t.apis;
        uint32_t nm = rec.name < nstr ? rec.name : 0;
        if (api_kind[nm] < 0) api_kind[nm] = static_cast<int8_t>(classify_api(name_of(nm)));
        ApiOp op{};
        op.start = s;
        op.dur = sat32(e - s);
        op.corr = rec.correlation;
        op.name = nm;
        op.thread = static_cast<uint16_t>(std::min<uint32_t>(thread, 0xffff));
        op.kind = static_cast<uint8_t>(api_kind[nm]);
        uint32_t idx = static_cast<uint32_t>(apis.size());
        apis.push_back(op);
        t.pend_py.push_back(idx);
        t.pend_range.push_back(idx);
        t.pend_layer.push_back(idx);
        break;
      }
      case RecordKind::kGpuKernel: {
        auto rec = dump::load<GpuKernelRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        uint32_t nm = rec.name < nstr ? rec.name : 0;
        ++kernel_count[nm];
        kernel_ns[nm] += e - s;
        gpu.push_back(GpuOp{s, sat32(e - s), rec.correlation, nm, detail::kKernel, 0, static_cast<uint16_t>(rec.stream)});
        break;
      }
      case RecordKind::kGpuMemcpy: {
        auto rec = dump::load<GpuMemcpyRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        std::string dir = copy_name(h.aux);
        uint8_t kind = dir == "h2d" ? detail::kH2D : dir == "d2h" ? detail::kD2H : detail::kOtherCopy;
        uint8_t host = kind == detail::kH2D ? uint8_t(rec.src_kind) : kind == detail::kD2H ? uint8_t(rec.dst_kind) : 0;
        auto& c = copies[{dir, memory_name(uint8_t(rec.src_kind)), memory_name(uint8_t(rec.dst_kind))}];
        ++c.count;
        c.bytes += rec.bytes;
        c.ns += e - s;
        gpu.push_back(GpuOp{s, sat32(e - s), rec.correlation, sat32(int64_t(std::min<uint64_t>(rec.bytes, UINT32_MAX))),
                            kind, host, static_cast<uint16_t>(rec.stream)});
        break;
      }
      case RecordKind::kGpuMemset: {
        auto rec = dump::load<GpuMemsetRecord>(p);
        int64_t s = clock.to_ns(rec.start), e = clock.to_ns(rec.end);
        if (e < s) e = s;
        seen_time(s, e);
        gpu.push_back(GpuOp{s, sat32(e - s), rec.correlation, sat32(int64_t(std::min<uint64_t>(rec.bytes, UINT32_MAX))),
                            detail::kMemset, 0, static_cast<uint16_t>(rec.stream)});
        break;
      }
      case RecordKind::kGpuMemory: {
        auto rec = dump::load<GpuMemoryRecord>(p);
        int64_t s = clock.to_ns(rec.ts);
        seen_time(s, s);
        bool alloc = h.aux == 1;
        auto& row = allocs[{alloc ? "alloc" : "free", memory_name(uint8_t(rec.memory_kind))}];
        row.op = alloc ? "alloc" : "free";
        row.memory = memory_name(uint8_t(rec.memory_kind));
        ++row.count;
        row.bytes += rec.bytes;
        mem_events.emplace_back(s, alloc);
        break;
      }
      case RecordKind::kCounter: {
        auto rec = dump::load<CounterRecord>(p);
        double v = h.aux == uint8_t(AttrType::kDouble) ? rec.value.d : double(rec.value.i);
        counters.push_back({rec.name, uint8_t(rec.scope), rec.target, clock.to_ns(rec.ts), v});
        break;
      }
      case RecordKind::kClockCheck: {
        auto rec = dump::load<ClockCheckRecord>(p);
        ++clock_checks;
        double viol = double(clock.to_ns(rec.cpu_before) - clock.to_ns(rec.gpu_ts));
        if (viol > clock_worst_ns) clock_worst_ns = viol;
        if (viol > 1000) ++clock_bad;
        break;
      }
      case RecordKind::kMark:
      case RecordKind::kNvtxMark: {
        auto rec = dump::load<MarkRecord>(p);
        int64_t s = clock.to_ns(rec.ts);
        seen_time(s, s);
        ++marks;
        T(thread);
        break;
      }
      default:
        break;
    }
  };
  {
    prog.total = 0;
    for (const auto& c : r.event_chunks())
      if (!is_channel(c.thread_id)) prog.total += c.count;
    std::thread gpu_worker([&] {
      visit_chunks(true, L_gpu, false, "reading", [&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
        if (app_kind(h.kind)) L_gpu.deferred.emplace_back(thread, p);
        else handle(L_gpu, thread, h, p);
      });
    });
    visit_chunks(false, L_app, true, "reading", [&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
      if (!app_kind(h.kind)) L_app.deferred.emplace_back(thread, p);
      else handle(L_app, thread, h, p);
    });
    gpu_worker.join();
    for (Local* L : {&L_app, &L_gpu}) {
      for (auto& [thread, p] : L->deferred) handle(*L, thread, dump::load<RecordHeader>(p), p);
      a.events += L->events;
      t_first = std::min(t_first, L->first);
      t_last = std::max(t_last, L->last);
      a.warnings.insert(a.warnings.end(), L->warnings.begin(), L->warnings.end());
      a.partial |= L->partial;
      L->deferred.clear();
      L->deferred.shrink_to_fit();
    }
  }
  if (a.events == 0 || t_first > t_last) {
    t_first = t_last = 0;
    a.warnings.push_back(r.path() + ": the dump holds no events");
  }
  a.trace_ms = ms(double(t_last - t_first));
  auto rel = [&](int64_t ns) { return ms(double(ns - t_first)); };

  phase("pass 1");
  // ---------------------------------------------------------------- steps
  std::vector<Cand> steps;
  auto cand_name = [&](const Cand& c) {
    return (c.name & 0x80000000u) ? code_name(c.name & 0x7fffffffu) : name_of(c.name);
  };
  if (!opt.step.empty()) {
    steps = asked;
    a.steps.name = opt.step;
    if (steps.empty())
      a.warnings.push_back("no range, scope or Python function named '" + opt.step +
                           "' in " + r.path() + "; the whole trace is analysed as one step");
  } else {
    std::map<uint32_t, std::pair<uint64_t, int64_t>> by_name;  // name -> (count, total)
    for (auto& c : top) {
      auto& x = by_name[c.name];
      ++x.first;
      x.second += c.end - c.start;
    }
    uint32_t best = 0;
    std::pair<int64_t, uint64_t> best_score{-1, 0};
    for (auto& [n, x] : by_name)
      if (x.first >= 2 && std::make_pair(x.second, x.first) > best_score) {
        best_score = {x.second, x.first};
        best = n;
      }
    if (best_score.first >= 0) {
      for (auto& c : top)
        if (c.name == best) steps.push_back(c);
      a.steps.name = name_of(best);
      a.steps.detected = true;
    } else {
      // An unmodified program (no ranges): the repeated shallow Python function covering the most time on
      // the thread that makes the most CUDA calls, e.g. the body of the serving loop.
      uint32_t launcher_thread = 0;
      uint64_t most = 0;
      for (uint32_t t = 0; t < ts.size(); ++t) {
        uint64_t score = ts[t].apis * 4 + ts[t].py_calls;  // the launching thread; Python-only: the busiest
        if (score > most) { most = score; launcher_thread = t; }
      }
      static const std::vector<std::pair<uint64_t, int64_t>> none;
      uint32_t bc = 0;
      std::pair<int64_t, uint64_t> bs{-1, 0};
      const auto& shallow = launcher_thread < ts.size() ? ts[launcher_thread].shallow_py : none;
      for (uint32_t code = 0; code < shallow.size(); ++code) {
        auto& x = shallow[code];
        if (x.first >= 2 && std::make_pair(x.second, x.first) > bs) {
          bs = {x.second, x.first};
          bc = code;
        }
      }
      if (bs.first >= 0) {
        // Its calls: one more pass over that thread's chunks (only in this fallback).
        for (const auto& c : r.event_chunks()) {
          if (c.thread_id != launcher_thread) continue;
          try {
            r.for_each_record_in(c, [&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
              if (h.kind != RecordKind::kPyCall || h.aux > 3) return;
              auto rec = dump::load<PyCallRecord>(p);
              if (rec.code != bc) return;
              int64_t s0 = clock.to_ns(rec.start);
              steps.push_back({thread, 0x80000000u | bc, s0, std::max(s0, clock.to_ns(rec.end))});
            });
          } catch (const dump::DumpError&) {  // reported by pass 1
          }
        }
        a.steps.name = code_name(bc);
        a.steps.detected = true;
        a.warnings.push_back("no repeated top-level range: the steps are the calls of the Python function '" +
                             a.steps.name + "' (repeated, covering the most time); mark steps with "
                             "inferscope_py.scope(\"step\") or pass --step to choose");
      }
    }
  }
  if (!steps.empty()) {  // one thread (the one with the most instances), no overlaps
    std::map<uint32_t, size_t> per_thread;
    for (auto& c : steps) ++per_thread[c.thread];
    uint32_t th = std::max_element(per_thread.begin(), per_thread.end(),
                                   [](auto& x, auto& y) { return x.second < y.second; })->first;
    std::vector<Cand> v;
    for (auto& c : steps)
      if (c.thread == th) v.push_back(c);
    std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; });
    steps.clear();
    for (auto& c : v)
      if (steps.empty() || c.start >= steps.back().end) steps.push_back(c);
    if (a.steps.name.empty()) a.steps.name = cand_name(steps.front());
  }
  uint32_t step_thread = 0;
  bool whole = steps.empty();
  if (whole) {
    // The application thread with the most CUDA calls (or records) carries the "step".
    uint64_t best = 0;
    for (uint32_t t = 0; t < ts.size(); ++t) {
      if (!ts[t].seen) continue;
      auto it = r.threads().find(t);
      if (it != r.threads().end() && it->second.is_channel()) continue;
      uint64_t score = ts[t].apis * 4 + ts[t].py_calls + ts[t].ranges + 1;
      if (score > best) { best = score; step_thread = t; }
    }
    steps.push_back({step_thread, 0, t_first, std::max(t_last, t_first + 1)});
    a.steps.name = "(whole trace)";
    a.steps.detected = false;
    if (opt.step.empty())
      a.warnings.push_back("no repeated top-level range or scope was found: the whole trace (" +
                           std::to_string(a.trace_ms) + " ms) is analysed as one step; wrap each inference step in "
                           "ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\") for per-step statistics");
  } else {
    step_thread = steps.front().thread;
  }
  {
    auto it = r.threads().find(step_thread);
    m.step_thread_name = it != r.threads().end() && !it->second.name.empty() ? it->second.name : "thread " + std::to_string(step_thread);
  }
  std::vector<double> durs;
  for (auto& c : steps) durs.push_back(double(c.end - c.start));
  {
    std::vector<double> sorted = durs;
    std::sort(sorted.begin(), sorted.end());
    a.steps.count = whole ? 0 : steps.size();
    double sum = std::accumulate(sorted.begin(), sorted.end(), 0.0);
    a.steps.mean_ms = ms(sum / double(sorted.size()));
    a.steps.p50_ms = ms(percentile_sorted(sorted, 0.5));
    a.steps.p90_ms = ms(percentile_sorted(sorted, 0.9));
    a.steps.p99_ms = ms(percentile_sorted(sorted, 0.99));
    a.steps.max_ms = ms(sorted.back());
    a.steps.min_ms = ms(sorted.front());
    std::vector<size_t> idx(steps.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return durs[x] > durs[y]; });
    if (!whole)
      for (size_t k = 0; k < idx.size() && k < 5; ++k)
        a.steps.slowest.push_back({uint32_t(idx[k]), rel(steps[idx[k]].start), ms(durs[idx[k]])});
    a.end_to_end_ms = a.steps.mean_ms;
    m.step_mean_ns = sum / double(sorted.size());
  }
  // Representative step: closest to the median.
  size_t rep = 0;
  {
    double med = percentile_sorted([&] { auto s = durs; std::sort(s.begin(), s.end()); return s; }(), 0.5);
    double bestd = 1e300;
    for (size_t i = 0; i < durs.size(); ++i)
      if (std::fabs(durs[i] - med) < bestd) { bestd = std::fabs(durs[i] - med); rep = i; }
  }
  const int64_t rep_s = steps[rep].start, rep_e = steps[rep].end;
  a.representative.step = {uint32_t(rep), rel(rep_s), ms(double(rep_e - rep_s))};
  size_t step_hint = 0;  // records mostly come in time order: try the last step found first
  auto step_of = [&](int64_t s, int64_t e) -> long {  // index of the step containing [s,e], -1 if none
    if (step_hint < steps.size() && s >= steps[step_hint].start && e <= steps[step_hint].end) return long(step_hint);
    auto it = std::upper_bound(steps.begin(), steps.end(), s, [](int64_t v, const Cand& c) { return v < c.start; });
    if (it == steps.begin()) return -1;
    --it;
    if (s >= it->start && e <= it->end) {
      step_hint = size_t(it - steps.begin());
      return long(step_hint);
    }
    return -1;
  };

  phase("steps");
  // ---------------------------------------------------------------- GPU order and launch index
  if (!std::is_sorted(gpu.begin(), gpu.end(), [](auto& x, auto& y) { return x.start < y.start; }))
    std::sort(gpu.begin(), gpu.end(), [](auto& x, auto& y) { return x.start < y.start; });
  uint32_t cmin = UINT32_MAX, cmax = 0;
  for (auto& x : apis)
    if (x.corr) { cmin = std::min(cmin, x.corr); cmax = std::max(cmax, x.corr); }
  std::vector<uint32_t> dense;
  std::unordered_map<uint32_t, uint32_t> sparse;
  const bool use_dense = cmin <= cmax && uint64_t(cmax - cmin) <= 4 * uint64_t(apis.size()) + 4096;
  if (use_dense) dense.assign(size_t(cmax - cmin) + 1, UINT32_MAX);
  for (uint32_t i = 0; i < apis.size(); ++i) {
    if (!apis[i].corr) continue;
    if (use_dense) dense[apis[i].corr - cmin] = i;
    else sparse[apis[i].corr] = i;
  }
  auto launch_of = [&](uint32_t corr) -> const ApiOp* {
    if (!corr) return nullptr;
    if (use_dense) {
      if (corr < cmin || corr > cmax) return nullptr;
      uint32_t i = dense[corr - cmin];
      return i == UINT32_MAX ? nullptr : &apis[i];
    }
    auto it = sparse.find(corr);
    return it == sparse.end() ? nullptr : &apis[it->second];
  };

  // Launcher labels: "python fn / range R / layer L", interned to small ids so hot loops compare integers.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> label_ids;
  std::vector<std::string> labels{"-"};
  // A direct-mapped cache in front of the map: launches keep coming from the same few contexts.
  struct CacheSlot {
    std::tuple<uint32_t, uint32_t, uint32_t> key{~0u, ~0u, ~0u};
    uint32_t id = 0;
  };
  std::vector<CacheSlot> label_cache(4096);
  auto launcher_id = [&](const ApiOp* api) -> uint32_t {
    if (!api) return 0;
    auto key = std::make_tuple(api->py, api->range, api->layer);
    CacheSlot& slot = label_cache[(api->py * 0x9E3779B1u ^ api->range * 0x85EBCA77u ^ api->layer * 0xC2B2AE3Du) >> 20];
    if (slot.key == key) return slot.id;
    auto it = label_ids.find(key);
    if (it == label_ids.end()) {
      std::string s;
      auto part = [&](const std::string& x) { s += (s.empty() ? "" : " / ") + x; };
      if (api->py) part(code_where(api->py));
      // The step range itself says nothing about who launched the work.
      if (api->range && api->range != api->layer && name_of(api->range) != a.steps.name) part("range " + name_of(api->range));
      if (api->layer) part("layer " + name_of(api->layer));
      uint32_t id = 0;
      if (!s.empty()) {
        id = uint32_t(labels.size());
        labels.push_back(std::move(s));
      }
      it = label_ids.emplace(key, id).first;
    }
    slot.key = key;
    slot.id = it->second;
    return slot.id;
  };
  auto launcher = [&](const ApiOp* api) -> const std::string& { return labels[launcher_id(api)]; };

  phase("sort + index");
  // ---------------------------------------------------------------- attribution and alignment
  std::unordered_map<uint64_t, int64_t> kernel_by_launcher;  // (kernel name << 32 | launcher id) -> ns
  std::vector<uint64_t> kernels_by_launcher;                  // launcher id -> kernels launched
  std::map<uint32_t, double> layer_gpu;
  std::map<uint32_t, uint64_t> layer_kernels;
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> copy_launchers;  // (desc, who) -> (bytes, n)
  Alignment& al = a.alignment;
  double worst = 0;
  int64_t max_gpu_dur = 0;
  // Attribution and alignment read only the arrays built above; they run beside pass 2, which reads the dump.
  std::thread attributor([&] {
  for (auto& op : gpu) {
    max_gpu_dur = std::max<int64_t>(max_gpu_dur, op.dur);
    const ApiOp* api = launch_of(op.corr);
    if (api) {
      ++al.kernels_checked;
      double v = double(api->start - op.start);
      if (v > worst) worst = v;
      if (v > 1000) ++al.violations_over_1us;
    }
    if (op.kind == detail::kKernel) {
      if (api) {
        uint32_t lid = launcher_id(api);
        kernel_by_launcher[uint64_t(op.name_or_bytes) << 32 | lid] += op.dur;
        if (lid >= kernels_by_launcher.size()) kernels_by_launcher.resize(lid + 1, 0);
        ++kernels_by_launcher[lid];
      }
      if (api && api->layer) {
        layer_gpu[api->layer] += op.dur;
        ++layer_kernels[api->layer];
      }
    } else if (op.kind == detail::kH2D || op.kind == detail::kD2H) {
      char d[96];
      std::snprintf(d, sizeof(d), "%s %s copy of %.1f MB", op.kind == detail::kH2D ? "H2D" : "D2H",
                    memory_name(op.host_mem), double(op.name_or_bytes) / 1e6);
      auto& x = copy_launchers[{d, api ? launcher(api) : std::string("-")}];
      x.first += op.name_or_bytes;
      ++x.second;
      if (api && api->layer) layer_gpu[api->layer] += op.dur;
    }
  }
  // Syncs: a device-wide synchronization must return after all GPU work launched before it ended.
  {
    // Memory O(syncs): bucket the GPU work by the first device sync launched after it, then a prefix max.
    std::vector<const ApiOp*> syncs;
    for (auto& api : apis) {
      if (api.kind != detail::kSync || !api.corr) continue;
      const std::string& n = name_of(api.name);
      if (n.find("DeviceSynchronize") != std::string::npos || n.find("CtxSynchronize") != std::string::npos)
        syncs.push_back(&api);
    }
    std::sort(syncs.begin(), syncs.end(), [](auto* x, auto* y) { return x->corr < y->corr; });
    std::vector<int64_t> before(syncs.size(), std::numeric_limits<int64_t>::min());  // max end launched before sync i
    std::vector<uint8_t> any_before(syncs.size(), 0);
    if (!syncs.empty())
      for (auto& op : gpu) {
        if (!op.corr) continue;
        auto it = std::upper_bound(syncs.begin(), syncs.end(), op.corr, [](uint32_t c, const ApiOp* x) { return c < x->corr; });
        if (it == syncs.end()) continue;
        size_t i = size_t(it - syncs.begin());
        before[i] = std::max(before[i], op.end());
        any_before[i] = 1;
      }
    uint64_t sync_checked = 0, sync_bad = 0;
    double sync_worst = 0;
    int64_t run_max = std::numeric_limits<int64_t>::min();
    bool run_any = false;
    for (size_t i = 0; i < syncs.size(); ++i) {
      run_max = std::max(run_max, before[i]);
      run_any |= any_before[i] != 0;
      if (!run_any) continue;
      ++sync_checked;
      double v = double(run_max - syncs[i]->end());
      if (v > sync_worst) sync_worst = v;
      if (v > 1000) ++sync_bad;
    }
    al.kernels_checked += sync_checked;
    al.violations_over_1us += sync_bad;
    worst = std::max(worst, sync_worst);
    if (sync_checked)
      al.note = std::to_string(sync_checked) + " device synchronizations checked (worst " +
                std::to_string(int(sync_worst)) + " ns after the sync returned). ";
  }
  al.max_violation_us = worst / 1e3;
  al.violation_pct = al.kernels_checked ? 100.0 * double(al.violations_over_1us) / double(al.kernels_checked) : 0;
  if (clock_checks) {
    al.note += std::to_string(clock_checks) + " CUDA-event round trips: worst " + std::to_string(clock_worst_ns / 1e3) +
               " us of GPU timestamp before the host call. ";
    al.max_violation_us = std::max(al.max_violation_us, clock_worst_ns / 1e3);
    al.violations_over_1us += clock_bad;
  }
  al.ok = al.max_violation_us <= 1.0 && al.violation_pct < 1.0;
  if (al.kernels_checked == 0 && !clock_checks)
    al.note += "no GPU activity with a matching launch call: alignment not measured.";
  else
    al.note += "Causality checked on " + std::to_string(al.kernels_checked) + " GPU activities/syncs.";
  if (!al.ok)
    a.warnings.push_back("CPU/GPU clock alignment error exceeds the budget: worst " + std::to_string(al.max_violation_us) +
                         " us, " + std::to_string(al.violation_pct) + " % of checks over 1 us; GPU-to-CPU attribution "
                         "and idle gaps below that size are unreliable");
  });  // attributor

  // ---------------------------------------------------------------- pass 2: host work in steps, timeline
  std::vector<Span> cov;  // step thread: frames inside steps, merged
  std::vector<double> hot_range(nstr, 0.0), hot_py(py_agg.size(), 0.0);  // self ns in steps by name / code id
  SelfTimer<int64_t> p2_range, p2_py;
  struct CpuSpan { uint32_t thread; int64_t s, e; uint32_t depth; std::string label; const char* cat; };
  std::vector<CpuSpan> rep_cpu;
  std::map<uint32_t, double> other_py_busy;  // other threads' outermost Python time during the steps span
  const int64_t steps_s = steps.front().start, steps_e = steps.back().end;
  bool has_other_app_threads = false;
  for (uint32_t t = 0; t < ts.size(); ++t)
    if (ts[t].seen && t != step_thread && (ts[t].py_calls || ts[t].ranges)) has_other_app_threads = true;
  Local L_pass2;
  prog.done = prog.next = 0;
  visit_chunks(false, L_pass2, true, "attributing", [&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    bool range = h.kind == RecordKind::kRange || h.kind == RecordKind::kNvtxRange;
    if (!range && h.kind != RecordKind::kPyCall) return;
    auto rec = dump::load<RangeRecord>(p);  // PyCallRecord has the same layout
    int64_t s = clock.to_ns(rec.start), e = std::max(s, clock.to_ns(rec.end));
    if (thread == step_thread) {
      int64_t self = range ? p2_range.self(h.aux, e - s) : p2_py.self(h.aux, e - s);
      long st = step_of(s, e);
      bool is_step_itself = st >= 0 && s == steps[st].start && e == steps[st].end;
      if (st >= 0 && !is_step_itself) {
        m.host_frames = true;
        if (range) hot_range[rec.name < nstr ? rec.name : 0] += double(self);
        else if (rec.name < hot_py.size()) hot_py[rec.name] += double(self);
        while (!cov.empty() && cov.back().start >= s) cov.pop_back();
        if (!cov.empty() && cov.back().end >= s) cov.back().end = std::max(cov.back().end, e);
        else cov.push_back({s, e, uint32_t(st)});
      }
    } else if (!range && h.aux == 0 && e > steps_s && s < steps_e) {
      other_py_busy[thread] += double(std::min(e, steps_e) - std::max(s, steps_s));
    }
    if (e > rep_s && s < rep_e && e > s)
      rep_cpu.push_back({thread, s, e, h.aux, range ? name_of(rec.name) : code_name(rec.name), range ? "range" : "python"});
  });
  (void)has_other_app_threads;
  std::sort(cov.begin(), cov.end(), [](auto& x, auto& y) { return x.start < y.start; });
  for (uint32_t i = 0; i < nstr; ++i)
    if (hot_range[i] > 0) m.hot_host.emplace_back("range " + name_of(i), hot_range[i]);
  for (uint32_t i = 0; i < hot_py.size(); ++i)
    if (hot_py[i] > 0) m.hot_host.emplace_back(code_name(i), hot_py[i]);
  std::sort(m.hot_host.begin(), m.hot_host.end(),
            [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  if (m.hot_host.size() > 10) m.hot_host.resize(10);
  if (prog.on) std::fprintf(stderr, "iscope-analyze: measuring %zu steps\n", steps.size());

  attributor.join();
  phase("pass 2");
  // ---------------------------------------------------------------- per-step sweep
  std::vector<const ApiOp*> sapi;  // step thread's calls by start
  for (auto& x : apis)
    if (x.thread == std::min<uint32_t>(step_thread, 0xffff)) sapi.push_back(&x);
  auto by_start = [](auto* x, auto* y) { return x->start < y->start; };
  if (!std::is_sorted(sapi.begin(), sapi.end(), by_start)) std::sort(sapi.begin(), sapi.end(), by_start);
  {  // Keep the outermost call where calls nest (a driver call inside a runtime call): host time counts once.
    size_t k = 0;
    int64_t end = std::numeric_limits<int64_t>::min();
    for (const ApiOp* x : sapi)
      if (x->start >= end) {
        sapi[k++] = x;
        end = x->end();
      }
    sapi.resize(k);
  }
  DurationStats kernel_stats;
  std::map<std::string, std::pair<double, std::map<std::string, uint64_t>>> sync_by_api, alloc_by_api;
  if (!sapi.empty()) {
    m.first_api_name = name_of(sapi.front()->name);
    m.first_api_ms = ms(sapi.front()->dur);
    m.first_api_in_steps = step_of(sapi.front()->start, sapi.front()->end()) >= 0 || whole;
  }
  // Cursors that only move forward: steps and the gaps inside them come in time order, and one thread's
  // calls do not overlap, so their ends are sorted too.
  size_t api_cursor = 0, cov_cursor = 0, gap_cursor = 0, gpu_cursor = 0;
  std::vector<uint32_t> carry;  // GPU activities still running at the next step's start
  m.steps.reserve(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const int64_t S = steps[i].start, E = steps[i].end;
    StepMetrics sm;
    sm.start = S;
    sm.dur = E - S;
    // Host: the step thread's CUDA calls.
    while (api_cursor < sapi.size() && sapi[api_cursor]->end() <= S) ++api_cursor;
    double api_in_step = 0;
    for (size_t j = api_cursor; j < sapi.size() && sapi[j]->start < E; ++j) {
      const ApiOp& x = *sapi[j];
      double d = double(std::min(E, x.end()) - std::max(S, x.start));
      if (d <= 0) continue;
      api_in_step += d;
      const std::string& n = name_of(x.name);
      switch (x.kind) {
        case detail::kLaunch: sm.launch_api_ns += d; break;
        case detail::kSync: case detail::kCopySync: {
          ++sm.syncs;
          sm.sync_api_ns += d;
          auto& s = sync_by_api[n];
          s.first += d;
          ++s.second[launcher(&x)];
          break;
        }
        case detail::kAlloc: case detail::kFree: {
          ++sm.allocs;
          sm.alloc_api_ns += d;
          auto& s = alloc_by_api[n];
          s.first += d;
          ++s.second[launcher(&x)];
          if (d > double(sm.worst_alloc.end - sm.worst_alloc.start)) sm.worst_alloc = {x.start, x.end(), uint32_t(i)};
          break;
        }
        default: break;
      }
    }
    sm.host_out_api = double(sm.dur) - api_in_step;
    // GPU: unions by precedence (compute > H2D > D2H) and the idle gaps between busy periods.
    Union uk, ukh, uall;
    std::vector<std::pair<int64_t, int64_t>> gaps;
    int64_t busy_end = S;
    bool any = false;
    // The activities that overlap [S, E) in start order: those carried over (started earlier, still running
    // at S), then those starting before E. A cursor and a short carry list keep this linear even when one
    // activity runs for seconds.
    while (gpu_cursor < gpu.size() && gpu[gpu_cursor].start < S) {
      if (gpu[gpu_cursor].end() > S) carry.push_back(uint32_t(gpu_cursor));
      ++gpu_cursor;
    }
    carry.erase(std::remove_if(carry.begin(), carry.end(), [&](uint32_t k) { return gpu[k].end() <= S; }), carry.end());
    auto visit = [&](const GpuOp* it) {
      int64_t s = std::max(S, it->start), e = std::min(E, it->end());
      if (e <= s) return;
      if (s > busy_end) gaps.emplace_back(busy_end, s);
      busy_end = std::max(busy_end, e);
      any = true;
      bool compute = it->kind == detail::kKernel || it->kind == detail::kMemset || it->kind == detail::kOtherCopy;
      if (compute) uk.add(s, e);
      if (compute || it->kind == detail::kH2D) ukh.add(s, e);
      uall.add(s, e);
      if (it->start < S) return;  // counted in the step it started in
      if (it->kind == detail::kKernel) {
        ++sm.kernels;
        sm.kernel_ns += it->dur;
        kernel_stats.add(it->dur);
      } else if (it->kind == detail::kH2D) {
        ++sm.copies_h2d;
        sm.h2d_bytes += it->name_or_bytes;
        if (it->host_mem == uint8_t(MemoryKind::kPageable)) sm.h2d_pageable_bytes += it->name_or_bytes;
      } else if (it->kind == detail::kD2H) {
        ++sm.copies_d2h;
        sm.d2h_bytes += it->name_or_bytes;
        if (it->host_mem == uint8_t(MemoryKind::kPageable)) sm.d2h_pageable_bytes += it->name_or_bytes;
      }
    };
    for (uint32_t k : carry) visit(&gpu[k]);
    for (; gpu_cursor < gpu.size() && gpu[gpu_cursor].start < E; ++gpu_cursor) {
      visit(&gpu[gpu_cursor]);
      if (gpu[gpu_cursor].end() > E) carry.push_back(uint32_t(gpu_cursor));
    }
    if (busy_end < E) gaps.emplace_back(busy_end, E);
    const double kc = double(uk.finish()), khc = double(ukh.finish()), allc = double(uall.finish());
    sm.compute = kc;
    sm.h2d = khc - kc;
    sm.d2h = allc - khc;
    // Each gap: instant by instant (breakdown) and as a whole by its cause (GPU idle split).
    for (size_t g = 0; g < gaps.size(); ++g) {
      auto [ga, gb] = gaps[g];
      double len = double(gb - ga);
      double sync = 0, fw = 0, alloc = 0;
      while (gap_cursor < sapi.size() && sapi[gap_cursor]->end() <= ga) ++gap_cursor;
      const ApiOp* at = gap_cursor < sapi.size() && sapi[gap_cursor]->start <= ga ? sapi[gap_cursor] : nullptr;
      for (auto it = sapi.begin() + gap_cursor; it != sapi.end() && (*it)->start < gb; ++it) {
        double d = double(std::min(gb, (*it)->end()) - std::max(ga, (*it)->start));
        if (d <= 0) continue;
        uint8_t k = (*it)->kind;
        if (k == detail::kSync || k == detail::kCopySync) sync += d;
        else {
          fw += d;
          if (k == detail::kAlloc || k == detail::kFree) alloc += d;
        }
      }
      double rest = std::max(0.0, len - sync - fw);
      double host = m.host_frames ? std::min(rest, std::max(0.0, double(overlap(cov, cov_cursor, ga, gb)) - sync - fw)) : rest;
      sm.sync_wait += sync;
      sm.framework += fw;
      sm.cpu += host;
      sm.idle += rest - host;
      sm.alloc_idle += alloc;
      bool between = any && g > 0 && gb < E;
      if (g == 0 && ga > S) between = true;  // busy work carried in from the previous step
      if (at && (at->kind == detail::kSync || at->kind == detail::kCopySync)) {
        sm.idle_sync += len;
        if (len > double(sm.worst_sync_gap.end - sm.worst_sync_gap.start)) sm.worst_sync_gap = {ga, gb, uint32_t(i)};
      } else if ((at && (at->kind == detail::kLaunch || at->kind == detail::kCopyAsync || at->kind == detail::kOtherApi)) ||
                 (between && gb - ga < kBetweenKernelsGapNs)) {
        sm.idle_gaps += len;
        ++sm.gaps_between;
      } else {
        sm.idle_host += len;
        if (len > double(sm.worst_host_gap.end - sm.worst_host_gap.start)) sm.worst_host_gap = {ga, gb, uint32_t(i)};
      }
    }
    m.steps.push_back(sm);
  }
  (void)cov_cursor;

  phase("per-step sweep");
  // ---------------------------------------------------------------- breakdown (mean step)
  {
    Breakdown& b = a.breakdown;
    const double n = double(m.steps.size());
    for (auto& s : m.steps) {
      b.step_ms += ms(double(s.dur)) / n;
      b.cpu_preprocessing_ms += ms(s.cpu) / n;
      b.h2d_ms += ms(s.h2d) / n;
      b.gpu_compute_ms += ms(s.compute) / n;
      b.d2h_ms += ms(s.d2h) / n;
      b.sync_wait_ms += ms(s.sync_wait) / n;
      b.framework_overhead_ms += ms(s.framework) / n;
      b.idle_ms += ms(s.idle) / n;
      b.gpu_idle_waiting_on_host_ms += ms(s.idle_host) / n;
      b.gpu_idle_gaps_between_kernels_ms += ms(s.idle_gaps) / n;
      b.gpu_idle_waiting_on_sync_ms += ms(s.idle_sync) / n;
    }
    b.gpu_utilization = b.step_ms > 0 ? (b.gpu_compute_ms + b.h2d_ms + b.d2h_ms) / b.step_ms : 0;
  }
  m.median_kernel_ns = kernel_stats.percentile(0.5);
  m.short_kernel_ns = opt.launch_bound_max_kernel_us * 1e3;
  m.kernels_per_step = double(kernel_stats.count()) / double(m.steps.size());
  if (!kernels_by_launcher.empty())
    m.top_kernel_launcher = labels[std::max_element(kernels_by_launcher.begin(), kernels_by_launcher.end()) - kernels_by_launcher.begin()];
  auto top_of = [](const std::map<std::string, std::pair<double, std::map<std::string, uint64_t>>>& mm,
                   std::string& api, std::string& who) {
    double best = -1;
    for (auto& [n, x] : mm)
      if (x.first > best) {
        best = x.first;
        api = n;
        who = std::max_element(x.second.begin(), x.second.end(), [](auto& p, auto& q) { return p.second < q.second; })->first;
      }
  };
  top_of(sync_by_api, m.top_sync_api, m.top_sync_caller);
  top_of(alloc_by_api, m.top_alloc_api, m.top_alloc_caller);
  {
    std::vector<std::pair<uint64_t, std::pair<std::string, std::string>>> v;
    for (auto& [k, x] : copy_launchers) v.push_back({x.first, k});
    std::sort(v.begin(), v.end(), [](auto& p, auto& q) { return p.first > q.first; });
    for (size_t i = 0; i < v.size() && i < 3; ++i) m.top_copies.push_back(v[i].second);
  }

  // PCIe peak: the link the system collector read from NVML (process info gpu.0.pcie_gen / pcie_width, the
  // maximum generation and the narrower of the maximum and trained width; docs/counters.md), else Gen5 x16.
  {
    // Usable GB/s per lane after line encoding: 8b/10b (Gen1-2), 128b/130b (Gen3-5), FLIT (Gen6).
    static constexpr double per_lane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
    auto info = [&](const char* k) -> int {
      auto it = a.process.find(k);
      return it == a.process.end() ? 0 : std::atoi(it->second.c_str());
    };
    const int g = info("gpu.0.pcie_gen"), w = info("gpu.0.pcie_width");
    if (g >= 1 && g <= 6 && w > 0 && w <= 32) {
      m.peak_h2d_gbps = per_lane[g] * w * 0.87;  // ~87 % of the raw rate is what DMA engines reach
      m.peak_assumed = false;
      m.peak_note = "PCIe Gen" + std::to_string(g) + " x" + std::to_string(w) + " from the dump (practical peak " +
                    std::to_string(int(m.peak_h2d_gbps)) + " GB/s)";
    } else {
      m.peak_h2d_gbps = 55;
      m.peak_note = "peak assumed: PCIe Gen5 x16, ~55 GB/s practical host<->device (the dump has no usable PCIe "
                    "link from NVML)";
    }
  }

  // ---------------------------------------------------------------- counters: CPU time, switches, memory
  {
    auto cname = [&](uint32_t id) -> const std::string& { return name_of(id < nstr ? id : 0); };
    // Cumulative counters: first and last sample inside the steps span give the delta.
    struct FL { int64_t t0 = 0, t1 = 0; double v0 = 0, v1 = 0; bool any = false; };
    std::map<std::pair<uint32_t, uint32_t>, FL> cpu_fl, inv_fl, rss_fl, flt_fl, run_fl, wait_fl;
    for (auto& c : counters) {
      if (c.ts < steps_s || c.ts > steps_e) continue;
      const std::string& n = cname(c.name);
      std::map<std::pair<uint32_t, uint32_t>, FL>* tgt = nullptr;
      bool thread_scope = c.scope == uint8_t(CounterScope::kThread);
      if (thread_scope && c.target == step_thread && n.find("sched.run") != std::string::npos)
        tgt = &run_fl;  // schedstat: on-CPU time with ns resolution (docs/counters.md)
      else if (thread_scope && c.target == step_thread && n.find("sched.wait") != std::string::npos)
        tgt = &wait_fl;  // runnable but waiting for a CPU
      else if (thread_scope && c.target == step_thread && n.find("cpu") != std::string::npos &&
          (n.find("_ns") != std::string::npos || n.find("time") != std::string::npos))
        tgt = &cpu_fl;
      else if (thread_scope && c.target == step_thread &&
               (n.find("involuntary") != std::string::npos || n.find("nonvoluntary") != std::string::npos))
        tgt = &inv_fl;
      else if (c.scope == uint8_t(CounterScope::kProcess) && n.find("rss") != std::string::npos)
        tgt = &rss_fl;
      else if (c.scope == uint8_t(CounterScope::kProcess) && n.find("fault") != std::string::npos)
        tgt = &flt_fl;
      if (!tgt) continue;
      auto& f = (*tgt)[{c.name, c.target}];
      if (!f.any) { f.t0 = c.ts; f.v0 = c.v; f.any = true; }
      f.t1 = c.ts;
      f.v1 = c.v;
    }
    double cpu_ns = 0, wall = 0;
    // Prefer schedstat's run time (ns resolution) over user+system time (clock-tick resolution).
    for (auto& [k, f] : run_fl.empty() ? cpu_fl : run_fl)
      if (f.t1 > f.t0) { cpu_ns += f.v1 - f.v0; wall = std::max(wall, double(f.t1 - f.t0)); }
    for (auto& [k, f] : wait_fl)
      if (f.t1 > f.t0) m.step_thread_runqueue_share = std::max(m.step_thread_runqueue_share, (f.v1 - f.v0) / double(f.t1 - f.t0));
    if (wall > 0) {
      m.have_cpu_counters = true;
      m.step_thread_cpu_util = cpu_ns / wall;
    }
    double inv = 0;
    for (auto& [k, f] : inv_fl) inv += f.v1 - f.v0;
    m.involuntary_per_step = inv / double(m.steps.size());
    for (auto& [k, f] : rss_fl) m.rss_growth_bytes += f.v1 - f.v0;
    double flt = 0;
    for (auto& [k, f] : flt_fl) flt += f.v1 - f.v0;
    m.faults_per_step = flt / double(m.steps.size());
    double span = double(std::max<int64_t>(1, steps_e - steps_s));
    for (auto& [t, busy] : other_py_busy) {
      double share = busy / span;
      if (share > 0.2) ++m.other_busy_python_threads;
      m.other_python_busy_share = std::max(m.other_python_busy_share, share);
    }
  }

  phase("counters");
  // ---------------------------------------------------------------- tables
  {
    double total_kernel = 0;
    for (uint32_t n = 0; n < nstr; ++n) total_kernel += double(kernel_ns[n]);
    std::map<uint32_t, std::pair<int64_t, std::string>> best_launcher;
    for (auto& [k, ns] : kernel_by_launcher) {
      auto& b = best_launcher[uint32_t(k >> 32)];
      const std::string& who = labels[uint32_t(k)];
      if (ns > b.first || (ns == b.first && who < b.second)) b = {ns, who};
    }
    for (uint32_t n = 0; n < nstr; ++n) {
      if (!kernel_count[n]) continue;
      KernelRow row;
      row.name = name_of(n);
      row.count = kernel_count[n];
      row.total_ms = ms(double(kernel_ns[n]));
      row.mean_us = double(kernel_ns[n]) / double(kernel_count[n]) / 1e3;
      row.share = total_kernel > 0 ? double(kernel_ns[n]) / total_kernel : 0;
      auto it = best_launcher.find(n);
      row.launched_by = it == best_launcher.end() ? "-" : it->second.second;
      a.kernels.push_back(std::move(row));
    }
    std::sort(a.kernels.begin(), a.kernels.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
    if (a.kernels.size() > 50) a.kernels.resize(50);
  }
  for (uint32_t code = 0; code < py_agg.size(); ++code) {
    const NameAgg& agg = py_agg[code];
    if (!agg.d.count()) continue;
    PythonRow row;
    auto it = r.code_table().find(code);
    if (it != r.code_table().end()) {
      row.qualname = it->second.qualname;
      row.file = it->second.file;
      row.line = it->second.line;
    } else {
      row.qualname = "<code " + std::to_string(code) + ">";
    }
    row.count = agg.d.count();
    row.total_ms = ms(double(agg.d.total()));
    row.self_ms = ms(double(agg.self));
    a.python.push_back(std::move(row));
  }
  std::sort(a.python.begin(), a.python.end(), [](auto& x, auto& y) { return x.self_ms > y.self_ms; });
  if (a.python.size() > 50) a.python.resize(50);
  for (uint32_t n = 0; n < nstr; ++n) {
    auto& agg = range_agg[n];
    if (!agg.d.count()) continue;
    RangeRow row;
    row.name = name_of(n);
    row.count = agg.d.count();
    row.total_ms = ms(double(agg.d.total()));
    row.self_ms = ms(double(agg.self));
    row.mean_us = agg.d.mean() / 1e3;
    row.p50_us = agg.d.percentile(0.5) / 1e3;
    row.p99_us = agg.d.percentile(0.99) / 1e3;
    row.max_us = double(agg.d.max()) / 1e3;
    a.ranges.push_back(std::move(row));
  }
  std::sort(a.ranges.begin(), a.ranges.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
  if (a.ranges.size() > 50) a.ranges.resize(50);
  for (auto& [k, c] : copies) {
    CopyRow row;
    row.direction = k.dir;
    row.src_memory = k.src;
    row.dst_memory = k.dst;
    row.count = c.count;
    row.bytes = c.bytes;
    row.total_ms = ms(double(c.ns));
    row.bandwidth_gbps = c.ns > 0 ? double(c.bytes) / double(c.ns) : 0;  // bytes/ns == GB/s
    row.peak_bandwidth_gbps = (k.dir == "h2d" || k.dir == "d2h") ? m.peak_h2d_gbps : 0;
    row.peak_assumed = row.peak_bandwidth_gbps > 0 && m.peak_assumed;
    a.copies.push_back(std::move(row));
  }
  std::sort(a.copies.begin(), a.copies.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
  {
    // Syncs, allocations and graph launches: per (API, caller) counts and host time, the same launcher labels
    // as kernels and copies (the API record carries the Python function, range and layer at the call).
    struct Callers {
      std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, int64_t>> by;  // (api name, launcher) -> (n, ns)
      void add(const ApiOp& x, uint32_t who) {
        auto& v = by[{x.name, who}];
        ++v.first;
        v.second += x.dur;
      }
    };
    // The caller of most calls, and the top three (API, caller) pairs by host time.
    auto finish = [&](const Callers& c, std::string& called_from, std::vector<CallerRow>& top) {
      std::map<uint32_t, uint64_t> per_who;
      for (auto& [k, v] : c.by) per_who[k.second] += v.first;
      called_from = "-";
      uint64_t most = 0;
      for (auto& [who, n] : per_who)
        if (n > most) { most = n; called_from = labels[who]; }
      for (auto& [k, v] : c.by) top.push_back({name_of(k.first), labels[k.second], v.first, ms(double(v.second))});
      std::sort(top.begin(), top.end(), [](auto& x, auto& y) {
        return x.total_ms != y.total_ms ? x.total_ms > y.total_ms : x.count > y.count;
      });
      if (top.size() > 3) top.resize(3);
    };
    std::map<std::string, SyncRow> rows;
    std::map<std::string, Callers> sync_callers;
    std::map<std::pair<std::string, std::string>, Callers> alloc_callers;
    std::map<std::string, GraphLaunchRow> graphs;
    std::map<std::string, Callers> graph_callers;
    for (auto& x : apis) {
      if (x.kind == detail::kSync || x.kind == detail::kCopySync) {
        auto& row = rows[name_of(x.name)];
        row.kind = name_of(x.name);
        ++row.count;
        row.total_ms += ms(x.dur);
        row.max_ms = std::max(row.max_ms, ms(x.dur));
        sync_callers[row.kind].add(x, launcher_id(&x));
      } else if (x.kind == detail::kAlloc || x.kind == detail::kFree) {
        const bool alloc = x.kind == detail::kAlloc;
        const std::string& n = name_of(x.name);
        // The API says which memory: cudaMallocHost/cudaFreeHost pinned, cudaMallocManaged managed.
        const char* memory = n.find("Host") != std::string::npos      ? memory_kind_name(MemoryKind::kPinned)
                             : n.find("Managed") != std::string::npos ? memory_kind_name(MemoryKind::kManaged)
                                                                      : memory_kind_name(MemoryKind::kDevice);
        auto& row = allocs[{alloc ? "alloc" : "free", memory}];
        row.op = alloc ? "alloc" : "free";
        row.memory = memory;
        row.api_ms += ms(x.dur);
        alloc_callers[{row.op, row.memory}].add(x, launcher_id(&x));
      } else if (x.kind == detail::kLaunch && name_of(x.name).find("GraphLaunch") != std::string::npos) {
        auto& row = graphs[name_of(x.name)];
        row.api = name_of(x.name);
        ++row.count;
        row.api_ms += ms(x.dur);
        graph_callers[row.api].add(x, launcher_id(&x));
      }
    }
    for (auto& [n, row] : rows) {
      finish(sync_callers[n], row.called_from, row.callers);
      a.syncs.push_back(row);
    }
    std::sort(a.syncs.begin(), a.syncs.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
    for (auto& [k, row] : allocs) {
      finish(alloc_callers[k], row.called_from, row.callers);
      a.allocations.push_back(row);
    }
    for (auto& [n, row] : graphs) {
      finish(graph_callers[n], row.called_from, row.callers);
      a.graph_launches.push_back(row);
    }
    std::sort(a.graph_launches.begin(), a.graph_launches.end(), [](auto& x, auto& y) { return x.api_ms > y.api_ms; });
  }
  for (auto& [n, cnt] : layer_count) {
    LayerRow row;
    row.path = name_of(n);
    row.count = cnt;
    row.cpu_ms = ms(layer_cpu[n]);
    row.gpu_ms = ms(layer_gpu[n]);
    row.kernels = layer_kernels[n];
    a.layers.push_back(std::move(row));
  }
  std::sort(a.layers.begin(), a.layers.end(), [](auto& x, auto& y) { return x.gpu_ms + x.cpu_ms > y.gpu_ms + y.cpu_ms; });
  {
    // Per-thread counters over the whole trace: (thread, counter) -> first and last value; summed per thread.
    std::map<std::pair<uint32_t, uint32_t>, std::pair<double, double>> cpu_fl2, inv_fl2;
    for (auto& c : counters) {
      if (c.scope != uint8_t(CounterScope::kThread)) continue;
      const std::string& n = name_of(c.name < nstr ? c.name : 0);
      std::map<std::pair<uint32_t, uint32_t>, std::pair<double, double>>* m2 = nullptr;
      if (n.find("cpu") != std::string::npos && (n.find("_ns") != std::string::npos || n.find("time") != std::string::npos))
        m2 = &cpu_fl2;
      else if (n.find("involuntary") != std::string::npos || n.find("nonvoluntary") != std::string::npos)
        m2 = &inv_fl2;
      if (!m2) continue;
      auto [it, fresh] = m2->try_emplace({c.target, c.name}, c.v, c.v);
      it->second.second = c.v;
      (void)fresh;
    }
    std::map<uint32_t, double> cpu_by_thread, inv_by_thread;
    for (auto& [k, v] : cpu_fl2) cpu_by_thread[k.first] += v.second - v.first;
    for (auto& [k, v] : inv_fl2) inv_by_thread[k.first] += v.second - v.first;
    for (auto& [id, info] : r.threads()) {
      if (info.is_channel()) continue;
      ThreadRow row;
      row.id = id;
      row.os_tid = info.os_tid;
      row.name = info.name;
      if (id < ts.size()) row.busy_ms = ms(std::max(ts[id].busy_range, ts[id].busy_py));
      if (cpu_by_thread.count(id)) row.cpu_ms = ms(cpu_by_thread[id]);
      if (inv_by_thread.count(id)) row.involuntary_switches = uint64_t(std::max(0.0, inv_by_thread[id]));
      a.threads.push_back(std::move(row));
    }
  }

  phase("tables");
  // ---------------------------------------------------------------- representative timeline
  {
    std::map<std::string, TimelineLane> lanes;
    auto lane_name = [&](uint32_t t) {
      auto it = r.threads().find(t);
      std::string n = it != r.threads().end() && !it->second.name.empty() ? it->second.name : "thread " + std::to_string(t);
      return "thread " + n + " (" + std::to_string(it != r.threads().end() ? it->second.os_tid : t) + ")";
    };
    auto add = [&](const std::string& lane, bool g, int64_t s, int64_t e, std::string label, const char* cat, uint32_t depth) {
      auto& L = lanes[lane];
      L.name = lane;
      L.gpu = g;
      s = std::max(s, rep_s);
      e = std::min(e, rep_e);
      L.spans.push_back({ms(double(s - rep_s)), ms(double(e - rep_s)), std::move(label), cat, depth});
    };
    for (auto& c : rep_cpu) add(lane_name(c.thread), false, c.s, c.e, c.label, c.cat, c.depth);
    for (auto& x : apis)
      if (x.end() > rep_s && x.start < rep_e)
        add(lane_name(x.thread), false, x.start, x.end(), name_of(x.name), x.kind == detail::kSync || x.kind == detail::kCopySync ? "sync" : "api", 0);
    auto first = std::lower_bound(gpu.begin(), gpu.end(), rep_s - max_gpu_dur, [](const GpuOp& x, int64_t v) { return x.start < v; });
    for (auto it = first; it != gpu.end() && it->start < rep_e; ++it) {
      if (it->end() <= rep_s) continue;
      static const char* cats[] = {"kernel", "memset", "h2d", "d2h", "copy"};
      std::string label = it->kind == detail::kKernel ? name_of(it->name_or_bytes)
                                                      : std::string(cats[it->kind]) + " " + std::to_string(it->name_or_bytes) + " B";
      add("GPU stream " + std::to_string(it->stream), true, it->start, it->end(), std::move(label), cats[it->kind], 0);
    }
    // Rows of a thread lane: ranges from depth 0, Python frames below the deepest range, CUDA calls last.
    for (auto& [n, L] : lanes) {
      if (L.gpu) continue;
      int rmax = -1, pmax = -1;
      for (auto& sp : L.spans) {
        if (sp.category == "range") rmax = std::max(rmax, int(sp.depth));
        else if (sp.category == "python") pmax = std::max(pmax, int(sp.depth));
      }
      for (auto& sp : L.spans) {
        if (sp.category == "python") sp.depth += uint32_t(rmax + 1);
        else if (sp.category != "range") sp.depth = uint32_t(rmax + 1 + pmax + 1);
      }
    }
    // Cap: merge runs of tiny spans, then keep the longest.
    const double min_w = ms(double(rep_e - rep_s)) / 2000.0;
    size_t total = 0;
    for (auto& [n, L] : lanes) {
      std::sort(L.spans.begin(), L.spans.end(), [](auto& x, auto& y) { return x.start_ms < y.start_ms; });
      std::vector<TimelineSpan> out;
      for (auto& s : L.spans) {
        bool tiny = s.end_ms - s.start_ms < min_w;
        if (tiny && !out.empty() && out.back().category == s.category && out.back().depth == s.depth &&
            s.start_ms - out.back().end_ms < min_w && out.back().end_ms - out.back().start_ms < 20 * min_w) {
          auto& b = out.back();
          b.end_ms = std::max(b.end_ms, s.end_ms);
          if (b.label.rfind("merged ", 0) != 0) b.label = "merged 2 " + b.category + "s";
          else {
            int k = std::atoi(b.label.c_str() + 7);
            b.label = "merged " + std::to_string(k + 1) + " " + b.category + "s";
          }
          continue;
        }
        out.push_back(s);
      }
      L.spans = std::move(out);
      total += L.spans.size();
    }
    if (total > opt.max_timeline_spans) {
      std::vector<double> widths;
      for (auto& [n, L] : lanes)
        for (auto& s : L.spans) widths.push_back(s.end_ms - s.start_ms);
      std::nth_element(widths.begin(), widths.begin() + (opt.max_timeline_spans - 1), widths.end(), std::greater<>());
      double cut = widths[opt.max_timeline_spans - 1];
      size_t kept = 0;
      for (auto& [n, L] : lanes) {
        std::vector<TimelineSpan> out;
        for (auto& s : L.spans)
          if (s.end_ms - s.start_ms > cut || (s.end_ms - s.start_ms == cut && kept < opt.max_timeline_spans)) {
            out.push_back(s);
            ++kept;
          }
        L.spans = std::move(out);
      }
      a.warnings.push_back("the representative step's timeline was cut to its " + std::to_string(opt.max_timeline_spans) +
                           " longest spans");
    }
    for (auto& [n, L] : lanes)
      if (!L.gpu) a.representative.lanes.push_back(std::move(L));
    for (auto& [n, L] : lanes)
      if (L.gpu) a.representative.lanes.push_back(std::move(L));
  }

  phase("timeline");
  a.findings = run_rules(a, m);
  if (prog.on) std::fprintf(stderr, "iscope-analyze: done: %llu records\n", (unsigned long long)a.events);
  (void)marks;
  return a;
}

std::string findings_digest(const Analysis& a) {
  std::ostringstream o;
  char b[256];
  std::snprintf(b, sizeof(b), "steps name=%s count=%llu\n", a.steps.name.c_str(), (unsigned long long)a.steps.count);
  o << b;
  for (auto& f : a.findings) {
    std::snprintf(b, sizeof(b), "%s primary=%d impact_ms=%.2f impact_pct=%.0f confidence=%.1f suggestions=%zu uncertain=%d\n",
                  f.category.c_str(), f.primary ? 1 : 0, f.impact_ms, f.impact_pct, f.confidence, f.suggestions.size(),
                  f.uncertain ? 1 : 0);
    o << b;
  }
  return o.str();
}

void print_findings_text(const Analysis& a, std::ostream& o) {
  char b[512];
  const Breakdown& d = a.breakdown;
  std::snprintf(b, sizeof(b), "End-to-end latency: %.3f ms per step '%s' (%llu steps; p50 %.3f, p90 %.3f, p99 %.3f, max %.3f ms)\n",
                a.end_to_end_ms, a.steps.name.c_str(), (unsigned long long)a.steps.count, a.steps.p50_ms, a.steps.p90_ms,
                a.steps.p99_ms, a.steps.max_ms);
  o << b;
  std::snprintf(b, sizeof(b), "Breakdown (ms): cpu %.3f | h2d %.3f | gpu %.3f | d2h %.3f | sync %.3f | framework %.3f | idle %.3f "
                "= %.3f; GPU utilization %.0f %%; GPU idle: host %.3f, gaps %.3f, sync %.3f\n",
                d.cpu_preprocessing_ms, d.h2d_ms, d.gpu_compute_ms, d.d2h_ms, d.sync_wait_ms, d.framework_overhead_ms,
                d.idle_ms, d.step_ms, d.gpu_utilization * 100, d.gpu_idle_waiting_on_host_ms,
                d.gpu_idle_gaps_between_kernels_ms, d.gpu_idle_waiting_on_sync_ms);
  o << b;
  for (auto& w : a.warnings) o << "warning: " << w << "\n";
  for (auto& f : a.findings) {
    std::snprintf(b, sizeof(b), "\n[%s]%s%s %s\n  impact %.3f ms (%.0f %% of the step), confidence %.2f\n", f.category.c_str(),
                  f.primary ? " PRIMARY" : "", f.uncertain ? " (uncertain)" : "", f.title.c_str(), f.impact_ms, f.impact_pct,
                  f.confidence);
    o << b;
    for (auto& e : f.evidence) o << "  - " << e << "\n";
    for (auto& x : f.examples) {
      std::snprintf(b, sizeof(b), "  - example %.3f-%.3f ms: %s\n", x.start_ms, x.end_ms, x.what.c_str());
      o << b;
    }
    for (auto& s : f.suggestions) o << "  * [" << s.priority << "] " << s.action << "\n";
  }
  if (!a.kernels.empty()) o << "\nTop kernels:\n";
  for (size_t i = 0; i < a.kernels.size() && i < 10; ++i) {
    std::snprintf(b, sizeof(b), "  %-40s x%llu %.3f ms (%.0f %%) from %s\n", a.kernels[i].name.c_str(),
                  (unsigned long long)a.kernels[i].count, a.kernels[i].total_ms, a.kernels[i].share * 100,
                  a.kernels[i].launched_by.c_str());
    o << b;
  }
  std::snprintf(b, sizeof(b), "\nAlignment: %s (max %.3f us, %.2f %% over 1 us) %s\n", a.alignment.ok ? "ok" : "NOT OK",
                a.alignment.max_violation_us, a.alignment.violation_pct, a.alignment.note.c_str());
  o << b;
}

}  // namespace inferscope::analyze
