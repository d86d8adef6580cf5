// A recorded program under a real cgroup CPU quota of 0.2 CPU: the dump's process info has cpu_quota "0.20" and
// its source, the collector status says the throttling is counted, cgroup.cpu.throttled_periods grows while
// the program spins, and the analysis names the quota as the primary cause. Needs root and a cpu cgroup this process can create a child in (cgroup v1 or v2); elsewhere,
// CI containers and unprivileged users, it prints why and exits 77, which ctest shows as skipped.
#include <doctest/doctest.h>

#include "analyze/analyzer.hpp"
#include "collect/system/cgroup_cpu.hpp"
#include "unit/test_util.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

using namespace inferscope;

namespace {

void skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

// "" or why the write failed.
std::string write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return "cannot write '" + text + "' to " + path + ": " + std::strerror(e);
  return "";
}

bool file_has_word(const std::string& path, const std::string& word) {
  std::ifstream f(path);
  for (std::string w; f >> w;)
    if (w == word) return true;
  return false;
}

// A cgroup with a quota of 0.2 CPU, removed (after its child process is gone) when the test ends however it ends:
// a REQUIRE that fails throws through the destructor.
struct QuotaCgroup {
  sys::CgroupVersion version = sys::CgroupVersion::kV2;
  std::string parent, dir;
  bool enabled_cpu = false;  // v2: this test added "+cpu" to the parent's cgroup.subtree_control
  pid_t child = -1;

  ~QuotaCgroup() { remove(); }

  // Creates `dir` under `parent` with 20 ms of CPU time per 100 ms period. "" or why not (nothing is left).
  std::string create(const std::string& parent_dir, const std::string& name) {
    parent = parent_dir;
    dir = parent + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      const std::string why = "cannot create " + dir + ": " + std::strerror(errno);
      dir.clear();
      return why;
    }
    std::string why = set_quota();
    if (!why.empty()) remove();
    return why;
  }

  std::string set_quota() {
    if (version == sys::CgroupVersion::kV1) {
      std::string err = write_file(dir + "/cpu.cfs_period_us", "100000");
      return err.empty() ? write_file(dir + "/cpu.cfs_quota_us", "20000") : err;
    }
    if (::access((dir + "/cpu.max").c_str(), F_OK) != 0) {
      // The parent does not hand the cpu controller down yet. Only a cgroup without processes of its own (or the
      // root) may: elsewhere the kernel refuses with EBUSY.
      if (!file_has_word(parent + "/cgroup.controllers", "cpu")) return "no cpu controller in " + parent;
      if (std::string err = write_file(parent + "/cgroup.subtree_control", "+cpu"); !err.empty()) return err;
      enabled_cpu = true;
    }
    return write_file(dir + "/cpu.max", "20000 100000");
  }

  void remove() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      testutil::wait_status(child);
      child = -1;
    }
    if (dir.empty()) return;
    // A reaped process can take a moment to leave the group's count: retry briefly.
    for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (enabled_cpu) write_file(parent + "/cgroup.subtree_control", "-cpu");  // others may use it: ignored
    enabled_cpu = false;
    dir.clear();
  }
};

// The exit status of `pid`, or -1 after killing it when it outlives `limit`.
int wait_with_deadline(pid_t& pid, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;  // QuotaCgroup::remove kills it
}

// Process-scope values of `name`, in time order.
std::vector<int64_t> process_series(const dump::DumpReader& r, const std::string& name) {
  std::vector<std::pair<uint64_t, int64_t>> v;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind != RecordKind::kCounter) return;
    const auto c = dump::load<CounterRecord>(p);
    if (c.scope == CounterScope::kProcess && c.target == 0 && r.string_at(c.name) == name)
      v.emplace_back(c.ts, c.value.i);
  });
  std::sort(v.begin(), v.end());
  std::vector<int64_t> out;
  for (auto& [ts, x] : v) out.push_back(x);
  return out;
}

std::string status_of(const dump::DumpReader& r, const std::string& collector) {
  for (auto& [k, v] : r.collector_status())
    if (k == collector) return v;
  return "";
}

}  // namespace

TEST_CASE("a recorded program under a 0.2 CPU cgroup quota: cpu_quota in process info, throttling counted") {
  if (::geteuid() != 0) skip("not root: cannot create a cgroup");
  std::string err;
  auto where = sys::read_cgroup_cpu_quota("/proc", "", &err);
  if (!where) skip("cannot find this process's cpu cgroup: " + err);
  if (where->cpus && *where->cpus <= 0.2)
    skip("this process is already limited to " + sys::format_cpus(*where->cpus) + " CPUs, not above the test's 0.2");
  // Under the process's own cgroup, else under the hierarchy's top: a v2 cgroup that holds processes (this one)
  // cannot hand the cpu controller to a child, the top can.
  QuotaCgroup g;
  g.version = where->version;
  const std::string name = "iscope-quota-test-" + std::to_string(::getpid());
  std::string why = g.create(where->process_dir, name);
  if (!why.empty() && where->mount_point != where->process_dir) {
    const std::string first = why;
    why = g.create(where->mount_point, name);
    if (!why.empty()) why = first + "; " + why;
  }
  if (!why.empty()) skip("cannot set a CPU quota on a new cgroup: " + why);
  std::printf("cgroup v%d %s: quota 0.2 CPU\n", static_cast<int>(g.version), g.dir.c_str());
  const std::string out = testutil::temp_path("cgroup-quota.iscope");
  g.child = testutil::spawn({std::string(INFERSCOPE_CGROUP_SPINNER), g.dir + "/cgroup.procs", out}, {});
  REQUIRE(g.child > 0);
  CHECK(wait_with_deadline(g.child, std::chrono::seconds(60)) == 0);
  g.remove();

  dump::DumpReader r(out);
  REQUIRE(r.complete());
  CHECK(testutil::process_value(r, "cpu_quota") == "0.20");
  CHECK(testutil::process_value(r, "cpu_quota_period_us") == "100000");
  const std::string source = testutil::process_value(r, "cpu_quota_source");
  CHECK(source.find(" = 0.2 CPUs") != std::string::npos);
  CHECK(source.find("iscope-quota-test-") != std::string::npos);
  INFO("system collector: " << status_of(r, "system"));
  CHECK(status_of(r, "system").find("; cgroup CPU quota 0.2 CPUs (throttling counted)") != std::string::npos);
  const auto periods = process_series(r, "cgroup.cpu.periods");
  const auto throttled = process_series(r, "cgroup.cpu.throttled_periods");
  const auto throttled_ns = process_series(r, "cgroup.cpu.throttled_ns");
  REQUIRE(!periods.empty());
  REQUIRE(!throttled.empty());
  REQUIRE(!throttled_ns.empty());
  std::printf("cgroup.cpu.*: periods %lld -> %lld, throttled %lld -> %lld, throttled_ns %lld -> %lld\n",
              (long long)periods.front(), (long long)periods.back(), (long long)throttled.front(),
              (long long)throttled.back(), (long long)throttled_ns.front(), (long long)throttled_ns.back());
  // A second of spinning at 0.2 CPU runs out of quota in nearly every one of its ~10 periods.
  CHECK(throttled.back() > throttled.front());
  CHECK(throttled.back() >= 3);
  CHECK(throttled_ns.back() > throttled_ns.front());
  CHECK(periods.back() >= throttled.back());

  // The analysis names the quota: the step thread's time off a CPU is the throttling, not a wait of its own
  // (schedstat credits each throttled wait only when the thread runs again: analyze/host_state.hpp).
  const analyze::Analysis a = analyze::analyze_file(out, {});
  REQUIRE(!a.findings.empty());
  const analyze::Finding& primary = a.findings.front();
  INFO("primary: " << primary.category << ": " << primary.title);
  CHECK(primary.category == "cpu_contention");
  CHECK(primary.title.find("held back by its cgroup's CPU quota (0.20 CPUs)") != std::string::npos);
  CHECK(primary.impact_pct > 50);
  for (const auto& f : a.findings) CHECK(f.category != "wait");
  std::remove(out.c_str());
}
