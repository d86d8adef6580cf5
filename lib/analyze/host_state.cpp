#include "analyze/host_state.hpp"

#include <inferscope/counter_names.hpp>

#include <algorithm>
#include <cmath>

namespace inferscope::analyze::detail {

double CumulativeSeries::at(int64_t t) const {
  if (points.empty()) return 0;
  if (t <= points.front().first) return points.front().second;
  if (t >= points.back().first) return points.back().second;
  auto it = std::upper_bound(points.begin(), points.end(), t, [](int64_t v, const auto& p) { return v < p.first; });
  const auto& [t1, v1] = *it;
  const auto& [t0, v0] = *(it - 1);
  return t1 > t0 ? v0 + (v1 - v0) * double(t - t0) / double(t1 - t0) : v1;
}

double ThreadCounters::on_cpu_delta(int64_t a, int64_t b) const {
  double d = 0;
  for (const auto& s : on_cpu) d += s.delta(a, b);
  return d;
}

bool ThreadCounters::has_on_cpu() const {
  return std::any_of(on_cpu.begin(), on_cpu.end(), [](const CumulativeSeries& s) { return s.points.size() >= 2; });
}

namespace {

// Narrows [s, e) to the part every on-CPU series has samples around (a cumulative series is flat outside its
// samples: measured beyond them, a thread on a CPU would read as off it). False when no part is covered.
bool covered_part(const std::vector<CumulativeSeries>& series, int64_t& s, int64_t& e) {
  bool any = false;
  for (const auto& x : series) {
    if (x.points.size() < 2) continue;
    s = std::max(s, x.points.front().first);
    e = std::min(e, x.points.back().first);
    any = true;
  }
  return any && e > s;
}

// Share of [s, e) other Python threads spent on a CPU (counters, over the part they cover).
double others_running_share(int64_t s, int64_t e, const std::vector<ThreadCounters>& others) {
  double share = 0;
  for (const auto& o : others) {
    if (!o.python) continue;
    int64_t a = s, b = e;
    // A thread without counters over the step adds nothing: its frames also cover the time it sleeps or
    // blocks (a producer thread in time.sleep holds no GIL), so frame coverage would call every wait a GIL wait.
    if (covered_part(o.on_cpu, a, b)) share += o.on_cpu_delta(a, b) / double(b - a);
  }
  return std::clamp(share, 0.0, 1.0);
}

}  // namespace

HostShares host_shares(int64_t s, int64_t e, double host_ns, const ThreadCounters& st,
                       const std::vector<ThreadCounters>& others, bool step_thread_python) {
  HostShares h;
  int64_t a = s, b = e;  // the part of the step the counters cover
  if (e <= s || host_ns <= 0 || !covered_part(st.on_cpu, a, b)) return h;
  const double wall = double(b - a);
  const double host = host_ns * wall / double(e - s);  // the host time in that part (spread evenly)
  const double on_cpu = std::clamp(st.on_cpu_delta(a, b), 0.0, wall);
  const double runq = std::clamp(st.runnable.delta(a, b), 0.0, wall - on_cpu);
  const double off_blocked = std::max(0.0, wall - on_cpu - runq);
  h.measured = true;
  h.runnable = std::min(1.0, runq / host);
  const double blocked = std::min(1.0 - h.runnable, off_blocked / host);
  const double gil_share = step_thread_python ? others_running_share(a, b, others) : 0;
  h.gil = blocked * gil_share;
  h.blocked = blocked - h.gil;
  h.running = std::max(0.0, 1.0 - h.runnable - h.gil - h.blocked);
  return h;
}

namespace {

// The on-CPU and run-queue cumulative values on the union of their sample times.
struct Grid {
  std::vector<int64_t> t;
  std::vector<double> run, wait;
};

Grid sample_grid(const ThreadCounters& st) {
  Grid g;
  for (const auto& s : st.on_cpu)
    for (const auto& p : s.points) g.t.push_back(p.first);
  for (const auto& p : st.runnable.points) g.t.push_back(p.first);
  std::sort(g.t.begin(), g.t.end());
  g.t.erase(std::unique(g.t.begin(), g.t.end()), g.t.end());
  for (int64_t t : g.t) {
    double run = 0;
    for (const auto& s : st.on_cpu) run += s.at(t);
    g.run.push_back(run);
    g.wait.push_back(st.runnable.at(t));
  }
  return g;
}

}  // namespace

void credit_pending_waits(ThreadCounters& st) {
  if (!st.on_cpu_exact || st.runnable.points.size() < 2 || !st.has_on_cpu()) return;
  const Grid g = sample_grid(st);
  const size_t n = g.t.size();
  for (size_t i = 0; i < n; ++i)  // values from a damaged or hostile dump: leave the series as they are
    if (!std::isfinite(g.run[i]) || !std::isfinite(g.wait[i])) return;
  // Per interval i (from g.t[i-1] to g.t[i]): credited on-CPU and run-queue time, and the unaccounted rest.
  std::vector<double> dr(n, 0), dw(n, 0), unaccounted(n, 0);
  for (size_t i = 1; i < n; ++i) {
    dr[i] = std::max(0.0, g.run[i] - g.run[i - 1]);
    dw[i] = std::max(0.0, g.wait[i] - g.wait[i - 1]);
    unaccounted[i] = std::max(0.0, double(g.t[i] - g.t[i - 1]) - dr[i] - dw[i]);
  }
  // The latest interval at or before j with unaccounted time left (0: none). Intervals only ever empty, so each
  // one passed on the way is pointed straight at the answer (path compression): the look-back stays near linear
  // however many intervals are empty (a thread always on a CPU) and however much later samples credit.
  std::vector<size_t> back(n);
  for (size_t j = 0; j < n; ++j) back[j] = j;
  auto step_back = [&](size_t j) { return back[j] == j ? j - 1 : back[j]; };
  auto open_at_or_before = [&](size_t j) {
    size_t r = j;
    while (r && unaccounted[r] <= 0) r = step_back(r);
    while (j != r) {
      const size_t next = step_back(j);
      back[j] = r;
      j = next;
    }
    return r;
  };
  for (size_t i = 2; i < n; ++i) {
    const double dt = double(g.t[i] - g.t[i - 1]), credited = dr[i] + dw[i], excess = credited - dt;
    if (excess <= 0) continue;
    // On-CPU time is credited at most a scheduler tick late, a run-queue wait only when it ends: the interval's
    // own time is taken to be its on-CPU credit first, and only on-CPU time beyond its length is late on-CPU time.
    const double wait_part = 1 - std::max(0.0, dr[i] - dt) / excess;
    // The credited time happened after `earliest`: intervals that ended by then keep their unaccounted time.
    const int64_t earliest = g.t[i] - int64_t(std::min(credited, double(g.t[i] - g.t[0])));
    double left = excess;
    for (size_t j = open_at_or_before(i - 1); j >= 1 && left > 0 && g.t[j] > earliest; j = open_at_or_before(j)) {
      const double moved = std::min(unaccounted[j], left);
      unaccounted[j] -= moved;
      dw[j] += moved * wait_part;
      dr[j] += moved * (1 - wait_part);
      dw[i] -= moved * wait_part;
      dr[i] -= moved * (1 - wait_part);
      left -= moved;
    }
  }
  CumulativeSeries run, wait;
  double r = g.run[0], w = g.wait[0];
  for (size_t i = 0; i < n; ++i) {
    if (i) r += dr[i], w += dw[i];
    run.points.emplace_back(g.t[i], r);
    wait.points.emplace_back(g.t[i], w);
  }
  st.on_cpu.assign(1, std::move(run));
  st.runnable = std::move(wait);
}

void split_idle_host(std::vector<StepMetrics>& steps, const ThreadCounters& st, const std::vector<ThreadCounters>& others,
                     bool step_thread_python) {
  for (StepMetrics& m : steps) {
    const HostShares h = host_shares(m.start, m.start + m.dur, m.host_out_api, st, others, step_thread_python);
    m.host_state_measured = h.measured;
    m.host_running = m.idle_host * h.running;
    m.host_contention = m.idle_host * h.runnable;
    m.host_gil = m.idle_host * h.gil;
    m.host_contention += m.host_gil;
    m.host_wait = m.idle_host * h.blocked;
  }
}

bool is_on_cpu_counter(const std::string& n, bool& schedstat) {
  namespace names = counter_names;
  schedstat = n == names::kThreadSchedRunNs;
  return schedstat || n == names::kThreadCpuUserNs || n == names::kThreadCpuSystemNs;
}

bool is_runnable_counter(const std::string& n) { return n == counter_names::kThreadSchedWaitNs; }

EvidenceSeries evidence_series(const std::string& n, CounterScope scope, uint32_t target, uint32_t step_thread) {
  namespace names = counter_names;
  if (scope == CounterScope::kThread && target == step_thread) {
    if (is_runnable_counter(n)) return EvidenceSeries::kRunQueueWait;
    if (n == names::kThreadCtxInvoluntary) return EvidenceSeries::kInvoluntarySwitches;
  } else if (scope == CounterScope::kProcess) {
    if (n == names::kMemRssBytes) return EvidenceSeries::kRss;
    if (n == names::kMemMinorFaults || n == names::kMemMajorFaults) return EvidenceSeries::kPageFaults;
  }
  return EvidenceSeries::kNone;
}

}  // namespace inferscope::analyze::detail
