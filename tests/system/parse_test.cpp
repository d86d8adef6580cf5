// The /proc and /sys parsers on fixed strings: real layouts, odd thread names, and malformed input (which
// must give nullopt and a reason, never a crash or half-read numbers).
#include <doctest/doctest.h>

#include "collect/system/proc_parse.hpp"

#include <sys/syscall.h>

using namespace inferscope::sys;

namespace {
// A thread stat line (kernel 6.x layout, 52 fields) with a comm holding spaces and parentheses.
const char* kStat =
    "4242 (busy (1) x) R 1 4242 4242 0 -1 4194368 1234 0 7 0 250 31 0 0 20 0 3 0 100 123456789 5000 "
    "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
}  // namespace

TEST_CASE("stat: fields after the last parenthesis") {
  std::string err;
  auto s = parse_stat(kStat, &err);
  REQUIRE(s);
  CHECK(s->comm == "busy (1) x");
  CHECK(s->state == 'R');
  CHECK(s->minflt == 1234);
  CHECK(s->majflt == 7);
  CHECK(s->utime == 250);
  CHECK(s->stime == 31);
  CHECK(s->num_threads == 3);
  CHECK(s->rss_pages == 5000);
  CHECK(s->processor == 5);
}

TEST_CASE("stat: malformed input is refused with a reason") {
  std::string err;
  CHECK_FALSE(parse_stat("", &err));
  CHECK(err.find("comm") != std::string::npos);
  CHECK_FALSE(parse_stat("12 (x) R 1 2 3", &err));
  CHECK(err.find("fields") != std::string::npos);
  std::string bad = kStat;
  bad.replace(bad.find(" 250 "), 5, " 2x0 ");
  CHECK_FALSE(parse_stat(bad, &err));
  CHECK(err.find("not a number") != std::string::npos);
  CHECK_FALSE(parse_stat("12 (x) RS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22", &err));
  CHECK_FALSE(parse_stat(std::string_view("\0\0\0", 3), &err));
  CHECK_FALSE(parse_stat(")(", &err));
}

TEST_CASE("status: context switches and RSS") {
  const char* text =
      "Name:\tbusy\nState:\tS (sleeping)\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nThreads:\t3\n"
      "voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n";
  std::string err;
  auto s = parse_status(text, &err);
  REQUIRE(s);
  CHECK(*s->voluntary_ctxt_switches == 150);
  CHECK(*s->nonvoluntary_ctxt_switches == 7);
  CHECK(*s->vm_rss_bytes == 10240ull * 1024);
  CHECK(*s->vm_hwm_bytes == 20480ull * 1024);
  // Kernel threads have no Vm lines.
  auto k = parse_status("Name:\tkthreadd\nvoluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t0\n", &err);
  REQUIRE(k);
  CHECK_FALSE(k->vm_rss_bytes);
  CHECK_FALSE(parse_status("Name: x\nState: R\n", &err));
  CHECK(err.find("ctxt") != std::string::npos);
  // A garbled number leaves that value absent instead of guessing.
  auto g = parse_status("voluntary_ctxt_switches:\tlots\nnonvoluntary_ctxt_switches:\t3\n", &err);
  REQUIRE(g);
  CHECK_FALSE(g->voluntary_ctxt_switches);
  CHECK(*g->nonvoluntary_ctxt_switches == 3);
}

TEST_CASE("schedstat, statm, loadavg") {
  std::string err;
  auto ss = parse_schedstat("107809 2673560 2\n", &err);
  REQUIRE(ss);
  CHECK(ss->run_ns == 107809);
  CHECK(ss->wait_ns == 2673560);
  CHECK(ss->timeslices == 2);
  CHECK_FALSE(parse_schedstat("1 2\n", &err));
  CHECK_FALSE(parse_schedstat("a b c\n", &err));

  auto m = parse_statm("2000 512 100 10 0 300 0\n", &err);
  REQUIRE(m);
  CHECK(m->resident_pages == 512);
  CHECK_FALSE(parse_statm("2000\n", &err));

  auto l = parse_loadavg("1.50 0.75 0.25 3/456 7890\n", &err);
  REQUIRE(l);
  CHECK(l->load1 == doctest::Approx(1.5));
  CHECK(l->load15 == doctest::Approx(0.25));
  CHECK(l->runnable == 3);
  CHECK(l->total == 456);
  CHECK_FALSE(parse_loadavg("1.5 0.7 0.2 3-456 1\n", &err));
  CHECK_FALSE(parse_loadavg("", &err));
}

TEST_CASE("/proc/stat cpu line and machine busy share") {
  std::string err;
  auto a = parse_proc_stat_cpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\nintr 1 2 3\n", &err);
  auto b = parse_proc_stat_cpu("cpu  200 0 100 900 100 0 0 0 0 0\n", &err);
  REQUIRE(a);
  REQUIRE(b);
  auto pct = busy_percent(*a, *b);
  REQUIRE(pct);
  CHECK(*pct == doctest::Approx(50.0));  // 150 busy ticks of 300
  CHECK_FALSE(busy_percent(*b, *a));     // counters going back: no value
  CHECK_FALSE(busy_percent(*a, *a));     // no time passed
  // Old kernels: four columns only.
  auto old = parse_proc_stat_cpu("cpu 1 2 3 4\n", &err);
  REQUIRE(old);
  CHECK(old->idle == 4);
  CHECK_FALSE(parse_proc_stat_cpu("cpu0 1 2 3 4\n", &err));
  CHECK_FALSE(parse_proc_stat_cpu("cpu 1 2 x 4\n", &err));
}

TEST_CASE("meminfo and pressure") {
  std::string err;
  auto m = parse_meminfo("MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n", &err);
  REQUIRE(m);
  CHECK(m->total_bytes == 16000000ull * 1024);
  CHECK(*m->available_bytes == 8000000ull * 1024);
  CHECK_FALSE(parse_meminfo("MemFree: 1 kB\n", &err));

  auto p = parse_pressure("some avg10=0.00 avg60=0.10 avg300=0.00 total=12345\n"
                          "full avg10=0.00 avg60=0.00 avg300=0.00 total=678\n", &err);
  REQUIRE(p);
  CHECK(p->some_total_us == 12345);
  CHECK(*p->full_total_us == 678);
  auto cpu = parse_pressure("some avg10=1.00 avg60=0.50 avg300=0.10 total=99\n", &err);
  REQUIRE(cpu);
  CHECK_FALSE(cpu->full_total_us);
  CHECK_FALSE(parse_pressure("some avg10=1.00 total=x\n", &err));
  CHECK_FALSE(parse_pressure("garbage\n", &err));
}

TEST_CASE("NUMA files and id lists") {
  std::string err;
  auto kv = parse_numastat("numa_hit 6638386\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 1139\n"
                           "local_node 6638386\nother_node 0\n", &err);
  REQUIRE(kv);
  REQUIRE(kv->size() == 6);
  CHECK((*kv)[0].first == "numa_hit");
  CHECK((*kv)[0].second == 6638386);
  CHECK_FALSE(parse_numastat("numa_hit\n", &err));
  CHECK_FALSE(parse_numastat("numa_hit 12 13\n", &err));
  CHECK_FALSE(parse_numastat("", &err));

  auto f = parse_node_memfree("Node 0 MemTotal:       32000 kB\nNode 0 MemFree:        1000 kB\n", &err);
  REQUIRE(f);
  CHECK(*f == 1000ull * 1024);
  CHECK_FALSE(parse_node_memfree("Node 0 MemTotal: 1 kB\n", &err));

  auto ids = parse_id_list("0-2,5\n", &err);
  REQUIRE(ids);
  CHECK(*ids == std::vector<uint32_t>{0, 1, 2, 5});
  CHECK(parse_id_list("0\n", &err)->size() == 1);
  CHECK(parse_id_list("\n", &err)->empty());
  CHECK_FALSE(parse_id_list("3-1", &err));
  CHECK_FALSE(parse_id_list("a", &err));
  CHECK_FALSE(parse_id_list("0-99999999", &err));
}

TEST_CASE("syscall: the call a blocked task sits in, 'running', or -1 outside any") {
  std::string err;
  CHECK(parse_syscall("202 0x7f00 0x80 0x0 0x0 0x0 0x0 0x7ffc 0x7f01\n", &err) == 202);
  CHECK(parse_syscall("running\n", &err) == kSyscallRunning);
  CHECK(parse_syscall("-1 0x7ffd 0x4011\n", &err) == -1);
  CHECK_FALSE(parse_syscall("", &err));
  CHECK(err.find("empty") != std::string::npos);
  CHECK_FALSE(parse_syscall("sleeping 0x1\n", &err));
  CHECK(err.find("sleeping") != std::string::npos);
  CHECK_FALSE(parse_syscall("-7 0x1\n", &err));
}

TEST_CASE("syscall text: a futex wait with a timeout (the GIL's) is told from one without (a lock)") {
  std::string err;
  // glibc's pthread_cond_timedwait (CPython's take_gil): FUTEX_WAIT_BITSET|PRIVATE|CLOCK_REALTIME, a deadline.
  CHECK(blocked_in_of_syscall_text("202 0x55d0c8a0 0x189 0x0 0x7ffd1234 0x0 0xffffffff 0x7ffc 0x7f01\n", &err) ==
        inferscope::BlockedIn::kLockTimed);
  // sem_wait (a blocking Lock.acquire, `with lock:`): the same operation with no deadline.
  CHECK(blocked_in_of_syscall_text("202 0x7f1200 0x189 0x0 0x0 0x0 0xffffffff 0x7ffc 0x7f01\n", &err) ==
        inferscope::BlockedIn::kLockUntimed);
  // FUTEX_WAIT|PRIVATE with a relative timeout, and without.
  CHECK(blocked_in_of_syscall_text("202 0x7f1200 0x80 0x2 0x7ffd0010 0x0 0x0 0x7ffc 0x7f01\n", &err) ==
        inferscope::BlockedIn::kLockTimed);
  CHECK(blocked_in_of_syscall_text("202 0x7f1200 0x80 0x2 0x0 0x0 0x0 0x7ffc 0x7f01\n", &err) ==
        inferscope::BlockedIn::kLockUntimed);
  // Not a futex: the number alone decides; arguments missing or unreadable: a futex of unknown kind.
  CHECK(blocked_in_of_syscall_text("230 0x1 0x0 0x7ffd0010 0x0 0x0 0x0 0x7ffc 0x7f01\n", &err) ==
        inferscope::BlockedIn::kSleep);
  CHECK(blocked_in_of_syscall_text("202\n", &err) == inferscope::BlockedIn::kLock);
  CHECK(blocked_in_of_syscall_text("202 0x7f1200 zz 0x0 0x0\n", &err) == inferscope::BlockedIn::kLock);
  CHECK(blocked_in_of_syscall_text("running\n", &err) == inferscope::BlockedIn::kRunning);
  CHECK_FALSE(blocked_in_of_syscall_text("sleeping 0x1\n", &err));
}

TEST_CASE("syscall numbers map to what the task waits for") {
  CHECK(blocked_in_of_syscall(kSyscallRunning) == inferscope::BlockedIn::kRunning);
  CHECK(blocked_in_of_syscall(-1) == inferscope::BlockedIn::kNoSyscall);
  CHECK(blocked_in_of_syscall(SYS_clock_nanosleep) == inferscope::BlockedIn::kSleep);
  CHECK(blocked_in_of_syscall(SYS_futex) == inferscope::BlockedIn::kLock);
  CHECK(blocked_in_of_syscall(SYS_ppoll) == inferscope::BlockedIn::kPoll);
  CHECK(blocked_in_of_syscall(SYS_epoll_pwait) == inferscope::BlockedIn::kPoll);
  CHECK(blocked_in_of_syscall(SYS_read) == inferscope::BlockedIn::kRead);
  CHECK(blocked_in_of_syscall(SYS_write) == inferscope::BlockedIn::kWrite);
  CHECK(blocked_in_of_syscall(SYS_wait4) == inferscope::BlockedIn::kChild);
  CHECK(blocked_in_of_syscall(SYS_ioctl) == inferscope::BlockedIn::kOther);
  CHECK(std::string(inferscope::blocked_in_name(inferscope::BlockedIn::kLock)) == "lock");
}

TEST_CASE("children: a list of process ids, possibly empty") {
  std::string err;
  auto none = parse_pid_list("", &err);
  REQUIRE(none);
  CHECK(none->empty());
  auto two = parse_pid_list("4711 4712 \n", &err);
  REQUIRE(two);
  CHECK(*two == std::vector<uint32_t>{4711, 4712});
  CHECK_FALSE(parse_pid_list("4711 x", &err));
  CHECK(err.find("'x'") != std::string::npos);
  CHECK_FALSE(parse_pid_list("0", &err));
}
