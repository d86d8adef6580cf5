// The names of the system counters in a dump: written by the system sampler (lib/collect/system), read by the
// analyzer and the exports. One list, so a renamed counter cannot leave a reader matching the old name.
// docs/counters.md describes each one (unit, source, scope).
#pragma once

#include <cstdint>
#include <string_view>

namespace inferscope::counter_names {

// Process scope (cumulative unless noted)
inline constexpr std::string_view kCpuUserNs = "cpu.user_ns";
inline constexpr std::string_view kCpuSystemNs = "cpu.system_ns";
inline constexpr std::string_view kCtxVoluntary = "ctx.voluntary";
inline constexpr std::string_view kCtxInvoluntary = "ctx.involuntary";
inline constexpr std::string_view kMemRssBytes = "mem.rss_bytes";          // a level
inline constexpr std::string_view kMemMinorFaults = "mem.minor_faults";
inline constexpr std::string_view kMemMajorFaults = "mem.major_faults";
inline constexpr std::string_view kMemHwmBytes = "mem.hwm_bytes";          // a level
inline constexpr std::string_view kProcessThreads = "process.threads";     // a level
inline constexpr std::string_view kPerfTaskClockNs = "perf.task_clock_ns";
inline constexpr std::string_view kChildProcesses = "process.children";  // a level: child processes alive
// The CPU quota of the process's cgroup (cpu.max, or cpu.cfs_quota_us in cgroup v1), from the cpu.stat of the
// level whose quota binds: scheduling periods, the periods in which the group ran out of quota, and the time its
// threads were held back (summed over the CPUs it was throttled on).
inline constexpr std::string_view kCgroupCpuPeriods = "cgroup.cpu.periods";
inline constexpr std::string_view kCgroupCpuThrottledPeriods = "cgroup.cpu.throttled_periods";
inline constexpr std::string_view kCgroupCpuThrottledNs = "cgroup.cpu.throttled_ns";

// Per thread (thread scope by dump thread id, or OS-thread scope by tid before the thread's first record)
inline constexpr std::string_view kThreadCpuUserNs = "thread.cpu.user_ns";      // ticks: 10 ms resolution
inline constexpr std::string_view kThreadCpuSystemNs = "thread.cpu.system_ns";  // ticks
inline constexpr std::string_view kThreadSchedRunNs = "thread.sched.run_ns";    // schedstat: ns resolution
inline constexpr std::string_view kThreadSchedWaitNs = "thread.sched.wait_ns";  // schedstat: runnable, not running
inline constexpr std::string_view kThreadState = "thread.state";                // a level: the state letter
inline constexpr std::string_view kThreadCtxVoluntary = "thread.ctx.voluntary";
inline constexpr std::string_view kThreadCtxInvoluntary = "thread.ctx.involuntary";
// A level: what the thread was blocked in when sampled (BlockedIn below), written when it changes; sampled with
// thread.sched.* for the threads the session knows.
inline constexpr std::string_view kThreadBlockedIn = "thread.blocked_in";

// Per child process (CounterScope::kChildProcess, target: its pid): the processes this one started (DataLoader
// workers, multiprocessing pools, a forkserver's children), found through /proc/<pid>/task/<tid>/children.
inline constexpr std::string_view kChildSchedRunNs = "child.sched.run_ns";    // its main thread, schedstat
inline constexpr std::string_view kChildSchedWaitNs = "child.sched.wait_ns";  // its main thread, run queue
inline constexpr std::string_view kChildCpuUserNs = "child.cpu.user_ns";      // all its threads, ticks
inline constexpr std::string_view kChildCpuSystemNs = "child.cpu.system_ns";  // all its threads, ticks

// Machine
inline constexpr std::string_view kLoad1m = "load.1m";
inline constexpr std::string_view kLoadRunnable = "load.runnable";
inline constexpr std::string_view kMachineBusyPct = "cpu.machine.busy_pct";
inline constexpr std::string_view kMachineMemAvailableBytes = "mem.machine.available_bytes";
inline constexpr std::string_view kPsiCpuSomeUs = "psi.cpu.some_us";
inline constexpr std::string_view kPsiMemorySomeUs = "psi.memory.some_us";
inline constexpr std::string_view kPsiMemoryFullUs = "psi.memory.full_us";
inline constexpr std::string_view kNumaMemFreeBytes = "numa.mem_free_bytes";

// GPU (NVML), levels
inline constexpr std::string_view kGpuUtilPct = "gpu.util_pct";
inline constexpr std::string_view kGpuMemUtilPct = "gpu.mem_util_pct";
inline constexpr std::string_view kGpuMemUsedBytes = "gpu.mem_used_bytes";
inline constexpr std::string_view kGpuMemTotalBytes = "gpu.mem_total_bytes";
inline constexpr std::string_view kGpuPcieTxBytesPerS = "gpu.pcie_tx_bytes_per_s";
inline constexpr std::string_view kGpuPcieRxBytesPerS = "gpu.pcie_rx_bytes_per_s";
inline constexpr std::string_view kGpuSmClockMhz = "gpu.sm_clock_mhz";
inline constexpr std::string_view kGpuPowerMw = "gpu.power_mw";
inline constexpr std::string_view kGpuThrottleReasons = "gpu.throttle_reasons";
inline constexpr std::string_view kGpuTemperatureC = "gpu.temperature_c";

}  // namespace inferscope::counter_names

namespace inferscope {

/// The values of thread.blocked_in: what a thread that was off a CPU was waiting in, from the system call it was
/// blocked in (/proc/<pid>/task/<tid>/syscall), mapped by the sampler for its own machine's system call numbers.
/// Append-only, like the record kinds.
enum class BlockedIn : uint8_t {
  kRunning = 0,    ///< on a CPU, or ran since the last sample
  kSleep = 1,      ///< nanosleep, clock_nanosleep, pause: a timed sleep (time.sleep, std::this_thread::sleep_for)
  kLock = 2,       ///< futex: a lock, a condition variable, a semaphore, a queue, a thread join, the GIL
  kPoll = 3,       ///< poll, select, epoll, accept, connect: waiting for a file descriptor (event loops, pipes)
  kRead = 4,       ///< read, pread, recv: a file, a pipe or a socket (multiprocessing queues read pipes)
  kWrite = 5,      ///< write, send, fsync
  kChild = 6,      ///< wait4, waitid: waiting for a child process to exit
  kOther = 7,      ///< another system call (ioctl: a GPU driver wait, ...)
  kNoSyscall = 8,  ///< off a CPU outside any system call (a page fault, a stopped task)
  kUnknown = 9,
  /// futex with a timeout: a timed lock, condition or queue wait, or the GIL (CPython waits for it a switch
  /// interval at a time). Dumps before these two values write kLock for every futex.
  kLockTimed = 10,
  /// futex without a timeout: `with lock:`, a blocking acquire, an untimed condition or queue wait, a std::mutex
  kLockUntimed = 11,
};

/// A futex wait, whatever its timeout (or with the timeout not recorded).
constexpr bool is_futex_wait(BlockedIn b) {
  return b == BlockedIn::kLock || b == BlockedIn::kLockTimed || b == BlockedIn::kLockUntimed;
}

/// "sleep", "lock", "poll", ...: the name reports use for a BlockedIn value.
constexpr const char* blocked_in_name(BlockedIn b) {
  switch (b) {
    case BlockedIn::kRunning: return "running";
    case BlockedIn::kSleep: return "sleep";
    case BlockedIn::kLock: return "lock";
    case BlockedIn::kLockTimed: return "timed wait";
    case BlockedIn::kLockUntimed: return "lock";
    case BlockedIn::kPoll: return "poll";
    case BlockedIn::kRead: return "read";
    case BlockedIn::kWrite: return "write";
    case BlockedIn::kChild: return "child";
    case BlockedIn::kOther: return "other";
    case BlockedIn::kNoSyscall: return "fault";
    default: return "unknown";
  }
}

}  // namespace inferscope
