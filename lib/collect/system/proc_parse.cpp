#include "collect/system/proc_parse.hpp"

#include "collect/system/text_scan.hpp"

#include <sys/syscall.h>

#include <charconv>

namespace inferscope::sys {
namespace {

using text::fail;
using text::for_each_line;
using text::split_ws;
using text::to_num;
using text::trim;

// "Key:   123 kB" -> 123 * 1024 when the unit is kB, else 123.
std::optional<uint64_t> value_of_key_line(std::string_view rest) {
  auto t = split_ws(rest);
  if (t.empty()) return std::nullopt;
  uint64_t v = 0;
  if (!to_num(t[0], v)) return std::nullopt;
  if (t.size() > 1 && t[1] == "kB") v *= 1024;
  return v;
}

}  // namespace

std::optional<TaskStat> parse_stat(std::string_view text, std::string* error) {
  // comm is inside the first '(' and the LAST ')': a thread may name itself "a) b (c".
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    fail(error, "stat: no '(comm)' field");
    return std::nullopt;
  }
  TaskStat s;
  s.comm = std::string(text.substr(open + 1, close - open - 1));
  auto t = split_ws(text.substr(close + 1));  // t[k] is field k + 3
  if (t.size() < 22) {
    fail(error, "stat: " + std::to_string(t.size() + 2) + " fields, need at least 24");
    return std::nullopt;
  }
  if (t[0].size() != 1) {
    fail(error, "stat: state field is not one character");
    return std::nullopt;
  }
  s.state = t[0][0];
  if (!to_num(t[7], s.minflt) || !to_num(t[9], s.majflt) || !to_num(t[11], s.utime) || !to_num(t[12], s.stime) ||
      !to_num(t[17], s.num_threads) || !to_num(t[21], s.rss_pages)) {
    fail(error, "stat: a numeric field (minflt, majflt, utime, stime, num_threads or rss) is not a number");
    return std::nullopt;
  }
  if (t.size() > 36 && !to_num(t[36], s.processor)) s.processor = -1;
  return s;
}

std::optional<TaskStatus> parse_status(std::string_view text, std::string* error) {
  TaskStatus st;
  for_each_line(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view key = line.substr(0, colon);
    const std::string_view rest = line.substr(colon + 1);
    if (key == "voluntary_ctxt_switches") st.voluntary_ctxt_switches = value_of_key_line(rest);
    else if (key == "nonvoluntary_ctxt_switches") st.nonvoluntary_ctxt_switches = value_of_key_line(rest);
    else if (key == "VmRSS") st.vm_rss_bytes = value_of_key_line(rest);
    else if (key == "VmHWM") st.vm_hwm_bytes = value_of_key_line(rest);
  });
  if (!st.voluntary_ctxt_switches && !st.nonvoluntary_ctxt_switches) {
    fail(error, "status: no voluntary_ctxt_switches / nonvoluntary_ctxt_switches line");
    return std::nullopt;
  }
  return st;
}

std::optional<SchedStat> parse_schedstat(std::string_view text, std::string* error) {
  auto t = split_ws(text);
  SchedStat s;
  if (t.size() < 3 || !to_num(t[0], s.run_ns) || !to_num(t[1], s.wait_ns) || !to_num(t[2], s.timeslices)) {
    fail(error, "schedstat: expected three numbers");
    return std::nullopt;
  }
  return s;
}

std::optional<StatM> parse_statm(std::string_view text, std::string* error) {
  auto t = split_ws(text);
  StatM s;
  if (t.size() < 3 || !to_num(t[0], s.size_pages) || !to_num(t[1], s.resident_pages) ||
      !to_num(t[2], s.shared_pages)) {
    fail(error, "statm: expected at least three numbers");
    return std::nullopt;
  }
  return s;
}

std::optional<LoadAvg> parse_loadavg(std::string_view text, std::string* error) {
  auto t = split_ws(text);
  LoadAvg l;
  if (t.size() < 4 || !to_num(t[0], l.load1) || !to_num(t[1], l.load5) || !to_num(t[2], l.load15)) {
    fail(error, "loadavg: expected three load averages and runnable/total");
    return std::nullopt;
  }
  const size_t slash = t[3].find('/');
  if (slash == std::string_view::npos || !to_num(t[3].substr(0, slash), l.runnable) ||
      !to_num(t[3].substr(slash + 1), l.total)) {
    fail(error, "loadavg: fourth field is not runnable/total");
    return std::nullopt;
  }
  return l;
}

std::optional<CpuTimes> parse_proc_stat_cpu(std::string_view text, std::string* error) {
  const std::string_view first = text.substr(0, text.find('\n'));
  auto t = split_ws(first);
  CpuTimes c;
  // Old kernels lack the later columns; user, nice, system and idle are always there.
  if (t.size() < 5 || t[0] != "cpu") {
    fail(error, "stat: first line is not the aggregate 'cpu' line");
    return std::nullopt;
  }
  uint64_t* fields[] = {&c.user, &c.nice, &c.system, &c.idle, &c.iowait, &c.irq, &c.softirq, &c.steal};
  for (size_t i = 0; i < 8 && i + 1 < t.size(); ++i)
    if (!to_num(t[i + 1], *fields[i])) {
      fail(error, "stat: cpu column " + std::to_string(i + 1) + " is not a number");
      return std::nullopt;
    }
  return c;
}

std::optional<double> busy_percent(const CpuTimes& before, const CpuTimes& after) {
  if (after.total() <= before.total() || after.busy() < before.busy()) return std::nullopt;
  const double dt = static_cast<double>(after.total() - before.total());
  const double pct = 100.0 * static_cast<double>(after.busy() - before.busy()) / dt;
  return pct > 100.0 ? 100.0 : pct;
}

std::optional<MemInfo> parse_meminfo(std::string_view text, std::string* error) {
  MemInfo m;
  bool have_total = false;
  for_each_line(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view key = line.substr(0, colon);
    if (key == "MemTotal") {
      if (auto v = value_of_key_line(line.substr(colon + 1))) {
        m.total_bytes = *v;
        have_total = true;
      }
    } else if (key == "MemAvailable") {
      m.available_bytes = value_of_key_line(line.substr(colon + 1));
    }
  });
  if (!have_total) {
    fail(error, "meminfo: no MemTotal line");
    return std::nullopt;
  }
  return m;
}

std::optional<Pressure> parse_pressure(std::string_view text, std::string* error) {
  Pressure p;
  bool have_some = false;
  for_each_line(text, [&](std::string_view line) {
    auto t = split_ws(line);
    if (t.empty() || (t[0] != "some" && t[0] != "full")) return;
    for (size_t i = 1; i < t.size(); ++i) {
      if (t[i].substr(0, 6) != "total=") continue;
      uint64_t v = 0;
      if (!to_num(t[i].substr(6), v)) return;
      if (t[0] == "some") {
        p.some_total_us = v;
        have_some = true;
      } else {
        p.full_total_us = v;
      }
    }
  });
  if (!have_some) {
    fail(error, "pressure: no 'some ... total=N' line");
    return std::nullopt;
  }
  return p;
}

std::optional<std::vector<std::pair<std::string, uint64_t>>> parse_numastat(std::string_view text,
                                                                             std::string* error) {
  std::vector<std::pair<std::string, uint64_t>> out;
  bool bad = false;
  for_each_line(text, [&](std::string_view line) {
    auto t = split_ws(line);
    if (t.empty()) return;
    uint64_t v = 0;
    if (t.size() != 2 || !to_num(t[1], v)) {
      bad = true;
      return;
    }
    out.emplace_back(std::string(t[0]), v);
  });
  if (bad || out.empty()) {
    fail(error, bad ? "numastat: a line is not 'name value'" : "numastat: empty");
    return std::nullopt;
  }
  return out;
}

std::optional<uint64_t> parse_node_memfree(std::string_view text, std::string* error) {
  std::optional<uint64_t> v;
  for_each_line(text, [&](std::string_view line) {
    // "Node 0 MemFree:        123456 kB"
    auto t = split_ws(line);
    if (t.size() >= 4 && t[0] == "Node" && t[2] == "MemFree:") {
      uint64_t kb = 0;
      if (to_num(t[3], kb)) v = kb * 1024;
    }
  });
  if (!v) fail(error, "node meminfo: no 'Node N MemFree:' line");
  return v;
}

std::optional<std::vector<uint32_t>> parse_id_list(std::string_view text, std::string* error) {
  std::vector<uint32_t> ids;
  text = trim(text);
  if (text.empty()) return ids;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    const size_t dash = part.find('-');
    uint32_t a = 0, b = 0;
    bool ok = dash == std::string_view::npos ? to_num(part, a) && (b = a, true)
                                             : to_num(part.substr(0, dash), a) && to_num(part.substr(dash + 1), b);
    if (!ok || b < a || b - a > 65536) {
      fail(error, "id list: '" + std::string(part) + "' is not N or N-M");
      return std::nullopt;
    }
    for (uint32_t i = a; i <= b; ++i) ids.push_back(i);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return ids;
}

std::optional<int64_t> parse_syscall(std::string_view text, std::string* error) {
  auto t = split_ws(text);
  if (t.empty()) {
    fail(error, "syscall: empty");
    return std::nullopt;
  }
  if (t[0] == "running") return kSyscallRunning;
  int64_t nr = 0;
  if (!to_num(t[0], nr) || nr < -1) {
    fail(error, "syscall: '" + std::string(t[0]) + "' is neither 'running' nor a system call number");
    return std::nullopt;
  }
  return nr;
}

BlockedIn blocked_in_of_syscall(int64_t nr) {
  switch (nr) {
    case kSyscallRunning: return BlockedIn::kRunning;
    case -1: return BlockedIn::kNoSyscall;
#ifdef SYS_nanosleep
    case SYS_nanosleep:
#endif
#ifdef SYS_pause
    case SYS_pause:
#endif
    case SYS_clock_nanosleep:
      return BlockedIn::kSleep;
    case SYS_futex:
#ifdef SYS_futex_waitv
    case SYS_futex_waitv:
#endif
      return BlockedIn::kLock;
#ifdef SYS_poll
    case SYS_poll:
#endif
#ifdef SYS_select
    case SYS_select:
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
#ifdef SYS_accept
    case SYS_accept:
#endif
    case SYS_ppoll: case SYS_pselect6: case SYS_epoll_pwait: case SYS_accept4: case SYS_connect:
      return BlockedIn::kPoll;
    case SYS_read: case SYS_readv: case SYS_pread64: case SYS_preadv: case SYS_recvfrom: case SYS_recvmsg:
    case SYS_recvmmsg: case SYS_msgrcv:
      return BlockedIn::kRead;
    case SYS_write: case SYS_writev: case SYS_pwrite64: case SYS_pwritev: case SYS_sendto: case SYS_sendmsg:
    case SYS_fsync: case SYS_fdatasync: case SYS_sync_file_range:
      return BlockedIn::kWrite;
    case SYS_wait4: case SYS_waitid:
      return BlockedIn::kChild;
    default:
      return nr >= 0 ? BlockedIn::kOther : BlockedIn::kUnknown;
  }
}

namespace {

// A system call argument as /proc/<pid>/task/<tid>/syscall writes it: "0x" and lower-case hex.
std::optional<uint64_t> parse_hex_arg(std::string_view s) {
  if (s.size() < 3 || s[0] != '0' || s[1] != 'x') return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Whether a futex call (op, the timeout argument) waits with a timeout. The wait operations take the timeout
// (or, for FUTEX_WAIT_BITSET and the PI ones, a deadline) in arg4; 0 waits until woken.
bool futex_waits_timed(uint64_t op, uint64_t timeout) {
  constexpr uint64_t kCmdMask = ~uint64_t(128 | 256);  // FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME
  switch (op & kCmdMask) {
    case 0:   // FUTEX_WAIT
    case 6:   // FUTEX_LOCK_PI
    case 9:   // FUTEX_WAIT_BITSET
    case 11:  // FUTEX_WAIT_REQUEUE_PI
    case 13:  // FUTEX_LOCK_PI2
      return timeout != 0;
    default:
      return false;
  }
}

}  // namespace

std::optional<BlockedIn> blocked_in_of_syscall_text(std::string_view text, std::string* error) {
  const auto nr = parse_syscall(text, error);
  if (!nr) return std::nullopt;
  const BlockedIn b = blocked_in_of_syscall(*nr);
  if (b != BlockedIn::kLock) return b;
  const auto t = split_ws(text);  // t[k] is arg k (1-based)
  if (t.size() < 5) return b;     // arguments not shown: the kind of wait stays unknown
  const auto op = parse_hex_arg(t[2]), timeout = parse_hex_arg(t[4]);
  if (!op || !timeout) return b;
#ifdef SYS_futex_waitv
  if (*nr == SYS_futex_waitv) return *timeout ? BlockedIn::kLockTimed : BlockedIn::kLockUntimed;
#endif
  return futex_waits_timed(*op, *timeout) ? BlockedIn::kLockTimed : BlockedIn::kLockUntimed;
}

std::optional<std::vector<uint32_t>> parse_pid_list(std::string_view text, std::string* error) {
  std::vector<uint32_t> pids;
  for (std::string_view tok : split_ws(text)) {
    uint32_t pid = 0;
    if (!to_num(tok, pid) || pid == 0) {
      fail(error, "children: '" + std::string(tok) + "' is not a process id");
      return std::nullopt;
    }
    pids.push_back(pid);
  }
  return pids;
}

}  // namespace inferscope::sys
