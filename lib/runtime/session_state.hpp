// The session's state, shared by the runtime's session files (internal): the per-thread ring entries, one
// session's state, the process-wide registry, and what each of the session files offers the others. A session's
// state is split by who owns it and which lock guards it (ThreadTable, Metadata, WriterProgress, SnapshotRequests,
// LivePage); what is set at start and read by all stays in SessionState itself.
//
//   session.cpp      start and stop, collectors, channels, the public API
//   writer.cpp       the writer thread: draining the rings, writing the dump (stream, ring and sampled modes)
//   signals.cpp      SIGINT/SIGTERM/SIGUSR2 handlers, chained to what they replaced
//   fork.cpp         the runtime made whole in a forked child
//   exit_report.cpp  INFERSCOPE_REPORT: iscope-analyze run once the dump is written
//   threads.cpp      the thread table: binding a thread to its ring, names, OS thread ids, thread exit
//   live.cpp         the live page: the tap the writer feeds, the server module (docs/live.md)
#pragma once

#include "live/server.hpp"
#include "live/tap.hpp"
#include "runtime/crash_dump.hpp"
#include "runtime/doorbell.hpp"
#include "runtime/dump_file.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

#include <inferscope/scope.hpp>

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace inferscope::runtime {

uint32_t os_tid();

struct RingEntry : detail::ThreadRing {
  uint32_t thread_id = 0;
  uint32_t epoch = 0;
  bool channel = false;
  bool program = true;  // its records are the program's own (not the system collector's counters)
  std::atomic<bool> retired{false};
  std::unique_ptr<uint8_t[]> storage;
};

RingEntry* make_ring(uint64_t bytes);

enum Command : uint8_t { kCmdWake = 'W', kCmdFinish = 'F', kCmdSnapshot = 'S' };

// Set by the SIGUSR2 handler (lock-free, so async-signal-safe) beside the doorbell it rings. The writer clears it; a forked child starts clear.
extern std::atomic<int> g_snapshot_signal;

struct SessionState;
/// Adaptive mode writes its baseline to the output as a stream while it records it (writer.cpp).
bool streams_baseline(const SessionState& s);

// SessionState's parts, one per owner and lock: who may touch a field is the part it is in.

/// The session's threads and channels. Guarded by Global::registry.
struct ThreadTable {
  std::map<uint32_t, dump::ThreadEntry> threads;
  std::set<uint32_t> dirty_threads;
  std::vector<std::unique_ptr<Channel>> channels;
  // Entries thread_for_os_tid made for threads that have not recorded themselves yet (os_tid -> thread id):
  // bind_thread gives such a thread this entry instead of a second one.
  std::map<uint32_t, uint32_t> unbound_threads;
  // Names given from outside (name_os_thread) to threads that have not recorded yet (os_tid -> string id): a
  // thread takes its own when it binds, unless it named itself (set_thread_name).
  std::map<uint32_t, uint32_t> waiting_names;
};

/// What the dump's metadata says beyond the records (status lines, process facts, drops counted outside the rings).
/// Guarded by `mu`.
struct Metadata {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> status;
  std::vector<std::pair<std::string, std::string>> process_extra;
  bool dirty = false;
  std::map<std::pair<uint32_t, std::string>, std::pair<uint64_t, uint64_t>> extra_drops;
};

/// What the writer has written so far. The writer thread's alone (and stop()'s, after the writer has finished).
struct WriterProgress {
  std::vector<dump::CalibrationPoint> calib;
  size_t calib_written = 0;
  uint32_t strings_written = 0;
  uint32_t code_written = 0;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> ring_drops;  // thread -> cumulative (records, bytes)
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> overwritten;
  std::deque<std::vector<uint8_t>> retained;  // ring mode: whole EVENTS chunks, oldest first
  uint64_t retained_bytes = 0;
  uint64_t records_written = 0;
  uint64_t program_records = 0;  // of them, the program's own: ranges, marks, Python calls, GPU activity
  uint64_t drops_written_total = ~0ull;
  bool resend_threads = false;  // stream: a failed append took thread entries with it
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> write_lost;  // thread -> records, bytes of dropped appends
  crash::Image crash;           // ring mode: what a SIGABRT/SIGSEGV/SIGBUS handler writes
};

/// Snapshot requests (ring mode): flush_ring() and SIGUSR2 ask, the writer answers. Guarded by `mu`, but for the
/// signal the handler sets without a lock.
struct SnapshotRequests {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t requested = 0;
  uint64_t done = 0;
  std::string last;
  uint32_t flush_index = 0;
  std::atomic<int> pending_signal{0};
};

/// The live page (live.cpp): the tap the writer feeds (made before the writer starts, never replaced) and the
/// server that reads it (started after the collectors, stopped first at stop).
struct LivePage {
  std::shared_ptr<live::Tap> tap;
  live::Server* server = nullptr;  // made and freed by the server module (api)
  const live::ModuleApi* api = nullptr;
  uint64_t threads_generation = ~0ull;  // writer only: the thread names the tap has
  uint64_t cycles = 0;                  // writer only
  uint64_t gpu_delivered = 0;           // writer only: when CUPTI last handed its complete records over (ticks)
  std::string token;                    // the page's token ("" when none is required)
  int handed_fd = -1;                   // stopping for an exec: the listening socket handed to the new image
};

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

  ThreadTable table;             // under Global::registry
  Metadata metadata;             // under metadata.mu
  WriterProgress progress;       // the writer thread's (and stop()'s, after the writer has finished)
  std::vector<std::unique_ptr<Collector>> collectors;  // appended under collectors_mu (the writer reads it)
  std::mutex collectors_mu;

  SnapshotRequests snaps;        // ring mode: under snaps.mu

  // Sampled mode (mode: sampled): set at start, never changed; shared with application threads that end a step.
  bool sampled = false;
  // Adaptive mode (streams_baseline): the baseline is also streamed to the file as it is drained (a stream dump,
  // as full capture writes), so a run killed by SIGKILL or by a signal with no handler keeps it. False once the
  // baseline has closed or an append failed (the ring still holds it all).
  bool streaming_baseline = false;
  std::shared_ptr<Sampler> sampler;
  uint32_t step_name_id = 0;

  LivePage live;

  // Stopping because this process execs (stop_for_exec): the live page's socket is handed to the new image
  // (live.handed_fd), and no report is written (the image the exec makes writes it at its end).
  bool stopping_for_exec = false;
};

struct Global {
  std::mutex control;   // start / stop / flush_ring
  std::mutex registry;  // rings, thread tables, binding
  std::vector<RingEntry*> rings;
  SessionState* session = nullptr;  // the running or the last session
  uint32_t next_epoch = 1;
  uint32_t next_thread_id = 1;
  std::vector<std::function<std::unique_ptr<Collector>()>> factories;
  std::vector<ProcessInfoSource> info_sources;  // register_process_info_source, under factories_mu
  std::mutex factories_mu;  // register_collector; held across fork
  // The writer's wake-up belongs to `owner_pid`: a forked child forgets what its copy holds, and nothing (a signal
  // handler included) rings it in any other process.
  Doorbell doorbell;
  std::atomic<pid_t> owner_pid{0};
  bool atfork_registered = false;
  std::string last_output;
  LogLevel log_level = LogLevel::kWarn;
  bool atexit_registered = false;
  std::atomic<uint64_t> threads_generation{0};  // bumped when a thread binds (session_threads_generation)
};

// Never destroyed: application threads may record while the process exits.
Global& G();

void send_command(uint8_t c);

extern thread_local std::string t_thread_name;
extern thread_local bool t_is_writer;  // the writer waits for nobody: only it makes room in the rings
extern thread_local bool t_exiting;

// --- writer.cpp
void writer_main(SessionState* s);
// The last writer cycle (on the writer thread, or the thread that stops from a signal): the final
// calibration point, the last drain, and END. True when the dump is complete at the output.
bool finish_writing(SessionState& s);
std::string snapshot_path(SessionState& s, bool final);
void append_process_info(SessionState& s, std::vector<uint8_t>& out);
// The drop reasons the writer itself counts, interned when the session starts (see writer.cpp).
extern const char* const kDropReasons[3];

// --- live.cpp
/// Makes the tap when `live` is set (before the writer starts; the clock's rate is known).
void make_live_tap(SessionState& s);
/// Starts the server and prints its URL on stderr; a failure is logged and recording goes on without it.
void start_live_server(SessionState& s);
/// Writer: one drained EVENTS chunk (header included) into the tap.
void live_observe(SessionState& s, const std::vector<uint8_t>& chunk);
/// Writer, after each cycle: drops and thread names.
void live_after_cycle(SessionState& s, uint64_t dropped_records);
/// stop(): the state shown becomes "stopping"; the server stops within a bounded time (before an exec it is handed
/// over instead: its listening socket stays open for the new image).
void stop_live(SessionState& s);
/// After a stop for exec: the variables that hand the page's socket and token to the new image.
std::vector<std::string> live_handover_environment(const SessionState& s);

// --- signals.cpp
void install_session_handlers(const SessionState& s);
void restore_handlers_in_child();
void reraise(int sig);
/// The writer thread keeps SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 blocked: they are the program's.
void block_program_signals_in_this_thread();
/// A SIGINT/SIGTERM handler holds the thread it interrupted until the writer ends the process, except the writer
/// itself and the thread that is stopping the session: each names itself while it is one.
void set_writer_thread(bool running);
void set_stopping_thread(bool stopping);
/// The writer's steps in ending the process by such a signal: it took the session; the dump is written.
void termination_stopping();
void termination_finalised();
/// The signal whose termination a handler asked for, for stop_impl to re-raise; 0 when none, or (not on the writer)
/// after waiting for the writer, which ends the process itself once it has taken the session.
int termination_to_raise(bool from_writer);

// --- fork.cpp
void register_fork_handlers(Global& g);
std::mutex& device_locations_mutex();

// --- exit_report.cpp
void write_report_at_exit(const std::string& dump_path, const std::string& report, const std::string& step);

// --- session.cpp
bool stop_impl(bool from_writer, int signal_number, bool* written = nullptr);
bool start_collector(SessionState& s, std::unique_ptr<Collector> c);

inline bool streams_baseline(const SessionState& s) { return s.cfg.mode == CaptureMode::kAdaptive; }

}  // namespace inferscope::runtime
