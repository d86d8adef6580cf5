// Builds dumps from C++ without a running session: synthetic traces for tests, golden fixtures, the
// analyzer's benchmark generator and the JSON-trace importer. Records are streamed to the file in chunks as
// they accumulate, so a 50 M-event dump needs only a few MiB of memory.
//
//   dump::DumpBuilder b("t.iscope");
//   uint32_t main = b.thread("main", 1234), gpu = b.channel("cupti");
//   b.api(main, "cudaLaunchKernel", /*corr=*/7, 1000, 1005);   // times in ns
//   b.range(main, "step", /*depth=*/0, 0, 2000);                // a thread's records in END order
//   b.kernel(gpu, "gemm", 7, 1010, 1900);
//   b.finish();
//
// The writer of a thread's records must keep the runtime's order (each record at its end), because the
// analyzer relies on it. Header-only so that tests, benches and the analyzer share it without a library.
#pragma once

#include <inferscope/records.hpp>

#include "dump/format.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferscope::dump {

/// An attribute for DumpBuilder::range (ints, doubles, strings).
struct BuilderAttr {
  std::string key;
  AttrType type = AttrType::kInt;
  int64_t i = 0;
  double d = 0;
  std::string s;
  BuilderAttr(std::string k, int64_t v) : key(std::move(k)), type(AttrType::kInt), i(v) {}
  BuilderAttr(std::string k, int v) : key(std::move(k)), type(AttrType::kInt), i(v) {}
  BuilderAttr(std::string k, double v) : key(std::move(k)), type(AttrType::kDouble), d(v) {}
  BuilderAttr(std::string k, const char* v) : key(std::move(k)), type(AttrType::kString), s(v) {}
  BuilderAttr(std::string k, std::string v) : key(std::move(k)), type(AttrType::kString), s(std::move(v)) {}
};

class DumpBuilder {
 public:
  /// Opens `path` for writing. Times given to the record methods are nanoseconds; they are stored as ticks
  /// = ns * ticks_per_ns + tick_base, with calibration points that map them back.
  explicit DumpBuilder(const std::string& path, double ticks_per_ns = 1.0, uint64_t tick_base = 1'000'000'000ull)
      : tpn_(ticks_per_ns), base_(tick_base) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw std::runtime_error(path + ": cannot create dump");
    open_ = true;
    FileHeader h = make_file_header();
    std::fwrite(&h, sizeof(h), 1, f_);
  }
  /// Builds the dump in memory instead of a file (an importer's, lib/import): take_bytes() after finish().
  struct InMemory {};
  explicit DumpBuilder(InMemory, double ticks_per_ns = 1.0, uint64_t tick_base = 1'000'000'000ull)
      : open_(true), in_memory_(true), tpn_(ticks_per_ns), base_(tick_base) {
    FileHeader h = make_file_header();
    memory_.append(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  ~DumpBuilder() {
    if (open_) finish(false);
  }
  DumpBuilder(const DumpBuilder&) = delete;
  DumpBuilder& operator=(const DumpBuilder&) = delete;

  uint64_t ticks(int64_t ns) const { return base_ + static_cast<uint64_t>(std::llround(double(ns) * tpn_)); }

  /// Interned string id (ids start at 1).
  uint32_t str(std::string_view s) {
    auto it = strings_.find(std::string(s));
    if (it != strings_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
    strings_.emplace(std::string(s), id);
    new_strings_.emplace_back(id, std::string(s));
    return id;
  }
  /// Python code object id.
  uint32_t code(std::string_view qualname, std::string_view file = "app.py", uint32_t line = 1) {
    std::string key = std::string(qualname) + '\0' + std::string(file) + '\0' + std::to_string(line);
    auto it = codes_.find(key);
    if (it != codes_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(codes_.size() + 1);
    codes_.emplace(key, id);
    new_codes_.push_back(CodeEntry{id, str(qualname), str(file), line});
    return id;
  }
  /// An application thread; returns its dump thread id.
  uint32_t thread(std::string_view name, uint32_t os_tid = 0) { return add_thread(name, os_tid, 0); }
  /// A collector channel (GPU activity, samples).
  uint32_t channel(std::string_view name) { return add_thread(name, 0, kThreadChannel); }
  /// Thread `t` started recording at `first_ns` and exited at `end_ns` (its entry written again, as the runtime
  /// does at a thread's exit).
  void thread_lifetime(uint32_t t, int64_t first_ns, int64_t end_ns) {
    threads_[t].first_ts = ticks(first_ns);
    threads_[t].end_ts = ticks(end_ns);
    threads_[t].flags |= kThreadExited;
    new_threads_.push_back(t);
  }
  void process(std::string_view key, std::string_view value) { process_.emplace_back(key, value); }
  void status(std::string_view key, std::string_view value) { status_.emplace_back(key, value); }
  void drop(uint32_t thread, std::string_view reason, uint64_t records) {
    drops_.push_back(DropEntry{thread, str(reason), records, records * 24});
  }

  void range(uint32_t t, std::string_view name, uint32_t depth, int64_t start_ns, int64_t end_ns,
             std::initializer_list<BuilderAttr> attrs = {}, RecordKind kind = RecordKind::kRange) {
    RangeRecord r{{kind, sat(depth), sizeof(RangeRecord)}, str(name), ticks(start_ns), ticks(end_ns)};
    if (attrs.size() == 0) return put(t, &r, sizeof(r));
    std::vector<uint8_t> buf(sizeof(r) + sizeof(AttrListHeader) + attrs.size() * sizeof(AttrRecord));
    r.h.size = static_cast<uint16_t>(buf.size());
    std::memcpy(buf.data(), &r, sizeof(r));
    AttrListHeader lh{static_cast<uint16_t>(attrs.size()), 0};
    std::memcpy(buf.data() + sizeof(r), &lh, sizeof(lh));
    size_t o = sizeof(r) + sizeof(lh);
    for (const auto& a : attrs) {
      AttrRecord ar{};
      ar.key = str(a.key);
      ar.type = a.type;
      if (a.type == AttrType::kDouble) ar.value.d = a.d;
      else if (a.type == AttrType::kString) ar.value.s = str(a.s);
      else ar.value.i = a.i;
      std::memcpy(buf.data() + o, &ar, sizeof(ar));
      o += sizeof(ar);
    }
    put(t, buf.data(), buf.size());
  }
  void pycall(uint32_t t, uint32_t code_id, uint32_t depth, int64_t start_ns, int64_t end_ns) {
    PyCallRecord r{{RecordKind::kPyCall, sat(depth), sizeof(PyCallRecord)}, code_id, ticks(start_ns), ticks(end_ns)};
    put(t, &r, sizeof(r));
  }
  /// The coroutine companion of the pycall just written on thread t (records.hpp, PyCoroutineRecord).
  void coroutine(uint32_t t, uint32_t code_id, int64_t start_ns, uint64_t object, bool first_run) {
    PyCoroutineRecord r{{RecordKind::kPyCoroutine, uint8_t(first_run ? kCoroutineFirstRun : 0), sizeof(PyCoroutineRecord)},
                        code_id, ticks(start_ns), object};
    put(t, &r, sizeof(r));
  }
  /// `calls` short calls of code_id counted in aggregate on thread t (records.hpp, PyElidedRecord).
  void elided(uint32_t t, uint32_t code_id, int64_t first_ns, int64_t last_ns, int64_t total_ns, uint32_t calls) {
    PyElidedRecord r{{RecordKind::kPyElided, 0, sizeof(PyElidedRecord)}, code_id, ticks(first_ns), ticks(last_ns),
                     uint64_t(std::llround(double(total_ns) * tpn_)), calls, 0};
    put(t, &r, sizeof(r));
  }
  /// An async range (id) begun on begin_thread and ended on end_thread, written to thread t.
  void async_range(uint32_t t, std::string_view name, uint64_t id, int64_t start_ns, int64_t end_ns,
                   uint32_t begin_thread, uint32_t end_thread) {
    AsyncRangeRecord r{};
    r.h = {RecordKind::kAsyncRange, 0, sizeof(AsyncRangeRecord)};
    r.name = str(name);
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.id = id;
    r.begin_thread = begin_thread;
    r.end_thread = end_thread;
    put(t, &r, sizeof(r));
  }
  void mark(uint32_t t, std::string_view name, int64_t ts_ns) {
    MarkRecord r{{RecordKind::kMark, 0, sizeof(MarkRecord)}, str(name), ticks(ts_ns)};
    put(t, &r, sizeof(r));
  }
  void api(uint32_t t, std::string_view name, uint32_t correlation, int64_t start_ns, int64_t end_ns,
           uint32_t cbid = 0, ApiDomain domain = ApiDomain::kRuntime) {
    api_of(t, threads_[t].os_tid, name, correlation, start_ns, end_ns, cbid, domain);
  }
  /// A call of the thread with OS id `caller_os_tid`, written to thread or channel t (CUPTI's API activity
  /// records arrive in the "gpu" channel naming their caller).
  void api_of(uint32_t t, uint32_t caller_os_tid, std::string_view name, uint32_t correlation, int64_t start_ns,
              int64_t end_ns, uint32_t cbid = 0, ApiDomain domain = ApiDomain::kRuntime) {
    CudaApiRecord r{};
    r.h = {RecordKind::kCudaApi, static_cast<uint8_t>(domain), sizeof(CudaApiRecord)};
    r.cbid = cbid;
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.correlation = correlation;
    r.name = str(name);
    r.os_tid = caller_os_tid;
    put(t, &r, sizeof(r));
  }
  void kernel(uint32_t ch, std::string_view name, uint32_t correlation, int64_t start_ns, int64_t end_ns,
              uint32_t stream = 7, uint32_t device = 0) {
    GpuKernelRecord r{};
    r.h = {RecordKind::kGpuKernel, 0, sizeof(GpuKernelRecord)};
    r.name = str(name);
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.correlation = correlation;
    r.device = device;
    r.stream = stream;
    r.grid[0] = 128; r.grid[1] = r.grid[2] = 1;
    r.block[0] = 256; r.block[1] = r.block[2] = 1;
    put(ch, &r, sizeof(r));
  }
  /// A CUDA graph launch traced at graph level (CUPTI's graph-trace record).
  void graph_launch(uint32_t ch, uint32_t graph_id, uint32_t correlation, int64_t start_ns, int64_t end_ns,
                    uint32_t stream = 7, uint32_t device = 0) {
    GpuGraphLaunchRecord r{};
    r.h = {RecordKind::kGpuGraphLaunch, 0, sizeof(GpuGraphLaunchRecord)};
    r.correlation = correlation;
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.device = device;
    r.stream = stream;
    r.graph_id = graph_id;
    put(ch, &r, sizeof(r));
  }
  void memcpy(uint32_t ch, CopyKind kind, uint64_t bytes, uint32_t correlation, int64_t start_ns, int64_t end_ns,
              MemoryKind host_kind = MemoryKind::kPageable, uint32_t stream = 7, bool async = false) {
    GpuMemcpyRecord r{};
    r.h = {RecordKind::kGpuMemcpy, static_cast<uint8_t>(kind), sizeof(GpuMemcpyRecord)};
    r.correlation = correlation;
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.bytes = bytes;
    r.stream = stream;
    r.src_kind = kind == CopyKind::kHtoD ? host_kind : MemoryKind::kDevice;
    r.dst_kind = kind == CopyKind::kDtoH ? host_kind : MemoryKind::kDevice;
    r.is_async = async;
    put(ch, &r, sizeof(r));
  }
  void memset(uint32_t ch, uint64_t bytes, uint32_t correlation, int64_t start_ns, int64_t end_ns, uint32_t stream = 7) {
    GpuMemsetRecord r{};
    r.h = {RecordKind::kGpuMemset, static_cast<uint8_t>(MemoryKind::kDevice), sizeof(GpuMemsetRecord)};
    r.correlation = correlation;
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.bytes = bytes;
    r.stream = stream;
    put(ch, &r, sizeof(r));
  }
  void sync(uint32_t ch, SyncKind kind, uint32_t correlation, int64_t start_ns, int64_t end_ns,
            uint32_t stream = 0xffffffffu) {
    GpuSyncRecord r{};
    r.h = {RecordKind::kGpuSync, static_cast<uint8_t>(kind), sizeof(GpuSyncRecord)};
    r.correlation = correlation;
    r.start = ticks(start_ns);
    r.end = ticks(end_ns);
    r.stream = stream;
    put(ch, &r, sizeof(r));
  }
  /// Device allocation (alloc = true) or release.
  void memory(uint32_t ch, bool alloc, uint64_t bytes, uint32_t correlation, int64_t ts_ns, uint64_t address = 0) {
    GpuMemoryRecord r{};
    r.h = {RecordKind::kGpuMemory, static_cast<uint8_t>(alloc ? 1 : 2), sizeof(GpuMemoryRecord)};
    r.correlation = correlation;
    r.ts = ticks(ts_ns);
    r.address = address;
    r.bytes = bytes;
    r.stream = 0xffffffffu;
    r.memory_kind = MemoryKind::kDevice;
    put(ch, &r, sizeof(r));
  }
  void counter(uint32_t ch, std::string_view name, CounterScope scope, uint32_t target, int64_t ts_ns, int64_t value) {
    CounterRecord r{};
    r.h = {RecordKind::kCounter, static_cast<uint8_t>(AttrType::kInt), sizeof(CounterRecord)};
    r.name = str(name);
    r.ts = ticks(ts_ns);
    r.value.i = value;
    r.scope = scope;
    r.target = target;
    put(ch, &r, sizeof(r));
  }
  void counter_double(uint32_t ch, std::string_view name, CounterScope scope, uint32_t target, int64_t ts_ns,
                      double value) {
    CounterRecord r{};
    r.h = {RecordKind::kCounter, static_cast<uint8_t>(AttrType::kDouble), sizeof(CounterRecord)};
    r.name = str(name);
    r.ts = ticks(ts_ns);
    r.value.d = value;
    r.scope = scope;
    r.target = target;
    put(ch, &r, sizeof(r));
  }
  void clock_check(uint32_t ch, int64_t cpu_before_ns, int64_t gpu_ns, int64_t cpu_after_ns) {
    ClockCheckRecord r{};
    r.h = {RecordKind::kClockCheck, 0, sizeof(ClockCheckRecord)};
    r.cpu_before = ticks(cpu_before_ns);
    r.gpu_ts = ticks(gpu_ns);
    r.cpu_after = ticks(cpu_after_ns);
    put(ch, &r, sizeof(r));
  }
  /// Any record, written as is.
  void raw(uint32_t t, const void* rec, size_t size) { put(t, rec, size); }

  // --- sampled mode: a dump whose events lie inside windows (times in ns, like the records)
  /// A window [begin_ns, end_ns) that counted `steps` steps from `first_step`; flags: WindowFlags.
  void window(uint32_t index, int64_t begin_ns, int64_t end_ns, uint64_t first_step, uint32_t steps,
              WindowReason reason = WindowReason::kPeriodic, uint8_t flags = kWindowFull, uint32_t slow_steps = 0) {
    windows_.push_back(WindowEntry{ticks(begin_ns), ticks(end_ns), first_step, index, steps, slow_steps,
                                   static_cast<uint8_t>(reason), flags, 0, 0});
    sampled_ = true;
  }
  /// A slow step the runtime detected; `window` 0: its records were not kept.
  void slow_step(uint32_t thread, uint64_t step, int64_t start_ns, int64_t end_ns, uint32_t window, bool full,
                 uint32_t bound_us = 0) {
    slow_.push_back(SlowStepEntry{ticks(start_ns), ticks(end_ns), step, thread, window, bound_us, full ? 1u : 0u});
    sampled_ = true;
  }
  /// The coverage summary; its begin/end/window times are ns like the records.
  void sampling(const SamplingSummary& s_ns, std::string_view step_name = "step") {
    summary_ = s_ns;
    summary_.begin_ticks = ticks(int64_t(s_ns.begin_ticks));
    summary_.end_ticks = ticks(int64_t(s_ns.end_ticks));
    summary_.window_ticks = uint64_t(std::llround(double(s_ns.window_ticks) * tpn_));
    summary_.step_name = str(step_name);
    sampled_ = true;
  }

  /// Writes what is pending, the tables, the drops and (when `end_chunk`) the END chunk, and closes the file.
  void finish(bool end_chunk = true) {
    if (!open_) return;
    for (auto& [t, b] : events_) flush_events(t);
    flush_tables();
    if (sampled_) write_sampling();
    if (!drops_.empty()) {
      ChunkBuilder b(ChunkType::kDrops);
      for (auto& d : drops_) b.add(d);
      write(b);
    }
    if (end_chunk) {
      ChunkBuilder b(ChunkType::kEnd);
      uint64_t dropped = 0;
      for (auto& d : drops_) dropped += d.records;
      b.add(EndEntry{ticks(last_ns_), records_, dropped});
      write(b);
    }
    if (sampled_) {  // the header's flags say what the file is
      FileHeader h = make_file_header(kFileRingSnapshot | kFileSampled);
      if (in_memory_) {
        std::memcpy(memory_.data(), &h, sizeof(h));
      } else {
        std::fseek(f_, 0, SEEK_SET);
        std::fwrite(&h, sizeof(h), 1, f_);
      }
    }
    if (f_) std::fclose(f_);
    f_ = nullptr;
    open_ = false;
  }
  /// The dump built in memory (InMemory), once finish() has run; empty for a file.
  std::string take_bytes() { return std::move(memory_); }
  uint64_t records() const { return records_; }
  /// Bytes written so far (chunks still buffered not counted).
  uint64_t bytes_written() const { return written_ + sizeof(FileHeader); }

  /// Flushes a thread's buffered records as soon as they reach this many bytes (default 1 MiB).
  void set_chunk_bytes(size_t n) { chunk_bytes_ = n; }

 private:
  static uint8_t sat(uint32_t d) { return static_cast<uint8_t>(d < 255 ? d : 255); }

  uint32_t add_thread(std::string_view name, uint32_t os_tid, uint32_t flags) {
    uint32_t id = static_cast<uint32_t>(threads_.size() + 1);
    ThreadEntry e{};
    e.thread_id = id;
    e.os_tid = os_tid ? os_tid : 1000 + id;
    e.pid = 4242;
    e.name = str(name);
    e.first_ts = base_;
    e.flags = flags;
    threads_[id] = e;
    new_threads_.push_back(id);
    return id;
  }

  void put(uint32_t t, const void* rec, size_t size) {
    auto it = events_.find(t);
    if (it == events_.end()) {
      it = events_.emplace(t, ChunkBuilder(ChunkType::kEvents)).first;
      EventsHeader eh{t, 0};
      it->second.append(&eh, sizeof(eh));
    }
    it->second.append(rec, size);
    it->second.add_count(1);
    ++records_;
    pending_bytes_[t] += size;
    if (pending_bytes_[t] >= chunk_bytes_) flush_events(t);
  }

  void flush_events(uint32_t t) {
    auto it = events_.find(t);
    if (it == events_.end() || it->second.count() == 0) return;
    flush_tables();  // the runtime writes names before the records that use them
    write(it->second);
    it->second = ChunkBuilder(ChunkType::kEvents);
    EventsHeader eh{t, 0};
    it->second.append(&eh, sizeof(eh));
    pending_bytes_[t] = 0;
  }

  void flush_tables() {
    if (!wrote_meta_) {
      wrote_meta_ = true;
      ChunkBuilder p(ChunkType::kProcessInfo);
      p.add_key_value("pid", "4242");
      p.add_key_value("cmdline", "synthetic");
      p.add_key_value("clock", "synthetic");
      write(p);
      ChunkBuilder c(ChunkType::kCalibration);
      c.add(CalibrationPoint{base_, 1'000'000'000ull, 1'700'000'000'000'000'000ull, 10, 0});
      c.add(CalibrationPoint{ticks(1'000'000'000'000ll), 1'000'000'000ull + 1'000'000'000'000ull,
                             1'700'000'000'000'000'000ull + 1'000'000'000'000ull, 10, 0});
      write(c);
    }
    if (!process_.empty()) {
      ChunkBuilder p(ChunkType::kProcessInfo);
      for (auto& [k, v] : process_) p.add_key_value(k, v);
      write(p);
      process_.clear();
    }
    if (!status_.empty()) {
      ChunkBuilder p(ChunkType::kCollectorStatus);
      for (auto& [k, v] : status_) p.add_key_value(k, v);
      write(p);
      status_.clear();
    }
    if (!new_strings_.empty()) {
      ChunkBuilder s(ChunkType::kStrings);
      for (auto& [id, v] : new_strings_) s.add_string(id, v);
      write(s);
      new_strings_.clear();
    }
    if (!new_codes_.empty()) {
      ChunkBuilder c(ChunkType::kCodeTable);
      for (auto& e : new_codes_) c.add(e);
      write(c);
      new_codes_.clear();
    }
    if (!new_threads_.empty()) {
      ChunkBuilder th(ChunkType::kThreads);
      for (uint32_t id : new_threads_) th.add(threads_[id]);
      write(th);
      new_threads_.clear();
    }
  }

  void write_sampling() {
    ChunkBuilder s(ChunkType::kSampling);
    s.add(summary_);
    write(s);
    ChunkBuilder w(ChunkType::kWindows);
    for (auto& e : windows_) w.add(e);
    if (!windows_.empty()) write(w);
    ChunkBuilder l(ChunkType::kSlowSteps);
    for (auto& e : slow_) l.add(e);
    if (!slow_.empty()) write(l);
  }

  void write(const ChunkBuilder& b) {
    auto bytes = b.finish();
    if (in_memory_) memory_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    else std::fwrite(bytes.data(), 1, bytes.size(), f_);
    written_ += bytes.size();
  }

  std::FILE* f_ = nullptr;
  bool open_ = false;
  bool in_memory_ = false;
  std::string memory_;  ///< the dump, when built in memory
  double tpn_;
  uint64_t base_;
  int64_t last_ns_ = 0;
  uint64_t records_ = 0, written_ = 0;
  size_t chunk_bytes_ = 1 << 20;
  bool wrote_meta_ = false;
  std::unordered_map<std::string, uint32_t> strings_;
  std::vector<std::pair<uint32_t, std::string>> new_strings_;
  std::unordered_map<std::string, uint32_t> codes_;
  std::vector<CodeEntry> new_codes_;
  std::map<uint32_t, ThreadEntry> threads_;
  std::vector<uint32_t> new_threads_;
  std::vector<std::pair<std::string, std::string>> process_, status_;
  std::vector<DropEntry> drops_;
  bool sampled_ = false;
  SamplingSummary summary_{};
  std::vector<WindowEntry> windows_;
  std::vector<SlowStepEntry> slow_;
  std::map<uint32_t, ChunkBuilder> events_;
  std::unordered_map<uint32_t, size_t> pending_bytes_;
};

}  // namespace inferscope::dump
