// The names of the system counters in a dump: written by the system sampler (lib/collect/system), read by the
// analyzer and the exports. One list, so a renamed counter cannot leave a reader matching the old name.
// docs/counters.md describes each one (unit, source, scope).
#pragma once

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
