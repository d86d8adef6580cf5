// One round of system sampling: process and per-thread CPU time, context switches, memory, the cgroup CPU
// quota's throttling, machine load, pressure (PSI), NUMA and GPU (NVML) counters, each a CounterRecord stamped
// with the session clock.
// The sampler only reads /proc, /sys and NVML: it takes no lock an application thread takes, so it never
// delays the threads it observes. docs/counters.md lists every counter (name, unit, scope).
//
//   SystemSampler s(opts, [&](const CounterRecord& r) { channel->write(&r, sizeof(r)); }, lookup);
//   std::string status = s.open();   // what it can sample here, one line
//   s.round(false);                  // every period; round(true) at stop writes every value
#pragma once

#include <inferscope/records.hpp>

#include "collect/system/cgroup_cpu.hpp"
#include "collect/system/corner_filter.hpp"
#include "collect/system/nvml.hpp"
#include "collect/system/proc_parse.hpp"
#include "collect/system/sampler_parts.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferscope::sys {

struct SamplerOptions {
  uint32_t period_ms = 10;
  /// Between rounds, the threads that ran lately and the threads the session knows have their schedstat read
  /// this often (fast_round), so that bursts of a few ms are seen; 0: only in rounds.
  uint32_t thread_sample_us = 1000;
  bool nvml = true;
  bool perf = false;                ///< per-thread perf_event_open cpu-clock counters
  std::string nvml_library;         ///< "" = libnvidia-ml.so.1
  std::string proc_root = "/proc";  ///< where "self" lives (tests may point elsewhere)
  std::string fs_root;              ///< prefix of the cgroup mount points in mountinfo ("": the real ones)
};

/// (os_tid, dump thread id) of the threads the session knows.
using ThreadMap = std::vector<std::pair<uint32_t, uint32_t>>;
/// Fills `map` and returns true when the session's thread table changed since `generation` (updating it);
/// returns false without work otherwise. nullptr: no session, every thread is sampled as kOsThread.
using ThreadLookup = std::function<bool(uint64_t& generation, ThreadMap& map)>;

class SystemSampler {
 public:
  using Sink = std::function<void(const CounterRecord&)>;

  SystemSampler(SamplerOptions options, Sink sink, ThreadLookup lookup);
  ~SystemSampler();
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  /// Opens the sources; returns one line saying what is sampled and what is not (and why).
  std::string open();
  /// Samples once. Values unchanged since their last write are skipped unless a second has passed;
  /// `final` writes every value (the last sample of a session).
  void round(bool final);
  /// Between rounds (every SamplerOptions::thread_sample_us): schedstat of the threads that ran in the last
  /// ~100 ms and of every thread the session knows, and what the latter are blocked in. Cheap: one pread per
  /// thread, and a sample is written only where the thread's rate changed (CornerFilter).
  void fast_round();
  /// Microseconds between fast rounds; 0 when there are none (off, or not shorter than the period).
  uint32_t fast_every_us() const;
  /// Which parts run from now on (SamplerPart bits; all by default): for measuring what each costs.
  void set_parts(uint32_t mask) { parts_ = mask; }
  uint32_t parts() const { return parts_; }

  /// Whether NVML is open (GPU counters are sampled).
  bool has_gpu() const { return nvml_.is_open(); }
  /// Why there are no GPU counters ("" when there are).
  const std::string& gpu_note() const { return gpu_note_; }
  /// Why there are no perf counters ("" when perf is on or was not asked for).
  const std::string& perf_note() const { return perf_note_; }
  /// Parse failures and unreadable files so far (each skipped one sample).
  uint64_t skipped_samples() const { return skipped_; }
  const std::string& last_error() const { return last_error_; }

 private:
  /// schedstat's two cumulative series of a thread or child process, written at their corners only.
  struct SchedSeries {
    CornerFilter run{kCornerToleranceNs}, wait{kCornerToleranceNs};
    CounterScope scope = CounterScope::kProcess;  ///< where they were written so far
    uint32_t target = 0;
    int64_t written_ns = 0;  ///< steady clock of the last write (keep-alive)
    bool started = false;
  };
  /// Linear interpolation between written schedstat samples stays within twice this of every sample read (ns of
  /// CPU time): 5 % of a millisecond.
  static constexpr double kCornerToleranceNs = 50'000;
  struct Task {
    int stat = -1, status = -1, schedstat = -1, perf = -1, syscall = -1;
    uint32_t dump_id = 0;
    uint64_t seen_round = 0;
    std::string published_name;  // last name written to process info (threads the session does not know)
    SchedStat sched;             // last schedstat reading
    int64_t full_read_ns = -1;   // when stat and status were last read
    uint32_t full_read_target = 0;  // the target they were written under (changes when the thread binds)
    uint64_t born_after = 0;        // ticks of the listing before the one that first saw it (0: there at start)
    SchedSeries series;
    static constexpr uint64_t kNeverMoved = ~0ull;
    uint64_t moved_round = kNeverMoved;  // the last round its schedstat moved in (fast rounds read it for a while)
  };
  /// A process this one started (or one of those started): DataLoader workers, pool processes.
  struct Child {
    int stat = -1, schedstat = -1;
    uint32_t parent = 0;
    uint64_t seen = 0;        // the discovery that last listed it
    uint64_t born_after = 0;  // ticks of the discovery before the one that first saw it (0: there at start)
    std::string name;         // comm, as last published
    SchedSeries series;
  };
  struct Last {
    union {
      int64_t i;
      double d;
    } v;
    bool is_double = false;
    int64_t written_ns = 0;
  };

  void emit_int(uint32_t name, CounterScope scope, uint32_t target, uint64_t ts, int64_t v);
  void emit_double(uint32_t name, CounterScope scope, uint32_t target, uint64_t ts, double v);
  void emit(CounterRecord& r, bool is_double);
  bool read_file(int& fd, const std::string& path, bool keep, std::string& out);
  bool read_path(const std::string& path, std::string& out);
  void skip(const std::string& what);

  std::string open_cgroup();
  void sample_process();
  void sample_cgroup(uint64_t ts);
  void sample_threads();
  void sample_task(uint32_t tid, Task& t);
  bool fast_tier(const Task& t) const;
  void sample_blocked_in(uint32_t tid, Task& t, uint64_t ts);
  void exact_run_time(uint32_t tid, SchedStat& s) const;
  void emit_sched(SchedSeries& s, CounterScope scope, uint32_t target, uint64_t ts, const SchedStat& v,
                  uint32_t run_name, uint32_t wait_name);
  void flush_sched(SchedSeries& s, uint32_t run_name, uint32_t wait_name);
  void discover_children();
  void sample_children();
  void forget_child(uint32_t pid, Child& c);
  void write_birth(CounterScope scope, uint32_t target, uint64_t ts);
  void sample_machine();
  void sample_numa();
  void sample_gpus(uint32_t parts);
  void update_device_map();
  void publish_device_map();
  void refresh_thread_map();
  int open_perf(uint32_t tid);
  uint32_t numa_name(const std::string& key);

  SamplerOptions opt_;
  Sink sink_;
  ThreadLookup lookup_;
  Nvml nvml_;
  // CUDA's ordinal of each NVML device (-1: not this process's), the numbering every GPU record uses; one entry
  // per NVML device from open() on, rebuilt when the GPU collector publishes CUDA's PCI locations
  // (see map_nvml_to_cuda).
  std::vector<int> cuda_of_nvml_;
  std::vector<std::string> nvml_locations_, nvml_uuids_;
  uint64_t locations_generation_ = ~0ull;
  std::string device_map_source_;  // what the mapping came from (process info nvml.device_map)
  std::string gpu_note_, perf_note_, last_error_;
  uint64_t skipped_ = 0;
  uint32_t parts_ = kAllSamplerParts;
  bool final_ = false;
  int64_t now_ns_ = 0;  // steady clock at the start of the round, for keep-alive and rates
  uint64_t round_ = 0;
  uint32_t slow_every_ = 10;  // rounds between machine, NUMA and GPU samples (every ~100 ms)
  double ns_per_tick_ = 1e7;
  uint64_t page_size_ = 4096;
  std::string self_;            // "<proc_root>/self"
  bool live_proc_ = false;      // proc_root is this process's /proc: its threads' CPU clocks can be read
  // Files read every round or less often are opened around each read (docs/counters.md, "Descriptors"): their
  // paths, "" where one could not be read at open().
  std::string task_dir_;
  std::string statm_;
  std::string cgroup_stat_;  // cpu.stat of the level whose CPU quota binds ("": no quota)
  CgroupVersion cgroup_version_ = CgroupVersion::kV2;
  size_t held_fds_ = 0;
  size_t held_budget_ = 0;  // descriptors kept open between reads (per-thread files), at most; set by open()
  bool have_schedstat_ = true;
  bool perf_ok_ = false;
  std::unordered_map<uint32_t, Task> tasks_;
  std::unordered_map<uint32_t, Child> children_;  // by pid
  uint64_t discovery_ = 0;        // discoveries of child processes so far
  uint64_t discovered_ts_ = 0;    // ticks of the last discovery
  bool have_children_file_ = true;
  uint64_t thread_generation_ = ~0ull;  // of the session's thread table when last looked up
  uint64_t listed_ts_ = 0;              // ticks just before the last listing of the threads (0: none yet)
  std::unordered_map<uint64_t, Last> last_;  // (name, scope, target) -> last written value
  // Machine
  std::string loadavg_, stat_, meminfo_, psi_cpu_, psi_mem_;
  std::optional<CpuTimes> prev_cpu_;
  struct Node {
    uint32_t id;
    std::string numastat, meminfo;
  };
  std::vector<Node> nodes_;
  std::unordered_map<std::string, uint32_t> numa_names_;
  // GPU: previous cumulative PCIe bytes and when they were read, per device.
  struct PcieLast {
    uint64_t tx = 0, rx = 0;
    int64_t ns = 0;
    bool valid = false;
  };
  std::vector<PcieLast> pcie_;
  std::string buf_;
};

/// The CPU counters of the thread whose /proc directory is `task_dir` (/proc/self/task/<tid>), read once as it
/// exits: schedstat's run and wait time (ns) and stat's user and system time (ticks), through `sink` under
/// `thread_id` (CounterScope::kThread). What it ran since the sampler's last round, all of it for a thread that
/// lived less than a period, would be lost otherwise. Shares no state with a SystemSampler: any thread may call it.
void sample_thread_at_exit(const std::string& task_dir, uint32_t thread_id, const SystemSampler::Sink& sink);

/// Counter names used by the sampler (interned once per process).
struct CounterNames {
  uint32_t cpu_user_ns, cpu_system_ns, ctx_voluntary, ctx_involuntary, mem_rss_bytes, mem_minor_faults,
      mem_major_faults, mem_hwm_bytes, threads;
  uint32_t cgroup_cpu_periods, cgroup_cpu_throttled_periods, cgroup_cpu_throttled_ns;
  uint32_t thread_cpu_user_ns, thread_cpu_system_ns, thread_sched_run_ns, thread_sched_wait_ns, thread_state,
      thread_ctx_voluntary, thread_ctx_involuntary, perf_task_clock_ns;
  uint32_t load_1m, load_runnable, machine_busy_pct, machine_mem_available_bytes, psi_cpu_some_us,
      psi_memory_some_us, psi_memory_full_us, numa_mem_free_bytes;
  uint32_t gpu_util_pct, gpu_mem_util_pct, gpu_mem_used_bytes, gpu_mem_total_bytes, gpu_pcie_tx, gpu_pcie_rx,
      gpu_sm_clock_mhz, gpu_power_mw, gpu_throttle_reasons, gpu_temperature_c;
  static const CounterNames& get();
  /// The names written per thread.
  uint32_t thread_blocked_in, children, child_sched_run_ns, child_sched_wait_ns, child_cpu_user_ns,
      child_cpu_system_ns;
  std::array<uint32_t, 9> per_thread() const {
    return {thread_cpu_user_ns, thread_cpu_system_ns, thread_sched_run_ns, thread_sched_wait_ns, thread_state,
            thread_ctx_voluntary, thread_ctx_involuntary, perf_task_clock_ns, thread_blocked_in};
  }
  std::array<uint32_t, 2> per_child() const { return {child_cpu_user_ns, child_cpu_system_ns}; }
};

}  // namespace inferscope::sys
