// The writer thread: one per session, it wakes every flush period, drains all rings into EVENTS chunks and
// either appends them to the dump (stream mode) or keeps them in a bounded in-memory window (ring mode, oldest
// dropped first); sampled mode hands them to the sampler's windows.
#include "runtime/session_state.hpp"

#include "dump/files.hpp"
#include "dump/path.hpp"
#include "runtime/rank_info.hpp"

#include <inferscope/version.hpp>

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace inferscope::runtime {

const char* const kDropReasons[3] = {"buffer_full", "ring_overwritten", "write_failed"};

namespace {

using dump::ChunkBuilder;
using dump::ChunkType;

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
    const uint64_t before = s.progress.records_written;
    if (drain_ring(e, chunk, s.progress.records_written)) {
      if (e->program) s.progress.program_records += s.progress.records_written - before;
      live_observe(s, chunk);  // the live page's tap (nothing when `live` is off)
      out.chunks.push_back(std::move(chunk));
    }
    s.progress.ring_drops[e->thread_id] = {e->dropped_records.load(std::memory_order_relaxed),
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

}  // namespace

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
  // What collectors add from the start (register_process_info_source): the system collector's container CPU
  // limit (a cgroup quota: cpu_quota, cpu_quota_period_us, cpu_quota_source), which the affinity above does not show.
  {
    std::lock_guard lk(G().factories_mu);
    for (ProcessInfoSource source : G().info_sources)
      for (const auto& [k, v] : source()) b.add_key_value(k, v);
  }
  for (const auto& [k, v] : detail::rank_info(std::getenv)) b.add_key_value(k, v);
  std::ifstream cl("/proc/self/cmdline", std::ios::binary);
  std::string cmd((std::istreambuf_iterator<char>(cl)), std::istreambuf_iterator<char>());
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  b.add_key_value("cmdline", cmd);
  char exe[4096] = {};
  if (::readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0) b.add_key_value("exe", exe);
  b.add_key_value("clock", clock_name());
  b.add_key_value("start_realtime_ns", s.progress.calib.empty() ? "0" : std::to_string(s.progress.calib.front().realtime_ns));
  b.add_key_value("buffer_mode", s.ring_mode ? "ring" : "stream");
  b.add_key_value("trace_size_mb", std::to_string(s.cfg.trace_size_mb));
  b.add_key_value("thread_buffer_kb", std::to_string(s.cfg.thread_buffer_kb));
  b.add_key_value("inferscope_version", INFERSCOPE_VERSION_STRING);
  b.add_key_value("session_epoch", std::to_string(s.epoch));
  if (s.sampler)
    for (auto& [k, v] : s.sampler->process_info()) b.add_key_value(k, v);
  b.finish_into(out);
}

namespace {

void append_meta_kv(SessionState& s, std::vector<uint8_t>& out, bool all) {
  std::lock_guard lk(s.metadata.mu);
  if (!all && !s.metadata.dirty) return;
  if (!all) s.metadata.dirty = false;
  if (!s.metadata.status.empty()) {
    ChunkBuilder b(ChunkType::kCollectorStatus);
    for (auto& [k, v] : s.metadata.status) b.add_key_value(k, v);
    b.finish_into(out);
  }
  if (!s.metadata.process_extra.empty()) {
    ChunkBuilder b(ChunkType::kProcessInfo);
    for (auto& [k, v] : s.metadata.process_extra) b.add_key_value(k, v);
    b.finish_into(out);
  }
}

// Strings and code entries new since the cursors (or all of them for a ring snapshot).
void append_tables(SessionState& s, std::vector<uint8_t>& out, bool all) {
  uint32_t first = all ? 1 : std::max<uint32_t>(1, s.progress.strings_written);
  ChunkBuilder sb(ChunkType::kStrings);
  uint32_t next = 0;
  strings_since(first, [&](uint32_t id, std::string_view v) { sb.add_string(id, v); }, &next);
  if (!sb.empty()) sb.finish_into(out);
  if (!all) s.progress.strings_written = next;
  ChunkBuilder cb(ChunkType::kCodeTable);
  code_since(all ? 0 : s.progress.code_written, [&](const dump::CodeEntry& c) { cb.add(c); }, &next);
  if (!cb.empty()) cb.finish_into(out);
  if (!all) s.progress.code_written = next;
}

void append_threads(SessionState& s, std::vector<uint8_t>& out, bool all) {
  ChunkBuilder b(ChunkType::kThreads);
  {
    std::lock_guard lk(G().registry);
    if (all || s.progress.resend_threads) {
      for (auto& [id, t] : s.table.threads) b.add(t);
      if (!all) s.table.dirty_threads.clear(), s.progress.resend_threads = false;
    } else {
      for (uint32_t id : s.table.dirty_threads) b.add(s.table.threads[id]);
      s.table.dirty_threads.clear();
    }
  }
  if (!b.empty()) b.finish_into(out);
}

void append_calibration(SessionState& s, std::vector<uint8_t>& out, bool all) {
  ChunkBuilder b(ChunkType::kCalibration);
  for (size_t i = all ? 0 : s.progress.calib_written; i < s.progress.calib.size(); ++i) b.add(s.progress.calib[i]);
  if (!all) s.progress.calib_written = s.progress.calib.size();
  if (!b.empty()) b.finish_into(out);
}

// The drop reasons the writer itself counts. They are interned when the session starts: current_drops() runs
// after a buffer's string table is built, so a reason first interned there would be missing from that buffer (a
// dump whose only successful append after failed ones was the last named its write_failed drops "<string N>").

std::vector<dump::DropEntry> current_drops(SessionState& s) {
  std::vector<dump::DropEntry> d;
  const uint32_t full = intern("buffer_full");
  for (auto& [tid, c] : s.progress.ring_drops)
    if (c.first) d.push_back({tid, full, c.first, c.second});
  const uint32_t over = intern("ring_overwritten");
  for (auto& [tid, c] : s.progress.overwritten) d.push_back({tid, over, c.first, c.second});
  const uint32_t lost = s.progress.write_lost.empty() ? 0 : intern("write_failed");
  for (auto& [tid, c] : s.progress.write_lost) d.push_back({tid, lost, c.first, c.second});
  if (s.sampler)
    for (auto& [tid, reason, records, bytes] : s.sampler->drops()) d.push_back({tid, intern(reason), records, bytes});
  std::lock_guard lk(s.metadata.mu);
  for (auto& [key, c] : s.metadata.extra_drops) d.push_back({key.first, intern(key.second), c.first, c.second});
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
  if (!all && total == s.progress.drops_written_total) return;
  if (!all) s.progress.drops_written_total = total;
  if (d.empty()) return;
  ChunkBuilder b(ChunkType::kDrops);
  for (auto& e : d) b.add(e);
  b.finish_into(out);
}

void append_end(SessionState& s, std::vector<uint8_t>& out) {
  // Sampled mode writes the windows' records only: what was sampled out is in the SAMPLING chunk, not dropped.
  const uint64_t written = s.sampler ? s.sampler->records_kept() : s.progress.records_written;
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
  return {s.progress.strings_written, s.progress.code_written, s.progress.calib_written, s.progress.drops_written_total};
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
      auto& c = s.progress.write_lost[eh.thread_id];
      c.first += h.count;
      c.second += h.length;
      s.progress.records_written -= std::min<uint64_t>(h.count, s.progress.records_written);
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
  s.progress.strings_written = before.strings;
  s.progress.code_written = before.code;
  s.progress.calib_written = before.calib;
  s.progress.drops_written_total = before.drops_total;
  s.progress.resend_threads = true;
  {
    std::lock_guard lk(s.metadata.mu);
    s.metadata.dirty = true;
  }
  if (!s.write_failing)
    log(LogLevel::kError, "writing " + s.file.written_path() + " failed: " + std::strerror(err) +
                              "; records that cannot be written are dropped whole and counted (write_failed), "
                              "the dump keeps whole chunks only, and writing is tried again every flush");
  s.write_failing = true;
  buf.clear();
}

// Ring mode: an EVENTS chunk larger than the whole budget keeps only its newest records that fit, the older ones
// counted as overwritten. One drain copies all a thread published since the last cycle, up to its ring
// (thread_buffer_kb, which may exceed trace_size_mb): a writer that fell behind (a loaded machine, a sanitizer
// build) would otherwise keep such a chunk whole as the newest, and the window would outgrow its budget.
void keep_newest_within(SessionState& s, std::vector<uint8_t>& chunk, uint64_t budget) {
  dump::ChunkHeader h;
  std::memcpy(&h, chunk.data(), sizeof(h));
  dump::EventsHeader eh;
  std::memcpy(&eh, chunk.data() + sizeof(h), sizeof(eh));
  const size_t first = sizeof(h) + sizeof(eh);
  size_t off = first;
  uint32_t dropped = 0;
  while (off < chunk.size() && first + (chunk.size() - off) > budget) {
    RecordHeader r;
    std::memcpy(&r, chunk.data() + off, sizeof(r));
    if (r.kind != RecordKind::kPad) ++dropped;  // pads are filler, not counted as records (drain_ring)
    off += r.size ? r.size : chunk.size() - off;
  }
  ChunkBuilder b(ChunkType::kEvents);
  b.append(&eh, sizeof(eh));
  b.append(chunk.data() + off, chunk.size() - off);
  b.add_count(h.count - std::min(dropped, h.count));
  auto& c = s.progress.overwritten[eh.thread_id];
  c.first += dropped;
  c.second += off - first;
  chunk = b.finish();
}

// Ring mode: keep the newest chunks within the budget; what falls out is counted per thread.
void retain(SessionState& s, std::vector<uint8_t>&& chunk) {
  const uint64_t budget = s.cfg.trace_size_mb * 1024 * 1024;
  if (chunk.size() > budget) keep_newest_within(s, chunk, budget);
  s.progress.retained_bytes += chunk.size();
  s.progress.retained.push_back(std::move(chunk));
  while (s.progress.retained_bytes > budget && s.progress.retained.size() > 1) {
    auto& old = s.progress.retained.front();
    dump::ChunkHeader h;
    std::memcpy(&h, old.data(), sizeof(h));
    dump::EventsHeader eh;
    std::memcpy(&eh, old.data() + sizeof(h), sizeof(eh));
    auto& c = s.progress.overwritten[eh.thread_id];
    c.first += h.count;
    c.second += h.length;
    s.progress.retained_bytes -= old.size();
    s.progress.retained.pop_front();
  }
}

}  // namespace

std::string snapshot_path(SessionState& s, bool final) {
  if (final) return s.output;
  return dump::insert_suffix(s.output, "flush" + std::to_string(++s.snaps.flush_index), ".iscope");
}

namespace {

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
  for (auto& c : s.progress.retained) out.insert(out.end(), c.begin(), c.end());
  append_drops(s, out, true);
  append_end(s, out);
  return out;
}

// A whole dump (a ring snapshot: flush_ring, SIGUSR2; adaptive mode's final dump): written to a temporary beside
// `path` and renamed over it.
bool write_snapshot_bytes(const std::vector<uint8_t>& out, const std::string& path) {
  DumpFile f;
  std::string error;
  if (f.open(path, /*in_place=*/false, error, /*lock=*/false) && f.rewrite(out.data(), out.size()) && f.commit(error))
    return true;
  if (error.empty()) error = "cannot write " + f.written_path() + ": " + std::strerror(errno);
  log(LogLevel::kError, "ring snapshot: " + error);
  f.discard();
  return false;
}

bool write_snapshot(SessionState& s, const std::string& path) { return write_snapshot_bytes(snapshot_bytes(s), path); }

// What this cycle adds to the metadata (strings, code, threads, calibration), for the crash image.
std::vector<uint8_t> new_meta(SessionState& s) {
  std::vector<uint8_t> meta;
  append_meta_kv(s, meta, false);
  append_tables(s, meta, false);
  append_threads(s, meta, false);
  append_calibration(s, meta, false);
  return meta;
}

// Inside an update: the crash image follows what the cycle changed (new metadata appended; the windows'
// summary, the drop table and END's counts replaced), all in the same update as the records, so a crash between
// two cycles writes counts that agree with the records. The drop table's locks (metadata.mu, the string table) and
// the sampler's are taken here, on the writer thread; the handler takes none.
void update_crash_image_locked(SessionState& s, std::vector<uint8_t> meta) {
  std::vector<uint8_t> drops, sampling;
  append_drops(s, drops, true);
  if (s.sampler) s.sampler->write_summary(sampling, s.step_name_id);
  if (!meta.empty()) s.progress.crash.meta.push_back(std::move(meta));
  s.progress.crash.drops.swap(drops);
  s.progress.crash.sampling.swap(sampling);
  s.progress.crash.records_written = s.sampler ? s.sampler->records_kept() : s.progress.records_written;
  s.progress.crash.records_dropped = total_drops(current_drops(s));
}

// Ring mode, each cycle: the drained chunks join the window, and the crash image follows.
void keep_in_window(SessionState& s, Drained& d) {
  std::vector<uint8_t> meta = new_meta(s);
  if (!crash::begin_update()) return;  // a crash dump is being written from the image: change nothing
  for (auto& c : d.chunks) retain(s, std::move(c));
  update_crash_image_locked(s, std::move(meta));
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

// Adaptive mode: the baseline's records also go to the file, as a stream dump's do, until the cycle that finds it
// closed (that cycle's records go too: the steps up to its close). An append that fails ends the streaming, and
// nothing is counted lost: the ring of windows holds every record and the snapshot at stop writes them. The
// records of the baseline that arrive later (CUPTI hands over the GPU's in buffers) are in that snapshot only.
void stream_baseline(SessionState& s, const Drained& d, const std::vector<uint8_t>& meta) {
  std::vector<uint8_t> buf = meta;
  for (auto& c : d.chunks) buf.insert(buf.end(), c.begin(), c.end());
  if (!buf.empty() && !s.file.append(buf.data(), buf.size())) {
    log(LogLevel::kWarn, "adaptive mode: streaming the baseline to " + s.file.written_path() + " failed (" +
                             std::strerror(errno) + "); it stays in memory and is written whole at stop");
    s.streaming_baseline = false;
    return;
  }
  if (!s.sampler->baseline_open()) s.streaming_baseline = false;
}

// Sampled and adaptive modes, each cycle: windows open and close first (so the pre-roll a slow step reaches back
// to is still there), then the drained records go to the window their time falls in. The ring of windows changes
// only inside a crash-image update: a crash handler may be writing it out.
void sample(SessionState& s, Drained& d, bool finishing) {
  if (!crash::begin_update()) return;
  s.sampler->before_drain(collectors_of(s), finishing);
  crash::end_update();
  drain_all(s, d);
  std::vector<uint8_t> meta = new_meta(s);
  if (s.streaming_baseline) stream_baseline(s, d, meta);
  if (!crash::begin_update()) return;
  s.sampler->route(d.chunks);
  update_crash_image_locked(s, std::move(meta));
  crash::end_update();
}

// One writer cycle: drain, then hand the chunks to the sink. Strings are written after the drain so every
// id a drained record uses is already in the table (it was interned before the record was written).
// `finishing`: the last cycle of a stopping session (collectors are stopped: nothing is switched).
void cycle_sinks(SessionState& s, std::vector<uint8_t>& buf, bool finishing);

void cycle(SessionState& s, std::vector<uint8_t>& buf, bool finishing = false) {
  cycle_sinks(s, buf, finishing);
  if (s.live.tap) live_after_cycle(s, total_drops(current_drops(s)));
}

void cycle_sinks(SessionState& s, std::vector<uint8_t>& buf, bool finishing) {
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
  for (const auto& [tid, c] : s.progress.write_lost) lost += c.first;
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

// Adaptive mode, the baseline streamed at the output: the whole dump goes to a temporary beside it, renamed over
// it. A snapshot that cannot be written leaves the streamed baseline at the output, and says so.
bool finish_streamed_baseline(SessionState& s, const std::vector<uint8_t>& out) {
  std::string error;
  // The snapshot needs a descriptor of its own: the stream's is given back first (nothing more is appended to it),
  // so a program that used every other one at its end still gets its dump.
  s.file.close_keeping_lock();
  if (write_snapshot_bytes(out, s.output)) {
    if (!s.file.commit(error)) log(LogLevel::kError, error);
    return true;
  }
  log(LogLevel::kError, "adaptive mode: the dump could not be written at " + s.output + "; the baseline streamed "
                            "during the run is left there (incomplete: no END chunk)");
  if (!s.file.commit(error, /*replace=*/false)) log(LogLevel::kError, error);
  return false;
}

// Ring mode: the window into the file preopened at start (no crash dump can use it from here on), renamed
// over the output.
bool finish_ring(SessionState& s) {
  const std::vector<uint8_t> out = snapshot_bytes(s);
  if (!crash::begin_update()) return false;
  crash::arm(nullptr);
  crash::end_update();
  std::string error;
  // Streamed at the output itself (nothing was there before): the snapshot replaces it through a temporary.
  // Streamed to a temporary beside an earlier dump: that temporary is rewritten whole and renamed, as in ring mode.
  if (streams_baseline(s) && s.file.written_path() == s.output) return finish_streamed_baseline(s, out);
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

}  // namespace

// The last writer cycle (on the writer thread, or the thread that stops from a signal): the final
// calibration point, the last drain, and END. True when the dump is complete at the output.
bool finish_writing(SessionState& s) {
  s.progress.calib.push_back(take_calibration_point());
  std::vector<uint8_t> buf;
  cycle(s, buf, /*finishing=*/true);
  s.dump_written = s.ring_mode ? finish_ring(s) : finish_stream(s);
  return s.dump_written;
}

void writer_main(SessionState* s) {
  Global& g = G();
  std::vector<uint8_t> buf;
  auto next_calib = std::chrono::steady_clock::now() + std::chrono::milliseconds(s->cfg.calibration_period_ms);
  int signalled = 0;  // a SIGINT/SIGTERM not yet acted on
  for (;;) {
    const uint32_t rung = g.doorbell.wait(static_cast<int>(s->cfg.flush_period_ms));
    const bool finish = rung & Doorbell::kFinish;
    bool snapshot = rung & Doorbell::kSnapshot;
    const int sig = rung & Doorbell::kSigTerm ? SIGTERM : rung & Doorbell::kSigInt ? SIGINT : 0;
    if (finish) break;
    if (sig) signalled = sig;
    if (signalled) {
      // Runs the same stop as the application would, then lets the signal's default action happen. While another
      // thread holds the control lock it is tried again next cycle; if that thread is stopping the session, it
      // re-raises the signal once the dump is written.
      if (stop_impl(true, signalled)) return;
      s->snaps.pending_signal.store(signalled);
    }
    for (Collector* c : collectors_of(*s)) c->flush();
    // SIGUSR2: its handler sets this flag beside ringing the doorbell.
    if (g_snapshot_signal.exchange(0, std::memory_order_acq_rel)) snapshot = true;
    if (std::chrono::steady_clock::now() >= next_calib) {
      s->progress.calib.push_back(take_calibration_point());
      next_calib += std::chrono::milliseconds(s->cfg.calibration_period_ms);
    }
    cycle(*s, buf);
    if (snapshot && s->ring_mode) {
      std::string path = snapshot_path(*s, false);
      bool ok = write_snapshot(*s, path);
      std::lock_guard lk(s->snaps.mu);
      s->snaps.last = ok ? path : std::string();
      s->snaps.done = s->snaps.requested ? s->snaps.requested : s->snaps.done + 1;
      s->snaps.cv.notify_all();
    }
  }
  finish_writing(*s);
}

}  // namespace inferscope::runtime
