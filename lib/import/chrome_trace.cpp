// Chrome-trace inputs imported into the dump's records: torch.profiler (Kineto) exports and InferScope's own --perfetto
// output. Both are trace-event JSON with complete events ("ph": "X"), µs timestamps and pid/tid tracks; they
// differ only in their categories, so one converter maps both (docs/analysis.md, "Inputs: torch.profiler
// traces"):
//
//   Kineto                              Perfetto export   dump record
//   user_annotation (ProfilerStep#N)    range             RangeRecord (ProfilerStep#N -> "ProfilerStep")
//   cpu_op                              nvtx              RangeRecord of kind kNvtxRange (library ranges)
//   python_function                     python            PyCallRecord
//   cuda_runtime / cuda_driver          cuda_api          CudaApiRecord (name, args.correlation)
//   kernel / gpu_memcpy / gpu_memset    kernel/memcpy/... GPU activity records on channel "GPU <device>"
//   ac2g flows                          launch flows      the correlation when args.correlation is missing
#include "import/chrome_trace.hpp"

#include "dump/builder.hpp"
#include "import/import.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <deque>
#include <set>
#include <unordered_set>

namespace inferscope::import {
namespace json = boost::json;

namespace {

// ---- JSON helpers --------------------------------------------------------------------------------------------

std::optional<double> number(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_double()) return v->as_double();
  if (v->is_int64()) return static_cast<double>(v->as_int64());
  if (v->is_uint64()) return static_cast<double>(v->as_uint64());
  return std::nullopt;
}

// A number from the trace as an unsigned field: NaN and negatives are 0, too large saturates (a plain cast of an
// out-of-range double is undefined behaviour).
template <class T>
T to_uint(std::optional<double> v, T def = 0) {
  if (!v) return def;
  const double d = *v;
  if (!(d > 0)) return 0;
  if (d >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(d);
}

const json::value* member(const json::object& o, std::string_view key) { return o.if_contains(key); }

const json::object* args_of(const json::object& o) {
  const json::value* a = o.if_contains("args");
  return a && a->is_object() ? &a->as_object() : nullptr;
}

std::optional<double> arg_number(const json::object* args, std::string_view key) {
  return args ? number(args->if_contains(key)) : std::nullopt;
}

std::string string_of(const json::value* v) {
  if (!v) return {};
  if (v->is_string()) return std::string(v->as_string());
  if (v->is_number()) return json::serialize(*v);
  return {};
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// ---- the mapping ----------------------------------------------------------------------------------------------

enum class Dialect { kKineto, kPerfetto };

enum class Role : uint8_t {
  kSkip, kRange, kLibRange, kPyCall, kApi, kDriverApi, kMark, kKernel, kMemcpy, kMemset, kGpuAnnotation
};

Role kineto_role(std::string_view cat) {
  if (cat == "user_annotation") return Role::kRange;
  if (cat == "cpu_op") return Role::kLibRange;
  if (cat == "python_function") return Role::kPyCall;
  if (cat == "cuda_runtime") return Role::kApi;
  if (cat == "cuda_driver") return Role::kDriverApi;
  if (cat == "kernel") return Role::kKernel;
  if (cat == "gpu_memcpy") return Role::kMemcpy;
  if (cat == "gpu_memset") return Role::kMemset;
  if (cat == "gpu_user_annotation") return Role::kGpuAnnotation;
  return Role::kSkip;
}

// Categories lib/export/perfetto.cpp writes.
Role perfetto_role(std::string_view cat, const json::object* args) {
  if (cat == "range") return Role::kRange;
  if (cat == "nvtx") return Role::kLibRange;
  if (cat == "python") return Role::kPyCall;
  if (cat == "cuda_api") {
    const json::value* d = args ? args->if_contains("domain") : nullptr;
    return d && d->is_string() && d->as_string() == "driver" ? Role::kDriverApi : Role::kApi;
  }
  if (cat == "mark") return Role::kMark;
  if (cat == "kernel") return Role::kKernel;
  if (cat == "memcpy") return Role::kMemcpy;
  if (cat == "memset") return Role::kMemset;
  return Role::kSkip;
}

bool is_host(Role r) { return r >= Role::kRange && r <= Role::kMark; }

using Track = std::pair<std::string, std::string>;  // (pid, tid) as written: numbers or strings

// What is kept of an event until the records are written (docs/reliability.md, "Memory bounds"): its fields, its
// name and track as pointers into the converter's tables (each distinct name and track is held once), in deques
// (no reallocation doubling the peak).
struct HostEvent {
  Role role = Role::kRange;
  const std::string* name = nullptr;
  const std::string* file = nullptr;
  int64_t start = 0, end = 0;
  uint32_t correlation = 0, cbid = 0, line = 0, depth = 0;
  int64_t step = -1;  // ProfilerStep#N: N
  bool layer = false;
};

struct GpuEvent {
  Role role = Role::kKernel;
  const std::string* name = nullptr;
  const Track* track = nullptr;
  int64_t start = 0, end = 0;
  uint32_t correlation = 0, device = 0, stream = 0, context = 0;
  uint64_t bytes = 0;
  CopyKind copy = CopyKind::kUnknown;
  MemoryKind src = MemoryKind::kUnknown, dst = MemoryKind::kUnknown;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t registers = 0, static_smem = 0, dynamic_smem = 0;
};

struct Flow {
  int64_t ts;
  uint32_t id;
  bool operator<(const Flow& o) const { return ts < o.ts; }
};

MemoryKind memory_kind_of(std::string_view s) {
  if (s == "pageable") return MemoryKind::kPageable;
  if (s == "pinned") return MemoryKind::kPinned;
  if (s == "device") return MemoryKind::kDevice;
  if (s == "array") return MemoryKind::kArray;
  if (s == "managed") return MemoryKind::kManaged;
  return MemoryKind::kUnknown;
}

/// "Memcpy HtoD (Pageable -> Device)": direction and the memory kinds of both ends (CUPTI's names, any case).
void parse_copy_name(std::string_view name, GpuEvent& g) {
  static const std::pair<const char*, CopyKind> kinds[] = {
      {"htod", CopyKind::kHtoD}, {"dtoh", CopyKind::kDtoH}, {"dtod", CopyKind::kDtoD}, {"htoh", CopyKind::kHtoH},
      {"ptop", CopyKind::kPtoP}, {"htoa", CopyKind::kHtoA}, {"atoh", CopyKind::kAtoH}, {"atoa", CopyKind::kAtoA},
      {"atod", CopyKind::kAtoD}, {"dtoa", CopyKind::kDtoA}};
  const std::string n = lower(name);
  const size_t k = n.find("memcpy ");
  if (k == std::string::npos) return;
  const std::string dir = n.substr(k + 7, 4);
  for (auto& [text, kind] : kinds)
    if (dir == text) g.copy = kind;
  const size_t open = n.find('(', k), arrow = n.find(" -> ", k), close = n.find(')', k);
  if (open == std::string::npos || arrow == std::string::npos || close == std::string::npos) return;
  if (!(open < arrow && arrow < close)) return;
  g.src = memory_kind_of(std::string_view(n).substr(open + 1, arrow - open - 1));
  g.dst = memory_kind_of(std::string_view(n).substr(arrow + 4, close - arrow - 4));
}

/// "torch/nn/modules/linear.py(125): forward" -> file, line, function. Other names ("nn.Module: Linear_0",
/// "<built-in method ...>") stay whole, without a location. Returns the function's name.
std::string parse_python_name(const std::string& name, std::string& file, uint32_t& line) {
  const size_t colon = name.find("): ");
  const size_t open = colon == std::string::npos ? std::string::npos : name.rfind('(', colon);
  if (open == std::string::npos || open == 0 || open + 1 == colon ||
      name.find_first_not_of("0123456789", open + 1) != colon)
    return name;
  file = name.substr(0, open);
  line = to_uint<uint32_t>(std::strtod(name.c_str() + open + 1, nullptr));
  return name.substr(colon + 3);
}

/// "ProfilerStep#12" -> 12; -1 for any other name.
int64_t profiler_step(std::string_view name) {
  constexpr std::string_view prefix = "ProfilerStep#";
  if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size() || name.size() > prefix.size() + 15)
    return -1;
  int64_t n = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

// ---- the converter --------------------------------------------------------------------------------------------

class ChromeTraceReader::Converter {
 public:
  Converter(const std::string& path, Dialect d) : path_(path), dialect_(d) {}

  void read(const json::value& v, size_t i) {
    if (!v.is_object()) throw InputError(where(i) + ": not an object");
    read_event(v.as_object(), i);
  }

  /// Correlation ids missing from args, taken from the flow events that link a call to its GPU work.
  void link_flows() {
    for (auto* m : {&flow_start_, &flow_end_})
      for (auto& [t, v] : *m) std::sort(v.begin(), v.end());
    for (auto& g : gpu_)
      if (!g.correlation) g.correlation = flow_in(flow_end_, *g.track, g.start, g.end);
    for (auto& [t, evs] : host_)
      for (auto& e : evs)
        if ((e.role == Role::kApi || e.role == Role::kDriverApi) && !e.correlation)
          e.correlation = flow_in(flow_start_, t, e.start, e.end);
  }

  void write(const json::object& root, dump::DumpBuilder& b) {
    const int64_t shift = any_ ? -min_ns_ : 0;  // the dump's times start at zero
    write_process_info(root, b);
    for (auto& [track, evs] : host_) write_thread(b, track, evs, shift);
    write_gpu(b, shift);
  }

  void warnings(std::vector<ImportWarning>& w) const;

 private:
  std::string where(size_t i) const { return path_ + ": traceEvents[" + std::to_string(i) + "]"; }

  void read_event(const json::object& o, size_t i);
  void read_metadata(const json::object& o);
  void read_flow(const json::object& o, char ph, size_t i);
  int64_t time_ns(const json::object& o, const char* key, size_t i, const std::string& cat);
  void add_host(Role role, const json::object& o, Track track, int64_t s, int64_t e);
  void add_gpu(Role role, const json::object& o, Track track, int64_t s, int64_t e);
  void write_process_info(const json::object& root, dump::DumpBuilder& b) const;
  /// The pid of the process with the most host events (Kineto may hold DataLoader workers too).
  std::string main_pid() const {
    std::map<std::string, size_t> n;
    for (auto& [t, evs] : host_) n[t.first] += evs.size();
    auto best = std::max_element(n.begin(), n.end(), [](auto& x, auto& y) { return x.second < y.second; });
    return best == n.end() ? "" : best->first;
  }
  void write_thread(dump::DumpBuilder& b, const Track& track, std::deque<HostEvent>& evs, int64_t shift) const;
  void write_host_event(dump::DumpBuilder& b, uint32_t t, const HostEvent& e, int64_t shift) const;
  void write_gpu(dump::DumpBuilder& b, int64_t shift);

  /// The full name of a kernel InferScope's writer named by its short name: the writer puts the full name in
  /// args.full_name of the kernel's first event in the file, which this reads before the others.
  std::string full_kernel_name(const std::string& name, const json::object* args) {
    const json::value* full = args ? args->if_contains("full_name") : nullptr;
    if (full && full->is_string()) return full_kernel_names_[name] = std::string(full->as_string());
    const auto it = full_kernel_names_.find(name);
    return it == full_kernel_names_.end() ? name : it->second;
  }

  static uint32_t flow_in(const std::map<Track, std::vector<Flow>>& m, const Track& t, int64_t s, int64_t e) {
    auto it = m.find(t);
    if (it == m.end()) return 0;
    auto f = std::lower_bound(it->second.begin(), it->second.end(), Flow{s, 0});
    return f != it->second.end() && f->ts <= e ? f->id : 0;
  }

  std::string path_;
  Dialect dialect_;
  const std::string* intern(std::string s) { return &*names_.insert(std::move(s)).first; }
  const Track* track_of(Track t) { return &*tracks_.insert(std::move(t)).first; }

  std::unordered_set<std::string> names_;  // every distinct name and file, once
  std::set<Track> tracks_;                 // every GPU track, once
  std::map<Track, std::deque<HostEvent>> host_;
  std::deque<GpuEvent> gpu_;
  std::map<Track, std::vector<Flow>> flow_start_, flow_end_;
  std::map<Track, std::string> thread_names_;
  std::map<std::string, std::string> full_kernel_names_;  // InferScope's short kernel name -> the full one
  std::map<std::string, uint64_t> skipped_;  // category -> events not converted
  uint64_t gpu_annotations_ = 0, clamped_ = 0, host_copies_ = 0, host_kind_unknown_ = 0, unknown_copies_ = 0;
  uint64_t uncorrelated_ = 0;
  int64_t min_ns_ = 0;
  bool any_ = false;
};

int64_t ChromeTraceReader::Converter::time_ns(const json::object& o, const char* key, size_t i, const std::string& cat) {
  const json::value* v = member(o, key);
  const std::string at = where(i) + (cat.empty() ? "" : " (cat '" + cat + "')");
  if (!v) throw InputError(at + ": missing field '" + key + "'");
  auto d = number(v);
  if (!d) throw InputError(at + ": field '" + key + "' is not a number");
  // 1e15 µs is 31 years: anything beyond cannot be a trace time and would not fit in nanoseconds.
  if (!std::isfinite(*d) || std::fabs(*d) > 1e15) throw InputError(at + ": field '" + key + "' is out of range");
  return std::llround(*d * 1000);
}

void ChromeTraceReader::Converter::read_event(const json::object& o, size_t i) {
  const json::value* phv = member(o, "ph");
  if (!phv || !phv->is_string() || phv->as_string().empty()) throw InputError(where(i) + ": missing field 'ph'");
  const char ph = phv->as_string()[0];
  if (ph == 'M') return read_metadata(o);
  if (ph == 's' || ph == 'f') return read_flow(o, ph, i);
  if (ph != 'X' && ph != 'i' && ph != 'I') return;  // counters, async and other phases: not analysed
  const std::string cat = string_of(member(o, "cat"));
  const Role role = dialect_ == Dialect::kKineto ? kineto_role(cat) : perfetto_role(cat, args_of(o));
  const bool instant = ph != 'X';
  if (role == Role::kSkip || instant != (role == Role::kMark)) {
    // Kineto's own bookkeeping ("Trace" spans, the uncategorised "Iteration Start" and "Record Window End"
    // instants) is in every export: skipped without a word.
    if (!cat.empty() && cat != "Trace") ++skipped_[cat];
    return;
  }
  if (role == Role::kGpuAnnotation) {
    ++gpu_annotations_;
    return;
  }
  const int64_t s = time_ns(o, "ts", i, cat);
  int64_t e = instant ? s : s + time_ns(o, "dur", i, cat);
  if (e < s) {  // a negative duration: keep the event as an instant
    e = s;
    ++clamped_;
  }
  if (!any_ || s < min_ns_) min_ns_ = s;
  any_ = true;
  Track track{string_of(member(o, "pid")), string_of(member(o, "tid"))};
  if (is_host(role)) add_host(role, o, std::move(track), s, e);
  else add_gpu(role, o, std::move(track), s, e);
}

void ChromeTraceReader::Converter::read_metadata(const json::object& o) {
  if (string_of(member(o, "name")) != "thread_name") return;
  const json::object* a = args_of(o);
  std::string name = a ? string_of(a->if_contains("name")) : "";
  while (!name.empty() && name.back() == ' ') name.pop_back();  // Kineto writes "stream 7 "
  if (!name.empty()) thread_names_[{string_of(member(o, "pid")), string_of(member(o, "tid"))}] = name;
}

void ChromeTraceReader::Converter::read_flow(const json::object& o, char ph, size_t i) {
  const std::string cat = string_of(member(o, "cat"));
  if (cat != (dialect_ == Dialect::kKineto ? "ac2g" : "launch")) return;
  const uint32_t id = to_uint<uint32_t>(number(member(o, "id")));
  if (!id) return;
  Track track{string_of(member(o, "pid")), string_of(member(o, "tid"))};
  (ph == 's' ? flow_start_ : flow_end_)[track].push_back({time_ns(o, "ts", i, cat), id});
}

void ChromeTraceReader::Converter::add_host(Role role, const json::object& o, Track track, int64_t s, int64_t e) {
  const json::object* args = args_of(o);
  HostEvent h;
  h.role = role;
  h.start = s;
  h.end = e;
  std::string name = string_of(member(o, "name")), file;
  if (role == Role::kPyCall && dialect_ == Dialect::kKineto) {
    name = parse_python_name(name, file, h.line);
  } else if (role == Role::kPyCall) {
    file = args ? string_of(args->if_contains("file")) : "";
    h.line = to_uint<uint32_t>(arg_number(args, "line"));
  } else if (role == Role::kApi || role == Role::kDriverApi) {
    h.correlation = to_uint<uint32_t>(arg_number(args, "correlation"));
    h.cbid = to_uint<uint32_t>(arg_number(args, "cbid"));
  } else if (role == Role::kRange && dialect_ == Dialect::kKineto) {
    h.step = profiler_step(name);
    if (h.step >= 0) name = "ProfilerStep";  // one name for every step, so the step detection sees repeats
  } else if (role == Role::kRange) {
    h.layer = arg_number(args, "layer").value_or(0) != 0;
  }
  h.name = intern(std::move(name));
  h.file = intern(std::move(file));
  host_[std::move(track)].push_back(h);
}

void ChromeTraceReader::Converter::add_gpu(Role role, const json::object& o, Track track, int64_t s, int64_t e) {
  const json::object* args = args_of(o);
  GpuEvent g;
  g.role = role;
  std::string name = string_of(member(o, "name"));
  if (dialect_ == Dialect::kPerfetto && role == Role::kKernel) name = full_kernel_name(name, args);
  g.start = s;
  g.end = e;
  g.correlation = to_uint<uint32_t>(arg_number(args, "correlation"));
  // Kineto's GPU tracks are pid = device, tid = stream: the fallback when args lack them.
  const auto track_number = [](const std::string& t) { return std::strtod(t.c_str(), nullptr); };
  g.device = to_uint<uint32_t>(arg_number(args, "device").value_or(track_number(track.first)));
  g.stream = to_uint<uint32_t>(arg_number(args, "stream").value_or(track_number(track.second)));
  g.context = to_uint<uint32_t>(arg_number(args, "context"));
  g.bytes = to_uint<uint64_t>(arg_number(args, "bytes"));
  for (const char* key : {"grid", "block"}) {
    const json::value* v = args ? args->if_contains(key) : nullptr;
    if (!v || !v->is_array()) continue;
    uint32_t* dims = key[0] == 'g' ? g.grid : g.block;
    for (size_t k = 0; k < 3 && k < v->as_array().size(); ++k) dims[k] = to_uint<uint32_t>(number(&v->as_array()[k]));
  }
  g.registers = to_uint<uint32_t>(arg_number(args, dialect_ == Dialect::kKineto ? "registers per thread" : "registers_per_thread"));
  g.static_smem = to_uint<uint32_t>(arg_number(args, dialect_ == Dialect::kKineto ? "shared memory" : "static_smem"));
  g.dynamic_smem = to_uint<uint32_t>(arg_number(args, "dynamic_smem"));
  if (role == Role::kMemcpy) {
    parse_copy_name(name, g);
    if (g.copy == CopyKind::kUnknown) ++unknown_copies_;
    const MemoryKind host = g.copy == CopyKind::kHtoD ? g.src : g.copy == CopyKind::kDtoH ? g.dst : MemoryKind::kDevice;
    if (g.copy == CopyKind::kHtoD || g.copy == CopyKind::kDtoH) {
      ++host_copies_;
      if (host == MemoryKind::kUnknown) ++host_kind_unknown_;
    }
  }
  g.name = intern(std::move(name));
  g.track = track_of(std::move(track));
  gpu_.push_back(g);
}

void ChromeTraceReader::Converter::write_process_info(const json::object& root, dump::DumpBuilder& b) const {
  if (dialect_ == Dialect::kPerfetto) {
    // The dump's process info, as the writer put it into otherData ("process.<key>").
    if (auto* od = root.if_contains("otherData"); od && od->is_object())
      for (const auto& kv : od->as_object()) {
        const std::string_view k = kv.key();
        if (k.starts_with("process.") && k != "process.source" && k != "process.source_format")
          b.process(k.substr(8), string_of(&kv.value()));
      }
  }
  b.process("source", path_);
  b.process("source_format", dialect_ == Dialect::kKineto ? "kineto" : "perfetto");
  if (dialect_ != Dialect::kKineto) return;
  b.process("pid", main_pid());
  b.process("cmdline", "(not recorded by torch.profiler)");
  // The ns the dump's time zero stands for: the trace's first event, on the clock its ts count from
  // (baseTimeNanoseconds plus ts, where torch.profiler writes a base), so that the ranks of one run line up.
  int64_t base = 0;
  // A whole number of ns within 2^62 (146 years; room to add the first event's time): anything else, 2^64, 1.5 or
  // 1e30, is refused naming the field. boost's to_number<int64_t> threw on it, and the throw ended the tool (exit 134).
  if (auto* v = root.if_contains("baseTimeNanoseconds"); v && v->is_number()) {
    const bool whole = v->is_int64() || (v->is_uint64() && v->as_uint64() <= uint64_t(INT64_MAX));
    const int64_t n = !whole ? 0 : v->is_int64() ? v->as_int64() : int64_t(v->as_uint64());
    if (!whole || n > (int64_t(1) << 62) || n < -(int64_t(1) << 62))
      throw InputError(path_ + ": field 'baseTimeNanoseconds' is out of range (a whole number of ns is expected)");
    base = n;
  }
  if (any_) b.process("time_shift_ns", std::to_string(base + min_ns_));
  // A distributed run's rank, as torch.profiler records it ("distributedInfo": {"rank", "world_size", "backend"}).
  if (auto* d = root.if_contains("distributedInfo"); d && d->is_object()) {
    for (const char* k : {"rank", "world_size"})
      if (auto* v = d->as_object().if_contains(k); v && v->is_int64() && v->as_int64() >= 0) b.process(k, std::to_string(v->as_int64()));
    if (auto* v = d->as_object().if_contains("backend"); v && v->is_string()) b.process("kineto.backend", string_of(v));
  }
  for (const char* k : {"schemaVersion", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "trace_id"})
    if (auto* v = root.if_contains(k)) b.process(std::string("kineto.") + k, string_of(v));
  const json::value* props = root.if_contains("deviceProperties");
  if (!props || !props->is_array()) return;
  b.process("gpu.count", std::to_string(props->as_array().size()));
  for (const json::value& d : props->as_array()) {
    if (!d.is_object()) continue;
    const json::object& o = d.as_object();
    const std::string k = "gpu." + std::to_string(to_uint<uint32_t>(number(o.if_contains("id")))) + ".";
    // The names the CUPTI collector uses, then every property under its Kineto name.
    if (auto* v = o.if_contains("name")) b.process(k + "name", string_of(v));
    if (auto* v = o.if_contains("totalGlobalMem")) b.process(k + "memory_bytes", string_of(v));
    if (auto* v = o.if_contains("numSms")) b.process(k + "sm_count", string_of(v));
    if (o.contains("computeMajor") && o.contains("computeMinor"))
      b.process(k + "compute_capability", string_of(o.if_contains("computeMajor")) + "." + string_of(o.if_contains("computeMinor")));
    for (const auto& kv : o) {
      const std::string_view name = kv.key();
      if (name != "id" && name != "name" && (kv.value().is_number() || kv.value().is_string()))
        b.process(k + std::string(name), string_of(&kv.value()));
    }
  }
}

void ChromeTraceReader::Converter::write_thread(dump::DumpBuilder& b, const Track& track, std::deque<HostEvent>& evs,
                                        int64_t shift) const {
  auto named = thread_names_.find(track);
  std::string name = named != thread_names_.end() ? named->second : "thread " + track.second;
  if (dialect_ == Dialect::kKineto && track.first != track.second && named == thread_names_.end())
    name += " (pid " + track.first + ")";
  const double tid = std::strtod(track.second.c_str(), nullptr);
  const uint32_t t = b.thread(name, to_uint<uint32_t>(tid));
  // Depth from time containment (ranges of both kinds share one stack, Python frames have their own), then
  // END order, children before parents, as the runtime writes them.
  std::sort(evs.begin(), evs.end(), [](auto& x, auto& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; });
  std::vector<int64_t> ranges, frames;
  for (auto& e : evs) {
    std::vector<int64_t>* open = e.role == Role::kRange || e.role == Role::kLibRange ? &ranges
                                 : e.role == Role::kPyCall                         ? &frames
                                                                                   : nullptr;
    if (!open) continue;
    while (!open->empty() && open->back() <= e.start) open->pop_back();
    e.depth = static_cast<uint32_t>(open->size());
    open->push_back(e.end);
  }
  std::stable_sort(evs.begin(), evs.end(), [](auto& x, auto& y) {
    return x.end != y.end ? x.end < y.end : x.start != y.start ? x.start > y.start : x.depth > y.depth;
  });
  for (auto& e : evs) write_host_event(b, t, e, shift);
}

void ChromeTraceReader::Converter::write_host_event(dump::DumpBuilder& b, uint32_t t, const HostEvent& e, int64_t shift) const {
  const int64_t s = e.start + shift, en = e.end + shift;
  switch (e.role) {
    case Role::kRange:
      if (e.step >= 0) b.range(t, *e.name, e.depth, s, en, {{"step", e.step}});
      else if (e.layer) b.range(t, *e.name, e.depth, s, en, {{"layer", int64_t(1)}});
      else b.range(t, *e.name, e.depth, s, en);
      break;
    case Role::kLibRange: b.range(t, *e.name, e.depth, s, en, {}, RecordKind::kNvtxRange); break;
    case Role::kPyCall: b.pycall(t, b.code(*e.name, *e.file, e.line), e.depth, s, en); break;
    case Role::kApi: b.api(t, *e.name, e.correlation, s, en, e.cbid, ApiDomain::kRuntime); break;
    case Role::kDriverApi: b.api(t, *e.name, e.correlation, s, en, e.cbid, ApiDomain::kDriver); break;
    case Role::kMark: b.mark(t, *e.name, s); break;
    default: break;
  }
}

void ChromeTraceReader::Converter::write_gpu(dump::DumpBuilder& b, int64_t shift) {
  std::stable_sort(gpu_.begin(), gpu_.end(), [](auto& x, auto& y) { return x.start < y.start; });
  std::map<uint32_t, uint32_t> channel;  // device -> channel
  for (const auto& g : gpu_) {
    if (!g.correlation) ++uncorrelated_;
    auto it = channel.find(g.device);
    if (it == channel.end()) it = channel.emplace(g.device, b.channel("GPU " + std::to_string(g.device))).first;
    const uint64_t s = b.ticks(g.start + shift), e = b.ticks(g.end + shift);
    if (g.role == Role::kKernel) {
      GpuKernelRecord r{};
      r.h = {RecordKind::kGpuKernel, 0, sizeof(GpuKernelRecord)};
      r.name = b.str(*g.name);
      r.start = s, r.end = e, r.correlation = g.correlation, r.device = g.device, r.context = g.context;
      r.stream = g.stream, r.registers = g.registers, r.static_smem = g.static_smem, r.dynamic_smem = g.dynamic_smem;
      std::copy(g.grid, g.grid + 3, r.grid);
      std::copy(g.block, g.block + 3, r.block);
      b.raw(it->second, &r, sizeof(r));
    } else if (g.role == Role::kMemcpy) {
      GpuMemcpyRecord r{};
      r.h = {RecordKind::kGpuMemcpy, static_cast<uint8_t>(g.copy), sizeof(GpuMemcpyRecord)};
      r.start = s, r.end = e, r.correlation = g.correlation, r.bytes = g.bytes, r.device = g.device;
      r.context = g.context, r.stream = g.stream, r.src_kind = g.src, r.dst_kind = g.dst, r.dst_device = g.device;
      b.raw(it->second, &r, sizeof(r));
    } else {
      GpuMemsetRecord r{};
      r.h = {RecordKind::kGpuMemset, static_cast<uint8_t>(MemoryKind::kDevice), sizeof(GpuMemsetRecord)};
      r.start = s, r.end = e, r.correlation = g.correlation, r.bytes = g.bytes, r.device = g.device;
      r.context = g.context, r.stream = g.stream;
      b.raw(it->second, &r, sizeof(r));
    }
  }
}

void ChromeTraceReader::Converter::warnings(std::vector<ImportWarning>& w) const {
  if (dialect_ == Dialect::kKineto) w.push_back({ImportIssue::kNoHostCounters});
  if (host_kind_unknown_) w.push_back({ImportIssue::kHostMemoryKindUnknown, host_kind_unknown_, host_copies_});
  if (unknown_copies_) w.push_back({ImportIssue::kCopyDirectionUnknown, unknown_copies_});
  if (gpu_annotations_) w.push_back({ImportIssue::kGpuAnnotationsSkipped, gpu_annotations_});
  if (uncorrelated_) w.push_back({ImportIssue::kUncorrelatedGpuWork, uncorrelated_});
  if (clamped_) w.push_back({ImportIssue::kNegativeDuration, clamped_});
  if (skipped_.empty()) return;
  ImportWarning s{ImportIssue::kCategoriesSkipped};
  s.skipped.assign(skipped_.begin(), skipped_.end());
  s.from_perfetto_export = dialect_ == Dialect::kPerfetto;
  w.push_back(std::move(s));
}

bool is_chrome_trace(const json::object& o) {
  return o.contains("traceEvents") || o.contains("schemaVersion") || o.contains("deviceProperties") ||
         o.contains("baseTimeNanoseconds");
}

namespace {

// InferScope's own Perfetto export names itself in otherData, which it writes before traceEvents.
Dialect dialect_of(const json::object& members) {
  if (auto* od = members.if_contains("otherData"); od && od->is_object())
    if (auto* g = od->as_object().if_contains("generator"); g && g->is_string() && g->as_string() == "iscope-analyze")
      return Dialect::kPerfetto;
  return Dialect::kKineto;
}

}  // namespace

ChromeTraceReader::ChromeTraceReader(const std::string& path, const json::object& members)
    : c_(std::make_unique<Converter>(path, dialect_of(members))) {}

ChromeTraceReader::~ChromeTraceReader() = default;

void ChromeTraceReader::event(const json::value& e, uint64_t index) {
  c_->read(e, size_t(index));
  ++events_;
}

void ChromeTraceReader::finish(const json::object& members, dump::DumpBuilder& b, std::vector<ImportWarning>& warnings) {
  c_->link_flows();
  c_->write(members, b);
  c_->warnings(warnings);
  if (events_ == 0) warnings.push_back({ImportIssue::kNoEvents});
}

}  // namespace inferscope::import
