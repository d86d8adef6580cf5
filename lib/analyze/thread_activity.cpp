// Stage "thread activity" (waits.hpp): when each thread of the process and each child process was on a CPU,
// from the system collector's schedstat (or clock-tick) counters, and what the step thread was blocked in.
#include "analyze/stages.hpp"
#include "analyze/waits/waits.hpp"

#include <inferscope/counter_names.hpp>

#include <cmath>
#include <cstdlib>

namespace inferscope::analyze::detail {

int64_t LevelSeries::at(int64_t t, int64_t none) const {
  auto it = std::upper_bound(points.begin(), points.end(), t, [](int64_t v, const auto& p) { return v < p.first; });
  return it == points.begin() ? none : std::prev(it)->second;
}

double LevelSeries::time_at_value(int64_t a, int64_t b, int64_t value) const {
  if (b <= a) return 0;
  auto it = std::upper_bound(points.begin(), points.end(), a, [](int64_t v, const auto& p) { return v < p.first; });
  if (it != points.begin()) --it;  // the sample holding at a
  double sum = 0;
  for (; it != points.end() && it->first < b; ++it) {
    if (it->second != value) continue;
    const int64_t from = std::max(a, it->first);
    const int64_t to = std::next(it) == points.end() ? b : std::min(b, std::next(it)->first);
    if (to > from) sum += double(to - from);
  }
  return sum;
}

double Activity::run_in(int64_t a, int64_t b) const { return run.points.size() >= 2 ? run.delta(a, b) : 0; }

namespace {

namespace names = counter_names;

void sort_series(CumulativeSeries& s) {
  std::stable_sort(s.points.begin(), s.points.end(), [](auto& x, auto& y) { return x.first < y.first; });
}

/// schedstat when there is any, else user + system time summed at each sample time (ticks).
struct SeriesParts {
  CumulativeSeries sched, wait, user, system;
};

CumulativeSeries sum_of(const CumulativeSeries& a, const CumulativeSeries& b) {
  std::vector<int64_t> t;
  for (auto& p : a.points) t.push_back(p.first);
  for (auto& p : b.points) t.push_back(p.first);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  CumulativeSeries out;
  for (int64_t x : t) out.points.emplace_back(x, a.at(x) + b.at(x));
  return out;
}

void finish(SeriesParts& p, Activity& a) {
  for (CumulativeSeries* s : {&p.sched, &p.wait, &p.user, &p.system}) sort_series(*s);
  a.exact = p.sched.points.size() >= 2;
  a.run = a.exact ? std::move(p.sched) : sum_of(p.user, p.system);
  a.runq = std::move(p.wait);
}

std::string info(const Context& cx, const std::string& key) { return cx.r.process_value(key); }

double number_in(const std::string& text, const std::string& before) {
  const size_t at = text.find(before);
  if (at == std::string::npos) return 0;
  return std::atof(text.c_str() + at + before.size());
}

}  // namespace

ActivitySet read_activity(const Context& cx, const std::vector<CounterSample>& counters, uint32_t step_thread,
                          const std::vector<uint8_t>& python_threads) {
  ActivitySet out;
  // The step thread: as the host-state split reads it.
  {
    ThreadCounters st = thread_counters(cx, counters, step_thread);
    credit_pending_waits(st);
    out.step.id = step_thread;
    out.step.kind = Activity::Kind::kThread;
    if (!st.on_cpu.empty()) out.step.run = st.on_cpu.size() == 1 ? st.on_cpu[0] : sum_of(st.on_cpu[0], st.on_cpu[1]);
    out.step.exact = st.on_cpu_exact;
    out.step.python = step_thread < python_threads.size() && python_threads[step_thread];
    out.step.runq = st.runnable;
    auto t = cx.r.threads().find(step_thread);
    if (t != cx.r.threads().end()) {
      out.step.os_id = t->second.os_tid;
      out.step.name = t->second.name;
    }
  }
  // Every other thread: dump threads joined with their OS-thread series, then OS threads the table does not have.
  std::unordered_map<uint32_t, uint32_t> table_of_os;  // os tid -> dump id (the latest: tids are reused)
  for (auto& [id, t] : cx.r.threads())
    if (!t.is_channel() && t.os_tid) table_of_os[t.os_tid] = id;
  std::map<uint32_t, SeriesParts> threads, os_threads, children;
  std::map<uint32_t, LevelSeries> blocked_of;  // other dump threads' thread.blocked_in
  const uint32_t blocked_in = [&] {
    for (uint32_t i = 1; i < cx.nstr; ++i)
      if (cx.name_of(i) == names::kThreadBlockedIn) return i;
    return 0u;
  }();
  std::vector<uint8_t> kind_of_name(cx.nstr, 0);  // 1 sched run, 2 sched wait, 3 user, 4 system, 5 blocked_in
  for (uint32_t i = 1; i < cx.nstr; ++i) {
    const std::string& n = cx.name_of(i);
    if (n == names::kThreadSchedRunNs || n == names::kChildSchedRunNs) kind_of_name[i] = 1;
    else if (n == names::kThreadSchedWaitNs || n == names::kChildSchedWaitNs) kind_of_name[i] = 2;
    else if (n == names::kThreadCpuUserNs || n == names::kChildCpuUserNs) kind_of_name[i] = 3;
    else if (n == names::kThreadCpuSystemNs || n == names::kChildCpuSystemNs) kind_of_name[i] = 4;
  }
  if (blocked_in) kind_of_name[blocked_in] = 5;
  for (const CounterSample& c : counters) {
    if (c.name >= cx.nstr || !kind_of_name[c.name] || !std::isfinite(c.v)) continue;
    const uint8_t k = kind_of_name[c.name];
    SeriesParts* p = nullptr;
    if (c.scope == uint8_t(CounterScope::kThread)) {
      if (k == 5) {
        (c.target == step_thread ? out.step.blocked_in : blocked_of[c.target]).points.emplace_back(c.ts, int64_t(c.v));
        continue;
      }
      if (c.target == step_thread) continue;
      p = &threads[c.target];
    } else if (c.scope == uint8_t(CounterScope::kOsThread)) {
      auto it = table_of_os.find(c.target);
      if (it != table_of_os.end()) {
        if (it->second == step_thread) continue;
        p = &threads[it->second];
      } else {
        p = &os_threads[c.target];
      }
    } else if (c.scope == uint8_t(CounterScope::kChildProcess)) {
      p = &children[c.target];
    } else {
      continue;
    }
    if (k == 5) continue;
    CumulativeSeries& s = k == 1 ? p->sched : k == 2 ? p->wait : k == 3 ? p->user : p->system;
    s.points.emplace_back(c.ts, c.v);
  }
  auto by_time = [](auto& x, auto& y) { return x.first < y.first; };
  std::stable_sort(out.step.blocked_in.points.begin(), out.step.blocked_in.points.end(), by_time);
  for (auto& [id, parts] : threads) {
    Activity a;
    a.kind = Activity::Kind::kThread;
    a.id = id;
    auto t = cx.r.threads().find(id);
    if (t != cx.r.threads().end()) {
      if (t->second.is_channel()) continue;
      a.os_id = t->second.os_tid;
      a.name = t->second.name;
    }
    a.python = id < python_threads.size() && python_threads[id];
    if (auto b = blocked_of.find(id); b != blocked_of.end()) {
      a.blocked_in = std::move(b->second);
      std::stable_sort(a.blocked_in.points.begin(), a.blocked_in.points.end(), by_time);
    }
    finish(parts, a);
    if (a.run.points.size() >= 2) out.others.push_back(std::move(a));
  }
  for (auto& [tid, parts] : os_threads) {
    Activity a;
    a.kind = Activity::Kind::kOsThread;
    a.id = a.os_id = tid;
    a.name = info(cx, "os_thread." + std::to_string(tid) + ".thread_name");
    a.python = !a.name.empty();  // named by Python's threading module: a Python thread that never recorded
    if (a.name.empty()) a.name = info(cx, "os_thread." + std::to_string(tid) + ".name");
    finish(parts, a);
    if (a.run.points.size() >= 2) out.others.push_back(std::move(a));
  }
  for (auto& [pid, parts] : children) {
    Activity a;
    a.kind = Activity::Kind::kChild;
    a.id = a.os_id = pid;
    a.name = info(cx, "child." + std::to_string(pid) + ".name");
    a.parent = uint32_t(std::strtoul(info(cx, "child." + std::to_string(pid) + ".parent").c_str(), nullptr, 10));
    finish(parts, a);
    if (a.run.points.size() >= 2) out.children.push_back(std::move(a));
  }
  const std::string status = [&] {
    for (auto& [k, v] : cx.r.collector_status())
      if (k == "system") return v;
    return std::string();
  }();
  out.round_ms = number_in(status, "every ");
  const double us = number_in(status, "schedstat every ");
  out.thread_sample_ms = us > 0 ? us / 1000 : 0;
  return out;
}

}  // namespace inferscope::analyze::detail
