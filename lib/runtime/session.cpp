// Sessions, per-thread rings and the writer thread.
//
// Every recording thread owns a single-producer ring (include/inferscope/internal/hot_path.hpp). One writer
// thread per session wakes every flush period, drains all rings into EVENTS chunks and either appends them
// to the dump (stream mode) or keeps them in a bounded in-memory window (ring mode, oldest dropped first).
// Rings are owned by the process-wide registry, not by threads: a thread that exits marks its ring retired
// and the writer frees it once drained, so nothing a thread recorded is lost when it exits.
#include "runtime/session.hpp"

#include "collect/system/cgroup_cpu.hpp"
#include "dump/files.hpp"
#include "dump/path.hpp"
#include "runtime/crash_dump.hpp"
#include "runtime/dump_file.hpp"
#include "runtime/rank_info.hpp"
#include "runtime/sampler.hpp"

#include <inferscope/scope.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

// The system collector's cgroup CPU quota reader: weak, as the collectors' registration in autostart.cpp (the
// runtime does not depend on the collectors; a build without the system collector writes no quota). The header
// is included for its declaration only, so a changed signature fails to compile here.
extern "C" void inferscope_cgroup_cpu_process_info(void (*add)(void* ctx, const char* key, const char* value),
                                                   void* ctx) __attribute__((weak));

namespace inferscope::detail {
std::atomic<uint32_t> g_session{0};
std::atomic<bool> g_nvtx_emit{false};
std::atomic<uint32_t> g_step_name{~0u};
// Config::nvtx_emit's NVTX side, installed by the GPU collector (runtime::set_nvtx_hooks).
static std::atomic<void (*)(const StaticName&) noexcept> g_nvtx_push{nullptr};
static std::atomic<void (*)() noexcept> g_nvtx_pop{nullptr};
__thread ThreadState t_state __attribute__((tls_model("initial-exec")));
}  // namespace inferscope::detail

extern char** environ;

namespace inferscope::runtime {
namespace {

using dump::ChunkBuilder;
using dump::ChunkType;

uint32_t os_tid() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

struct RingEntry : detail::ThreadRing {
  uint32_t thread_id = 0;
  uint32_t epoch = 0;
  bool channel = false;
  std::atomic<bool> retired{false};
  std::unique_ptr<uint8_t[]> storage;
};

RingEntry* make_ring(uint64_t bytes) {
  uint64_t cap = 64 * 1024;
  while (cap < bytes) cap <<= 1;
  auto* e = new RingEntry;
  // Touch every page now, on the slow path: a first-touch page fault every 170 records would otherwise
  // land on the recording thread's hot path.
  e->storage.reset(new uint8_t[cap]());
  e->data = e->storage.get();
  e->capacity = cap;
  e->mask = cap - 1;
  return e;
}

enum Command : uint8_t { kCmdWake = 'W', kCmdFinish = 'F', kCmdSnapshot = 'S' };

// Set by the SIGUSR2 handler (lock-free, so async-signal-safe) beside the byte it writes to the writer's pipe: a
// snapshot is not lost when that byte cannot be written. The writer clears it; a forked child starts clear.
std::atomic<int> g_snapshot_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct SessionState {
  Config cfg;
  uint32_t epoch = 0;
  std::string output;
  bool ring_mode = false;
  bool from_env = false;
  // The path forked children's dumps are named after (<stem>.<pid>.iscope): the output before any pid suffix.
  std::string family_output;
  DumpFile file;             // stream: the dump; ring: the final snapshot's file, preopened for crash dumps
  bool write_failing = false;  // stream: the last append failed (logged once per run of failures)
  bool dump_written = false;   // the dump is complete at `output` (stop() returns it)
  std::thread writer;

  // Guarded by Global::registry.
  std::map<uint32_t, dump::ThreadEntry> threads;
  std::set<uint32_t> dirty_threads;
  std::vector<std::unique_ptr<Channel>> channels;
  // Entries thread_for_os_tid made for threads that have not recorded themselves yet (os_tid -> thread id):
  // bind_thread gives such a thread this entry instead of a second one.
  std::map<uint32_t, uint32_t> unbound_threads;
  // Names given from outside (name_os_thread) to threads that have not recorded yet (os_tid -> string id): a
  // thread takes its own when it binds, unless it named itself (set_thread_name).
  std::map<uint32_t, uint32_t> waiting_names;

  // Guarded by meta_mu.
  std::mutex meta_mu;
  std::vector<std::pair<std::string, std::string>> status;
  std::vector<std::pair<std::string, std::string>> process_extra;
  bool meta_dirty = false;
  std::map<std::pair<uint32_t, std::string>, std::pair<uint64_t, uint64_t>> extra_drops;

  // Writer thread only (and stop(), after the writer has finished).
  std::vector<dump::CalibrationPoint> calib;
  size_t calib_written = 0;
  uint32_t strings_written = 0;
  uint32_t code_written = 0;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> ring_drops;  // thread -> cumulative (records, bytes)
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> overwritten;
  std::deque<std::vector<uint8_t>> retained;  // ring mode: whole EVENTS chunks, oldest first
  uint64_t retained_bytes = 0;
  uint64_t records_written = 0;
  uint64_t drops_written_total = ~0ull;
  bool resend_threads = false;  // stream: a failed append took thread entries with it
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> write_lost;  // thread -> records, bytes of dropped appends
  crash::Image crash;           // ring mode: what a SIGABRT/SIGSEGV/SIGBUS handler writes
  std::vector<std::unique_ptr<Collector>> collectors;  // appended under collectors_mu (the writer reads it)
  std::mutex collectors_mu;

  // Snapshot requests (ring mode).
  std::mutex snap_mu;
  std::condition_variable snap_cv;
  uint64_t snaps_requested = 0;
  uint64_t snaps_done = 0;
  std::string last_snapshot;
  uint32_t flush_index = 0;
  std::atomic<int> pending_signal{0};

  // Sampled mode (mode: sampled): set at start, never changed; shared with application threads that end a step.
  bool sampled = false;
  std::shared_ptr<Sampler> sampler;
  uint32_t step_name_id = 0;
};

struct Global {
  std::mutex control;   // start / stop / flush_ring
  std::mutex registry;  // rings, thread tables, binding
  std::vector<RingEntry*> rings;
  SessionState* session = nullptr;  // the running or the last session
  uint32_t next_epoch = 1;
  uint32_t next_thread_id = 1;
  std::vector<std::function<std::unique_ptr<Collector>()>> factories;
  std::mutex factories_mu;  // register_collector; held across fork
  // The writer's wake-up pipe belongs to `owner_pid`: a forked child closes its copy and makes its own, and
  // nothing (a signal handler included) ever writes to a pipe made by another process.
  int pipe_r = -1, pipe_w = -1;
  std::atomic<pid_t> owner_pid{0};
  bool atfork_registered = false;
  std::string last_output;
  LogLevel log_level = LogLevel::kWarn;
  bool atexit_registered = false;
  std::atomic<uint64_t> threads_generation{0};  // bumped when a thread binds (session_threads_generation)
};

// Never destroyed: application threads may record while the process exits.
Global& G() {
  static Global* g = new Global;
  return *g;
}

void send_command(uint8_t c) {
  Global& g = G();
  if (g.pipe_w >= 0 && g.owner_pid.load(std::memory_order_relaxed) == ::getpid()) {
    ssize_t r;
    do r = ::write(g.pipe_w, &c, 1);
    while (r < 0 && errno == EINTR);
  }
}

thread_local std::string t_thread_name;
thread_local bool t_is_writer = false;  // the writer waits for nobody: only it makes room in the rings
thread_local bool t_exiting = false;
std::atomic<ThreadExitHook> g_thread_exit_hook{nullptr};

struct ExitGuard {
  RingEntry* entry = nullptr;
  ~ExitGuard();
};
thread_local ExitGuard t_exit_guard;

// The calling thread's names, interned before a bind takes the registry lock: the one it gave itself
// (set_thread_name) and the kernel's. A name given from outside (waiting_names) comes between the two.
struct OwnNames {
  uint32_t given = 0, kernel = 0;
};
OwnNames names_for_new_thread() {
  OwnNames n;
  if (!t_thread_name.empty()) n.given = intern(t_thread_name);
  char buf[64] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof(buf)) == 0 && buf[0]) n.kernel = intern(buf);
  return n;
}

// The name OS thread `tid` binds with (registry lock held); a waiting name is used up.
uint32_t bind_name(SessionState& s, uint32_t tid, const OwnNames& own) {
  uint32_t waiting = 0;
  if (auto w = s.waiting_names.find(tid); w != s.waiting_names.end()) {
    waiting = w->second;
    s.waiting_names.erase(w);
  }
  return own.given ? own.given : waiting ? waiting : own.kernel;
}

// ---------------------------------------------------------------------------------------------------------
// Draining and writing (writer thread)

struct Drained {
  std::vector<std::vector<uint8_t>> chunks;  // complete EVENTS chunks (header included)
};

// Copies one ring's published records into an EVENTS chunk; returns false when there was nothing new.
bool drain_ring(RingEntry* e, std::vector<uint8_t>& chunk, uint64_t& records) {
  const uint64_t pub = e->published.load(std::memory_order_acquire);
  const uint64_t tail = e->tail.load(std::memory_order_relaxed);
  if (pub == tail) return false;
  ChunkBuilder b(ChunkType::kEvents);
  dump::EventsHeader eh{e->thread_id, 0};
  b.append(&eh, sizeof(eh));
  uint64_t pos = tail;
  uint32_t n = 0;
  while (pos < pub) {
    const uint64_t off = pos & e->mask;
    const uint64_t seg = std::min<uint64_t>(pub - pos, e->capacity - off);
    const uint8_t* p = e->data + off;
    // Count records (pads excluded: they are filler) while copying the segment.
    for (uint64_t o = 0; o < seg;) {
      RecordHeader h;
      std::memcpy(&h, p + o, sizeof(h));
      if (h.kind != RecordKind::kPad) ++n;
      o += h.size ? h.size : seg;  // a zero size cannot happen; never loop forever on a corrupt ring
    }
    b.append(p, seg);
    pos += seg;
  }
  e->tail.store(pub, std::memory_order_release);
  b.add_count(n);
  records += n;
  chunk = b.finish();
  return true;
}

void drain_all(SessionState& s, Drained& out) {
  Global& g = G();
  std::vector<RingEntry*> mine;
  {
    std::lock_guard lk(g.registry);
    for (RingEntry* e : g.rings)
      if (e->epoch == s.epoch) mine.push_back(e);
  }
  std::vector<RingEntry*> done;
  for (RingEntry* e : mine) {
    // Read `retired` before draining: a retired ring gets no more records, so once drained it can go.
    const bool retired = e->retired.load(std::memory_order_acquire);
    std::vector<uint8_t> chunk;
    if (drain_ring(e, chunk, s.records_written)) out.chunks.push_back(std::move(chunk));
    s.ring_drops[e->thread_id] = {e->dropped_records.load(std::memory_order_relaxed),
                                  e->dropped_bytes.load(std::memory_order_relaxed)};
    if (retired && !e->channel) done.push_back(e);
  }
  std::lock_guard lk(g.registry);
  const uint32_t current = detail::g_session.load(std::memory_order_relaxed);
  auto gone = [&](RingEntry* e) {
    bool mine_done = std::find(done.begin(), done.end(), e) != done.end();
    bool stale = e->retired.load(std::memory_order_acquire) && e->epoch != s.epoch && e->epoch != current;
    if (mine_done || stale) {
      delete e;
      return true;
    }
    return false;
  };
  g.rings.erase(std::remove_if(g.rings.begin(), g.rings.end(), gone), g.rings.end());
}

void append_process_info(SessionState& s, std::vector<uint8_t>& out) {
  ChunkBuilder b(ChunkType::kProcessInfo);
  b.add_key_value("pid", std::to_string(::getpid()));
  b.add_key_value("ppid", std::to_string(::getppid()));
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  b.add_key_value("hostname", host);
  // The CPUs this process may run on (affinity, not the machine's count): what worker suggestions can use.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) b.add_key_value("cpus_allowed", std::to_string(CPU_COUNT(&allowed)));
  // A container's CPU limit (a cgroup quota), which the affinity above does not show: cpu_quota,
  // cpu_quota_period_us, cpu_quota_source.
  if (inferscope_cgroup_cpu_process_info)
    inferscope_cgroup_cpu_process_info(
        [](void* to, const char* k, const char* v) { static_cast<ChunkBuilder*>(to)->add_key_value(k, v); }, &b);
  for (const auto& [k, v] : detail::rank_info(std::getenv)) b.add_key_value(k, v);
  std::ifstream cl("/proc/self/cmdline", std::ios::binary);
  std::string cmd((std::istreambuf_iterator<char>(cl)), std::istreambuf_iterator<char>());
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  b.add_key_value("cmdline", cmd);
  char exe[4096] = {};
  if (::readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0) b.add_key_value("exe", exe);
  b.add_key_value("clock", clock_name());
  b.add_key_value("start_realtime_ns", s.calib.empty() ? "0" : std::to_string(s.calib.front().realtime_ns));
  b.add_key_value("buffer_mode", s.ring_mode ? "ring" : "stream");
  b.add_key_value("trace_size_mb", std::to_string(s.cfg.trace_size_mb));
  b.add_key_value("thread_buffer_kb", std::to_string(s.cfg.thread_buffer_kb));
  b.add_key_value("inferscope_version", "0.1.0");
  b.add_key_value("session_epoch", std::to_string(s.epoch));
  if (s.sampler)
    for (auto& [k, v] : s.sampler->process_info()) b.add_key_value(k, v);
  b.finish_into(out);
}

void append_meta_kv(SessionState& s, std::vector<uint8_t>& out, bool all) {
  std::lock_guard lk(s.meta_mu);
  if (!all && !s.meta_dirty) return;
  if (!all) s.meta_dirty = false;
  if (!s.status.empty()) {
    ChunkBuilder b(ChunkType::kCollectorStatus);
    for (auto& [k, v] : s.status) b.add_key_value(k, v);
    b.finish_into(out);
  }
  if (!s.process_extra.empty()) {
    ChunkBuilder b(ChunkType::kProcessInfo);
    for (auto& [k, v] : s.process_extra) b.add_key_value(k, v);
    b.finish_into(out);
  }
}

// Strings and code entries new since the cursors (or all of them for a ring snapshot).
void append_tables(SessionState& s, std::vector<uint8_t>& out, bool all) {
  uint32_t first = all ? 1 : std::max<uint32_t>(1, s.strings_written);
  ChunkBuilder sb(ChunkType::kStrings);
  uint32_t next = 0;
  strings_since(first, [&](uint32_t id, std::string_view v) { sb.add_string(id, v); }, &next);
  if (!sb.empty()) sb.finish_into(out);
  if (!all) s.strings_written = next;
  ChunkBuilder cb(ChunkType::kCodeTable);
  code_since(all ? 0 : s.code_written, [&](const dump::CodeEntry& c) { cb.add(c); }, &next);
  if (!cb.empty()) cb.finish_into(out);
  if (!all) s.code_written = next;
}

void append_threads(SessionState& s, std::vector<uint8_t>& out, bool all) {
  ChunkBuilder b(ChunkType::kThreads);
  {
    std::lock_guard lk(G().registry);
    if (all || s.resend_threads) {
      for (auto& [id, t] : s.threads) b.add(t);
      if (!all) s.dirty_threads.clear(), s.resend_threads = false;
    } else {
      for (uint32_t id : s.dirty_threads) b.add(s.threads[id]);
      s.dirty_threads.clear();
    }
  }
  if (!b.empty()) b.finish_into(out);
}

void append_calibration(SessionState& s, std::vector<uint8_t>& out, bool all) {
  ChunkBuilder b(ChunkType::kCalibration);
  for (size_t i = all ? 0 : s.calib_written; i < s.calib.size(); ++i) b.add(s.calib[i]);
  if (!all) s.calib_written = s.calib.size();
  if (!b.empty()) b.finish_into(out);
}

// The drop reasons the writer itself counts. They are interned when the session starts: current_drops() runs
// after a buffer's string table is built, so a reason first interned there would be missing from that buffer (a
// dump whose only successful append after failed ones was the last named its write_failed drops "<string N>").
constexpr const char* kDropReasons[] = {"buffer_full", "ring_overwritten", "write_failed"};

std::vector<dump::DropEntry> current_drops(SessionState& s) {
  std::vector<dump::DropEntry> d;
  const uint32_t full = intern("buffer_full");
  for (auto& [tid, c] : s.ring_drops)
    if (c.first) d.push_back({tid, full, c.first, c.second});
  const uint32_t over = intern("ring_overwritten");
  for (auto& [tid, c] : s.overwritten) d.push_back({tid, over, c.first, c.second});
  const uint32_t lost = s.write_lost.empty() ? 0 : intern("write_failed");
  for (auto& [tid, c] : s.write_lost) d.push_back({tid, lost, c.first, c.second});
  if (s.sampler)
    for (auto& [tid, reason, records, bytes] : s.sampler->drops()) d.push_back({tid, intern(reason), records, bytes});
  std::lock_guard lk(s.meta_mu);
  for (auto& [key, c] : s.extra_drops) d.push_back({key.first, intern(key.second), c.first, c.second});
  return d;
}

uint64_t total_drops(const std::vector<dump::DropEntry>& d) {
  uint64_t n = 0;
  for (auto& e : d) n += e.records;
  return n;
}

void append_drops(SessionState& s, std::vector<uint8_t>& out, bool all) {
  auto d = current_drops(s);
  uint64_t total = total_drops(d);
  // Drop counts are cumulative; write them when they change (and in every snapshot).
  if (!all && total == s.drops_written_total) return;
  if (!all) s.drops_written_total = total;
  if (d.empty()) return;
  ChunkBuilder b(ChunkType::kDrops);
  for (auto& e : d) b.add(e);
  b.finish_into(out);
}

void append_end(SessionState& s, std::vector<uint8_t>& out) {
  // Sampled mode writes the windows' records only: what was sampled out is in the SAMPLING chunk, not dropped.
  const uint64_t written = s.sampler ? s.sampler->records_kept() : s.records_written;
  dump::EndEntry end{detail::now(), written, total_drops(current_drops(s))};
  ChunkBuilder b(ChunkType::kEnd);
  b.add(end);
  b.finish_into(out);
}

// Where the stream's metadata cursors stood before a buffer was built. A buffer that cannot be written is
// dropped whole, and what it carried besides records (new strings, code, calibration, drops) goes again.
struct Cursors {
  uint32_t strings = 0, code = 0;
  size_t calib = 0;
  uint64_t drops_total = 0;
};

Cursors cursors_of(const SessionState& s) {
  return {s.strings_written, s.code_written, s.calib_written, s.drops_written_total};
}

// The records of the EVENTS chunks in `buf` (whole chunks) are lost to a failed write: counted per thread as
// "write_failed" drops and taken out of the records written, so END says they were dropped, not in the file.
void count_lost(SessionState& s, const std::vector<uint8_t>& buf) {
  size_t off = 0;
  while (off + sizeof(dump::ChunkHeader) + sizeof(dump::EventsHeader) <= buf.size()) {
    dump::ChunkHeader h;
    std::memcpy(&h, buf.data() + off, sizeof(h));
    if (h.type == static_cast<uint32_t>(ChunkType::kEvents)) {
      dump::EventsHeader eh;
      std::memcpy(&eh, buf.data() + off + sizeof(h), sizeof(eh));
      auto& c = s.write_lost[eh.thread_id];
      c.first += h.count;
      c.second += h.length;
      s.records_written -= std::min<uint64_t>(h.count, s.records_written);
    }
    off += sizeof(h) + h.length;
  }
}

// Appends `buf` whole, or drops it whole (DumpFile truncates a partial write away) and counts what it held.
void stream_write(SessionState& s, std::vector<uint8_t>& buf, const Cursors& before) {
  if (buf.empty() || !s.file.is_open()) return buf.clear();
  if (s.file.append(buf.data(), buf.size())) {
    if (s.write_failing)
      log(LogLevel::kWarn, "writing " + s.file.written_path() + " works again; what could not be written is "
                           "counted as dropped (write_failed)");
    s.write_failing = false;
    return buf.clear();
  }
  const int err = errno;
  count_lost(s, buf);
  s.strings_written = before.strings;
  s.code_written = before.code;
  s.calib_written = before.calib;
  s.drops_written_total = before.drops_total;
  s.resend_threads = true;
  {
    std::lock_guard lk(s.meta_mu);
    s.meta_dirty = true;
  }
  if (!s.write_failing)
    log(LogLevel::kError, "writing " + s.file.written_path() + " failed: " + std::strerror(err) +
                              "; records that cannot be written are dropped whole and counted (write_failed), "
                              "the dump keeps whole chunks only, and writing is tried again every flush");
  s.write_failing = true;
  buf.clear();
}

// Ring mode: keep the newest chunks within the budget; what falls out is counted per thread.
void retain(SessionState& s, std::vector<uint8_t>&& chunk) {
  const uint64_t budget = s.cfg.trace_size_mb * 1024 * 1024;
  s.retained_bytes += chunk.size();
  s.retained.push_back(std::move(chunk));
  while (s.retained_bytes > budget && s.retained.size() > 1) {
    auto& old = s.retained.front();
    dump::ChunkHeader h;
    std::memcpy(&h, old.data(), sizeof(h));
    dump::EventsHeader eh;
    std::memcpy(&eh, old.data() + sizeof(h), sizeof(eh));
    auto& c = s.overwritten[eh.thread_id];
    c.first += h.count;
    c.second += h.length;
    s.retained_bytes -= old.size();
    s.retained.pop_front();
  }
}

std::string snapshot_path(SessionState& s, bool final) {
  if (final) return s.output;
  return dump::insert_suffix(s.output, "flush" + std::to_string(++s.flush_index), ".iscope");
}

// Ring mode: a whole dump of the current window.
std::vector<uint8_t> snapshot_bytes(SessionState& s) {
  std::vector<uint8_t> out;
  auto fh = dump::make_file_header(dump::kFileRingSnapshot | (s.sampler ? dump::kFileSampled : 0u));
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  append_process_info(s, out);
  append_meta_kv(s, out, true);
  append_tables(s, out, true);
  append_threads(s, out, true);
  append_calibration(s, out, true);
  if (s.sampler) s.sampler->write(out, s.step_name_id);
  for (auto& c : s.retained) out.insert(out.end(), c.begin(), c.end());
  append_drops(s, out, true);
  append_end(s, out);
  return out;
}

// A ring snapshot (flush_ring, SIGUSR2): written to a temporary beside `path` and renamed over it.
bool write_snapshot(SessionState& s, const std::string& path) {
  const std::vector<uint8_t> out = snapshot_bytes(s);
  DumpFile f;
  std::string error;
  if (f.open(path, /*in_place=*/false, error, /*lock=*/false) && f.rewrite(out.data(), out.size()) && f.commit(error))
    return true;
  if (error.empty()) error = "cannot write " + f.written_path() + ": " + std::strerror(errno);
  log(LogLevel::kError, "ring snapshot: " + error);
  f.discard();
  return false;
}

// Ring mode, each cycle: the drained chunks join the window, and the crash image follows (what a SIGABRT,
// SIGSEGV or SIGBUS handler writes): new metadata appended, the drop table and counts replaced.
void keep_in_window(SessionState& s, Drained& d) {
  std::vector<uint8_t> meta;
  append_meta_kv(s, meta, false);
  append_tables(s, meta, false);
  append_threads(s, meta, false);
  append_calibration(s, meta, false);
  if (!crash::begin_update()) return;  // a crash dump is being written from the image: change nothing
  for (auto& c : d.chunks) retain(s, std::move(c));
  if (!meta.empty()) s.crash.meta.push_back(std::move(meta));
  crash::end_update();
  // The drop table takes locks (meta_mu, the string table): built outside the update, swapped in after.
  std::vector<uint8_t> drops;
  append_drops(s, drops, true);
  const uint64_t dropped = total_drops(current_drops(s));
  if (!crash::begin_update()) return;
  s.crash.drops.swap(drops);
  s.crash.records_written = s.records_written;
  s.crash.records_dropped = dropped;
  crash::end_update();
}

// The collectors started so far. They start after the writer, so the list may grow while it runs; they are
// never removed before the writer has finished, so the pointers stay valid outside the lock.
std::vector<Collector*> collectors_of(SessionState& s) {
  std::vector<Collector*> cs;
  std::lock_guard lk(s.collectors_mu);
  for (auto& c : s.collectors) cs.push_back(c.get());
  return cs;
}

// Sampled mode, each cycle: windows open and close first (so the pre-roll a slow step reaches back to is still
// there), then the drained records go to the window their time falls in.
void sample(SessionState& s, Drained& d, bool finishing) {
  s.sampler->before_drain(collectors_of(s), finishing);
  drain_all(s, d);
  s.sampler->route(d.chunks);
}

// One writer cycle: drain, then hand the chunks to the sink. Strings are written after the drain so every
// id a drained record uses is already in the table (it was interned before the record was written).
// `finishing`: the last cycle of a stopping session (collectors are stopped: nothing is switched).
void cycle(SessionState& s, std::vector<uint8_t>& buf, bool finishing = false) {
  const Cursors before = cursors_of(s);
  Drained d;
  if (s.sampler) return sample(s, d, finishing);
  drain_all(s, d);
  if (s.ring_mode) return keep_in_window(s, d);
  append_meta_kv(s, buf, false);
  append_tables(s, buf, false);
  append_threads(s, buf, false);
  append_calibration(s, buf, false);
  for (auto& c : d.chunks) buf.insert(buf.end(), c.begin(), c.end());
  append_drops(s, buf, false);
  stream_write(s, buf, before);
}

// END could not be written (a disk still full at stop): the dump cannot say what it lost after its last drop
// table, so this line does, with the count of every record a failed write dropped.
void say_not_complete(const SessionState& s) {
  uint64_t lost = 0;
  for (const auto& [tid, c] : s.write_lost) lost += c.first;
  log(LogLevel::kError, "the dump " + s.file.written_path() + " is not complete (END could not be written): " +
                            std::to_string(lost) + " records could not be written (write_failed), and those lost "
                            "after the last drop table in the file are counted nowhere in it");
}

// Stream mode: the last metadata, the drop table and END; the file renamed into place when it is a
// temporary beside an earlier dump (only when END was written: an incomplete dump never replaces one).
bool finish_stream(SessionState& s) {
  const Cursors before = cursors_of(s);
  std::vector<uint8_t> buf;
  append_meta_kv(s, buf, false);
  append_tables(s, buf, false);
  append_threads(s, buf, false);
  append_calibration(s, buf, false);
  append_drops(s, buf, true);
  append_end(s, buf);
  stream_write(s, buf, before);
  const bool ended = !s.write_failing;
  std::string error;
  const bool committed = s.file.commit(error, /*replace=*/ended);
  if (!ended) say_not_complete(s);
  if (!committed) log(LogLevel::kError, error);
  return ended && committed;
}

// Ring mode: the window into the file preopened at start (no crash dump can use it from here on), renamed
// over the output.
bool finish_ring(SessionState& s) {
  const std::vector<uint8_t> out = snapshot_bytes(s);
  if (!crash::begin_update()) return false;
  crash::arm(nullptr);
  crash::end_update();
  std::string error;
  if (!s.file.rewrite(out.data(), out.size())) {
    log(LogLevel::kError, "cannot write " + s.file.written_path() + ": " + std::strerror(errno) + "; no dump at " +
                              s.output);
    s.file.discard();
    return false;
  }
  if (!s.file.commit(error)) {
    log(LogLevel::kError, error);
    return false;
  }
  return true;
}

// The last writer cycle (on the writer thread, or the thread that stops from a signal): the final
// calibration point, the last drain, and END. True when the dump is complete at the output.
bool finish_writing(SessionState& s) {
  s.calib.push_back(take_calibration_point());
  std::vector<uint8_t> buf;
  cycle(s, buf, /*finishing=*/true);
  s.dump_written = s.ring_mode ? finish_ring(s) : finish_stream(s);
  return s.dump_written;
}

bool stop_impl(bool from_writer, int signal_number, bool* written = nullptr);

void writer_main(SessionState* s) {
  Global& g = G();
  std::vector<uint8_t> buf;
  auto next_calib = std::chrono::steady_clock::now() + std::chrono::milliseconds(s->cfg.calibration_period_ms);
  for (;;) {
    pollfd p{g.pipe_r, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(s->cfg.flush_period_ms));
    bool finish = false, snapshot = false;
    int sig = 0;
    if (r > 0) {
      uint8_t cmds[64];
      ssize_t n = ::read(g.pipe_r, cmds, sizeof(cmds));
      for (ssize_t i = 0; i < n; ++i) {
        if (cmds[i] == kCmdFinish) finish = true;
        else if (cmds[i] == kCmdSnapshot) snapshot = true;
        else if (cmds[i] == SIGINT || cmds[i] == SIGTERM) sig = cmds[i];
        else if (cmds[i] == SIGUSR2) snapshot = true;
      }
    }
    if (finish) break;
    if (sig) {
      // Runs the same stop as the application would, then lets the signal's default action happen. If the
      // application is stopping right now, it re-raises the signal once the dump is written.
      if (stop_impl(true, sig)) return;
      s->pending_signal.store(sig);
    }
    for (Collector* c : collectors_of(*s)) c->flush();
    // SIGUSR2's flag: set even when the handler's byte could not be written (a full pipe).
    if (g_snapshot_signal.exchange(0, std::memory_order_acq_rel)) snapshot = true;
    if (std::chrono::steady_clock::now() >= next_calib) {
      s->calib.push_back(take_calibration_point());
      next_calib += std::chrono::milliseconds(s->cfg.calibration_period_ms);
    }
    cycle(*s, buf);
    if (snapshot && s->ring_mode) {
      std::string path = snapshot_path(*s, false);
      bool ok = write_snapshot(*s, path);
      std::lock_guard lk(s->snap_mu);
      s->last_snapshot = ok ? path : std::string();
      s->snaps_done = s->snaps_requested ? s->snaps_requested : s->snaps_done + 1;
      s->snap_cv.notify_all();
    }
  }
  finish_writing(*s);
}

// --- signals ---------------------------------------------------------------------------------------------
//
// SIGINT/SIGTERM handlers only ever replace a default action (SIG_DFL), and remember what they replaced: in any
// process but the one that installed them (a child made by clone() without fork's handlers, or before they ran)
// they act exactly as that previous disposition would. Only the owner writes to its own writer's pipe.
// SIGUSR2 (ring and sampled modes) is chained instead: over a handler the program installed first, ours asks for
// the snapshot and then calls the program's, so both happen; a program that ignores SIGUSR2 keeps ignoring it.

constexpr int kMaxSignal = 65;
struct sigaction g_prev_action[kMaxSignal];
std::atomic<bool> g_ours[kMaxSignal];
std::atomic<bool> g_chained[kMaxSignal];  // ours runs the program's handler after its own work
std::atomic<pid_t> g_handler_owner{0};
std::atomic<bool> g_deferred_python_signals{false};  // SIGTERM/SIGUSR2 wait for Python's start-up (see below)

// What the signal would have done without us, in this process.
void chain_signal(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_prev_action[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler == SIG_DFL) {
    ::sigaction(sig, &prev, nullptr);  // blocked while this handler runs: the default action follows at once
    ::raise(sig);
  } else if (prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
}

// The program's own handler, which ours was installed over (never a default action or SIG_IGN: see
// install_chained_handler).
void call_program_handler(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_prev_action[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
}

void handle_signal(int sig, siginfo_t* info, void* context) {
  // Async-signal-safe: a flag and one byte to this process's own writer thread, which writes the dump (and for
  // SIGINT/SIGTERM re-raises); no lock, no allocation.
  const int saved_errno = errno;
  Global& g = G();
  if (::getpid() == g_handler_owner.load(std::memory_order_relaxed) &&
      g.owner_pid.load(std::memory_order_relaxed) == ::getpid() && g.pipe_w >= 0) {
    if (sig == SIGUSR2) g_snapshot_signal.store(1, std::memory_order_release);
    uint8_t c = static_cast<uint8_t>(sig);
    [[maybe_unused]] ssize_t r = ::write(g.pipe_w, &c, 1);
    if (g_chained[sig].load(std::memory_order_relaxed)) call_program_handler(sig, info, context);
  } else {
    chain_signal(sig, info, context);
  }
  errno = saved_errno;
}

bool handler_is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == handle_signal;
}

void install_handler(int sig) {
  struct sigaction old{};
  if (::sigaction(sig, nullptr, &old) != 0) return;
  if (handler_is_ours(old)) {
    g_handler_owner.store(::getpid());
    return;
  }
  // Only take over the default action: a program that handles or ignores the signal keeps doing so, and
  // its own exit path (atexit) writes the dump.
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  g_prev_action[sig] = old;
  struct sigaction sa{};
  sa.sa_sigaction = handle_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  g_handler_owner.store(::getpid());
  g_ours[sig].store(true);
  ::sigaction(sig, &sa, nullptr);
}

// SIGUSR2: ours also over a handler the program installed first (then chained to it), not over SIG_IGN.
void install_chained_handler(int sig) {
  struct sigaction old{};
  if (::sigaction(sig, nullptr, &old) != 0) return;
  if (handler_is_ours(old)) {
    g_handler_owner.store(::getpid());
    return;
  }
  const bool is_default = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return;
  g_prev_action[sig] = old;
  struct sigaction sa{};
  sa.sa_sigaction = handle_signal;
  sa.sa_mask = old.sa_mask;  // the program's handler runs with the signals it asked to block
  sa.sa_flags = SA_RESTART | SA_SIGINFO | (old.sa_flags & SA_ONSTACK);
  g_handler_owner.store(::getpid());
  g_chained[sig].store(!is_default);
  g_ours[sig].store(true);
  ::sigaction(sig, &sa, nullptr);
}

// A forked child: what was ours goes back to what it replaced (the child's own session, if it has one,
// installs them again for itself). A handler the program installed since is left alone.
void restore_handlers_in_child() {
  for (int sig = 1; sig < kMaxSignal; ++sig) {
    if (!g_ours[sig].load()) continue;
    g_ours[sig].store(false);
    g_chained[sig].store(false);
    struct sigaction cur{};
    if (::sigaction(sig, nullptr, &cur) == 0 && handler_is_ours(cur)) ::sigaction(sig, &g_prev_action[sig], nullptr);
  }
  g_handler_owner.store(0);
  g_deferred_python_signals.store(false);
  g_snapshot_signal.store(0);
}

// Ends this process by `sig` as it would have ended without us (the dump is written).
void reraise(int sig) {
  if (sig <= 0 || sig >= kMaxSignal) return;
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, g_ours[sig].load() ? &g_prev_action[sig] : &dfl, nullptr);
  ::raise(sig);
}

// A Python interpreter lives in this process (the executable or libpython exports the C API).
int (*python_is_initialized())() {
  return reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
}

void install_session_handlers(const SessionState& s) {
  auto py_initialized = python_is_initialized();
  // Python reads every signal's disposition once, when it starts, and shows a handler it did not install as
  // None (signal.getsignal; a saved None cannot be restored). Installed before that (LD_PRELOAD), ours would
  // change what the program sees, so they wait until inferscope_py is imported (install_deferred_...).
  const bool wait_for_python = py_initialized && !py_initialized();
  if (s.from_env && s.cfg.handle_signals) {
    // SIGINT stays Python's own: KeyboardInterrupt runs the program's except/finally and atexit, which
    // writes the dump.
    if (!py_initialized) install_handler(SIGINT);
    if (!wait_for_python) install_handler(SIGTERM);
  }
  if (s.ring_mode && !wait_for_python) {
    install_chained_handler(SIGUSR2);
    if (!s.sampled) crash::install_handlers();
  }
  g_deferred_python_signals.store(wait_for_python);
}

void at_exit_stop() { stop_impl(false, 0); }

// Starts one collector in session `s` (control lock held) and records its one-line status.
bool start_collector(SessionState& s, std::unique_ptr<Collector> c) {
  if (!c || !c->wanted(s.cfg)) return false;
  std::string status;
  try {
    status = c->start(s.cfg);
  } catch (const std::exception& e) {
    status = std::string("off: failed to start: ") + e.what();
  }
  set_collector_status(c->name(), status);
  if (status.rfind("off", 0) == 0) log(LogLevel::kInfo, std::string(c->name()) + " collector " + status);
  std::lock_guard lk(s.collectors_mu);
  s.collectors.push_back(std::move(c));
  return true;
}

// --- fork --------------------------------------------------------------------------------------------------
//
// A child gets a clean runtime: every runtime lock free (the ones with data behind them are held across
// fork(), so the child's copy is whole), no writer thread, no inherited pipe, signal handlers back to what
// they replaced, and either a session of its own (follow_children) or none: g_session is 0, so its hot path
// costs one load. The parent's session goes on untouched.

std::mutex& device_locations_mutex();

void before_fork() {
  Global& g = G();
  g.registry.lock();  // before the string table: open_channel() interns while holding the registry
  strings_lock_for_fork();
  g.factories_mu.lock();
  device_locations_mutex().lock();
}

void after_fork_in_parent() {
  Global& g = G();
  device_locations_mutex().unlock();
  g.factories_mu.unlock();
  strings_unlock_after_fork(false);
  g.registry.unlock();
}

// The parent's session as this child found it: abandoned (its writer, collectors and rings stay in the parent).
struct Inherited {
  bool follow = false;
  bool from_env = false;
  Config cfg;
  std::string family_output;
};

Inherited abandon_parent_session(Global& g) {
  Inherited in;
  SessionState* s = g.session;
  if (s && detail::g_session.load() == s->epoch) {
    in = Inherited{s->cfg.follow_children, s->from_env, s->cfg, s->family_output};
  }
  detail::g_session.store(0, std::memory_order_seq_cst);
  detail::g_nvtx_emit.store(false, std::memory_order_relaxed);
  detail::g_step_name.store(~0u, std::memory_order_relaxed);  // the parent's sampler is the parent's
  if (s) s->file.abandon();  // the parent's dump (and its lock) are the parent's alone
  // Kept, never freed: its threads and locks do not exist here, so nothing may run its destructors. Held from a
  // static so the memory stays reachable (a leak checker in the child reports nothing).
  static auto* abandoned = new std::pair<std::vector<SessionState*>, std::vector<RingEntry*>>();
  if (s) abandoned->first.push_back(s);
  abandoned->second.insert(abandoned->second.end(), g.rings.begin(), g.rings.end());
  g.session = nullptr;
  g.rings.clear();
  return in;
}

void after_fork_in_child() {
  Global& g = G();
  // The thread that held these in the parent does not exist here (placement new: a held lock's owner id
  // would be meaningless).
  new (&g.control) std::mutex;
  new (&g.registry) std::mutex;
  new (&g.factories_mu) std::mutex;
  new (&device_locations_mutex()) std::mutex;
  strings_unlock_after_fork(true);
  Inherited in = abandon_parent_session(g);
  if (g.pipe_r >= 0) ::close(g.pipe_r);
  if (g.pipe_w >= 0) ::close(g.pipe_w);
  g.pipe_r = g.pipe_w = -1;
  g.owner_pid.store(::getpid());
  restore_handlers_in_child();
  crash::restore_in_child();
  if (!in.follow) return;
  Config cfg = in.cfg;
  const std::string pid = std::to_string(::getpid());
  cfg.output = dump::insert_suffix(in.family_output, pid);
  if (!cfg.report.empty()) cfg.report = dump::insert_suffix(cfg.report, pid);
  // CUDA (and NVML) cannot be used in a child forked from a process that initialised them: the child records
  // its CPU side. (A multiprocessing "spawn" child is a fresh process and records everything.)
  cfg.cupti = false;
  cfg.nvml = false;
  start_session(cfg, in.from_env, in.family_output, /*fork_child=*/true);
}

void register_fork_handlers(Global& g) {
  if (g.atfork_registered) return;
  g.atfork_registered = true;
  ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

// The writer's pipe, made by (and for) this process.
bool ensure_pipe(Global& g) {
  if (g.pipe_r >= 0 && g.owner_pid.load() == ::getpid()) return true;
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    log(LogLevel::kError, std::string("start: cannot create the writer's pipe: ") + std::strerror(errno));
    return false;
  }
  g.pipe_r = p[0];
  g.pipe_w = p[1];
  g.owner_pid.store(::getpid());
  return true;
}

// INFERSCOPE_REPORT: the runtime never links the analyzer (by design the hot path never includes analysis
// code), so it runs the iscope-analyze tool installed beside the library, or the one on PATH.
void write_report_at_exit(const std::string& dump_path, const std::string& report, const std::string& step) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("INFERSCOPE_ANALYZE")) candidates.emplace_back(env);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&write_report_at_exit), &info) && info.dli_fname) {
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    candidates.push_back(dir + "../bin/iscope-analyze");                      // installed
    candidates.push_back(dir + "../../tools/iscope-analyze/iscope-analyze");  // build tree
  }
  std::string tool = "iscope-analyze";
  for (auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) {
      tool = c;
      break;
    }
  std::vector<char*> argv{const_cast<char*>(tool.c_str()), const_cast<char*>(dump_path.c_str()),
                          const_cast<char*>("-o"), const_cast<char*>(report.c_str())};
  if (!step.empty()) {
    argv.push_back(const_cast<char*>("--step"));
    argv.push_back(const_cast<char*>(step.c_str()));
  }
  argv.push_back(nullptr);
  // The analyzer must not record itself.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "INFERSCOPE_", 11) != 0 && std::strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        std::strncmp(*e, "CUDA_INJECTION64_PATH=", 22) != 0)
      env_store.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawnp(&pid, tool.c_str(), nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    log(LogLevel::kError, "cannot run " + tool + " to write " + report + ": " + std::strerror(rc));
    return;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    log(LogLevel::kError, tool + " was killed by signal " + std::to_string(WTERMSIG(status)) + " writing " + report);
  else if (WEXITSTATUS(status) != 0)
    log(LogLevel::kError, tool + " could not write " + report + " (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
}

// Stops the running session; `written` (optional): whether its dump is complete at its output. From the
// writer thread (a signal), gives up when the application holds the control lock (it is stopping already)
// and returns false.
bool stop_impl(bool from_writer, int signal_number, bool* written) {
  Global& g = G();
  SessionState* s = nullptr;
  {
    std::unique_lock ctl(g.control, std::defer_lock);
    if (from_writer) {
      if (!ctl.try_lock()) return false;
    } else {
      ctl.lock();
    }
    s = g.session;
    if (!s || detail::g_session.load() != s->epoch) {
      s = nullptr;
    } else {
      // Collectors hand over what they buffer while the session still records.
      for (auto& c : s->collectors) c->stop();
      {
        std::lock_guard lk(g.registry);
        detail::g_session.store(0, std::memory_order_seq_cst);
        detail::g_step_name.store(~0u, std::memory_order_relaxed);
      }
      if (from_writer) {
        finish_writing(*s);
        s->writer.detach();
      } else {
        send_command(kCmdFinish);
        s->writer.join();
      }
      std::lock_guard lk(g.registry);
      for (RingEntry* e : g.rings)
        if (e->epoch == s->epoch && e->channel) e->retired.store(true);
      for (auto& ch : s->channels) ch->close();
      std::lock_guard sl(s->snap_mu);
      s->snap_cv.notify_all();
    }
  }
  if (written) *written = s && s->dump_written;
  if (s && s->from_env && !s->cfg.report.empty()) write_report_at_exit(s->output, s->cfg.report, s->cfg.step);
  if (!signal_number && s) signal_number = s->pending_signal.load();
  if (signal_number) reraise(signal_number);
  return true;
}

}  // namespace

void install_deferred_signal_handlers() {
  Global& g = G();
  std::lock_guard ctl(g.control);
  SessionState* s = g.session;
  if (!g_deferred_python_signals.exchange(false) || !s || detail::g_session.load() != s->epoch) return;
  if (g.owner_pid.load() != ::getpid()) return;
  if (s->from_env && s->cfg.handle_signals) install_handler(SIGTERM);
  if (s->ring_mode) {
    install_chained_handler(SIGUSR2);
    if (!s->sampled) crash::install_handlers();
  }
}

std::string finish_session_of_this_process() {
  if (detail::g_session.load() == 0 || G().owner_pid.load() != ::getpid()) return {};
  std::string path;
  {
    std::lock_guard ctl(G().control);
    SessionState* s = G().session;
    if (!s || detail::g_session.load() != s->epoch) return {};
    path = s->ring_mode ? snapshot_path(*s, true) : s->output;
  }
  stop_impl(false, 0);
  return path;
}

// ---------------------------------------------------------------------------------------------------------

void log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) > static_cast<int>(G().log_level)) return;
  std::string line = "inferscope: " + message + "\n";
  [[maybe_unused]] ssize_t r = ::write(2, line.data(), line.size());
}

void register_collector(std::function<std::unique_ptr<Collector>()> factory) {
  // Called with the control lock held when start() registers the built-in collectors.
  std::lock_guard lk(G().factories_mu);
  G().factories.push_back(std::move(factory));
}

bool attach_collector(std::unique_ptr<Collector> collector) {
  Global& g = G();
  std::lock_guard ctl(g.control);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return false;
  return start_collector(*s, std::move(collector));
}

void set_collector_status(const std::string& collector, const std::string& status) {
  SessionState* s = G().session;
  if (!s) return;
  std::lock_guard lk(s->meta_mu);
  for (auto& [k, v] : s->status)
    if (k == collector) {
      v = status;
      s->meta_dirty = true;
      return;
    }
  s->status.emplace_back(collector, status);
  s->meta_dirty = true;
}

void set_process_info(const std::string& key, const std::string& value) {
  SessionState* s = G().session;
  if (!s) return;
  std::lock_guard lk(s->meta_mu);
  s->process_extra.emplace_back(key, value);
  s->meta_dirty = true;
}

std::string format_pci_location(uint32_t domain, uint32_t bus, uint32_t device) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x", domain & 0xffffu, bus & 0xffu, device & 0xffu);
  return buf;
}

namespace {
struct CudaDeviceLocations {
  std::mutex mu;
  std::vector<std::string> locations;
  std::atomic<uint64_t> generation{0};
};
CudaDeviceLocations& device_locations() {
  static auto* d = new CudaDeviceLocations;  // never destroyed: collector threads may ask while the process exits
  return *d;
}
std::mutex& device_locations_mutex() { return device_locations().mu; }
}  // namespace

void set_cuda_device_locations(std::vector<std::string> locations) {
  auto& d = device_locations();
  std::lock_guard lk(d.mu);
  d.locations = std::move(locations);
  d.generation.fetch_add(1, std::memory_order_release);
}

std::vector<std::string> cuda_device_locations(uint64_t* generation) {
  auto& d = device_locations();
  std::lock_guard lk(d.mu);
  if (generation) *generation = d.generation.load(std::memory_order_relaxed);
  return d.locations;
}

uint64_t cuda_device_locations_generation() {
  return device_locations().generation.load(std::memory_order_acquire);
}

void add_drops(uint32_t thread_id, std::string_view reason, uint64_t records, uint64_t bytes) {
  SessionState* s = G().session;
  if (!s) return;
  intern(reason);  // now, so the next buffer's string table names it (see kDropReasons)
  std::lock_guard lk(s->meta_mu);
  auto& c = s->extra_drops[{thread_id, std::string(reason)}];
  c.first += records;
  c.second += bytes;
}

void set_nvtx_hooks(void (*push)(const detail::StaticName&) noexcept, void (*pop)() noexcept) {
  detail::g_nvtx_pop.store(pop, std::memory_order_release);
  detail::g_nvtx_push.store(push, std::memory_order_release);
}

size_t live_ring_count() {
  std::lock_guard lk(G().registry);
  return G().rings.size();
}

const Config& active_config() {
  static const Config defaults;
  SessionState* s = G().session;
  return s ? s->cfg : defaults;
}

bool Channel::write(const void* record, uint32_t size, uint32_t max_wait_ms) {
  // On the writer thread (a collector flushing from a signal-initiated stop) waiting cannot help: no one
  // else drains, so a full ring drops and counts at once.
  if (t_is_writer) max_wait_ms = 0;
  std::lock_guard lk(mu_);
  if (!ring_) return false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_wait_ms);
  for (;;) {
    uint8_t* p = detail::ring_try_reserve(ring_, size);
    if (p) {
      std::memcpy(p, record, size);
      detail::ring_commit(ring_, size);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      detail::count_drop(ring_, size);
      return false;
    }
    send_command(kCmdWake);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

Channel* open_channel(std::string_view name) {
  Global& g = G();
  std::lock_guard lk(g.registry);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return nullptr;
  RingEntry* e = make_ring(std::max<uint64_t>(8ull << 20, uint64_t(s->cfg.thread_buffer_kb) * 1024));
  e->thread_id = g.next_thread_id++;
  e->epoch = s->epoch;
  e->channel = true;
  g.rings.push_back(e);
  dump::ThreadEntry t{e->thread_id, 0, static_cast<uint32_t>(::getpid()), intern(name), detail::now(), 0,
                      dump::kThreadChannel, 0};
  s->threads[e->thread_id] = t;
  s->dirty_threads.insert(e->thread_id);
  s->channels.push_back(std::unique_ptr<Channel>(new Channel));
  Channel* c = s->channels.back().get();
  c->ring_ = e;
  c->thread_id_ = e->thread_id;
  return c;
}

uint32_t current_thread_id() {
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return 0;
  if (detail::t_state.epoch != e && !detail::bind_thread(e)) return 0;
  return static_cast<RingEntry*>(detail::t_state.ring)->thread_id;
}

std::vector<std::pair<uint32_t, uint32_t>> session_threads() {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  Global& g = G();
  std::lock_guard lk(g.registry);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return out;
  out.reserve(s->threads.size());
  for (auto& [id, t] : s->threads)
    if (!(t.flags & (dump::kThreadChannel | dump::kThreadExited)) && t.os_tid) out.emplace_back(t.os_tid, id);
  return out;
}

namespace {

// The session's entry for OS thread `tid`: the live one, else the newest that exited (CUPTI delivers a thread's
// calls up to a flush period late, at exit often after the thread's own end was recorded); 0 when none
// (registry lock held).
uint32_t thread_with_os_tid(const SessionState& s, uint32_t tid) {
  uint32_t exited = 0;
  uint64_t exited_first = 0;
  for (auto& [id, t] : s.threads) {
    if (t.os_tid != tid || (t.flags & dump::kThreadChannel)) continue;
    if (!(t.flags & dump::kThreadExited)) return id;
    if (!exited || t.first_ts >= exited_first) exited = id, exited_first = t.first_ts;
  }
  return exited;
}

// The session's live entry for OS thread `tid`, 0 when none (registry lock held).
uint32_t live_thread_with_os_tid(const SessionState& s, uint32_t tid) {
  for (auto& [id, t] : s.threads)
    if (t.os_tid == tid && !(t.flags & (dump::kThreadChannel | dump::kThreadExited))) return id;
  return 0;
}

// The kernel's name of a thread of this process ("" when it exited or /proc is not readable).
std::string task_comm(uint32_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

uint32_t thread_for_os_tid(uint32_t tid) {
  if (tid == 0) return 0;
  Global& g = G();
  auto running = [&g]() -> SessionState* {
    SessionState* s = g.session;
    return s && detail::g_session.load() == s->epoch ? s : nullptr;
  };
  {
    std::lock_guard lk(g.registry);
    SessionState* s = running();
    if (!s) return 0;
    if (uint32_t id = thread_with_os_tid(*s, tid)) return id;
  }
  // Read and intern the name outside the registry lock: recording threads take it when they bind.
  const std::string comm = task_comm(tid);
  const uint32_t name = comm.empty() ? 0 : intern(comm);
  std::lock_guard lk(g.registry);
  SessionState* s = running();
  if (!s) return 0;
  if (uint32_t id = thread_with_os_tid(*s, tid)) return id;  // it bound (or was added) meanwhile
  const uint32_t id = g.next_thread_id++;
  auto waiting = s->waiting_names.find(tid);  // kept: the thread binds with it too
  const uint32_t shown = waiting != s->waiting_names.end() ? waiting->second : name;
  s->threads[id] = dump::ThreadEntry{id, tid, static_cast<uint32_t>(::getpid()), shown, detail::now(), 0, 0, 0};
  s->dirty_threads.insert(id);
  s->unbound_threads[tid] = id;
  g.threads_generation.fetch_add(1, std::memory_order_release);
  return id;
}

void name_os_thread(uint32_t tid, std::string_view name) {
  if (tid == 0 || name.empty() || detail::g_session.load() == 0) return;
  const uint32_t id = intern(name);  // outside the registry lock, like every intern on a bind
  Global& g = G();
  std::lock_guard lk(g.registry);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return;
  const uint32_t entry = live_thread_with_os_tid(*s, tid);
  if (entry) {
    s->threads[entry].name = id;
    s->dirty_threads.insert(entry);
  }
  // A thread without a ring yet (no entry, or one a collector made) binds later and must keep this name.
  if (!entry || s->unbound_threads.count(tid)) s->waiting_names[tid] = id;
  // A thread that never records keeps no entry at all: its counters (sampled by OS thread id) are named by this.
  std::lock_guard meta(s->meta_mu);
  s->process_extra.emplace_back("os_thread." + std::to_string(tid) + ".thread_name", std::string(name));
  s->meta_dirty = true;
}

void forget_os_thread_name(uint32_t tid) {
  Global& g = G();
  std::lock_guard lk(g.registry);
  if (SessionState* s = g.session) s->waiting_names.erase(tid);
}

uint64_t session_threads_generation() { return G().threads_generation.load(std::memory_order_acquire); }

void flush_now() {
  send_command(kCmdWake);
}

void set_thread_exit_hook(ThreadExitHook hook) { g_thread_exit_hook.store(hook, std::memory_order_release); }

ExitGuard::~ExitGuard() {
  t_exiting = true;
  RingEntry* e = entry;
  if (!e) return;
  detail::ThreadState& ts = detail::t_state;
  const bool recording = ts.ring == e && ts.epoch == detail::g_session.load(std::memory_order_relaxed);
  if (ThreadExitHook hook = g_thread_exit_hook.load(std::memory_order_acquire); hook && recording) hook(e->thread_id);
  const uint64_t now = detail::now();
  if (recording) {
    ThreadEndRecord r{{RecordKind::kThreadEnd, 0, sizeof(ThreadEndRecord)}, 0, now};
    if (uint8_t* p = detail::ring_reserve(e, sizeof(r))) {
      std::memcpy(p, &r, sizeof(r));
      detail::ring_commit(e, sizeof(r));
    }
  }
  {
    Global& g = G();
    std::lock_guard lk(g.registry);
    SessionState* s = g.session;
    if (s && s->epoch == e->epoch) {
      auto it = s->threads.find(e->thread_id);
      if (it != s->threads.end()) {
        it->second.end_ts = now;
        it->second.flags |= dump::kThreadExited;
        s->dirty_threads.insert(e->thread_id);
      }
    }
    ts.ring = nullptr;
    ts.epoch = 0;
    e->retired.store(true, std::memory_order_release);
  }
  entry = nullptr;
}

// ---------------------------------------------------------------------------------------------------------

// The session's file (docs/reliability.md, "Files"), opened at start in both modes so that a session that
// could never write its dump does not start: the output locked, created exclusively (stream: at the output
// when nothing is there; ring: a temporary beside it, preopened for crash dumps). Then the first calibration
// points and the head of the dump (stream) or of the crash image (ring).
bool open_dump(SessionState& s) {
  for (const char* reason : kDropReasons) intern(reason);
  std::string why;
  if (!s.file.open(s.output, /*in_place=*/!s.ring_mode, why)) {
    log(LogLevel::kError, "start: " + why + "; not recording");
    return false;
  }
  // Two calibration points 1 ms apart, so even a dump cut short right after start has a clock rate.
  s.calib.push_back(take_calibration_point());
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < until) {
  }
  s.calib.push_back(take_calibration_point());
  std::vector<uint8_t> head;
  auto fh = dump::make_file_header(s.ring_mode ? 1 : 0);
  head.insert(head.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  append_process_info(s, head);
  if (s.sampled) return true;  // sampled mode writes no crash dump (docs/sampled-mode.md)
  if (s.ring_mode) {
    s.crash.fd = s.file.fd();
    s.crash.temp = s.file.written_path();
    s.crash.output = s.output;
    s.crash.window = &s.retained;
    s.crash.meta.push_back(std::move(head));
    if (crash::begin_update()) {
      crash::arm(&s.crash);
      crash::end_update();
    }
    return true;
  }
  if (!s.file.append(head.data(), head.size())) {
    log(LogLevel::kError, "start: cannot write " + s.file.written_path() + ": " + std::strerror(errno) +
                              "; not recording");
    s.file.discard();
    return false;
  }
  return true;
}

// The session clock's ticks per ns, from the calibration points open_dump took 1 ms apart.
double ticks_per_ns(const std::vector<dump::CalibrationPoint>& calib) {
  if (calib.size() < 2) return 1.0;
  const auto& a = calib.front();
  const auto& b = calib.back();
  if (b.monotonic_ns <= a.monotonic_ns || b.ticks <= a.ticks) return 1.0;
  return double(b.ticks - a.ticks) / double(b.monotonic_ns - a.monotonic_ns);
}

// Sampled mode: made once open_dump has measured the clock's rate, before the session is published (the step
// range's name is interned first, so its id is known before any range can end).
void start_sampler(SessionState& s) {
  s.step_name_id = intern(Sampler::step_name(s.cfg));
  // The drop reasons are interned now: a snapshot writes the string table before it builds its drop table.
  for (const char* reason : Sampler::kDropReasons) intern(reason);
  s.sampler = std::make_shared<Sampler>(s.cfg, s.calib.front().ticks, ticks_per_ns(s.calib));
}

bool start_session(const Config& config, bool from_env, const std::string& family_output, bool fork_child) {
  Global& g = G();
  std::lock_guard ctl(g.control);
  if (detail::g_session.load() != 0) {
    log(LogLevel::kWarn, "start: a session is already recording to " + g.last_output);
    return false;
  }
  g.log_level = config.log_level;
  choose_clock();
  ensure_builtin_collectors();
  if (!ensure_pipe(g)) return false;
  register_fork_handlers(g);
  {  // Commands left over from an earlier session mean nothing to this one.
    uint8_t junk[64];
    while (::read(g.pipe_r, junk, sizeof(junk)) > 0) {
    }
  }

  auto* s = new SessionState;
  s->cfg = config;
  // start() is serialized by the control lock: the epoch can be chosen now, so the header names it.
  s->epoch = g.next_epoch++;
  if (g.next_epoch == 0) g.next_epoch = 1;
  if (s->cfg.thread_buffer_kb < 64) s->cfg.thread_buffer_kb = 64;
  if (s->cfg.flush_period_ms == 0) s->cfg.flush_period_ms = 1;
  if (s->cfg.calibration_period_ms == 0) s->cfg.calibration_period_ms = 1000;
  if (s->cfg.trace_size_mb == 0) s->cfg.trace_size_mb = 1;
  // Absolute from here on: a program that calls chdir() must not move its dump, temporary, lock file or report.
  s->output = dump::absolute_path(config.output.empty() ? default_output_path() : config.output);
  s->cfg.report = dump::absolute_path(config.report);
  // Sampled mode keeps its windows in memory and writes them whole, as ring mode does.
  s->ring_mode = config.buffer_mode == BufferMode::kRing || config.mode == CaptureMode::kSampled;
  s->from_env = from_env;
  s->family_output = family_output.empty() ? s->output : dump::absolute_path(family_output);
  s->sampled = config.mode == CaptureMode::kSampled;
  if (!open_dump(*s)) {
    delete s;
    return false;
  }
  if (s->sampled) start_sampler(*s);

  SessionState* old = g.session;
  {
    std::lock_guard lk(g.registry);
    g.session = s;
    g.last_output = s->output;
    if (s->sampler) detail::g_step_name.store(s->step_name_id, std::memory_order_relaxed);
    detail::g_session.store(s->epoch, std::memory_order_seq_cst);
  }
  delete old;  // its writer has finished and its channels are closed

  s->writer = std::thread([s] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    pthread_setname_np(pthread_self(), "iscope-writer");
    t_is_writer = true;
    writer_main(s);
  });

  // Collectors start after the writer so they can open channels; each reports what it could do.
  for (auto& f : g.factories) {
    std::unique_ptr<Collector> c;
    try {
      c = f();
    } catch (...) {
      continue;
    }
    // In a child still inside fork(), Python has not made itself whole again: inferscope_py attaches its
    // collector from its own at-fork hook.
    if (fork_child && c && std::string_view(c->name()) == "python") continue;
    start_collector(*s, std::move(c));
  }
  if (!g.atexit_registered) {
    std::atexit(at_exit_stop);
    g.atexit_registered = true;
  }
  install_session_handlers(*s);
  return true;
}

bool start_from_environment(const Config& config, const std::string& family_output) {
  return start_session(config, true, family_output, false);
}

}  // namespace inferscope::runtime

// -------------------------------------------------------------------------------------------------------------
// Public API

namespace inferscope {

using runtime::G;

std::string default_output_path() { return "inferscope-" + std::to_string(::getpid()) + ".iscope"; }

bool start(const Config& config) { return runtime::start_from_code(config); }

bool start_exactly(const Config& config) { return runtime::start_session(config, false, {}, false); }

bool stop() {
  // False when no session was running, and when its dump could not be written whole (the log says why).
  bool written = false;
  runtime::stop_impl(false, 0, &written);
  return written;
}

bool is_active() noexcept { return detail::g_session.load(std::memory_order_relaxed) != 0; }

std::string output_path() {
  std::lock_guard lk(G().control);
  return G().last_output;
}

std::string flush_ring() {
  auto& g = G();
  std::unique_lock ctl(g.control);
  runtime::SessionState* s = g.session;
  if (!s || !s->ring_mode || detail::g_session.load() != s->epoch) return {};
  std::unique_lock lk(s->snap_mu);
  uint64_t want = ++s->snaps_requested;
  runtime::send_command(runtime::kCmdSnapshot);
  s->snap_cv.wait(lk, [&] { return s->snaps_done >= want; });
  return s->last_snapshot;
}

void set_thread_name(std::string_view name) noexcept {
  try {
    runtime::t_thread_name.assign(name);
    const uint32_t id = runtime::intern(name);
    const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
    if (e == 0 || runtime::t_exiting) return;
    if (detail::t_state.epoch != e && !detail::bind_thread(e)) return;
    auto* entry = static_cast<runtime::RingEntry*>(detail::t_state.ring);
    ThreadNameRecord r{{RecordKind::kThreadName, 0, sizeof(ThreadNameRecord)}, id, detail::now()};
    detail::emit_record(&r, sizeof(r));
    std::lock_guard lk(G().registry);
    if (G().session && G().session->epoch == e) {
      G().session->threads[entry->thread_id].name = id;
      G().session->dirty_threads.insert(entry->thread_id);
    }
  } catch (...) {
  }
}

namespace detail {

bool bind_thread(uint32_t epoch) noexcept {
  if (runtime::t_exiting) return false;
  try {
    const runtime::OwnNames own = runtime::names_for_new_thread();
    auto& g = G();
    std::lock_guard lk(g.registry);
    runtime::SessionState* s = g.session;
    if (!s || g_session.load(std::memory_order_relaxed) != epoch || s->epoch != epoch) return false;
    ThreadState& ts = t_state;
    if (ts.ring) static_cast<runtime::RingEntry*>(ts.ring)->retired.store(true, std::memory_order_release);
    runtime::RingEntry* e = runtime::make_ring(uint64_t(s->cfg.thread_buffer_kb) * 1024);
    const uint32_t tid = runtime::os_tid();
    const uint32_t name = runtime::bind_name(*s, tid, own);
    // A collector may have entered this thread already (runtime::thread_for_os_tid): one thread, one entry.
    if (auto u = s->unbound_threads.find(tid); u != s->unbound_threads.end() && s->threads.count(u->second)) {
      e->thread_id = u->second;
      s->unbound_threads.erase(u);
      if (name) s->threads[e->thread_id].name = name;
    } else {
      if (u != s->unbound_threads.end()) s->unbound_threads.erase(u);
      e->thread_id = g.next_thread_id++;
      s->threads[e->thread_id] =
          dump::ThreadEntry{e->thread_id, tid, static_cast<uint32_t>(::getpid()), name, now(), 0, 0, 0};
    }
    e->epoch = epoch;
    g.rings.push_back(e);
    s->dirty_threads.insert(e->thread_id);
    g.threads_generation.fetch_add(1, std::memory_order_release);
    ts.ring = e;
    ts.epoch = epoch;
    runtime::t_exit_guard.entry = e;
    return true;
  } catch (...) {
    return false;
  }
}

void step_ended(uint64_t start, uint64_t end) noexcept {
  try {
    std::shared_ptr<runtime::Sampler> sampler;
    uint32_t thread = 0;
    {
      // Under the registry lock: a session that stops meanwhile (and the next one that frees it) cannot take the
      // sampler away while this thread still uses it.
      std::lock_guard lk(G().registry);
      runtime::SessionState* s = G().session;
      const uint32_t e = g_session.load(std::memory_order_relaxed);
      if (!s || e == 0 || s->epoch != e || !s->sampler || t_state.epoch != e || !t_state.ring) return;
      sampler = s->sampler;
      thread = static_cast<runtime::RingEntry*>(t_state.ring)->thread_id;
    }
    if (sampler->step_ended(thread, start, end)) runtime::send_command(runtime::kCmdWake);
  } catch (...) {
  }
}

void fill_attr(AttrRecord& out, const Attribute& a) noexcept {
  out.key = intern_cached(a.key, std::strlen(a.key));
  std::memset(out.reserved, 0, sizeof(out.reserved));
  switch (a.type) {
    case Attribute::Type::kInt: out.type = AttrType::kInt; out.value.i = a.i; break;
    case Attribute::Type::kBool: out.type = AttrType::kBool; out.value.i = a.i; break;
    case Attribute::Type::kDouble: out.type = AttrType::kDouble; out.value.d = a.d; break;
    case Attribute::Type::kString:
      out.type = AttrType::kString;
      out.value.s = intern_cached(a.s.data(), a.s.size());
      break;
  }
}

void nvtx_range_push(const StaticName& name) noexcept {
  if (auto f = g_nvtx_push.load(std::memory_order_acquire)) f(name);
}

void end_range_slow(uint32_t epoch, uint32_t name, uint32_t depth, uint64_t start, uint64_t end,
                    const AttrRecord* attrs, uint32_t flags) noexcept {
  if (flags & kRangeNvtxFlag)
    if (auto f = g_nvtx_pop.load(std::memory_order_acquire)) f();
  // A session that stopped (or restarted) while the range was open: the range is not part of it.
  if (epoch != g_session.load(std::memory_order_relaxed)) return;
  ThreadState& ts = t_state;
  const uint32_t n = flags & ~kRangeNvtxFlag;
  if (n != 0) write_range_attrs(ts.ring, name, depth, start, end, attrs, n);
  else write_range(ts.ring, RecordKind::kRange, name, depth, start, end);
  note_step(name, start, end);
}

void write_range_attrs(ThreadRing* r, uint32_t name, uint32_t depth, uint64_t start, uint64_t end,
                       const AttrRecord* attrs, uint32_t n) noexcept {
  const uint32_t size = sizeof(RangeRecord) + sizeof(AttrListHeader) + n * sizeof(AttrRecord);
  uint8_t* p = ring_reserve(r, size);
  if (!p) return;
  const RangeRecord rec{{RecordKind::kRange, static_cast<uint8_t>(depth < 255 ? depth : 255),
                         static_cast<uint16_t>(size)},
                        name, start, end};
  std::memcpy(p, &rec, sizeof(rec));
  const AttrListHeader lh{static_cast<uint16_t>(n), 0};
  std::memcpy(p + sizeof(rec), &lh, sizeof(lh));
  std::memcpy(p + sizeof(rec) + sizeof(lh), attrs, n * sizeof(AttrRecord));
  ring_commit(r, size);
}

}  // namespace detail

void mark_event(std::string_view name, std::initializer_list<Attribute> attrs) noexcept {
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return;
  detail::ThreadState& ts = detail::t_state;
  if (ts.epoch != e && !detail::bind_thread(e)) return;
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(attrs.size(), 64));
  const uint32_t size = sizeof(MarkRecord) + (n ? sizeof(AttrListHeader) + n * sizeof(AttrRecord) : 0);
  AttrRecord buf[64];
  uint32_t i = 0;
  for (const auto& a : attrs) {
    if (i == n) break;
    detail::fill_attr(buf[i++], a);
  }
  const MarkRecord m{{RecordKind::kMark, 0, static_cast<uint16_t>(size)}, detail::intern_cached(name.data(), name.size()),
                     detail::now()};
  uint8_t* p = detail::ring_reserve(ts.ring, size);
  if (!p) return;
  std::memcpy(p, &m, sizeof(m));
  if (n) {
    const AttrListHeader lh{static_cast<uint16_t>(n), 0};
    std::memcpy(p + sizeof(m), &lh, sizeof(lh));
    std::memcpy(p + sizeof(m) + sizeof(lh), buf, n * sizeof(AttrRecord));
  }
  detail::ring_commit(ts.ring, size);
}

namespace {
std::atomic<uint64_t> g_async_ids{1};
}

AsyncRange::AsyncRange(std::string_view name) noexcept {
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return;
  uint32_t tid = runtime::current_thread_id();
  if (tid == 0) return;
  name_ = detail::intern_cached(name.data(), name.size());
  begin_thread_ = tid;
  epoch_ = e;
  id_ = g_async_ids.fetch_add(1, std::memory_order_relaxed);
  start_ = detail::now();
}

void AsyncRange::end() noexcept {
  if (start_ == 0) return;
  const uint64_t end = detail::now();
  const uint64_t start = start_;
  start_ = 0;
  if (detail::g_session.load(std::memory_order_relaxed) != epoch_) return;
  uint32_t tid = runtime::current_thread_id();
  if (tid == 0) return;
  AsyncRangeRecord r{{RecordKind::kAsyncRange, 0, sizeof(AsyncRangeRecord)}, name_, start, end, id_, begin_thread_, tid};
  detail::emit_record(&r, sizeof(r));
}

}  // namespace inferscope
