#include "collect/system/cgroup_cpu.hpp"

#include "collect/system/text_scan.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace inferscope::sys {
namespace {

constexpr size_t npos = std::string_view::npos;

using text::fail;
using text::for_each_line;
using text::split_ws;
using text::to_num;
using text::trim;

// Tokens between separators `sep`; runs of separators give no empty tokens.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(sep, i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A line quoted in a reason, cut short: the file may be anything.
std::string quoted(std::string_view line) {
  return "'" + std::string(line.substr(0, 80)) + (line.size() > 80 ? "...'" : "'");
}

bool has(const std::vector<std::string>& v, std::string_view x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// mountinfo escapes space, tab, newline and backslash in paths as a backslash and three octal digits.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string_view oct = s.substr(i + 1, 3);
      if (std::all_of(oct.begin(), oct.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out += static_cast<char>(((oct[0] - '0') << 6) | ((oct[1] - '0') << 3) | (oct[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Whether the cgroup `path` lies at or below a mount's `root`, component by component ("/a" is not under "/ab").
bool under_root(std::string_view path, std::string_view root) {
  if (root == "/") return true;
  return path.substr(0, root.size()) == root && (path.size() == root.size() || path[root.size()] == '/');
}

// `rel` is "" or starts with '/'.
std::string join(const std::string& dir, std::string_view rel) {
  if (rel.empty()) return dir;
  if (!dir.empty() && dir.back() == '/') return dir + std::string(rel.substr(1));
  return dir + std::string(rel);
}

// The mount with the longest root above `path` (several mounts may show parts of one hierarchy).
const CgroupMount* mount_for(const std::string& path, const std::vector<const CgroupMount*>& candidates) {
  const CgroupMount* best = nullptr;
  for (const CgroupMount* m : candidates)
    if (under_root(path, m->root) && (!best || m->root.size() > best->root.size())) best = m;
  return best;
}

// A whole small file; 0 or the errno of the failure.
int read_text(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  out.clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (16u << 20)) break;  // no cgroup file is this large: do not read a hostile one for ever
  }
  ::close(fd);
  return 0;
}

bool read_or_fail(const std::string& path, std::string& out, std::string* error) {
  if (const int e = read_text(path, out)) return fail(error, "cannot read " + path + ": " + std::strerror(e));
  return true;
}

std::optional<CgroupLine> parse_cgroup_line(std::string_view line) {
  const size_t c1 = line.find(':');
  const size_t c2 = c1 == npos ? npos : line.find(':', c1 + 1);
  CgroupLine l;
  // The path is everything after the second colon: a cgroup's name may itself contain colons.
  if (c2 == npos || !to_num(line.substr(0, c1), l.hierarchy) || c2 + 1 >= line.size() || line[c2 + 1] != '/')
    return std::nullopt;
  for (auto c : split(line.substr(c1 + 1, c2 - c1 - 1), ',')) l.controllers.emplace_back(c);
  l.path = std::string(line.substr(c2 + 1));
  return l;
}

std::optional<CgroupMount> parse_mount_line(std::string_view line, bool& is_cgroup) {
  const auto t = split(line, ' ');
  size_t dash = 6;  // optional fields (shared:N, master:N ...) come between the options and the "-"
  while (dash < t.size() && t[dash] != "-") ++dash;
  is_cgroup = false;
  if (dash + 3 >= t.size()) return std::nullopt;  // also when there is no "-" at all
  const std::string_view type = t[dash + 1];
  is_cgroup = type == "cgroup" || type == "cgroup2";
  CgroupMount m;
  m.root = unescape_octal(t[3]);
  m.mount_point = unescape_octal(t[4]);
  m.v2 = type == "cgroup2";
  for (auto o : split(t[dash + 3], ',')) m.super_options.emplace_back(o);
  return m;
}

// One level's limit: no quota when the level has no quota file (the v2 root, a v1 level the walk passes), a
// reason when a file exists but cannot be read or parsed.
std::optional<CpuBandwidth> read_level(const std::string& dir, CgroupVersion version, std::string* error) {
  std::string quota, period;
  const std::string qpath = dir + (version == CgroupVersion::kV2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  if (const int e = read_text(qpath, quota)) {
    if (e == ENOENT) return CpuBandwidth{};
    fail(error, "cannot read " + qpath + ": " + std::strerror(e));
    return std::nullopt;
  }
  std::string err;
  std::optional<CpuBandwidth> bw;
  if (version == CgroupVersion::kV2) {
    bw = parse_cpu_max(quota, &err);
  } else {
    if (!read_or_fail(dir + "/cpu.cfs_period_us", period, error)) return std::nullopt;
    bw = parse_cfs_bandwidth(quota, period, &err);
  }
  if (!bw) fail(error, dir + ": " + err);
  return bw;
}

std::string cpus_word(double cpus) { return format_cpus(cpus) + (cpus == 1.0 ? " CPU" : " CPUs"); }

std::string describe(const CgroupCpuQuota& q) {
  const bool v2 = q.version == CgroupVersion::kV2;
  std::string s = std::string("cgroup ") + (v2 ? "v2 " : "v1 ");
  if (!q.cpus)
    return s + q.process_dir + ": no " + (v2 ? "cpu.max" : "cpu.cfs_quota_us") + " quota up to " + q.mount_point;
  const std::string quota = std::to_string(q.quota_us), period = std::to_string(q.period_us);
  s += q.dir + ": ";
  s += v2 ? "cpu.max " + quota + " / " + period : "cpu.cfs_quota_us " + quota + " / cpu.cfs_period_us " + period;
  return s + " = " + cpus_word(*q.cpus);
}

// The levels from `dir` up to `mount_point`, both included (`dir` lies at or below it).
std::vector<std::string> levels(const std::string& dir, const std::string& mount_point) {
  std::vector<std::string> out{dir};
  std::string cur = dir;
  while (cur != mount_point && cur.size() > mount_point.size()) {
    const size_t slash = cur.rfind('/');
    cur = slash == npos || slash < mount_point.size() ? mount_point : cur.substr(0, slash);
    out.push_back(cur);
  }
  return out;
}

}  // namespace

std::optional<std::vector<CgroupLine>> parse_proc_cgroup(std::string_view text, std::string* error) {
  std::vector<CgroupLine> out;
  std::optional<std::string_view> bad;
  for_each_line(text, [&](std::string_view line) {
    if (bad || trim(line).empty()) return;
    if (auto l = parse_cgroup_line(line)) out.push_back(std::move(*l));
    else bad = line;
  });
  if (bad) {
    fail(error, "cgroup: line " + quoted(*bad) + " is not 'hierarchy:controllers:/path'");
    return std::nullopt;
  }
  if (out.empty()) {
    fail(error, "cgroup: no lines");
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<CgroupMount>> parse_cgroup_mounts(std::string_view mountinfo, std::string* error) {
  std::vector<CgroupMount> out;
  std::optional<std::string_view> bad;
  for_each_line(mountinfo, [&](std::string_view line) {
    if (bad || trim(line).empty()) return;
    bool is_cgroup = false;
    auto m = parse_mount_line(line, is_cgroup);
    if (!m) bad = line;
    else if (is_cgroup) out.push_back(std::move(*m));
  });
  if (bad) {
    fail(error, "mountinfo: line " + quoted(*bad) + " lacks fields (root, mount point, '-', type, options)");
    return std::nullopt;
  }
  return out;
}

namespace {
// "/../other", "/.." : a path component "..", not a name that merely starts with two dots ("/..data").
bool has_dot_dot_component(std::string_view path) {
  size_t at = 0;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    if (path.substr(at, end - at) == "..") return true;
    at = end + 1;
  }
  return false;
}
}  // namespace

std::optional<CpuCgroupDir> find_cpu_cgroup(const std::vector<CgroupLine>& cgroups,
                                            const std::vector<CgroupMount>& mounts, std::string* error) {
  const CgroupLine* v1 = nullptr;
  const CgroupLine* v2 = nullptr;
  for (auto& l : cgroups) {
    if (l.hierarchy != 0 && has(l.controllers, "cpu") && !v1) v1 = &l;
    if (l.hierarchy == 0 && l.controllers.empty() && !v2) v2 = &l;
  }
  const CgroupLine* line = v1 ? v1 : v2;
  if (!line) {
    fail(error, "cgroup: no v1 hierarchy with the cpu controller and no v2 line");
    return std::nullopt;
  }
  const bool want_v2 = !v1;
  std::vector<const CgroupMount*> candidates;
  for (auto& m : mounts)
    if (m.v2 == want_v2 && (want_v2 || has(m.super_options, "cpu"))) candidates.push_back(&m);
  const std::string kind = want_v2 ? "cgroup2" : "cgroup v1 cpu";
  // Outside a cgroup namespace's root the kernel writes the path relative to it ("/../other"): not visible here.
  if (has_dot_dot_component(line->path)) {
    fail(error, "the process's " + kind + " cgroup " + line->path + " lies outside this cgroup namespace");
    return std::nullopt;
  }
  const CgroupMount* m = mount_for(line->path, candidates);
  if (!m) {
    fail(error, candidates.empty() ? "no " + kind + " mount in mountinfo"
                                   : "no " + kind + " mount shows the process's cgroup " + line->path);
    return std::nullopt;
  }
  const std::string_view rel = std::string_view(line->path).substr(m->root == "/" ? 0 : m->root.size());
  CpuCgroupDir d;
  d.version = want_v2 ? CgroupVersion::kV2 : CgroupVersion::kV1;
  d.mount_point = m->mount_point;
  d.dir = join(m->mount_point, rel == "/" ? std::string_view() : rel);
  return d;
}

std::optional<CpuBandwidth> parse_cpu_max(std::string_view text, std::string* error) {
  const auto t = split_ws(trim(text));
  CpuBandwidth b;
  uint64_t quota = 0;
  // The kernel always writes both fields; "max" alone is what one writes to it, accepted as well.
  const bool max = !t.empty() && t[0] == "max";
  if (t.empty() || t.size() > 2 || (!max && (t.size() != 2 || !to_num(t[0], quota))) ||
      (t.size() == 2 && !to_num(t[1], b.period_us))) {
    fail(error, "cpu.max: " + quoted(trim(text)) + " is not 'max|QUOTA PERIOD'");
    return std::nullopt;
  }
  if (t.size() == 2 && b.period_us == 0) {
    fail(error, "cpu.max: period 0");
    return std::nullopt;
  }
  if (!max) b.quota_us = quota;
  return b;
}

std::optional<CpuBandwidth> parse_cfs_bandwidth(std::string_view quota_text, std::string_view period_text,
                                                std::string* error) {
  int64_t quota = 0;
  CpuBandwidth b;
  if (!to_num(trim(quota_text), quota) || (quota < 0 && quota != -1)) {
    fail(error, "cpu.cfs_quota_us: " + quoted(trim(quota_text)) + " is not -1 or a number of microseconds");
    return std::nullopt;
  }
  if (!to_num(trim(period_text), b.period_us) || b.period_us == 0) {
    fail(error, "cpu.cfs_period_us: " + quoted(trim(period_text)) + " is not a positive number of microseconds");
    return std::nullopt;
  }
  if (quota >= 0) b.quota_us = static_cast<uint64_t>(quota);
  return b;
}

std::optional<CpuThrottling> parse_cgroup_cpu_stat(std::string_view text, CgroupVersion version, std::string* error) {
  const std::string_view time_key = version == CgroupVersion::kV2 ? "throttled_usec" : "throttled_time";
  std::optional<uint64_t> periods, throttled, time;
  std::string bad;
  for_each_line(text, [&](std::string_view line) {
    const auto t = split_ws(line);
    if (t.empty() || !bad.empty()) return;
    std::optional<uint64_t>* slot = t[0] == "nr_periods"     ? &periods
                                    : t[0] == "nr_throttled" ? &throttled
                                    : t[0] == time_key       ? &time
                                                             : nullptr;
    if (!slot) return;  // usage_usec, nr_bursts, burst_time ... and keys of later kernels
    uint64_t v = 0;
    if (t.size() != 2 || !to_num(t[1], v)) bad = std::string(t[0]);
    else *slot = v;
  });
  if (!bad.empty()) {
    fail(error, "cpu.stat: " + bad + " is not followed by one number");
    return std::nullopt;
  }
  if (!periods || !throttled || !time) {
    fail(error, "cpu.stat: no " + std::string(!periods ? "nr_periods" : !throttled ? "nr_throttled" : time_key) +
                    " line (no CPU bandwidth control in this group)");
    return std::nullopt;
  }
  const uint64_t ns = version == CgroupVersion::kV2 ? *time * 1000 : *time;
  return CpuThrottling{*periods, *throttled, ns};
}

std::optional<CgroupCpuQuota> read_cgroup_cpu_quota(const std::string& proc_root, const std::string& fs_root,
                                                    std::string* error) {
  std::string text;
  if (!read_or_fail(proc_root + "/self/cgroup", text, error)) return std::nullopt;
  const auto lines = parse_proc_cgroup(text, error);
  if (!lines || !read_or_fail(proc_root + "/self/mountinfo", text, error)) return std::nullopt;
  const auto mounts = parse_cgroup_mounts(text, error);
  if (!mounts) return std::nullopt;
  const auto where = find_cpu_cgroup(*lines, *mounts, error);
  if (!where) return std::nullopt;
  CgroupCpuQuota q;
  q.version = where->version;
  q.process_dir = fs_root + where->dir;
  q.mount_point = fs_root + where->mount_point;
  // Nearest level first: of two equal quotas the nearer one is taken.
  std::string above;  // why a level above a quota already found could not be read
  for (const std::string& dir : levels(q.process_dir, q.mount_point)) {
    std::string why;
    const auto bw = read_level(dir, q.version, &why);
    if (!bw && !q.cpus) {
      fail(error, why);
      return std::nullopt;
    }
    if (!bw) {  // the quota found below still binds; a tighter one above is unknown
      above = why;
      break;
    }
    if (!bw->quota_us) continue;
    const double cpus = static_cast<double>(*bw->quota_us) / static_cast<double>(bw->period_us);
    if (q.cpus && cpus >= *q.cpus) continue;
    q.cpus = cpus;
    q.quota_us = *bw->quota_us;
    q.period_us = bw->period_us;
    q.dir = dir;
    q.cpu_stat = dir + "/cpu.stat";
  }
  q.description = describe(q) + (above.empty() ? "" : " (levels above unread: " + above + ")");
  return q;
}

namespace {
// A fixed-point decimal with a '.' whatever the program's locale: this runs inside the profiled process, which may
// have called setlocale(LC_ALL, "") with a decimal comma ("0,50" would not read back as a number).
std::string fixed(double v, int digits) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, digits);
  return r.ec == std::errc{} ? std::string(buf, r.ptr) : std::string("0");
}
}  // namespace

std::string format_cpus(double cpus) {
  std::string s = fixed(cpus, 3);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::vector<std::pair<std::string, std::string>> cgroup_cpu_process_info(const std::string& proc_root,
                                                                         const std::string& fs_root) {
  const auto q = read_cgroup_cpu_quota(proc_root, fs_root, nullptr);
  if (!q || !q->cpus) return {};
  // Two decimals ("0.20"); a quota under 0.01 CPUs (v1 allows 1 ms per 1 s) keeps four, so it never reads "0.00".
  return {{"cpu_quota", fixed(*q->cpus, *q->cpus >= 0.01 ? 2 : 4)},
          {"cpu_quota_period_us", std::to_string(q->period_us)},
          {"cpu_quota_source", q->description}};
}

}  // namespace inferscope::sys
