// Sessions: start and stop, the collectors a session runs, channels, and the public API that reaches them.
//
// Every recording thread owns a single-producer ring (include/inferscope/internal/hot_path.hpp); one writer
// thread per session drains them (writer.cpp). The other jobs of a session live beside this file, each in
// its own: signals.cpp, fork.cpp, exit_report.cpp (INFERSCOPE_REPORT) and threads.cpp (the thread table);
// session_state.hpp holds the state they share.
#include "runtime/session_state.hpp"

#include "dump/path.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

namespace inferscope::detail {
std::atomic<uint32_t> g_session{0};
std::atomic<bool> g_nvtx_emit{false};
std::atomic<uint32_t> g_step_name{~0u};
// Config::nvtx_emit's NVTX side, installed by the GPU collector (runtime::set_nvtx_hooks).
static std::atomic<void (*)(const StaticName&) noexcept> g_nvtx_push{nullptr};
static std::atomic<void (*)() noexcept> g_nvtx_pop{nullptr};
__thread ThreadState t_state __attribute__((tls_model("initial-exec")));
}  // namespace inferscope::detail

namespace inferscope::runtime {

// Never destroyed: application threads may record while the process exits.
Global& G() {
  static Global* g = new Global;
  return *g;
}

void send_command(uint8_t c) {
  Global& g = G();
  if (g.owner_pid.load(std::memory_order_relaxed) != ::getpid()) return;
  g.doorbell.ring(c == kCmdFinish ? Doorbell::kFinish : c == kCmdSnapshot ? Doorbell::kSnapshot : Doorbell::kWake);
}

namespace {

void at_exit_stop() { stop_impl(false, 0); }

}  // namespace

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

namespace {

// The writer's doorbell is this process's; commands left over from an earlier session mean nothing to this one.
void claim_doorbell(Global& g) {
  g.owner_pid.store(::getpid());
  g.doorbell.clear();
}

}  // namespace

namespace {

// The stop of the session `s`, with the control lock held: the collectors hand over what they buffer, recording
// ends, the writer writes the last of the dump (here, on the writer thread, from a signal; else the writer thread,
// joined), the rings and channels are retired.
void stop_session_locked(Global& g, SessionState& s, bool from_writer) {
  stop_live(s);  // bounded: a connected browser never holds the exit
  // Collectors hand over what they buffer while the session still records.
  for (auto& c : s.collectors) c->stop();
  {
    std::lock_guard lk(g.registry);
    detail::g_session.store(0, std::memory_order_seq_cst);
    detail::g_step_name.store(~0u, std::memory_order_relaxed);
  }
  if (from_writer) {
    finish_writing(s);
    s.writer.detach();
  } else {
    send_command(kCmdFinish);
    s.writer.join();
  }
  std::lock_guard lk(g.registry);
  for (RingEntry* e : g.rings)
    if (e->epoch == s.epoch && e->channel) e->retired.store(true);
  for (auto& ch : s.table.channels) ch->close();
  std::lock_guard sl(s.snaps.mu);
  s.snaps.cv.notify_all();
}

}  // namespace

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
      if (from_writer) termination_stopping();
      else set_stopping_thread(true);  // a signal handler on this thread must not wait for what this thread does
      stop_session_locked(g, *s, from_writer);
      set_stopping_thread(false);
    }
  }
  if (from_writer) termination_finalised();
  if (written) *written = s && s->dump_written;
  if (s && s->from_env && !s->cfg.report.empty() && !s->stopping_for_exec)
    write_report_at_exit(s->output, s->cfg.report, s->cfg.step);
  if (!signal_number && s) signal_number = s->snaps.pending_signal.load();
  // A SIGINT/SIGTERM that came while the program was stopping: it ends the process (or already is, on the writer).
  if (!signal_number) signal_number = termination_to_raise(from_writer);
  if (signal_number) reraise(signal_number);
  return true;
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

ExecHandover stop_for_exec() {
  ExecHandover h;
  if (detail::g_session.load() == 0 || G().owner_pid.load() != ::getpid()) return h;
  SessionState* s = nullptr;
  {
    std::lock_guard ctl(G().control);
    s = G().session;
    if (!s || detail::g_session.load() != s->epoch) return h;
    s->stopping_for_exec = true;
  }
  stop_impl(false, 0);
  // `s` stays valid: a session state is freed only when this process starts another session.
  h.had_session = true;
  h.environment.push_back("INFERSCOPE_EXEC_FROM=" + std::to_string(::getpid()));
  if (s->progress.program_records == 0) h.environment.push_back("INFERSCOPE_EXEC_EMPTY=1");
  for (std::string& v : live_handover_environment(*s)) h.environment.push_back(std::move(v));
  h.live_fd = s->live.handed_fd;
  return h;
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

void register_process_info_source(ProcessInfoSource source) {
  std::lock_guard lk(G().factories_mu);
  G().info_sources.push_back(source);
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
  std::lock_guard lk(s->metadata.mu);
  for (auto& [k, v] : s->metadata.status)
    if (k == collector) {
      v = status;
      s->metadata.dirty = true;
      return;
    }
  s->metadata.status.emplace_back(collector, status);
  s->metadata.dirty = true;
}

void set_process_info(const std::string& key, const std::string& value) {
  SessionState* s = G().session;
  if (!s) return;
  std::lock_guard lk(s->metadata.mu);
  s->metadata.process_extra.emplace_back(key, value);
  s->metadata.dirty = true;
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

}  // namespace

std::mutex& device_locations_mutex() { return device_locations().mu; }

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
  std::lock_guard lk(s->metadata.mu);
  auto& c = s->metadata.extra_drops[{thread_id, std::string(reason)}];
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

std::string sampled_window_state() {
  std::shared_ptr<Sampler> sampler;
  {
    // As step_ended: the sampler is taken under the registry lock and asked outside it (no lock nests in another).
    std::lock_guard lk(G().registry);
    SessionState* s = G().session;
    if (!s || detail::g_session.load() != s->epoch || !s->sampler) return "";
    sampler = s->sampler;
  }
  switch (sampler->window_state()) {
    case sampling::WindowScheduler::State::kOff: return "off";
    case sampling::WindowScheduler::State::kOpening: return "opening";
    case sampling::WindowScheduler::State::kOpen: return "open";
    case sampling::WindowScheduler::State::kClosing: return "closing";
  }
  return "";
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
  e->program = name != "system";  // whether a run recorded anything of the program: counters alone are not
  g.rings.push_back(e);
  dump::ThreadEntry t{e->thread_id, 0, static_cast<uint32_t>(::getpid()), intern(name), detail::now(), 0,
                      dump::kThreadChannel, 0};
  s->table.threads[e->thread_id] = t;
  s->table.dirty_threads.insert(e->thread_id);
  s->table.channels.push_back(std::unique_ptr<Channel>(new Channel));
  Channel* c = s->table.channels.back().get();
  c->ring_ = e;
  c->thread_id_ = e->thread_id;
  return c;
}

void flush_now() {
  send_command(kCmdWake);
}

// ---------------------------------------------------------------------------------------------------------

// The session's file (docs/reliability.md, "Files"), opened at start in both modes so that a session that
// could never write its dump does not start: the output locked, created exclusively (stream, and adaptive
// mode's streamed baseline: at the output when nothing is there; ring: a temporary beside it, preopened for
// crash dumps). Then the first calibration points and the head of the dump (stream) or of the crash image
// (ring, sampled, adaptive), or both.
void start_sampler(SessionState& s);

// The file header with `flags` and the process info: how a dump and a crash image begin.
std::vector<uint8_t> dump_head(SessionState& s, uint32_t flags) {
  std::vector<uint8_t> head;
  auto fh = dump::make_file_header(flags);
  head.insert(head.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  append_process_info(s, head);
  return head;
}

// The head of a stream dump (full capture, or adaptive mode's streamed baseline, which the snapshot written at
// stop replaces whole).
bool append_stream_head(SessionState& s) {
  const std::vector<uint8_t> head = dump_head(s, 0);
  if (s.file.append(head.data(), head.size())) return true;
  log(LogLevel::kError, "start: cannot write " + s.file.written_path() + ": " + std::strerror(errno) +
                            "; not recording");
  s.file.discard();
  return false;
}

bool open_dump(SessionState& s) {
  for (const char* reason : kDropReasons) intern(reason);
  std::string why;
  if (!s.file.open(s.output, /*in_place=*/!s.ring_mode || streams_baseline(s), why)) {
    log(LogLevel::kError, "start: " + why + "; not recording");
    return false;
  }
  // Two calibration points 1 ms apart, so even a dump cut short right after start has a clock rate.
  s.progress.calib.push_back(take_calibration_point());
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < until) {
  }
  s.progress.calib.push_back(take_calibration_point());
  // Sampled and adaptive: the sampler first, so the head's process info names the mode and its settings (a
  // crash dump's, and the stream an adaptive run leaves when it is killed).
  if (s.sampled) start_sampler(s);
  if (s.streaming_baseline && !append_stream_head(s)) return false;
  if (s.ring_mode) {  // ring, sampled and adaptive: the crash image
    // A streamed baseline is the file itself: a crash writes beside it, into a file the handler creates, and
    // renames that over the output only once it is whole (the writer may be appending to the stream meanwhile).
    s.progress.crash.fd = streams_baseline(s) ? -1 : s.file.fd();
    s.progress.crash.temp = streams_baseline(s) ? s.output + ".crash" + std::to_string(::getpid()) : s.file.written_path();
    s.progress.crash.output = s.output;
    if (s.sampler) s.progress.crash.windows = &s.sampler->store();
    s.progress.crash.window = &s.progress.retained;
    s.progress.crash.meta.push_back(dump_head(s, dump::kFileRingSnapshot | (s.sampled ? dump::kFileSampled : 0u)));
    if (crash::begin_update()) {
      crash::arm(&s.progress.crash);
      crash::end_update();
    }
    return true;
  }
  return append_stream_head(s);
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
  s.sampler = std::make_shared<Sampler>(s.cfg, s.progress.calib.front().ticks, ticks_per_ns(s.progress.calib));
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
  claim_doorbell(g);
  register_fork_handlers(g);

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
  // Sampled and adaptive modes keep their windows in memory and write them whole, as ring mode does.
  s->ring_mode = config.buffer_mode == BufferMode::kRing || records_in_windows(config.mode);
  s->from_env = from_env;
  s->family_output = family_output.empty() ? s->output : dump::absolute_path(family_output);
  s->sampled = records_in_windows(config.mode);
  s->streaming_baseline = streams_baseline(*s);
  if (!open_dump(*s)) {
    delete s;
    return false;
  }
  if (!fork_child) make_live_tap(*s);  // a forked child leaves the page to its parent (docs/live.md)

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
    // Signals sent to the process are the program's threads' to take (a program's sigwait() thread, our
    // SIGTERM handler that holds the interrupted thread until the dump is written), never the writer's.
    block_program_signals_in_this_thread();
    pthread_setname_np(pthread_self(), "iscope-writer");
    t_is_writer = true;
    set_writer_thread(true);
    writer_main(s);
    set_writer_thread(false);
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
  start_live_server(*s);
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

bool start_exactly(const Config& config) {
  // As resolve() does for a ring with the mode left alone: a ring is full capture's (adaptive ignores it).
  Config c = config;
  if (c.buffer_mode == BufferMode::kRing && c.mode == CaptureMode::kAdaptive) c.mode = CaptureMode::kFull;
  return runtime::start_session(c, false, {}, false);
}

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
  std::unique_lock lk(s->snaps.mu);
  uint64_t want = ++s->snaps.requested;
  runtime::send_command(runtime::kCmdSnapshot);
  s->snaps.cv.wait(lk, [&] { return s->snaps.done >= want; });
  return s->snaps.last;
}

namespace detail {

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
