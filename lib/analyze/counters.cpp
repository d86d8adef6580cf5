// Stage "counters": the PCIe peak, the system counters over the steady steps (CPU time, switches, memory,
// other Python threads, the cgroup's throttling) and the host-state split of each step's GPU idle
// (host_state.cpp) (docs/analysis.md section 4, docs/counters.md).
#include "analyze/stages.hpp"

#include <inferscope/counter_names.hpp>

#include <cmath>

namespace inferscope::analyze::detail {
namespace {

// A thread that exited with a single reading of a counter had that reading taken as it exited, and no sampling
// round saw it alive (a thread alive at the first round, the session's start, was read there): it was born
// during the session, so the counter grew from 0, from no later than its first record.
void grew_from_zero(const Context& cx, const dump::ThreadInfo& t, CumulativeSeries& s) {
  if (s.points.size() != 1 || !(t.flags & dump::kThreadExited)) return;
  const int64_t first = cx.clock.to_ns(t.first_ts);
  s.points.insert(s.points.begin(), {std::min(first, s.points.front().first), 0.0});
}

// The cgroup CPU quota's throttling over the steady steps' span [s, e]. The sampler writes these counters when
// they change (about once per quota period while throttled) and at least once a second, so each is read as a
// cumulative series interpolated at the span's bounds: a first sample inside the span would drop the period
// before it.
void read_cgroup_throttling(const Context& cx, const std::vector<CounterSample>& counters, int64_t s, int64_t e,
                            CounterEvidence& m) {
  namespace names = counter_names;
  CumulativeSeries periods, throttled, throttled_ns;
  for (const CounterSample& c : counters) {
    if (c.scope != uint8_t(CounterScope::kProcess) || c.name >= cx.nstr) continue;
    const std::string& n = cx.name_of(c.name);
    CumulativeSeries* to = n == names::kCgroupCpuPeriods            ? &periods
                           : n == names::kCgroupCpuThrottledPeriods ? &throttled
                           : n == names::kCgroupCpuThrottledNs      ? &throttled_ns
                                                                    : nullptr;
    if (to && std::isfinite(c.v)) to->points.emplace_back(c.ts, c.v);
  }
  for (CumulativeSeries* x : {&periods, &throttled, &throttled_ns})
    std::stable_sort(x->points.begin(), x->points.end(), [](auto& p, auto& q) { return p.first < q.first; });
  m.cgroup_periods = std::max(0.0, periods.delta(s, e));
  m.cgroup_throttled_periods = std::max(0.0, throttled.delta(s, e));
  m.cgroup_throttled_ns = std::max(0.0, throttled_ns.delta(s, e));
  m.steps_span_ns = double(std::max<int64_t>(0, e - s));
}

}  // namespace

ThreadCounters thread_counters(const Context& cx, const std::vector<CounterSample>& counters, uint32_t thread) {
  auto info = cx.r.threads().find(thread);
  const uint32_t os_tid = info == cx.r.threads().end() ? 0 : info->second.os_tid;
  std::map<uint32_t, CumulativeSeries> sched, times;
  ThreadCounters out;
  for (const CounterSample& c : counters) {
    const bool mine = (c.scope == uint8_t(CounterScope::kThread) && c.target == thread) ||
                      (os_tid && c.scope == uint8_t(CounterScope::kOsThread) && c.target == os_tid);
    if (!mine) continue;
    const std::string& n = cx.name_of(c.name);
    bool schedstat = false;
    if (is_runnable_counter(n)) out.runnable.points.emplace_back(c.ts, c.v);
    else if (is_on_cpu_counter(n, schedstat)) (schedstat ? sched : times)[c.name].points.emplace_back(c.ts, c.v);
  }
  auto by_time = [](auto& x, auto& y) { return x.first < y.first; };
  out.on_cpu_exact = !sched.empty();
  for (auto& [k, v] : sched.empty() ? times : sched) {
    std::stable_sort(v.points.begin(), v.points.end(), by_time);
    if (info != cx.r.threads().end()) grew_from_zero(cx, info->second, v);
    out.on_cpu.push_back(std::move(v));
  }
  std::stable_sort(out.runnable.points.begin(), out.runnable.points.end(), by_time);
  return out;
}

std::unordered_map<uint32_t, std::vector<CounterSample>> thread_samples(const Context& cx,
                                                                        const std::vector<CounterSample>& counters) {
  std::unordered_map<uint32_t, std::vector<uint32_t>> by_os_tid;  // an OS thread id may be reused
  for (auto& [id, t] : cx.r.threads())
    if (!t.is_channel() && t.os_tid) by_os_tid[t.os_tid].push_back(id);
  std::unordered_map<uint32_t, std::vector<CounterSample>> out;
  for (const CounterSample& c : counters) {
    if (c.scope == uint8_t(CounterScope::kThread)) {
      out[c.target].push_back(c);
    } else if (c.scope == uint8_t(CounterScope::kOsThread)) {
      if (auto it = by_os_tid.find(c.target); it != by_os_tid.end())
        for (uint32_t id : it->second) out[id].push_back(c);
    }
  }
  return out;
}

// PCIe peak: the link the system collector read from NVML (process info gpu.0.pcie_gen / pcie_width, the
// maximum generation and the narrower of the maximum and trained width; docs/counters.md), else Gen5 x16.
LinkPeak pcie_peak(const ProcessInfo& process) {
  LinkPeak m;
  // Usable GB/s per lane after line encoding: 8b/10b (Gen1-2), 128b/130b (Gen3-5), FLIT (Gen6).
  static constexpr double per_lane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  auto info = [&](const char* k) -> int {
    auto it = process.find(k);
    return it == process.end() ? 0 : std::atoi(it->second.c_str());
  };
  const int g = info("gpu.0.pcie_gen"), w = info("gpu.0.pcie_width");
  if (g >= 1 && g <= 6 && w > 0 && w <= 32) {
    m.peak_h2d_gbps = per_lane[g] * w * 0.87;  // ~87 % of the raw rate is what DMA engines reach
    m.peak_assumed = false;
    m.peak_note = "PCIe Gen" + std::to_string(g) + " x" + std::to_string(w) + " from the dump (practical peak " +
                  std::to_string(int(m.peak_h2d_gbps)) + " GB/s)";
  } else {
    m.peak_h2d_gbps = 55;
    m.peak_note = "peak assumed: PCIe Gen5 x16, ~55 GB/s practical host<->device (the dump has no usable PCIe "
                  "link from NVML)";
  }
  m.pinned_gbps = m.peak_h2d_gbps;  // what the what-if of pinned copies assumes they reach
  return m;
}

CounterEvidence read_counters(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw,
                              uint64_t steady_count) {
  CounterEvidence m;
  const size_t nstr = cx.nstr;
  const auto& counters = in.counters;
  const uint32_t step_thread = ss.step_thread;
  const int64_t steps_s = ss.steps_s, steps_e = ss.steps_e;
  const auto& other_py_busy = hw.other_py_busy;
  auto cname = [&](uint32_t id) -> const std::string& { return cx.name_of(id < nstr ? id : 0); };
  // Cumulative counters: first and last sample inside the steps span give the delta.
  struct FL { int64_t t0 = 0, t1 = 0; double v0 = 0, v1 = 0; bool any = false; };
  std::map<std::pair<uint32_t, uint32_t>, FL> inv_fl, rss_fl, flt_fl, wait_fl;
  for (auto& c : counters) {
    if (c.ts < steps_s || c.ts > steps_e) continue;
    // The step thread's on-CPU time is read per step by the host-state split (host_state.hpp); here only its
    // run-queue share over the steps, for the evidence.
    std::map<std::pair<uint32_t, uint32_t>, FL>* tgt = nullptr;
    switch (evidence_series(cname(c.name), CounterScope(c.scope), c.target, step_thread)) {
      case EvidenceSeries::kRunQueueWait: tgt = &wait_fl; break;  // runnable but waiting for a CPU
      case EvidenceSeries::kInvoluntarySwitches: tgt = &inv_fl; break;
      case EvidenceSeries::kRss: tgt = &rss_fl; break;
      case EvidenceSeries::kPageFaults: tgt = &flt_fl; break;
      case EvidenceSeries::kNone: continue;
    }
    auto& f = (*tgt)[{c.name, c.target}];
    if (!f.any) { f.t0 = c.ts; f.v0 = c.v; f.any = true; }
    f.t1 = c.ts;
    f.v1 = c.v;
  }
  for (auto& [k, f] : wait_fl)
    if (f.t1 > f.t0) m.step_thread_runqueue_share = std::max(m.step_thread_runqueue_share, (f.v1 - f.v0) / double(f.t1 - f.t0));
  double inv = 0;
  for (auto& [k, f] : inv_fl) inv += f.v1 - f.v0;
  const double steady_steps = double(std::max<uint64_t>(1, steady_count));
  m.involuntary_per_step = inv / steady_steps;
  for (auto& [k, f] : rss_fl) m.rss_growth_bytes += f.v1 - f.v0;
  double flt = 0;
  for (auto& [k, f] : flt_fl) flt += f.v1 - f.v0;
  m.faults_per_step = flt / steady_steps;
  double span = double(std::max<int64_t>(1, steps_e - steps_s));
  for (auto& [t, busy] : other_py_busy) {
    double share = busy / span;
    if (share > 0.2) ++m.other_busy_python_threads;
    m.other_python_busy_share = std::max(m.other_python_busy_share, share);
  }
  read_cgroup_throttling(cx, counters, steps_s, steps_e, m);
  return m;
}

HostSplitSteps split_host_state(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw,
                                std::vector<StepMetrics> swept) {
  const auto& counters = in.counters;
  const auto& ts = in.ts;
  const uint32_t step_thread = ss.step_thread;
  const auto& other_py_busy = hw.other_py_busy;
  // The step thread's state while the GPU waited on it: running, contention or a wait of its own.
  auto series_of = [&](uint32_t thread) { return thread_counters(cx, counters, thread); };
  std::vector<detail::ThreadCounters> others;
  for (auto& [t, busy] : other_py_busy) {
    others.push_back(series_of(t));
    others.back().python = true;
  }
  const bool step_python = step_thread < ts.size() && ts[step_thread].py_calls > 0;
  detail::ThreadCounters st = series_of(step_thread);
  detail::credit_pending_waits(st);
  detail::split_idle_host(swept, st, others, step_python);
  return {std::move(swept)};
}

}  // namespace inferscope::analyze::detail
