// The runtime's interface for collectors and tests (not public API): string and code interning, collector
// registration, channels for records that belong to no application thread, clock calibration.
#pragma once

#include <inferscope/config.hpp>
#include <inferscope/internal/hot_path.hpp>

#include "dump/format.hpp"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::runtime {

// --- strings and code objects ----------------------------------------------------------------------------

/// Interns `s` (process-wide, never freed); ids start at 1. Thread-safe, takes a lock: not for hot paths.
uint32_t intern(std::string_view s);
/// Interns `s` and returns its id with a view of the stored text (valid for the life of the process).
std::pair<uint32_t, std::string_view> intern_view(std::string_view s);
/// Interns a Python code object (or anything with a qualified name, file and line); returns its code id.
uint32_t intern_code(std::string_view qualname, std::string_view file, uint32_t line);
/// "ns::Class::method" from a __PRETTY_FUNCTION__ string.
std::string function_name_from_pretty(std::string_view pretty);

// --- clock -------------------------------------------------------------------------------------------------

/// Reads the session clock and CLOCK_MONOTONIC/CLOCK_REALTIME as close together as possible.
dump::CalibrationPoint take_calibration_point();
/// "tsc" or "monotonic_raw".
const char* clock_name();

// --- collectors --------------------------------------------------------------------------------------------

/// A source of records beside the annotations (GPU activity, Python calls, system samples). The runtime
/// starts every registered collector the configuration enables, after the writer runs, and stops them
/// before the final drain. A collector that cannot work returns a status that says so; it never throws.
class Collector {
 public:
  virtual ~Collector() = default;
  virtual const char* name() const = 0;
  /// Whether the configuration asks for this collector.
  virtual bool wanted(const Config& config) const = 0;
  /// Starts collecting; returns the one-line status that goes into the dump ("on: ..." / "off: ...").
  virtual std::string start(const Config& config) = 0;
  /// Called from the writer thread every flush period while the session runs (hand over what is buffered).
  virtual void flush() {}
  /// Sampled mode (docs/sampled-mode.md): full detail on at a window's start, off at its end; called from the
  /// writer thread. A collector started in sampled mode starts with its detail off. Default: always on.
  virtual void set_detail(bool /*on*/) {}
  /// Stops collecting and hands over everything still buffered. Called from stop(), before the final drain.
  virtual void stop() = 0;
};

/// Registers a collector factory; collectors do this from a static registrar in their own source file.
void register_collector(std::function<std::unique_ptr<Collector>()> factory);

struct CollectorRegistrar {
  explicit CollectorRegistrar(std::function<std::unique_ptr<Collector>()> f) { register_collector(std::move(f)); }
};

/// Starts a collector inside the session that is already running (e.g. the Python collector when
/// inferscope_py is imported after INFERSCOPE_ENABLE started the session at load time). The session owns
/// it and stops it with the others. Returns false (and drops it) when no session runs or it is not wanted.
bool attach_collector(std::unique_ptr<Collector> collector);

/// Replaces (or adds) the one-line status of a collector in the dump, e.g. after a late failure.
void set_collector_status(const std::string& collector, const std::string& status);

/// Keys the dump's process info carries from its head on (e.g. the system collector's cgroup CPU quota),
/// read each time the head is written. The runtime knows no collector: one that has such keys registers a
/// source with its factory (register_collector), and a build without it writes none of its keys.
using ProcessInfoSource = std::vector<std::pair<std::string, std::string>> (*)();
void register_process_info_source(ProcessInfoSource source);

/// Adds a key/value to the dump's process info (e.g. "gpu.0.name"). Later values for a key win.
void set_process_info(const std::string& key, const std::string& value);

/// A PCI device location as the dump writes it: "dddd:bb:dd", lower-case hex (domain, bus, device).
std::string format_pci_location(uint32_t domain, uint32_t bus, uint32_t device);

/// The PCI location of each CUDA device ordinal (index = ordinal), as the GPU collector read it from the
/// driver, for collectors that see devices in another numbering (NVML) and must write CUDA's, the numbering
/// of every GPU record. Process-wide: ordinals do not change within a process. Empty until published.
void set_cuda_device_locations(std::vector<std::string> locations);
/// The published locations; `generation` (optional) changes whenever they are set.
std::vector<std::string> cuda_device_locations(uint64_t* generation = nullptr);
/// The generation alone (one atomic load), for a sampler that checks every round.
uint64_t cuda_device_locations_generation();

/// Adds to a drop count that is not a ring's own ("cupti_dropped", ...).
void add_drops(uint32_t thread_id, std::string_view reason, uint64_t records, uint64_t bytes);

/// A stream of records that belongs to no application thread: it gets its own entry in the thread table
/// (flagged as a channel) and its own ring. One producer at a time: write() takes the channel's lock.
class Channel {
 public:
  /// Writes one record. When the ring is full, waits up to `max_wait_ms` for the writer to make room
  /// (collector threads may wait; application threads never do), then drops and counts.
  bool write(const void* record, uint32_t size, uint32_t max_wait_ms = 50);
  uint32_t thread_id() const { return thread_id_; }
  /// Ends the channel (the session stopped); later writes return false.
  void close() {
    std::lock_guard lk(mu_);
    ring_ = nullptr;
  }

 private:
  friend Channel* open_channel(std::string_view name);
  Channel() = default;
  std::mutex mu_;
  detail::ThreadRing* ring_ = nullptr;
  uint32_t thread_id_ = 0;
};

/// Opens a channel for the running session (nullptr when none runs). Valid until the session stops.
Channel* open_channel(std::string_view name);

/// Dump thread id of the calling thread in the running session (binding it if needed); 0 when none runs.
uint32_t current_thread_id();

/// (os_tid, dump thread id) of every live thread the running session knows (channels and exited threads
/// left out); empty when none runs. Takes the registry lock that threads take when they first record: for
/// samplers that map /proc/self/task to dump thread ids now and then, not for hot paths.
std::vector<std::pair<uint32_t, uint32_t>> session_threads();
/// Dump thread id of the running session's non-channel thread whose OS thread id is `os_tid` (the live one,
/// else the newest that exited: CUPTI delivers calls late). A thread the session does not know yet (it calls
/// CUDA but never recorded: a collector saw it in CUPTI's records) gets a thread-table entry now, named after
/// /proc/self/task/<os_tid>/comm; when that thread later records itself, it binds to this same entry. 0 when
/// no session runs (or os_tid is 0). Takes the registry lock: once per new os_tid, never per record.
uint32_t thread_for_os_tid(uint32_t os_tid);
/// Names OS thread `os_tid` of this process in the running session, from any thread (the Python binding gives
/// threads their `threading` names): a live thread-table entry is renamed; a thread that has not recorded yet
/// takes the name when it does, unless it named itself first (set_thread_name wins). Writes no record and
/// binds nothing. Nothing when no session runs. Takes the registry lock: not for hot paths.
void name_os_thread(uint32_t os_tid, std::string_view name);
/// Drops a name name_os_thread keeps for a thread that has not recorded, when that thread exits: its OS thread
/// id may be given to a later thread.
void forget_os_thread_name(uint32_t os_tid);
/// Changes whenever a thread joins a session's thread table (one relaxed load, no lock): samplers call
/// session_threads() only when it moved.
uint64_t session_threads_generation();

/// Called on a thread that recorded in the running session as it exits, just before its end is recorded, with
/// its dump thread id: a collector writes the thread's last records there with detail::emit_record (the system
/// collector: its final CPU time, which the next sampling round could no longer read). Must not block.
using ThreadExitHook = void (*)(uint32_t thread_id) noexcept;
/// Installs the one thread-exit hook (nullptr removes it).
void set_thread_exit_hook(ThreadExitHook hook);

/// Called by the writer thread each flush period, for collectors that sample (e.g. the system sampler
/// asks the writer to stay awake). Exposed for tests: drains every ring now and writes what is pending.
void flush_now();

/// Installs the NVTX side of Config::nvtx_emit (the GPU collector does, when built with the CUDA headers).
void set_nvtx_hooks(void (*push)(const detail::StaticName&) noexcept, void (*pop)() noexcept);

/// Test hook: the write every dump file uses (pwrite(2) when nullptr, the default). A test injects failures
/// (ENOSPC on the Nth write, short writes, EINTR) to prove a dump never holds a torn chunk.
void set_dump_write_for_testing(ssize_t (*write_at)(int fd, const void* data, size_t size, off_t offset));

/// Test hook: rings the process holds right now (live threads' rings and retired ones not yet freed).
size_t live_ring_count();

/// Installs the signal handlers an environment-started session left for later because Python had not read its
/// own dispositions yet (inferscope_py calls this when it is imported). Does nothing otherwise.
void install_deferred_signal_handlers();

/// Completes the running session's dump when this process owns it (before exec, os._exit in a fork child);
/// returns its output path, or "" when this process records nothing of its own (no session, or a vfork child
/// sharing its parent's memory: it touches nothing).
std::string finish_session_of_this_process();

/// Test hook: takes the string table's lock on the calling thread, calls `while_held`, then keeps the lock for
/// `ms` milliseconds (a fork() made meanwhile must neither deadlock the child nor break the table).
void hold_strings_lock_for_test(uint32_t ms, const std::function<void()>& while_held);

/// Test hook: the configuration the running session was started with.
const Config& active_config();

/// Test hook: where the running session's windows stand (sampled and adaptive modes): "open" (a step begun now is
/// counted in a window), "closing" (it has counted its steps; detail is still on), "off", "opening" (due; detail
/// not on yet), or "" with no sampling session running. A test waits on it instead of on the writer thread's
/// timing; it waits for "off" only where no window is due, since a due window opens in the same step as the last
/// one closes.
std::string sampled_window_state();

}  // namespace inferscope::runtime
