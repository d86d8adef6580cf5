#include "collect/system/sampler.hpp"

#include "runtime/runtime.hpp"

#include <inferscope/counter_names.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace inferscope::sys {
namespace {

// The per-thread files read between rounds (every thread_sample_us) are kept open while the program can spare the
// descriptors: at most 1/64 of its limit (RLIMIT_NOFILE), never more than 384; beyond that they are opened for each
// read, at about three times the cost (docs/counters.md, "Descriptors"). Every other file is opened for each read.
constexpr size_t kMaxHeldFds = 384;
constexpr size_t kLimitPerHeldFd = 64;

size_t held_budget_for(size_t fd_limit) { return std::min(kMaxHeldFds, fd_limit / kLimitPerHeldFd); }

size_t descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return kMaxHeldFds * kLimitPerHeldFd;
  return static_cast<size_t>(r.rlim_cur);
}

constexpr int64_t kKeepAliveNs = 1'000'000'000;   // an unchanged counter is rewritten once a second

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int open_ro(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// `path` when it can be opened now, "" otherwise: what open() checks before sampling it.
std::string readable(const std::string& path) {
  const int fd = open_ro(path);
  if (fd < 0) return "";
  ::close(fd);
  return path;
}

CounterRecord int_counter(uint32_t name, CounterScope scope, uint32_t target, uint64_t ts, int64_t v) {
  CounterRecord r{};
  r.h = {RecordKind::kCounter, static_cast<uint8_t>(AttrType::kInt), sizeof(CounterRecord)};
  r.name = name;
  r.ts = ts;
  r.value.i = v;
  r.scope = scope;
  r.target = target;
  return r;
}

// A small /proc file read whole with plain calls (no held descriptor); false when it cannot be read.
bool read_small(const std::string& path, std::string& out) {
  const int fd = open_ro(path);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n;
  do n = ::read(fd, buf, sizeof(buf));
  while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  out.assign(buf, static_cast<size_t>(n));
  return true;
}

double ns_per_clock_tick() {
  const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? 1e9 / static_cast<double>(hz) : 1e7;
}

// Collision-free while string ids stay below 2^29 and scopes below 8.
uint64_t key_of(uint32_t name, CounterScope scope, uint32_t target) {
  return (uint64_t(static_cast<uint8_t>(scope)) << 61) | (uint64_t(name) << 32) | target;
}

}  // namespace

const CounterNames& CounterNames::get() {
  static const CounterNames n = [] {
    using runtime::intern;
    namespace names = counter_names;
    CounterNames c{};
    c.cpu_user_ns = intern(names::kCpuUserNs);
    c.cpu_system_ns = intern(names::kCpuSystemNs);
    c.ctx_voluntary = intern(names::kCtxVoluntary);
    c.ctx_involuntary = intern(names::kCtxInvoluntary);
    c.mem_rss_bytes = intern(names::kMemRssBytes);
    c.mem_minor_faults = intern(names::kMemMinorFaults);
    c.mem_major_faults = intern(names::kMemMajorFaults);
    c.mem_hwm_bytes = intern(names::kMemHwmBytes);
    c.threads = intern(names::kProcessThreads);
    c.cgroup_cpu_periods = intern(names::kCgroupCpuPeriods);
    c.cgroup_cpu_throttled_periods = intern(names::kCgroupCpuThrottledPeriods);
    c.cgroup_cpu_throttled_ns = intern(names::kCgroupCpuThrottledNs);
    c.thread_cpu_user_ns = intern(names::kThreadCpuUserNs);
    c.thread_cpu_system_ns = intern(names::kThreadCpuSystemNs);
    c.thread_sched_run_ns = intern(names::kThreadSchedRunNs);
    c.thread_sched_wait_ns = intern(names::kThreadSchedWaitNs);
    c.thread_state = intern(names::kThreadState);
    c.thread_ctx_voluntary = intern(names::kThreadCtxVoluntary);
    c.thread_ctx_involuntary = intern(names::kThreadCtxInvoluntary);
    c.perf_task_clock_ns = intern(names::kPerfTaskClockNs);
    c.thread_blocked_in = intern(names::kThreadBlockedIn);
    c.children = intern(names::kChildProcesses);
    c.child_sched_run_ns = intern(names::kChildSchedRunNs);
    c.child_sched_wait_ns = intern(names::kChildSchedWaitNs);
    c.child_cpu_user_ns = intern(names::kChildCpuUserNs);
    c.child_cpu_system_ns = intern(names::kChildCpuSystemNs);
    c.load_1m = intern(names::kLoad1m);
    c.load_runnable = intern(names::kLoadRunnable);
    c.machine_busy_pct = intern(names::kMachineBusyPct);
    c.machine_mem_available_bytes = intern(names::kMachineMemAvailableBytes);
    c.psi_cpu_some_us = intern(names::kPsiCpuSomeUs);
    c.psi_memory_some_us = intern(names::kPsiMemorySomeUs);
    c.psi_memory_full_us = intern(names::kPsiMemoryFullUs);
    c.numa_mem_free_bytes = intern(names::kNumaMemFreeBytes);
    c.gpu_util_pct = intern(names::kGpuUtilPct);
    c.gpu_mem_util_pct = intern(names::kGpuMemUtilPct);
    c.gpu_mem_used_bytes = intern(names::kGpuMemUsedBytes);
    c.gpu_mem_total_bytes = intern(names::kGpuMemTotalBytes);
    c.gpu_pcie_tx = intern(names::kGpuPcieTxBytesPerS);
    c.gpu_pcie_rx = intern(names::kGpuPcieRxBytesPerS);
    c.gpu_sm_clock_mhz = intern(names::kGpuSmClockMhz);
    c.gpu_power_mw = intern(names::kGpuPowerMw);
    c.gpu_throttle_reasons = intern(names::kGpuThrottleReasons);
    c.gpu_temperature_c = intern(names::kGpuTemperatureC);
    return c;
  }();
  return n;
}

SystemSampler::SystemSampler(SamplerOptions options, Sink sink, ThreadLookup lookup)
    : opt_(std::move(options)), sink_(std::move(sink)), lookup_(std::move(lookup)) {
  if (opt_.period_ms == 0) opt_.period_ms = 1;
  // Machine-wide files (/proc/stat grows with the CPU count) and NVML are read at most every 100 ms: one
  // NVML sample of an H200 took ~0.7 ms inside a sampling round (docs/history/benchmarks-2026-11.md), and NVML's own
  // utilization is an average over 1/6 s or more, so sampling it faster shows nothing new.
  slow_every_ = std::max<uint32_t>(1, 100 / opt_.period_ms);
  ns_per_tick_ = ns_per_clock_tick();
  const long ps = ::sysconf(_SC_PAGESIZE);
  page_size_ = ps > 0 ? static_cast<uint64_t>(ps) : 4096;
  self_ = opt_.proc_root + "/self";
  live_proc_ = opt_.proc_root == "/proc";  // tests point proc_root at a made-up tree: its threads are not ours
}

SystemSampler::~SystemSampler() {
  for (auto& [tid, t] : tasks_) {
    close_fd(t.stat);
    close_fd(t.status);
    close_fd(t.schedstat);
    close_fd(t.perf);
    close_fd(t.syscall);
  }
  for (auto& [pid, c] : children_) {
    close_fd(c.stat);
    close_fd(c.schedstat);
  }
}

std::string SystemSampler::open() {
  CounterNames::get();
  std::string status = "every " + std::to_string(opt_.period_ms) + " ms";
  held_budget_ = held_budget_for(descriptor_limit());
  task_dir_ = readable(self_ + "/task");
  statm_ = readable(self_ + "/statm");
  status += !task_dir_.empty() ? "; process and per-thread CPU, context switches, memory" : "; process counters only ("
                                                                                       + self_ + "/task unreadable)";
  status += open_cgroup();
  loadavg_ = readable(opt_.proc_root + "/loadavg");
  stat_ = readable(opt_.proc_root + "/stat");
  meminfo_ = readable(opt_.proc_root + "/meminfo");
  psi_cpu_ = readable(opt_.proc_root + "/pressure/cpu");
  psi_mem_ = readable(opt_.proc_root + "/pressure/memory");
  status += !psi_cpu_.empty() || !psi_mem_.empty() ? "; machine load, PSI" : "; machine load (no PSI)";
  {
    std::string text;
    int fd = open_ro("/sys/devices/system/node/online");
    std::string err;
    if (fd >= 0 && read_file(fd, "", false, text)) {
      if (auto ids = parse_id_list(text, &err))
        for (uint32_t id : *ids) {
          const std::string dir = "/sys/devices/system/node/node" + std::to_string(id);
          nodes_.push_back({id, readable(dir + "/numastat"), readable(dir + "/meminfo")});
        }
    }
    close_fd(fd);
    status += nodes_.empty() ? "; no NUMA statistics" : "; NUMA " + std::to_string(nodes_.size()) + " node" +
                                                          (nodes_.size() == 1 ? "" : "s");
  }
  if (!opt_.nvml) {
    gpu_note_ = "GPU counters off (nvml: false)";
  } else if (std::string err = nvml_.open(opt_.nvml_library.empty() ? "libnvidia-ml.so.1" : opt_.nvml_library);
             !err.empty()) {
    gpu_note_ = "no NVML: " + err + "; GPU counters off";
  } else {
    pcie_.assign(nvml_.device_count(), {});
    status += "; GPU counters for " + std::to_string(nvml_.device_count()) + " device" +
              (nvml_.device_count() == 1 ? "" : "s") + " via NVML";
    const std::string name = nvml_.device_name(0);
    if (!name.empty()) status += " (" + name + (nvml_.device_count() > 1 ? ", ..." : "") + ")";
    for (uint32_t i = 0; i < nvml_.device_count(); ++i) {
      nvml_locations_.push_back(nvml_.pci_location(i));
      nvml_uuids_.push_back(nvml_.uuid(i));
    }
    update_device_map();
  }
  if (!gpu_note_.empty()) status += "; " + gpu_note_;
  if (opt_.perf) {
    const int fd = open_perf(static_cast<uint32_t>(::syscall(SYS_gettid)));
    if (fd >= 0) {
      perf_ok_ = true;
      ::close(fd);
      status += "; perf cpu-clock per thread";
    } else {
      const int open_errno = errno;
      std::string paranoid;
      int p = open_ro("/proc/sys/kernel/perf_event_paranoid");
      if (p >= 0) read_file(p, "", false, paranoid);
      close_fd(p);
      while (!paranoid.empty() && (paranoid.back() == '\n' || paranoid.back() == ' ')) paranoid.pop_back();
      perf_note_ = std::string("perf sampling unavailable: perf_event_open: ") + std::strerror(open_errno) +
                   (paranoid.empty() ? "" : " (perf_event_paranoid=" + paranoid + ")");
      status += "; " + perf_note_;
    }
  }
  return status;
}

// The CPU quota is found once: a container's limit is set when it starts. Its cpu.stat stays open and is re-read
// each round, like the process's own files.
std::string SystemSampler::open_cgroup() {
  std::string err;
  const auto q = read_cgroup_cpu_quota(opt_.proc_root, opt_.fs_root, &err);
  if (!q) return "; cgroup CPU quota unknown (" + err + ")";
  if (!q->cpus) return "; no cgroup CPU quota";
  const std::string quota = "; cgroup CPU quota " + format_cpus(*q->cpus) + (*q->cpus == 1.0 ? " CPU" : " CPUs");
  cgroup_version_ = q->version;
  cgroup_stat_ = readable(q->cpu_stat);
  if (cgroup_stat_.empty()) {
    const int open_errno = errno;
    return quota + " (throttling not counted: cannot open " + q->cpu_stat + ": " + std::strerror(open_errno) + ")";
  }
  std::string text;
  if (!read_path(cgroup_stat_, text) || !parse_cgroup_cpu_stat(text, cgroup_version_, &err)) {
    cgroup_stat_.clear();
    return quota + " (throttling not counted: " + (err.empty() ? "nothing read from " + q->cpu_stat : err) + ")";
  }
  return quota + " (throttling counted)";
}

int SystemSampler::open_perf(uint32_t tid) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  // perf_event_paranoid >= 2 (the usual default) refuses an event that does not exclude the kernel. In
  // counting mode the software cpu-clock ignores the flag: the count is all time on a CPU (docs/counters.md).
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  return static_cast<int>(::syscall(SYS_perf_event_open, &a, static_cast<pid_t>(tid), -1, -1, PERF_FLAG_FD_CLOEXEC));
}

void SystemSampler::skip(const std::string& what) {
  ++skipped_;
  last_error_ = what;
}

// Reads a whole /proc or /sys file. A held fd is re-read with pread at offset 0, which makes the kernel
// generate the file afresh; without one (fd < 0) the file at `path` is opened, and kept when `keep`.
bool SystemSampler::read_file(int& fd, const std::string& path, bool keep, std::string& out) {
  bool transient = false;
  if (fd < 0) {
    if (path.empty()) return false;
    fd = open_ro(path);
    if (fd < 0) return false;
    transient = !keep;
    if (keep) ++held_fds_;
  }
  out.resize(4096);
  size_t len = 0;
  for (;;) {
    ssize_t r = ::pread(fd, out.data() + len, out.size() - len, static_cast<off_t>(len));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      len = 0;
      break;
    }
    len += static_cast<size_t>(r);
    if (r == 0 || len < out.size()) break;
    out.resize(out.size() * 2);
  }
  out.resize(len);
  if (transient) close_fd(fd);
  return len > 0;
}

bool SystemSampler::read_path(const std::string& path, std::string& out) {
  int fd = -1;
  return !path.empty() && read_file(fd, path, false, out);
}

void SystemSampler::emit(CounterRecord& r, bool is_double) {
  const uint64_t k = key_of(r.name, r.scope, r.target);
  auto [it, fresh] = last_.try_emplace(k);
  Last& l = it->second;
  const bool same = !fresh && l.is_double == is_double && l.v.i == r.value.i;
  if (same && !final_ && now_ns_ - l.written_ns < kKeepAliveNs) return;
  l.v.i = r.value.i;
  l.is_double = is_double;
  l.written_ns = now_ns_;
  sink_(r);
}

void SystemSampler::emit_int(uint32_t name, CounterScope scope, uint32_t target, uint64_t ts, int64_t v) {
  CounterRecord r = int_counter(name, scope, target, ts, v);
  emit(r, false);
}

void SystemSampler::emit_double(uint32_t name, CounterScope scope, uint32_t target, uint64_t ts, double v) {
  CounterRecord r{};
  r.h = {RecordKind::kCounter, static_cast<uint8_t>(AttrType::kDouble), sizeof(CounterRecord)};
  r.name = name;
  r.ts = ts;
  r.value.d = v;
  r.scope = scope;
  r.target = target;
  emit(r, true);
}

void SystemSampler::round(bool final) {
  final_ = final;
  now_ns_ = steady_ns();
  sample_process();
  if (!task_dir_.empty()) sample_threads();
  if (!task_dir_.empty() && (final || round_ % slow_every_ == 0)) discover_children();
  sample_children();
  if (final || round_ % slow_every_ == 0) {
    sample_machine();
    sample_numa();
    if (nvml_.is_open() && (parts_ & kPartNvml)) sample_gpus(kGpuAll);
  }
  ++round_;
}

void SystemSampler::sample_process() {
  const auto& n = CounterNames::get();
  const auto P = CounterScope::kProcess;
  rusage ru{};
  const uint64_t ts = detail::now();
  // getrusage is one system call with microsecond CPU times (the stat file counts 10 ms ticks), and it
  // includes threads that have already exited.
  if (::getrusage(RUSAGE_SELF, &ru) == 0) {
    emit_int(n.cpu_user_ns, P, 0, ts, int64_t(ru.ru_utime.tv_sec) * 1000000000 + int64_t(ru.ru_utime.tv_usec) * 1000);
    emit_int(n.cpu_system_ns, P, 0, ts, int64_t(ru.ru_stime.tv_sec) * 1000000000 + int64_t(ru.ru_stime.tv_usec) * 1000);
    emit_int(n.ctx_voluntary, P, 0, ts, ru.ru_nvcsw);
    emit_int(n.ctx_involuntary, P, 0, ts, ru.ru_nivcsw);
    emit_int(n.mem_minor_faults, P, 0, ts, ru.ru_minflt);
    emit_int(n.mem_major_faults, P, 0, ts, ru.ru_majflt);
    emit_int(n.mem_hwm_bytes, P, 0, ts, int64_t(ru.ru_maxrss) * 1024);
  }
  std::string err;
  if (read_path(statm_, buf_)) {
    if (auto m = parse_statm(buf_, &err)) emit_int(n.mem_rss_bytes, P, 0, ts, int64_t(m->resident_pages * page_size_));
    else skip(err);
  }
  if (!cgroup_stat_.empty()) sample_cgroup(ts);
}

// Every round, not at the machine files' cadence: one small file, and throttling comes in bursts of a period
// (100 ms by default) that a 100 ms cadence would smear over the neighbouring steps.
void SystemSampler::sample_cgroup(uint64_t ts) {
  const auto& n = CounterNames::get();
  const auto P = CounterScope::kProcess;
  std::string err;
  if (!read_path(cgroup_stat_, buf_)) return skip("cgroup cpu.stat: nothing read");
  if (auto c = parse_cgroup_cpu_stat(buf_, cgroup_version_, &err)) {
    emit_int(n.cgroup_cpu_periods, P, 0, ts, static_cast<int64_t>(c->periods));
    emit_int(n.cgroup_cpu_throttled_periods, P, 0, ts, static_cast<int64_t>(c->throttled_periods));
    emit_int(n.cgroup_cpu_throttled_ns, P, 0, ts, static_cast<int64_t>(c->throttled_ns));
  } else {
    skip(err);
  }
}

void SystemSampler::refresh_thread_map() {
  ThreadMap map;
  if (!lookup_ || !lookup_(thread_generation_, map)) return;
  for (auto& [os, id] : map) {
    auto it = tasks_.find(os);
    if (it != tasks_.end()) it->second.dump_id = id;
  }
}

void SystemSampler::sample_threads() {
  // Listing the directory each round finds new threads and notices the ones that exited.
  DIR* d = ::opendir(task_dir_.c_str());
  if (!d) return;
  const uint64_t listed = detail::now();  // a thread this listing misses was born after it
  bool unmapped = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const uint32_t tid = static_cast<uint32_t>(std::strtoul(e->d_name, nullptr, 10));
    auto [it, fresh] = tasks_.try_emplace(tid);
    if (fresh) it->second.born_after = listed_ts_;
    it->second.seen_round = round_ + 1;
    unmapped |= it->second.dump_id == 0;
  }
  ::closedir(d);
  listed_ts_ = listed;
  // Threads bind to the session lazily (their first annotation). The runtime's thread table is read (under
  // its registry lock) only when some thread is unknown and a thread bound since the last look: a lock
  // application threads have just taken themselves, never a periodic one.
  if (unmapped) refresh_thread_map();
  uint64_t count = 0;
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    Task& t = it->second;
    if (t.seen_round != round_ + 1) {  // exited
      flush_sched(t.series, CounterNames::get().thread_sched_run_ns, CounterNames::get().thread_sched_wait_ns);
      for (int* fd : {&t.stat, &t.status, &t.schedstat, &t.perf, &t.syscall})
        if (*fd >= 0) {
          close_fd(*fd);
          --held_fds_;
        }
      for (uint32_t name : CounterNames::get().per_thread()) {  // a long run with thread churn stays bounded
        last_.erase(key_of(name, CounterScope::kOsThread, it->first));
        if (t.dump_id) last_.erase(key_of(name, CounterScope::kThread, t.dump_id));
      }
      it = tasks_.erase(it);
      continue;
    }
    sample_task(it->first, t);
    ++count;
    ++it;
  }
  emit_int(CounterNames::get().threads, CounterScope::kProcess, 0, detail::now(), static_cast<int64_t>(count));
}

void SystemSampler::sample_task(uint32_t tid, Task& t) {
  const auto& n = CounterNames::get();
  // The dump thread id when the session knows the thread, else the OS thread id (records.hpp).
  const CounterScope scope = t.dump_id ? CounterScope::kThread : CounterScope::kOsThread;
  const uint32_t target = t.dump_id ? t.dump_id : tid;
  const std::string dir = self_ + "/task/" + std::to_string(tid);
  const bool keep = held_fds_ + 3 <= held_budget_;
  std::string err;
  if (t.born_after) {
    write_birth(scope, target, t.born_after);
    if (have_schedstat_)
      emit_sched(t.series, scope, target, t.born_after, SchedStat{}, n.thread_sched_run_ns, n.thread_sched_wait_ns);
    t.born_after = 0;
  }
  const uint64_t ts = detail::now();
  // schedstat first: it is cheap (about 1 µs against 5 for stat and 12 for status). A thread whose run
  // time, run-queue wait and timeslice count did not move has neither run nor waited to run since the last
  // round, so its stat and status lines cannot have changed: they are read again only for the keep-alive.
  bool moved = true;
  if (have_schedstat_) {
    if (read_file(t.schedstat, dir + "/schedstat", keep, buf_)) {
      if (auto s = parse_schedstat(buf_, &err)) {
        if (parts_ & kPartExactClock) exact_run_time(tid, *s);
        // The first read has nothing to compare with: stat and status are read, but the thread joins the fast
        // rounds' tier only once a later round sees it move (else a session's first 100 ms read every idle thread
        // of the process each millisecond: a PyTorch process holds a pool thread per core).
        const bool changed = t.full_read_ns >= 0 && (s->run_ns != t.sched.run_ns || s->wait_ns != t.sched.wait_ns ||
                                                     s->timeslices != t.sched.timeslices);
        moved = t.full_read_ns < 0 || changed;
        if (changed) t.moved_round = round_;
        t.sched = *s;
        const uint64_t run_ts = detail::now();  // right after the clock read: the run time is exact at this instant
        emit_sched(t.series, scope, target, run_ts, *s, n.thread_sched_run_ns, n.thread_sched_wait_ns);
        if (t.dump_id && (parts_ & kPartBlockedIn)) sample_blocked_in(tid, t, run_ts);
      } else {
        skip(err);
      }
    } else if (errno == ENOENT) {
      have_schedstat_ = false;  // kernel without CONFIG_SCHED_INFO
    }
  }
  if (!moved && !final_ && target == t.full_read_target && now_ns_ - t.full_read_ns < kKeepAliveNs) return;
  t.full_read_ns = now_ns_;
  t.full_read_target = target;
  if (read_file(t.stat, dir + "/stat", keep, buf_)) {
    if (auto s = parse_stat(buf_, &err)) {
      emit_int(n.thread_cpu_user_ns, scope, target, ts, static_cast<int64_t>(double(s->utime) * ns_per_tick_));
      emit_int(n.thread_cpu_system_ns, scope, target, ts, static_cast<int64_t>(double(s->stime) * ns_per_tick_));
      emit_int(n.thread_state, scope, target, ts, s->state);
      if (!t.dump_id && t.published_name != s->comm) {
        // Threads the session does not know have no thread-table entry: their names go to process info
        // (again when a thread renames itself; the later value wins).
        runtime::set_process_info("os_thread." + std::to_string(tid) + ".name", s->comm);
        t.published_name = s->comm;
      }
    } else {
      skip(err);
    }
  }
  if (read_file(t.status, dir + "/status", keep, buf_)) {
    if (auto s = parse_status(buf_, &err)) {
      if (s->voluntary_ctxt_switches)
        emit_int(n.thread_ctx_voluntary, scope, target, ts, static_cast<int64_t>(*s->voluntary_ctxt_switches));
      if (s->nonvoluntary_ctxt_switches)
        emit_int(n.thread_ctx_involuntary, scope, target, ts, static_cast<int64_t>(*s->nonvoluntary_ctxt_switches));
    } else {
      skip(err);
    }
  }
  if (perf_ok_) {
    if (t.perf < 0 && held_fds_ < held_budget_) {
      t.perf = open_perf(tid);
      if (t.perf >= 0) ++held_fds_;
    }
    uint64_t v = 0;
    if (t.perf >= 0 && ::read(t.perf, &v, sizeof(v)) == sizeof(v))
      emit_int(n.perf_task_clock_ns, scope, target, ts, static_cast<int64_t>(v));
  }
}

// schedstat's run and run-queue series of a thread or child through their corner filters. A thread that binds to the
// session changes its scope and target: what the filters hold is written under the old ones first, and the series
// starts afresh under the new (the analyzer joins the two through the thread table's os_tid).
void SystemSampler::emit_sched(SchedSeries& s, CounterScope scope, uint32_t target, uint64_t ts, const SchedStat& v,
                               uint32_t run_name, uint32_t wait_name) {
  if (s.started && (s.scope != scope || s.target != target)) {
    flush_sched(s, run_name, wait_name);
    s.run = CornerFilter(kCornerToleranceNs);
    s.wait = CornerFilter(kCornerToleranceNs);
  }
  s.started = true;
  s.scope = scope;
  s.target = target;
  bool wrote = false;
  auto write = [&](uint32_t name, const std::optional<CounterPoint>& p) {
    if (!p) return;
    sink_(int_counter(name, scope, target, p->ts, p->v));
    wrote = true;
  };
  write(run_name, s.run.observe(ts, static_cast<int64_t>(v.run_ns)));
  write(wait_name, s.wait.observe(ts, static_cast<int64_t>(v.wait_ns)));
  // The keep-alive and the final round write what is held back, as the change-only counters do.
  if (final_ || now_ns_ - s.written_ns >= kKeepAliveNs) {
    write(run_name, s.run.flush());
    write(wait_name, s.wait.flush());
    s.written_ns = now_ns_;
  }
  if (wrote) s.written_ns = now_ns_;
}

void SystemSampler::flush_sched(SchedSeries& s, uint32_t run_name, uint32_t wait_name) {
  if (!s.started) return;
  if (auto p = s.run.flush()) sink_(int_counter(run_name, s.scope, s.target, p->ts, p->v));
  if (auto p = s.wait.flush()) sink_(int_counter(wait_name, s.scope, s.target, p->ts, p->v));
}

uint32_t SystemSampler::fast_every_us() const {
  const uint64_t us = opt_.thread_sample_us;
  return us > 0 && us < uint64_t(opt_.period_ms) * 1000 && have_schedstat_ ? static_cast<uint32_t>(us) : 0;
}

// The threads read between rounds: those the session knows (the step thread among them: when it blocks and wakes
// is what the analyzer needs to the millisecond), and those whose schedstat moved in the last ~100 ms (idle pool
// threads are not read again until a round sees them move). A thread whose schedstat is not held open (beyond the
// descriptor budget) costs an open per read, so only the threads the session knows are read so.
bool SystemSampler::fast_tier(const Task& t) const {
  return t.dump_id != 0 ||
         (t.schedstat >= 0 && t.moved_round != Task::kNeverMoved && round_ - t.moved_round <= slow_every_);
}

void SystemSampler::fast_round() {
  if (!fast_every_us() || task_dir_.empty()) return;
  const auto& n = CounterNames::get();
  now_ns_ = steady_ns();
  constexpr size_t kMaxFastThreads = 64;  // a process with hundreds of busy threads costs at most 64 reads a tick
  size_t read = 0;
  std::string err;
  for (auto& [tid, t] : tasks_) {
    if (!fast_tier(t) || read >= kMaxFastThreads) continue;
    ++read;
    const CounterScope scope = t.dump_id ? CounterScope::kThread : CounterScope::kOsThread;
    const uint32_t target = t.dump_id ? t.dump_id : tid;
    if (!read_file(t.schedstat, self_ + "/task/" + std::to_string(tid) + "/schedstat", false, buf_)) continue;
    auto s = parse_schedstat(buf_, &err);
    if (!s) continue;  // counted by the round's own read
    if (parts_ & kPartExactClock) exact_run_time(tid, *s);
    const uint64_t ts = detail::now();  // right after the clock read: the run time is exact at this instant
    emit_sched(t.series, scope, target, ts, *s, n.thread_sched_run_ns, n.thread_sched_wait_ns);
    if (t.dump_id && (parts_ & kPartBlockedIn)) sample_blocked_in(tid, t, ts);
  }
}

// schedstat's run time is the scheduler's own accounting, brought up to date only at a tick or a context switch:
// a thread on a CPU reads up to a tick (1-4 ms) behind, then ahead at the next read, so a thread that runs without
// a pause looked blocked for a millisecond and then ran 2.4 ms in one (H100 host, a kernel-launching step
// thread). The thread's CPU-time clock accounts the running slice first and is exact to the nanosecond; it can be
// read for any thread of this process (not of a child), so the threads of the process the sampler runs in take
// their run time from it.
void SystemSampler::exact_run_time(uint32_t tid, SchedStat& s) const {
  if (!live_proc_) return;
  // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as pthread_getcpuclockid builds it: ~tid << 3 | per-thread | sched.
  const clockid_t clock = static_cast<clockid_t>((~tid << 3) | 6u);
  timespec now{};
  if (::clock_gettime(clock, &now) == 0) s.run_ns = uint64_t(now.tv_sec) * 1'000'000'000ull + uint64_t(now.tv_nsec);
}

// What a thread the session knows is blocked in at this read: the system call it sits in. A thread on a CPU
// answers "running" at once; a blocked one is read where it sleeps. Read whether or not it ran since the last
// read: a thread that alternates between running and waiting (for the GIL between two kernel launches) is caught
// waiting at some reads, and what it waits in (a timed futex: the GIL; an untimed one: a lock) is what tells the
// two apart.
void SystemSampler::sample_blocked_in(uint32_t tid, Task& t, uint64_t ts) {
  BlockedIn b = BlockedIn::kUnknown;  // not readable here (e.g. a kernel without it): says nothing either way
  const bool keep = held_fds_ < held_budget_;
  std::string text;
  if (read_file(t.syscall, self_ + "/task/" + std::to_string(tid) + "/syscall", keep, text))
    b = blocked_in_of_syscall_text(text, nullptr).value_or(BlockedIn::kUnknown);
  emit_int(CounterNames::get().thread_blocked_in, CounterScope::kThread, t.dump_id, ts, static_cast<int64_t>(b));
}

// Child processes (DataLoader workers, multiprocessing pools) are found every ~100 ms through each thread's
// /proc/self/task/<tid>/children (a child belongs to the thread that forked it), and one level further through
// each child's main thread (a forkserver's or a pool's children). Kernels without that file (CONFIG_PROC_CHILDREN
// off) show no children.
void SystemSampler::discover_children() {
  constexpr size_t kMaxChildren = 256;
  const uint64_t listed = detail::now();
  ++discovery_;
  std::string err;
  auto add = [&](uint32_t pid, uint32_t parent) {
    auto [it, fresh] = children_.try_emplace(pid);
    if (fresh && children_.size() > kMaxChildren) {
      children_.erase(it);
      return;
    }
    if (fresh) {
      it->second.parent = parent;
      it->second.born_after = discovery_ > 1 ? discovered_ts_ : 0;
      runtime::set_process_info("child." + std::to_string(pid) + ".parent", std::to_string(parent));
      std::string cmd;
      if (read_small(opt_.proc_root + "/" + std::to_string(pid) + "/cmdline", cmd)) {
        for (char& c : cmd)
          if (c == '\0') c = ' ';
        while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
        if (cmd.size() > 256) cmd.resize(256);
        runtime::set_process_info("child." + std::to_string(pid) + ".cmdline", cmd);
      }
    }
    it->second.seen = discovery_;
  };
  // A children file that exists but is empty is the usual answer (no children): only ENOENT everywhere means the
  // kernel has no such files.
  auto read_children = [&](const std::string& path, bool& exists) {
    std::vector<uint32_t> out;
    int fd = open_ro(path);
    exists = fd >= 0 || errno != ENOENT;
    if (fd < 0) return out;
    std::string text;
    const bool ok = read_file(fd, "", false, text);
    ::close(fd);
    if (ok)
      if (auto pids = parse_pid_list(text, &err)) out = std::move(*pids);
    return out;
  };
  if (have_children_file_) {
    const uint32_t self = static_cast<uint32_t>(::getpid());
    bool any_file = false;
    for (auto& [tid, t] : tasks_) {
      bool exists = false;
      for (uint32_t pid : read_children(self_ + "/task/" + std::to_string(tid) + "/children", exists)) add(pid, self);
      any_file |= exists;
    }
    if (!any_file && !tasks_.empty()) have_children_file_ = false;
    std::vector<uint32_t> level;
    for (auto& [pid, c] : children_) level.push_back(pid);
    for (uint32_t pid : level) {
      const std::string p = std::to_string(pid);
      bool exists = false;
      for (uint32_t g : read_children(opt_.proc_root + "/" + p + "/task/" + p + "/children", exists)) add(g, pid);
    }
  }
  discovered_ts_ = listed;
  for (auto it = children_.begin(); it != children_.end();) {
    if (it->second.seen != discovery_) {
      forget_child(it->first, it->second);
      it = children_.erase(it);
    } else {
      ++it;
    }
  }
  emit_int(CounterNames::get().children, CounterScope::kProcess, 0, listed, static_cast<int64_t>(children_.size()));
}

void SystemSampler::forget_child(uint32_t pid, Child& c) {
  const auto& n = CounterNames::get();
  flush_sched(c.series, n.child_sched_run_ns, n.child_sched_wait_ns);
  for (int* fd : {&c.stat, &c.schedstat})
    if (*fd >= 0) {
      close_fd(*fd);
      --held_fds_;
    }
  for (uint32_t name : n.per_child()) last_.erase(key_of(name, CounterScope::kChildProcess, pid));
}

// Every round: each child's CPU time, its main thread's schedstat (ns) and all its threads' user and system time
// (clock ticks) from its stat. A child that is gone, or a zombie, is not read; the next discovery forgets it.
void SystemSampler::sample_children() {
  const auto& n = CounterNames::get();
  const auto C = CounterScope::kChildProcess;
  std::string err;
  for (auto& [pid, c] : children_) {
    const std::string dir = opt_.proc_root + "/" + std::to_string(pid);
    const bool keep = held_fds_ + 2 <= held_budget_;
    const uint64_t ts = detail::now();
    if (!read_file(c.stat, dir + "/stat", keep, buf_)) continue;
    auto st = parse_stat(buf_, &err);
    if (!st) {
      skip(err);
      continue;
    }
    if (st->state == 'Z' || st->state == 'X') continue;
    if (c.born_after) {
      for (uint32_t name : n.per_child()) emit_int(name, C, pid, c.born_after, 0);
      emit_sched(c.series, C, pid, c.born_after, SchedStat{}, n.child_sched_run_ns, n.child_sched_wait_ns);
      c.born_after = 0;
    }
    if (st->comm != c.name) {
      runtime::set_process_info("child." + std::to_string(pid) + ".name", st->comm);
      c.name = st->comm;
    }
    emit_int(n.child_cpu_user_ns, C, pid, ts, static_cast<int64_t>(double(st->utime) * ns_per_tick_));
    emit_int(n.child_cpu_system_ns, C, pid, ts, static_cast<int64_t>(double(st->stime) * ns_per_tick_));
    if (have_schedstat_ && read_file(c.schedstat, dir + "/schedstat", keep, buf_))
      if (auto ss = parse_schedstat(buf_, &err))
        emit_sched(c.series, C, pid, ts, *ss, n.child_sched_run_ns, n.child_sched_wait_ns);
  }
}

// A thread born since the last round: its cumulative counters were 0 at that round (it did not exist), so
// what it ran before this round's first reading counts too. Without this point a short thread's CPU time
// (the difference of its first and last readings) was mostly or wholly lost.
void SystemSampler::write_birth(CounterScope scope, uint32_t target, uint64_t ts) {
  const auto& n = CounterNames::get();
  for (uint32_t name : {n.thread_cpu_user_ns, n.thread_cpu_system_ns, n.thread_ctx_voluntary, n.thread_ctx_involuntary})
    emit_int(name, scope, target, ts, 0);
}

void sample_thread_at_exit(const std::string& task_dir, uint32_t thread_id, const SystemSampler::Sink& sink) {
  const auto& n = CounterNames::get();
  const auto T = CounterScope::kThread;
  std::string text;
  const uint64_t ts = detail::now();
  if (read_small(task_dir + "/schedstat", text))
    if (auto s = parse_schedstat(text, nullptr)) {
      sink(int_counter(n.thread_sched_run_ns, T, thread_id, ts, static_cast<int64_t>(s->run_ns)));
      sink(int_counter(n.thread_sched_wait_ns, T, thread_id, ts, static_cast<int64_t>(s->wait_ns)));
    }
  if (read_small(task_dir + "/stat", text))
    if (auto s = parse_stat(text, nullptr)) {
      const double tick = ns_per_clock_tick();
      sink(int_counter(n.thread_cpu_user_ns, T, thread_id, ts, static_cast<int64_t>(double(s->utime) * tick)));
      sink(int_counter(n.thread_cpu_system_ns, T, thread_id, ts, static_cast<int64_t>(double(s->stime) * tick)));
    }
}

void SystemSampler::sample_machine() {
  const auto& n = CounterNames::get();
  const auto M = CounterScope::kMachine;
  std::string err;
  uint64_t ts = detail::now();
  if (read_path(loadavg_, buf_)) {
    if (auto l = parse_loadavg(buf_, &err)) {
      emit_double(n.load_1m, M, 0, ts, l->load1);
      emit_int(n.load_runnable, M, 0, ts, static_cast<int64_t>(l->runnable));
    } else {
      skip(err);
    }
  }
  if (read_path(stat_, buf_)) {
    if (auto c = parse_proc_stat_cpu(buf_, &err)) {
      if (prev_cpu_)
        if (auto pct = busy_percent(*prev_cpu_, *c)) emit_double(n.machine_busy_pct, M, 0, ts, *pct);
      prev_cpu_ = c;
    } else {
      skip(err);
    }
  }
  if (read_path(meminfo_, buf_)) {
    if (auto m = parse_meminfo(buf_, &err)) {
      if (m->available_bytes) emit_int(n.machine_mem_available_bytes, M, 0, ts, static_cast<int64_t>(*m->available_bytes));
    } else {
      skip(err);
    }
  }
  ts = detail::now();
  if (read_path(psi_cpu_, buf_)) {
    if (auto p = parse_pressure(buf_, &err)) emit_int(n.psi_cpu_some_us, M, 0, ts, static_cast<int64_t>(p->some_total_us));
    else skip(err);
  }
  if (read_path(psi_mem_, buf_)) {
    if (auto p = parse_pressure(buf_, &err)) {
      emit_int(n.psi_memory_some_us, M, 0, ts, static_cast<int64_t>(p->some_total_us));
      if (p->full_total_us) emit_int(n.psi_memory_full_us, M, 0, ts, static_cast<int64_t>(*p->full_total_us));
    } else {
      skip(err);
    }
  }
}

uint32_t SystemSampler::numa_name(const std::string& key) {
  auto it = numa_names_.find(key);
  if (it != numa_names_.end()) return it->second;
  const uint32_t id = runtime::intern("numa." + key);
  numa_names_.emplace(key, id);
  return id;
}

void SystemSampler::sample_numa() {
  std::string err;
  for (auto& node : nodes_) {
    const uint64_t ts = detail::now();
    if (read_path(node.numastat, buf_)) {
      if (auto kv = parse_numastat(buf_, &err)) {
        for (auto& [k, v] : *kv) emit_int(numa_name(k), CounterScope::kNumaNode, node.id, ts, static_cast<int64_t>(v));
      } else {
        skip(err);
      }
    }
    if (read_path(node.meminfo, buf_)) {
      if (auto f = parse_node_memfree(buf_, &err))
        emit_int(CounterNames::get().numa_mem_free_bytes, CounterScope::kNumaNode, node.id, ts, static_cast<int64_t>(*f));
      else
        skip(err);
    }
  }
}

// NVML numbers all of the machine's GPUs in bus order; every GPU record and the analyzer use CUDA's ordinals,
// which CUDA_VISIBLE_DEVICES restricts and reorders. Rebuilt when the GPU collector publishes CUDA's PCI
// locations (one atomic load per round until then).
void SystemSampler::update_device_map() {
  const uint64_t g = runtime::cuda_device_locations_generation();
  if (g == locations_generation_) return;
  uint64_t seen = 0;
  const std::vector<std::string> cuda = runtime::cuda_device_locations(&seen);
  locations_generation_ = seen;
  NvmlDeviceMap m = map_nvml_to_cuda(nvml_locations_, nvml_uuids_, cuda, std::getenv("CUDA_VISIBLE_DEVICES"));
  if (m.source != device_map_source_) runtime::set_process_info("nvml.device_map", m.source);
  device_map_source_ = m.source;
  if (m.cuda == cuda_of_nvml_) return;
  cuda_of_nvml_ = std::move(m.cuda);
  publish_device_map();
}

// Per device this process sees (keys by CUDA ordinal): its NVML index and location, and the PCIe link the
// analyzer compares achieved copy bandwidth with (docs/analysis.md), which it can only assume without them.
void SystemSampler::publish_device_map() {
  for (uint32_t i = 0; i < nvml_.device_count(); ++i) {
    const int cuda = cuda_of_nvml_[i];
    if (cuda < 0) continue;  // another process's GPU
    const std::string k = "gpu." + std::to_string(cuda) + ".";
    runtime::set_process_info(k + "nvml_index", std::to_string(i));
    if (!nvml_locations_[i].empty()) runtime::set_process_info(k + "nvml_pci_location", nvml_locations_[i]);
    const PcieLink link = nvml_.pcie_link(i);
    auto put = [&](const char* key, const std::optional<uint32_t>& v) {
      if (v) runtime::set_process_info(k + "pcie_" + key, std::to_string(*v));
    };
    put("gen_max", link.max_gen);
    put("width_max", link.max_width);
    put("gen_current", link.cur_gen);
    put("width_current", link.cur_width);
    if (auto eff = effective_pcie_link(link)) {
      runtime::set_process_info(k + "pcie_gen", std::to_string(eff->first));
      runtime::set_process_info(k + "pcie_width", std::to_string(eff->second));
    }
  }
}

void SystemSampler::sample_gpus(uint32_t parts) {
  const auto& n = CounterNames::get();
  const auto D = CounterScope::kDevice;
  update_device_map();
  for (uint32_t i = 0; i < nvml_.device_count(); ++i) {
    if (cuda_of_nvml_[i] < 0) continue;  // another process's GPU
    const uint32_t cuda = static_cast<uint32_t>(cuda_of_nvml_[i]);
    const uint64_t ts = detail::now();
    const int64_t ns = steady_ns();
    GpuSample s = nvml_.sample(i, parts);
    if (s.util_pct) emit_int(n.gpu_util_pct, D, cuda, ts, *s.util_pct);
    if (s.mem_util_pct) emit_int(n.gpu_mem_util_pct, D, cuda, ts, *s.mem_util_pct);
    if (s.mem_used_bytes) emit_int(n.gpu_mem_used_bytes, D, cuda, ts, static_cast<int64_t>(*s.mem_used_bytes));
    if (s.mem_total_bytes) emit_int(n.gpu_mem_total_bytes, D, cuda, ts, static_cast<int64_t>(*s.mem_total_bytes));
    if (s.sm_clock_mhz) emit_int(n.gpu_sm_clock_mhz, D, cuda, ts, *s.sm_clock_mhz);
    if (s.power_mw) emit_int(n.gpu_power_mw, D, cuda, ts, *s.power_mw);
    if (s.throttle_reasons) emit_int(n.gpu_throttle_reasons, D, cuda, ts, static_cast<int64_t>(*s.throttle_reasons));
    if (s.temperature_c) emit_int(n.gpu_temperature_c, D, cuda, ts, *s.temperature_c);
    if (s.pcie_tx_bytes && s.pcie_rx_bytes) {
      PcieLast& p = pcie_[i];
      // The counters are cumulative and may wrap or reset: a decrease starts a new baseline.
      if (p.valid && ns > p.ns && *s.pcie_tx_bytes >= p.tx && *s.pcie_rx_bytes >= p.rx) {
        const double dt = static_cast<double>(ns - p.ns) * 1e-9;
        emit_double(n.gpu_pcie_tx, D, cuda, ts, static_cast<double>(*s.pcie_tx_bytes - p.tx) / dt);
        emit_double(n.gpu_pcie_rx, D, cuda, ts, static_cast<double>(*s.pcie_rx_bytes - p.rx) / dt);
      }
      p = {*s.pcie_tx_bytes, *s.pcie_rx_bytes, ns, true};
    }
  }
}

}  // namespace inferscope::sys
