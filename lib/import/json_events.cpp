// The seeds' JSON event trace imported into the dump's records, in memory (lib/import/import.hpp).
//
//   {"events": [{"event_type": "gpu_kernel", "name": "gemm", "start_us": 10.0, "end_us": 52.5,
//                "device_id": 0, "grid_dim": [128,1,1], "block_dim": [256,1,1]}, ...]}      (or a bare array)
//
// Required per event: event_type, name, start_us, end_us (end_us optional for marks). Optional: thread_id,
// stream_id, device_id, bytes, correlation_id, grid_dim, block_dim, pinned. Unknown event types are counted
// and skipped. A Chrome trace (torch.profiler export, InferScope's --perfetto output) goes to chrome_trace.cpp.
#include "import/json_events.hpp"

#include "dump/builder.hpp"
#include "import/import.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace inferscope::import {
namespace json = boost::json;

namespace {

// A number from the trace as an integer field: NaN is 0 and out-of-range values saturate (a plain cast of an
// out-of-range double is undefined behaviour; the fuzzer found one).
template <class T>
T to_int(double v) {
  if (!(v == v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

struct HostEvent {
  int64_t start, end;
  int kind;  // 0 range, 1 sync api, 2 mark
  std::string name;
  uint32_t depth = 0;
};

// What is kept of the events until the records are written: what the records need, per event.
struct GpuEvent {
  int kind;
  std::string name;
  int64_t s, e;
  uint64_t bytes;
  uint32_t stream, device, corr;
  int host_mem;
};

}  // namespace

struct JsonEventsReader::State {
  std::map<std::string, uint64_t> unknown;
  std::map<int64_t, std::vector<HostEvent>> host;  // thread -> events
  std::vector<GpuEvent> gpu;
  double min_us = 0;
  bool first = true;
  uint64_t events = 0;
};

JsonEventsReader::JsonEventsReader(const std::string& path) : path_(path), s_(std::make_unique<State>()) {}
JsonEventsReader::~JsonEventsReader() = default;

void JsonEventsReader::event(const json::value& v, uint64_t index) {
  const std::string& path = path_;
  const size_t i = size_t(index);
  ++s_->events;
  auto num = [&](const json::object& o, const char* key, bool required, double def = 0) -> double {
    auto* f = o.if_contains(key);
    if (!f || f->is_null()) {
      if (required) throw InputError(path + ": event " + std::to_string(i) + ": missing field '" + key + "'");
      return def;
    }
    if (f->is_double()) return f->as_double();
    if (f->is_int64()) return double(f->as_int64());
    if (f->is_uint64()) return double(f->as_uint64());
    if (f->is_string()) {  // lenient: "12.5"
      try { return std::stod(std::string(f->as_string())); } catch (...) {}
    }
    throw InputError(path + ": event " + std::to_string(i) + ": field '" + key + "' is not a number");
  };
  auto str = [&](const json::object& o, const char* key) -> std::string {
    auto* f = o.if_contains(key);
    if (!f) throw InputError(path + ": event " + std::to_string(i) + ": missing field '" + key + "'");
    if (f->is_string()) return std::string(f->as_string());
    if (f->is_number()) return json::serialize(*f);
    throw InputError(path + ": event " + std::to_string(i) + ": field '" + key + "' is not a string");
  };
  if (!v.is_object()) throw InputError(path + ": event " + std::to_string(i) + ": not an object");
  const json::object& o = v.as_object();
  std::string type = str(o, "event_type");
  static const char* known[] = {"cpu_call", "gpu_kernel", "gpu_memcpy_h2d", "gpu_memcpy_d2h", "gpu_memset", "gpu_sync", "mark"};
  if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return type == k; }) == std::end(known)) {
    ++s_->unknown[type];
    return;
  }
  std::string name = str(o, "name");
  double s = num(o, "start_us", true);
  double e = type == "mark" ? num(o, "end_us", false, s) : num(o, "end_us", true);
  if (!std::isfinite(s) || !std::isfinite(e)) throw InputError(path + ": event " + std::to_string(i) + ": time is not finite");
  // 1e15 us is 31 years: anything beyond cannot be a trace time and would not fit in nanoseconds.
  if (std::fabs(s) > 1e15 || std::fabs(e) > 1e15)
    throw InputError(path + ": event " + std::to_string(i) + ": start_us/end_us out of range (|t| > 1e15 us)");
  if (e < s) throw InputError(path + ": event " + std::to_string(i) + ": end_us (" + std::to_string(e) + ") before start_us (" + std::to_string(s) + ")");
  if (s_->first || s < s_->min_us) s_->min_us = s;
  s_->first = false;
  int64_t sn = std::llround(s * 1000), en = std::llround(e * 1000);
  int64_t thread = to_int<int64_t>(num(o, "thread_id", false, 0));
  if (type == "cpu_call") s_->host[thread].push_back({sn, en, 0, name});
  else if (type == "gpu_sync") s_->host[thread].push_back({sn, en, 1, name});
  else if (type == "mark") s_->host[thread].push_back({sn, sn, 2, name});
  else {
    int kind = type == "gpu_kernel" ? 0 : type == "gpu_memcpy_h2d" ? 1 : type == "gpu_memcpy_d2h" ? 2 : 3;
    int host_mem = 0;
    if (auto* pv = o.if_contains("pinned"); pv && pv->is_bool()) host_mem = pv->as_bool() ? 2 : 1;
    if (auto* pv = o.if_contains("memory"); pv && pv->is_string()) host_mem = pv->as_string() == "pinned" ? 2 : pv->as_string() == "pageable" ? 1 : 0;
    s_->gpu.push_back({kind, name, sn, en, to_int<uint64_t>(num(o, "bytes", false, 0)),
                       to_int<uint32_t>(num(o, "stream_id", false, 7)), to_int<uint32_t>(num(o, "device_id", false, 0)),
                       to_int<uint32_t>(num(o, "correlation_id", false, 0)), host_mem});
  }
}

void JsonEventsReader::finish(dump::DumpBuilder& b, std::vector<ImportWarning>& warnings) {
  for (auto& [t, n] : s_->unknown) {
    ImportWarning w{ImportIssue::kUnknownEventType, n};
    w.name = t;
    warnings.push_back(std::move(w));
  }
  if (s_->events == 0) warnings.push_back({ImportIssue::kNoEvents});

  // Times start at zero (and never go negative) in the dump.
  const int64_t shift = s_->first ? 0 : -std::llround(s_->min_us * 1000);
  b.process("source", path_);
  b.process("source_format", "json");
  std::map<int64_t, uint32_t> tid;
  for (auto& [t, evs] : s_->host) {
    tid[t] = b.thread(t == 0 ? "main" : "thread " + std::to_string(t), uint32_t(t));
    // Depth from nesting, then END order as the runtime writes them.
    std::sort(evs.begin(), evs.end(), [](auto& x, auto& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; });
    std::vector<int64_t> open;
    for (auto& e : evs) {
      if (e.kind != 0) continue;
      while (!open.empty() && open.back() <= e.start) open.pop_back();
      e.depth = uint32_t(open.size());
      open.push_back(e.end);
    }
    std::stable_sort(evs.begin(), evs.end(), [](auto& x, auto& y) { return x.end != y.end ? x.end < y.end : x.depth > y.depth; });
    uint32_t corr = 0x40000000u;  // synthetic ids for syncs, far from any correlation_id the trace carries
    for (auto& e : evs) {
      if (e.kind == 0) b.range(tid[t], e.name, e.depth, e.start + shift, e.end + shift);
      else if (e.kind == 1) b.api(tid[t], e.name.find("ynchronize") != std::string::npos ? e.name : "cudaDeviceSynchronize(" + e.name + ")",
                                  ++corr, e.start + shift, e.end + shift);
      else b.mark(tid[t], e.name, e.start + shift);
    }
  }
  auto& gpu = s_->gpu;
  std::stable_sort(gpu.begin(), gpu.end(), [](auto& x, auto& y) { return x.s < y.s; });
  std::map<uint32_t, uint32_t> ch;
  for (auto& g : gpu) {
    auto it = ch.find(g.device);
    if (it == ch.end()) it = ch.emplace(g.device, b.channel("GPU " + std::to_string(g.device))).first;
    switch (g.kind) {
      case 0: b.kernel(it->second, g.name, g.corr, g.s + shift, g.e + shift, g.stream, g.device); break;
      case 1: case 2:
        b.memcpy(it->second, g.kind == 1 ? CopyKind::kHtoD : CopyKind::kDtoH, g.bytes, g.corr, g.s + shift, g.e + shift,
                 static_cast<MemoryKind>(g.host_mem), g.stream);
        break;
      default: b.memset(it->second, g.bytes, g.corr, g.s + shift, g.e + shift, g.stream); break;
    }
  }
}

}  // namespace inferscope::import
