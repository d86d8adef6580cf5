// The cgroup CPU quota readers: each parser on fixed strings (v1, v2, hybrid, nested paths, mount roots, "max",
// -1, malformed lines, missing keys), read_cgroup_cpu_quota on temporary trees laid out like /proc and
// /sys/fs/cgroup, and the sampler's status line and cgroup.cpu.* counters on such a tree.
#include <doctest/doctest.h>

#include "collect/system/cgroup_cpu.hpp"
#include "collect/system/sampler.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

using namespace inferscope;
using namespace inferscope::sys;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// What this machine (Linux 6.18, hybrid) shows.
const char* kHybridCgroup =
    "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/43b8\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
// A v2-only host with optional fields (shared:N) between the options and the "-".
const char* kV2Mounts =
    "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
    "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";

struct Tree {
  fs::path root;
  Tree() {
    char dir[] = "/tmp/iscope-cgroup-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    root = dir;
    fs::create_directories(root / "proc/self");
  }
  ~Tree() { fs::remove_all(root); }
  void put(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  void proc(const std::string& cgroup, const std::string& mountinfo) const {
    put("proc/self/cgroup", cgroup);
    put("proc/self/mountinfo", mountinfo);
  }
  std::optional<CgroupCpuQuota> read(std::string* err) const {
    return read_cgroup_cpu_quota((root / "proc").string(), root.string(), err);
  }
  std::string at(const std::string& rel) const { return (root / rel).string(); }
};

}  // namespace

TEST_CASE("/proc/self/cgroup: hierarchies, controllers and paths") {
  std::string err;
  auto l = parse_proc_cgroup(kHybridCgroup, &err);
  REQUIRE(l);
  REQUIRE(l->size() == 7);
  CHECK((*l)[0].hierarchy == 9);
  CHECK((*l)[0].controllers == std::vector<std::string>{"name=systemd"});
  CHECK((*l)[2].path == "/process_api/43b8");
  CHECK(l->back().hierarchy == 0);
  CHECK(l->back().controllers.empty());
  CHECK(l->back().path == "/");
  auto c = parse_proc_cgroup("4:cpu,cpuacct:/kubepods/pod1/c:1\n0::/a/b\n", &err);
  REQUIRE(c);
  CHECK((*c)[0].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK((*c)[0].path == "/kubepods/pod1/c:1");  // everything after the second colon
  CHECK((*c)[1].path == "/a/b");
}

TEST_CASE("/proc/self/cgroup: malformed text is refused with a reason") {
  std::string err;
  for (const char* bad : {"garbage\n", "x:cpu:/a\n", "1:cpu:relative\n", "1:cpu:\n", "0::/\n1\n", "1:cpu/a\n"}) {
    CAPTURE(bad);
    err.clear();
    CHECK_FALSE(parse_proc_cgroup(bad, &err));
    CHECK(contains(err, "is not 'hierarchy:controllers:/path'"));
  }
  CHECK_FALSE(parse_proc_cgroup("", &err));
  CHECK(err == "cgroup: no lines");
  CHECK_FALSE(parse_proc_cgroup(std::string_view("\0\0\0", 3), &err));
  CHECK_FALSE(parse_proc_cgroup(std::string(500, ':'), &err));
  CHECK(err.size() < 200);  // the quoted line is cut short
}

TEST_CASE("mountinfo: cgroup mounts with roots, escapes and optional fields; others left out") {
  std::string err;
  auto m = parse_cgroup_mounts(kHybridMounts, &err);
  REQUIRE(m);
  REQUIRE(m->size() == 5);  // not the tmpfs
  CHECK((*m)[0].mount_point == "/sys/fs/cgroup/cpu");
  CHECK((*m)[0].root == "/");
  CHECK_FALSE((*m)[0].v2);
  CHECK((*m)[0].super_options == std::vector<std::string>{"rw", "cpu"});
  CHECK(m->back().v2);
  auto v2 = parse_cgroup_mounts(kV2Mounts, &err);
  REQUIRE(v2);
  REQUIRE(v2->size() == 1);
  CHECK((*v2)[0].mount_point == "/sys/fs/cgroup");
  auto e = parse_cgroup_mounts("50 31 0:40 /docker/a\\040b /mnt/my\\040cg\\134x rw - cgroup2 none rw\n", &err);
  REQUIRE(e);
  CHECK((*e)[0].root == "/docker/a b");
  CHECK((*e)[0].mount_point == "/mnt/my cg\\x");
  auto none = parse_cgroup_mounts("22 1 259:1 / / rw - ext4 /dev/root rw\n", &err);
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("mountinfo: a line without its fields is refused with a reason") {
  std::string err;
  for (const char* bad : {"1 2 3\n", "31 23 0:28 / /x rw tmpfs tmpfs rw\n", "31 23 0:28 / /x rw - cgroup2\n",
                          "31 23 - / /x rw cgroup cgroup rw\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_cgroup_mounts(bad, &err));
    CHECK(contains(err, "mountinfo: line '"));
  }
  CHECK(parse_cgroup_mounts("", &err));  // no mounts at all is not malformed (find_cpu_cgroup then says so)
  auto nul = parse_cgroup_mounts(std::string_view("\0\0\0", 3), &err);
  CHECK((nul && nul->empty()));
  CHECK_FALSE(parse_cgroup_mounts(std::string_view("1 2\0 3 - cgroup2", 16), &err));
}

TEST_CASE("find_cpu_cgroup: v1's cpu hierarchy wins on a hybrid system, else v2; mount roots are removed") {
  std::string err;
  auto dir = [&](const std::string& cg, const std::string& mi) {
    return find_cpu_cgroup(*parse_proc_cgroup(cg, nullptr), *parse_cgroup_mounts(mi, nullptr), &err);
  };
  auto h = dir(kHybridCgroup, kHybridMounts);
  REQUIRE(h);
  CHECK(h->version == CgroupVersion::kV1);
  CHECK(h->dir == "/sys/fs/cgroup/cpu");  // path "/": the mount point itself
  CHECK(h->mount_point == "/sys/fs/cgroup/cpu");
  auto nested = dir("1:cpu:/x/y\n0::/\n", kHybridMounts);
  REQUIRE(nested);
  CHECK(nested->dir == "/sys/fs/cgroup/cpu/x/y");
  // "cpuacct" and "cpuset" are not "cpu": v2 then, under its own mount.
  auto v2 = dir("2:cpuacct:/\n3:cpuset:/\n0::/user.slice/a.scope\n", kHybridMounts);
  REQUIRE(v2);
  CHECK(v2->version == CgroupVersion::kV2);
  CHECK(v2->dir == "/sys/fs/cgroup/unified/user.slice/a.scope");
  // Docker without a cgroup namespace: the container's cgroup is mounted as the root of /sys/fs/cgroup/...
  const char* docker =
      "1200 1190 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n";
  auto d = dir("4:cpu,cpuacct:/docker/abc/sub\n", docker);
  REQUIRE(d);
  CHECK(d->dir == "/sys/fs/cgroup/cpu,cpuacct/sub");
  CHECK(d->mount_point == "/sys/fs/cgroup/cpu,cpuacct");
  CHECK(dir("4:cpu,cpuacct:/docker/abc\n", docker)->dir == "/sys/fs/cgroup/cpu,cpuacct");
  // Of two mounts of one hierarchy, the one with the longer root above the path.
  const std::string two = std::string(kV2Mounts) + "30 22 0:23 /a /mnt/a rw - cgroup2 cgroup2 rw\n";
  CHECK(dir("0::/a/b\n", two)->dir == "/mnt/a/b");
  CHECK(dir("0::/ab\n", two)->dir == "/sys/fs/cgroup/ab");  // "/a" is not above "/ab"
}

TEST_CASE("find_cpu_cgroup: no mount, a mount root elsewhere, a path outside the namespace give reasons") {
  std::string err;
  auto dir = [&](const std::string& cg, const std::string& mi) {
    return find_cpu_cgroup(*parse_proc_cgroup(cg, nullptr), *parse_cgroup_mounts(mi, nullptr), &err);
  };
  CHECK_FALSE(dir("1:cpu:/x\n", kV2Mounts));
  CHECK(err == "no cgroup v1 cpu mount in mountinfo");
  CHECK_FALSE(dir("0::/x\n", "30 22 0:23 /other /mnt/o rw - cgroup2 cgroup2 rw\n"));
  CHECK(err == "no cgroup2 mount shows the process's cgroup /x");
  CHECK_FALSE(dir("0::/../sibling\n", kV2Mounts));
  CHECK(contains(err, "outside this cgroup namespace"));
  CHECK_FALSE(dir("0::/..\n", kV2Mounts));
  CHECK(contains(err, "outside this cgroup namespace"));
  // A name that only starts with two dots is a cgroup like any other.
  auto dotted = dir("0::/..data/x\n", kV2Mounts);
  REQUIRE_MESSAGE(dotted, err);
  CHECK(dotted->dir == "/sys/fs/cgroup/..data/x");
  CHECK_FALSE(dir("5:memory:/\n", kV2Mounts));
  CHECK(contains(err, "no v1 hierarchy with the cpu controller and no v2 line"));
}

TEST_CASE("cpu.max and cpu.cfs_quota_us: quotas, 'max' and -1, malformed values") {
  std::string err;
  auto none = parse_cpu_max("max 100000\n", &err);
  REQUIRE(none);
  CHECK_FALSE(none->quota_us);
  CHECK(none->period_us == 100000);
  auto two = parse_cpu_max("200000 100000\n", &err);
  REQUIRE(two);
  CHECK(*two->quota_us == 200000);
  CHECK(two->period_us == 100000);
  CHECK(parse_cpu_max("max", &err));
  for (const char* bad : {"", "\n", "abc 100000", "200000", "200000 0", "1 2 3", "-5 100000", "200000 x"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_cpu_max(bad, &err));
    CHECK(contains(err, "cpu.max: "));
  }
  auto v1 = parse_cfs_bandwidth("20000\n", "100000\n", &err);
  REQUIRE(v1);
  CHECK(*v1->quota_us == 20000);
  CHECK(v1->period_us == 100000);
  auto unlimited = parse_cfs_bandwidth("-1\n", "100000\n", &err);
  REQUIRE(unlimited);
  CHECK_FALSE(unlimited->quota_us);
  CHECK_FALSE(parse_cfs_bandwidth("-2", "100000", &err));
  CHECK(contains(err, "cpu.cfs_quota_us: '-2'"));
  CHECK_FALSE(parse_cfs_bandwidth("x", "100000", &err));
  CHECK_FALSE(parse_cfs_bandwidth("20000", "", &err));
  CHECK(contains(err, "cpu.cfs_period_us"));
  CHECK_FALSE(parse_cfs_bandwidth("20000", "0", &err));
}

TEST_CASE("cpu.stat: v1 and v2 keys, v2's microseconds in ns, missing keys refused") {
  std::string err;
  // Read on this machine around 2 s of spinning at 0.2 CPU (v1).
  const char* v1text = "nr_periods 23\nnr_throttled 22\nthrottled_time 1674663563\nnr_bursts 0\nburst_time 0\n";
  auto v1 = parse_cgroup_cpu_stat(v1text, CgroupVersion::kV1, &err);
  REQUIRE(v1);
  CHECK(v1->periods == 23);
  CHECK(v1->throttled_periods == 22);
  CHECK(v1->throttled_ns == 1674663563);
  const char* v2text =
      "usage_usec 2000000\nuser_usec 1990000\nsystem_usec 10000\nnr_periods 23\nnr_throttled 22\n"
      "throttled_usec 1674663\nnr_bursts 0\nburst_usec 0\nfuture_key 7\n";
  auto v2 = parse_cgroup_cpu_stat(v2text, CgroupVersion::kV2, &err);
  REQUIRE(v2);
  CHECK(v2->throttled_ns == 1674663000);
  CHECK(v2->periods == 23);
  // A v2 group without the cpu controller has only the usage lines.
  CHECK_FALSE(parse_cgroup_cpu_stat("usage_usec 1\nuser_usec 1\nsystem_usec 0\n", CgroupVersion::kV2, &err));
  CHECK(contains(err, "no nr_periods line"));
  CHECK_FALSE(parse_cgroup_cpu_stat("nr_periods 1\nnr_throttled 0\nthrottled_time 5\n", CgroupVersion::kV2, &err));
  CHECK(contains(err, "no throttled_usec line"));
  CHECK_FALSE(parse_cgroup_cpu_stat("nr_periods x\nnr_throttled 0\nthrottled_time 5\n", CgroupVersion::kV1, &err));
  CHECK(contains(err, "nr_periods is not followed by one number"));
  CHECK_FALSE(parse_cgroup_cpu_stat("nr_periods 1 2\nnr_throttled 0\nthrottled_time 5\n", CgroupVersion::kV1, &err));
  CHECK_FALSE(parse_cgroup_cpu_stat(std::string_view("\0\0\0", 3), CgroupVersion::kV1, &err));
  CHECK_FALSE(parse_cgroup_cpu_stat("", CgroupVersion::kV1, &err));
}

TEST_CASE("format_cpus: up to three decimals, no trailing zeros") {
  CHECK(format_cpus(0.2) == "0.2");
  CHECK(format_cpus(2) == "2");
  CHECK(format_cpus(2.5) == "2.5");
  CHECK(format_cpus(1.0 / 3) == "0.333");
}

TEST_CASE("read_cgroup_cpu_quota: v2, the parent's quota is tighter than the child's and binds") {
  Tree t;
  t.proc("0::/kubepods/pod/ctr\n", kV2Mounts);
  t.put("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");  // the root has no cpu.max
  t.put("sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  t.put("sys/fs/cgroup/kubepods/pod/cpu.max", "50000 100000\n");
  t.put("sys/fs/cgroup/kubepods/pod/ctr/cpu.max", "200000 100000\n");
  std::string err;
  auto q = t.read(&err);
  REQUIRE_MESSAGE(q, err);
  CHECK(q->version == CgroupVersion::kV2);
  CHECK(q->process_dir == t.at("sys/fs/cgroup/kubepods/pod/ctr"));
  CHECK(q->mount_point == t.at("sys/fs/cgroup"));
  REQUIRE(q->cpus);
  CHECK(*q->cpus == doctest::Approx(0.5));
  CHECK(q->dir == t.at("sys/fs/cgroup/kubepods/pod"));
  CHECK(q->cpu_stat == t.at("sys/fs/cgroup/kubepods/pod/cpu.stat"));
  CHECK(q->description == "cgroup v2 " + t.at("sys/fs/cgroup/kubepods/pod") + ": cpu.max 50000 / 100000 = 0.5 CPUs");
  auto info = cgroup_cpu_process_info(t.at("proc"), t.root.string());
  REQUIRE(info.size() == 3);
  CHECK(info[0] == std::pair<std::string, std::string>{"cpu_quota", "0.50"});
  CHECK(info[1] == std::pair<std::string, std::string>{"cpu_quota_period_us", "100000"});
  CHECK(info[2] == std::pair<std::string, std::string>{"cpu_quota_source", q->description});
}

TEST_CASE("read_cgroup_cpu_quota: v1 cpu,cpuacct under a container's mount root") {
  Tree t;
  t.proc("11:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
         "1200 1190 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
         "1201 1190 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  t.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  t.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  std::string err;
  auto q = t.read(&err);
  REQUIRE_MESSAGE(q, err);
  CHECK(q->version == CgroupVersion::kV1);
  REQUIRE(q->cpus);
  CHECK(*q->cpus == doctest::Approx(2.5));
  CHECK(q->description == "cgroup v1 " + t.at("sys/fs/cgroup/cpu,cpuacct") +
                              ": cpu.cfs_quota_us 250000 / cpu.cfs_period_us 100000 = 2.5 CPUs");
  auto info = cgroup_cpu_process_info(t.at("proc"), t.root.string());
  REQUIRE(info.size() == 3);
  CHECK(info[0].second == "2.50");
}

TEST_CASE("read_cgroup_cpu_quota: no quota anywhere; nested v1 child binds when its parent is unlimited") {
  Tree t;
  t.proc("1:cpu:/x/y\n0::/\n", kHybridMounts);
  for (const char* d : {"", "/x", "/x/y"}) {
    t.put(std::string("sys/fs/cgroup/cpu") + d + "/cpu.cfs_quota_us", "-1\n");
    t.put(std::string("sys/fs/cgroup/cpu") + d + "/cpu.cfs_period_us", "100000\n");
  }
  std::string err;
  auto q = t.read(&err);
  REQUIRE_MESSAGE(q, err);
  CHECK_FALSE(q->cpus);
  CHECK(q->dir.empty());
  CHECK(q->description == "cgroup v1 " + t.at("sys/fs/cgroup/cpu/x/y") + ": no cpu.cfs_quota_us quota up to " +
                              t.at("sys/fs/cgroup/cpu"));
  CHECK(cgroup_cpu_process_info(t.at("proc"), t.root.string()).empty());
  t.put("sys/fs/cgroup/cpu/x/y/cpu.cfs_quota_us", "20000\n");
  q = t.read(&err);
  REQUIRE(q);
  REQUIRE(q->cpus);
  CHECK(*q->cpus == doctest::Approx(0.2));
  CHECK(q->dir == t.at("sys/fs/cgroup/cpu/x/y"));
  CHECK(cgroup_cpu_process_info(t.at("proc"), t.root.string())[0].second == "0.20");
}

TEST_CASE("read_cgroup_cpu_quota: an unreadable level above a quota keeps the quota found below") {
  Tree t;
  t.proc("0::/pod/ctr\n", kV2Mounts);
  t.put("sys/fs/cgroup/pod/ctr/cpu.max", "30000 100000\n");
  fs::create_directories(t.at("sys/fs/cgroup/pod/cpu.max"));  // open() succeeds, read() fails: EISDIR
  std::string err;
  auto q = t.read(&err);
  REQUIRE_MESSAGE(q, err);
  REQUIRE(q->cpus);
  CHECK(*q->cpus == doctest::Approx(0.3));
  CHECK(contains(q->description, "= 0.3 CPUs (levels above unread: cannot read " + t.at("sys/fs/cgroup/pod/cpu.max")));
}

TEST_CASE("read_cgroup_cpu_quota: missing, unreadable or malformed files give a reason, never a crash") {
  Tree t;
  std::string err;
  CHECK_FALSE(t.read(&err));
  CHECK(contains(err, "cannot read " + t.at("proc/self/cgroup")));
  t.put("proc/self/cgroup", "0::/a\n");
  CHECK_FALSE(t.read(&err));
  CHECK(contains(err, "cannot read " + t.at("proc/self/mountinfo")));
  t.put("proc/self/mountinfo", "nonsense\n");
  CHECK_FALSE(t.read(&err));
  CHECK(contains(err, "mountinfo: line 'nonsense'"));
  t.put("proc/self/mountinfo", kV2Mounts);
  auto q = t.read(&err);  // no directories at all: no quota files, no quota
  REQUIRE(q);
  CHECK_FALSE(q->cpus);
  t.put("sys/fs/cgroup/a/cpu.max", "lots\n");
  CHECK_FALSE(t.read(&err));
  CHECK(err == t.at("sys/fs/cgroup/a") + ": cpu.max: 'lots' is not 'max|QUOTA PERIOD'");
  fs::remove(t.at("sys/fs/cgroup/a/cpu.max"));
  fs::create_directories(t.at("sys/fs/cgroup/a/cpu.max"));  // open() succeeds, read() fails: EISDIR
  CHECK_FALSE(t.read(&err));
  CHECK(contains(err, "cannot read " + t.at("sys/fs/cgroup/a/cpu.max") + ": "));
  CHECK(cgroup_cpu_process_info(t.at("proc"), t.root.string()).empty());
  // v1: a quota without its period.
  t.proc("1:cpu:/\n", kHybridMounts);
  t.put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "20000\n");
  CHECK_FALSE(t.read(&err));
  CHECK(contains(err, "cannot read " + t.at("sys/fs/cgroup/cpu/cpu.cfs_period_us")));
}

TEST_CASE("sampler: the binding level's cpu.stat becomes cgroup.cpu.* counters, and the status says so") {
  Tree t;
  t.proc("0::/ctr\n", kV2Mounts);
  t.put("sys/fs/cgroup/ctr/cpu.max", "20000 100000\n");
  t.put("sys/fs/cgroup/ctr/cpu.stat", "usage_usec 5\nnr_periods 3\nnr_throttled 2\nthrottled_usec 140198\n");
  SamplerOptions o;
  o.nvml = false;
  o.proc_root = t.at("proc");
  o.fs_root = t.root.string();
  std::vector<CounterRecord> got;
  SystemSampler s(o, [&](const CounterRecord& r) { got.push_back(r); }, nullptr);
  const std::string status = s.open();
  CHECK(contains(status, "; cgroup CPU quota 0.2 CPUs (throttling counted)"));
  const auto& n = CounterNames::get();
  auto values = [&] {
    std::map<uint32_t, int64_t> v;
    for (auto& r : got)
      if (r.scope == CounterScope::kProcess && r.target == 0) v[r.name] = r.value.i;
    got.clear();
    return v;
  };
  s.round(false);
  auto v = values();
  CHECK(v.at(n.cgroup_cpu_periods) == 3);
  CHECK(v.at(n.cgroup_cpu_throttled_periods) == 2);
  CHECK(v.at(n.cgroup_cpu_throttled_ns) == 140198000);
  // The held descriptor is re-read from offset 0 each round.
  t.put("sys/fs/cgroup/ctr/cpu.stat", "nr_periods 23\nnr_throttled 22\nthrottled_usec 1674663\n");
  s.round(false);
  v = values();
  CHECK(v.at(n.cgroup_cpu_throttled_periods) == 22);
  CHECK(v.at(n.cgroup_cpu_throttled_ns) == 1674663000);
  t.put("sys/fs/cgroup/ctr/cpu.stat", "nr_periods 23\n");
  const uint64_t skipped = s.skipped_samples();
  s.round(true);
  CHECK(s.skipped_samples() == skipped + 1);
  CHECK(contains(s.last_error(), "cpu.stat: no nr_throttled line"));
}

TEST_CASE("sampler: no quota, a quota whose cpu.stat lacks the keys, and an unreadable cgroup, in the status") {
  Tree t;
  SamplerOptions o;
  o.nvml = false;
  o.proc_root = t.at("proc");
  o.fs_root = t.root.string();
  auto status = [&] { return SystemSampler(o, [](const CounterRecord&) {}, nullptr).open(); };
  CHECK(contains(status(), "; cgroup CPU quota unknown (cannot read " + t.at("proc/self/cgroup")));
  t.proc("0::/ctr\n", kV2Mounts);
  CHECK(contains(status(), "; no cgroup CPU quota"));
  t.put("sys/fs/cgroup/ctr/cpu.max", "20000 100000\n");
  CHECK(contains(status(), "; cgroup CPU quota 0.2 CPUs (throttling not counted: cannot open "));
  t.put("sys/fs/cgroup/ctr/cpu.stat", "usage_usec 5\n");
  CHECK(contains(status(), "; cgroup CPU quota 0.2 CPUs (throttling not counted: cpu.stat: no nr_periods line"));
}
