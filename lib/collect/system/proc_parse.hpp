// Pure parsers for the /proc and /sys files the system sampler reads. Each takes the file's text and
// returns the values or std::nullopt with a reason in *error: malformed input never crashes and never yields
// half-parsed numbers (the sampler skips that sample). Tested with fixed strings in tests/system/.
#pragma once

#include <inferscope/counter_names.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::sys {

/// Fields of /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (proc(5)); times in clock ticks (USER_HZ).
struct TaskStat {
  std::string comm;       ///< field 2, without the parentheses (may contain spaces and ')')
  char state = '?';       ///< field 3: R, S, D, Z, T, t, X, I ...
  uint64_t minflt = 0;    ///< field 10
  uint64_t majflt = 0;    ///< field 12
  uint64_t utime = 0;     ///< field 14, ticks
  uint64_t stime = 0;     ///< field 15, ticks
  int64_t num_threads = 0;  ///< field 20
  int64_t rss_pages = 0;  ///< field 24
  int64_t processor = -1; ///< field 39, CPU last run on (-1 when the line is shorter)
};
std::optional<TaskStat> parse_stat(std::string_view text, std::string* error);

/// The lines of /proc/<pid>/status the sampler uses.
struct TaskStatus {
  std::optional<uint64_t> voluntary_ctxt_switches;
  std::optional<uint64_t> nonvoluntary_ctxt_switches;
  std::optional<uint64_t> vm_rss_bytes;  ///< VmRSS (absent for kernel threads)
  std::optional<uint64_t> vm_hwm_bytes;  ///< VmHWM, the RSS high-water mark
};
/// Fails when neither context-switch line is present (not a status file).
std::optional<TaskStatus> parse_status(std::string_view text, std::string* error);

/// /proc/<pid>/schedstat: nanoseconds on a CPU, nanoseconds waiting on a run queue, timeslices.
struct SchedStat {
  uint64_t run_ns = 0;
  uint64_t wait_ns = 0;
  uint64_t timeslices = 0;
};
std::optional<SchedStat> parse_schedstat(std::string_view text, std::string* error);

/// /proc/<pid>/statm: sizes in pages.
struct StatM {
  uint64_t size_pages = 0;
  uint64_t resident_pages = 0;
  uint64_t shared_pages = 0;
};
std::optional<StatM> parse_statm(std::string_view text, std::string* error);

/// /proc/loadavg.
struct LoadAvg {
  double load1 = 0, load5 = 0, load15 = 0;
  uint64_t runnable = 0;  ///< scheduling entities currently runnable
  uint64_t total = 0;     ///< scheduling entities that exist
};
std::optional<LoadAvg> parse_loadavg(std::string_view text, std::string* error);

/// The aggregate "cpu" line of /proc/stat, in ticks.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
  uint64_t busy() const { return total() - idle - iowait; }
};
std::optional<CpuTimes> parse_proc_stat_cpu(std::string_view text, std::string* error);
/// Busy share of the machine between two readings, in percent [0, 100]; nullopt when no time passed.
std::optional<double> busy_percent(const CpuTimes& before, const CpuTimes& after);

/// /proc/meminfo (values converted from kB to bytes). Fails without MemTotal.
struct MemInfo {
  uint64_t total_bytes = 0;
  std::optional<uint64_t> available_bytes;
};
std::optional<MemInfo> parse_meminfo(std::string_view text, std::string* error);

/// /proc/pressure/{cpu,memory,io}: cumulative stall time in microseconds (PSI).
struct Pressure {
  uint64_t some_total_us = 0;
  std::optional<uint64_t> full_total_us;  ///< absent in /proc/pressure/cpu on older kernels
};
std::optional<Pressure> parse_pressure(std::string_view text, std::string* error);

/// /sys/devices/system/node/node<N>/numastat: "name value" lines (numa_hit, numa_miss, ... in pages).
std::optional<std::vector<std::pair<std::string, uint64_t>>> parse_numastat(std::string_view text, std::string* error);

/// /sys/devices/system/node/node<N>/meminfo: "Node N MemFree: kB" lines; returns MemFree in bytes.
std::optional<uint64_t> parse_node_memfree(std::string_view text, std::string* error);

/// /proc/<pid>/task/<tid>/syscall: the number of the system call the task is blocked in; kSyscallRunning when it
/// is on a CPU (the kernel writes "running"), -1 when it is blocked outside any system call ("-1 <sp> <pc>": a
/// page fault, a stop); nullopt when the text is none of these.
inline constexpr int64_t kSyscallRunning = -2;
std::optional<int64_t> parse_syscall(std::string_view text, std::string* error);
/// What a task blocked in system call `nr` (of this machine's ABI, as parse_syscall returns it) waits for.
BlockedIn blocked_in_of_syscall(int64_t nr);
/// The same from the whole of /proc/<pid>/task/<tid>/syscall ("nr arg1 ... arg6 sp pc", the arguments in hex):
/// a futex wait is told apart by its timeout argument (arg4): kLockTimed with one, kLockUntimed without. CPython
/// waits for the GIL a switch interval at a time (a timed condition wait), while `with lock:`, a blocking
/// Lock.acquire(), a std::mutex or an untimed condition wait passes no timeout. nullopt when the text is none of
/// the forms parse_syscall takes.
std::optional<BlockedIn> blocked_in_of_syscall_text(std::string_view text, std::string* error);

/// /proc/<pid>/task/<tid>/children: the process ids of that thread's children, space separated (may be empty).
std::optional<std::vector<uint32_t>> parse_pid_list(std::string_view text, std::string* error);

/// A kernel id list such as /sys/devices/system/node/online ("0-3,5"), expanded.
std::optional<std::vector<uint32_t>> parse_id_list(std::string_view text, std::string* error);

}  // namespace inferscope::sys
