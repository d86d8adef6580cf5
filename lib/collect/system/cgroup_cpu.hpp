// The CPU quota of the process's cgroup and how often it throttled the process. A program in a container with a
// CPU limit (Kubernetes resources.limits.cpu, docker --cpus, systemd CPUQuota) is held off the CPUs once its group
// has used its quota for the period: its threads then wait on a run queue although CPUs are idle, which without
// these figures reads as other threads taking its CPU.
//
// Pure parsers for /proc/self/cgroup, /proc/self/mountinfo, cpu.max (cgroup v2), cpu.cfs_quota_us and
// cpu.cfs_period_us (v1) and cpu.stat: each takes the file's text and returns the values or std::nullopt with a
// reason in *error, never a crash (tested with fixed strings in tests/system/). read_cgroup_cpu_quota reads the
// real files, under roots a test can point at a temporary tree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::sys {

enum class CgroupVersion : uint8_t { kV1 = 1, kV2 = 2 };

/// One line of /proc/<pid>/cgroup: "hierarchy-ID:controller-list:cgroup-path".
struct CgroupLine {
  uint32_t hierarchy = 0;                ///< 0 for the cgroup v2 line
  std::vector<std::string> controllers;  ///< "cpu", "cpuacct", "name=systemd"; empty for the v2 line
  std::string path;                      ///< relative to the hierarchy's root as this cgroup namespace sees it
};
std::optional<std::vector<CgroupLine>> parse_proc_cgroup(std::string_view text, std::string* error);

/// A cgroup (v1) or cgroup2 mount of /proc/<pid>/mountinfo; other file systems are left out.
struct CgroupMount {
  std::string root;         ///< field 4: the cgroup shown at the mount point ("/" unless a sub-tree is mounted)
  std::string mount_point;  ///< field 5; both with the kernel's octal escapes (\040 ...) decoded
  bool v2 = false;          ///< cgroup2, else cgroup v1
  std::vector<std::string> super_options;  ///< v1: "rw", then the hierarchy's controllers ("cpu", "cpuacct")
};
/// Fails on a line that is not mountinfo's "id parent maj:min root mount-point options ... - type source options".
std::optional<std::vector<CgroupMount>> parse_cgroup_mounts(std::string_view mountinfo, std::string* error);

/// The directory of the process's cgroup for the CPU controller.
struct CpuCgroupDir {
  CgroupVersion version = CgroupVersion::kV2;
  std::string dir;          ///< mount point + the cgroup path below the mount's root
  std::string mount_point;  ///< the highest level visible here: where a walk up stops
};
/// v1 when a hierarchy's controller list holds "cpu" (a controller lives in one hierarchy only, so on a hybrid
/// system the v2 line then has no CPU controller), else the v2 "0::" line. Fails with a reason when no mount
/// shows that cgroup (none of that type, or no mount root above its path).
std::optional<CpuCgroupDir> find_cpu_cgroup(const std::vector<CgroupLine>& cgroups,
                                            const std::vector<CgroupMount>& mounts, std::string* error);

/// One level's CPU bandwidth limit: quota_us of CPU time per period_us of wall time; no quota_us: unlimited.
struct CpuBandwidth {
  std::optional<uint64_t> quota_us;
  uint64_t period_us = 0;
};
/// v2 cpu.max: "max 100000" (no quota), "200000 100000" (2 CPUs).
std::optional<CpuBandwidth> parse_cpu_max(std::string_view text, std::string* error);
/// v1 cpu.cfs_quota_us ("-1": no quota) and cpu.cfs_period_us.
std::optional<CpuBandwidth> parse_cfs_bandwidth(std::string_view quota_text, std::string_view period_text,
                                                std::string* error);

/// A group's throttling, cumulative since the group was created.
struct CpuThrottling {
  uint64_t periods = 0;            ///< nr_periods: enforcement periods in which the group had a runnable thread
  uint64_t throttled_periods = 0;  ///< nr_throttled: periods in which it used up its quota
  uint64_t throttled_ns = 0;       ///< v1 throttled_time (ns), v2 throttled_usec × 1000; summed over CPUs
};
/// cpu.stat of `version`; other keys are ignored. Fails when a key is missing or not a number (a v2 group
/// without the cpu controller has only usage_usec, user_usec and system_usec).
std::optional<CpuThrottling> parse_cgroup_cpu_stat(std::string_view text, CgroupVersion version, std::string* error);

/// The quota that binds the process: the fewest CPUs (quota / period) on the walk from its cgroup up to the mount
/// point. A parent's quota is shared with its other children, so this is the most the process can get.
struct CgroupCpuQuota {
  CgroupVersion version = CgroupVersion::kV2;
  std::string process_dir;               ///< the process's own cgroup directory
  std::string mount_point;               ///< where the walk stopped
  std::optional<double> cpus;            ///< at the binding level; none: no level has a quota
  uint64_t quota_us = 0, period_us = 0;  ///< at the binding level
  std::string dir;                       ///< the binding level ("" without a quota)
  std::string cpu_stat;                  ///< dir + "/cpu.stat": where its throttling is counted
  /// One line, e.g. "cgroup v1 /sys/fs/cgroup/cpu/x: cpu.cfs_quota_us 20000 / cpu.cfs_period_us 100000 =
  /// 0.2 CPUs", or "cgroup v2 /sys/fs/cgroup/x: no cpu.max quota up to /sys/fs/cgroup".
  std::string description;
};
/// Reads <proc_root>/self/cgroup and <proc_root>/self/mountinfo, then the quota files under fs_root + each mount
/// point ("" for the real ones; a test's temporary tree otherwise). A level without quota files (the v2 root) is
/// unlimited; a file that exists but cannot be read or parsed is a failure with its reason, except above a level
/// whose quota was already found: that quota is kept, and the description says why the levels above were not read.
std::optional<CgroupCpuQuota> read_cgroup_cpu_quota(const std::string& proc_root, const std::string& fs_root,
                                                    std::string* error);

/// CPUs as the description and the collector status write them: up to 3 decimals, no trailing zeros ("0.2", "2").
std::string format_cpus(double cpus);

/// The runtime's process-info keys (lib/runtime/session.cpp) when a quota binds: `cpu_quota` (CPUs, two decimals,
/// "0.20"; four under 0.01 CPUs; always a '.'), `cpu_quota_period_us` (the binding level's period) and
/// `cpu_quota_source` (the description); nothing without a quota or when it cannot be read.

std::vector<std::pair<std::string, std::string>> cgroup_cpu_process_info(const std::string& proc_root,
                                                                         const std::string& fs_root);

}  // namespace inferscope::sys
