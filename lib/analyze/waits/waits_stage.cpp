// Stage "waits" (docs/analysis.md, "Whom the step waits on"): runs the wait attribution's stages (waits.hpp) over
// the typical steps: the threads' and child processes' activity, the wait pieces, one more walk over the
// application threads' frames, the child dumps' hot functions, and the attribution.
#include "analyze/aggregate.hpp"
#include "analyze/children.hpp"
#include "analyze/stages.hpp"
#include "analyze/waits/waits.hpp"

namespace inferscope::analyze::detail {
namespace {

// The GPU's busy intervals (a union) that overlap [s, e): `gpu` is sorted by start, `max_dur` its longest op.
Intervals gpu_busy_in(const Slab<GpuOp>& gpu, int64_t max_dur, int64_t s, int64_t e) {
  Intervals out;
  auto it = std::lower_bound(gpu.begin(), gpu.end(), s - max_dur, [](const GpuOp& g, int64_t x) { return g.start < x; });
  for (; it != gpu.end() && it->start < e; ++it) {
    if (it->end() <= s) continue;
    if (!out.empty() && it->start <= out.back().second) out.back().second = std::max(out.back().second, it->end());
    else out.emplace_back(it->start, it->end());
  }
  return out;
}

}  // namespace

WaitAttribution find_waits(const Context& cx, const Ingested& in, const StepSet& ss, const std::vector<const ApiOp*>& sapi,
                           const StepSelection& sel, const std::string& pid) {
  std::vector<uint8_t> python(in.ts.size(), 0);
  for (size_t t = 0; t < in.ts.size(); ++t) python[t] = in.ts[t].py_calls > 0;
  ActivitySet act = read_activity(cx, in.counters, ss.step_thread, python);
  for (const ApiOp& x : in.apis) {  // the other threads' CUDA calls, merged (a driver call inside a runtime call)
    if (x.thread == std::min<uint32_t>(ss.step_thread, 0xffff)) continue;
    Intervals& v = act.cuda_calls[x.thread];
    v.emplace_back(x.start, x.end());
  }
  for (auto& [t, v] : act.cuda_calls) {
    std::sort(v.begin(), v.end());
    size_t k = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (k && v[i].first <= v[k - 1].second) v[k - 1].second = std::max(v[k - 1].second, v[i].second);
      else v[k++] = v[i];
    }
    v.resize(k);
  }
  WaitAttribution none;
  none.thread_sample_ms = act.thread_sample_ms;
  none.round_ms = act.round_ms;
  if (!act.measured() || ss.whole) return none;
  std::vector<WaitStep> typical;
  for (size_t i : typical_indexes(sel))
    if (i < ss.steps.size()) typical.push_back({uint32_t(i), ss.steps[i].start, ss.steps[i].end});
  if (typical.empty()) return none;
  Intervals calls;
  calls.reserve(sapi.size());
  for (const ApiOp* x : sapi) calls.emplace_back(x->start, x->end());
  const Intervals busy = gpu_busy_in(in.gpu, in.gpu_max_dur, typical.front().start, typical.back().end);
  const WaitWindows w = find_wait_windows(typical, act.step, calls, busy, 0.05, kDispatchGapNs);
  none.measured = w.measured;
  if (w.pieces.empty()) return none;
  const WaitFrames f = read_wait_frames(cx, w, ss.step_thread, ss.steps_s, ss.steps_e);
  ParentFacts parent = parent_facts(cx.r);
  parent.pid = pid;
  // Child dumps lie beside a dump's file; records imported from a trace (lib/import) have none.
  const std::vector<ChildFrames> child =
      cx.r.is_file() ? read_child_frames(cx.r.path(), parent, ss.steps_s, ss.steps_e) : std::vector<ChildFrames>{};
  WaitNaming naming;
  naming.typical_steps = typical.size();
  naming.steady_steps = size_t(std::count(sel.steady.begin(), sel.steady.end(), true));
  naming.span_start = ss.steps_s;
  naming.span_end = ss.steps_e;
  naming.steps = typical;
  naming.code_name = [&](uint32_t code) { return cx.code_name(code); };
  naming.range_name = [&](uint32_t name) { return cx.name_of(name); };
  naming.wait_point = [&](uint32_t code) { return cx.wait_point(code); };
  return attribute_waits(w, f, act, child, naming);
}

MeasuredSteps split_waits(HostSplitSteps split, const WaitAttribution& waits) {
  std::vector<StepMetrics>& steps = split.steps;
  for (auto& [step, t] : waits.per_step) {
    if (step >= steps.size()) continue;
    StepMetrics& m = steps[step];
    // Long host gaps: the host-state split already holds their blocked time (wait + GIL); the attribution,
    // which saw when the step thread waited and which Python thread ran meanwhile, says how much was the GIL.
    if (t.blocked > 0) {
      const double blocked = m.host_wait + m.host_gil;
      const double gil = blocked * std::clamp(t.gil / t.blocked, 0.0, 1.0);
      m.host_contention += gil - m.host_gil;
      m.host_gil = gil;
      m.host_wait = blocked - gil;
    }
    // Dispatch gaps: a step thread blocked between two launches was not launching. That idle time is the
    // blocking cause's, not the launch path's: it moves from the gaps to the host time, as wait or GIL.
    if (t.gap_blocked > 0 && m.idle_gaps > 0) {
      const double moved = std::min(t.gap_blocked, m.idle_gaps);
      const double gil = moved * std::clamp(t.gap_gil / t.gap_blocked, 0.0, 1.0);
      m.idle_gaps -= moved;
      m.idle_host += moved;
      m.host_gil += gil;
      m.host_contention += gil;
      m.host_wait += moved - gil;
    }
  }
  return {std::move(steps)};
}

namespace {

const char* kind_name(WaitParty::Kind k) {
  switch (k) {
    case WaitParty::Kind::kThreads: return "threads";
    case WaitParty::Kind::kGil: return "gil";
    case WaitParty::Kind::kProcesses: return "processes";
    case WaitParty::Kind::kOwnSleep: return "own_sleep";
    case WaitParty::Kind::kOwnIo: return "own_io";
    case WaitParty::Kind::kLock: return "lock";
    case WaitParty::Kind::kUnknown: break;
  }
  return "unknown";
}

}  // namespace

Waits describe_waits(const WaitAttribution& w, const TypicalStep& t) {
  Waits out;
  out.measured = w.measured;
  out.thread_sample_ms = w.thread_sample_ms;
  const double steps = double(std::max<size_t>(1, t.steps));
  out.blocked_ms = w.blocked_ns / steps / 1e6;
  // Each party's time per step is its share of its kind's blocked time (the GIL's, or the rest) times the typical
  // step's figure for that kind, so the rows add up to the breakdown's waiting and GIL time.
  double gil_total = 0, rest_total = 0;
  for (const WaitParty& p : w.parties) (p.kind == WaitParty::Kind::kGil ? gil_total : rest_total) += p.blocked_ns;
  for (const WaitParty& p : w.parties) {
    const bool gil = p.kind == WaitParty::Kind::kGil;
    const double total = gil ? gil_total : rest_total;
    WaitPartyRow r;
    r.kind = kind_name(p.kind);
    r.name = p.kind == WaitParty::Kind::kOwnSleep || p.kind == WaitParty::Kind::kOwnIo ? "" : p.name;
    for (size_t i = 0; i < p.members.size(); ++i) {
      const std::string id = (p.kind == WaitParty::Kind::kProcesses ? "pid " : "thread ") + std::to_string(p.members[i]);
      const std::string n = i < p.member_names.size() ? p.member_names[i] : "";
      r.members.push_back(n.empty() ? id : n + " (" + id + ")");
    }
    r.python = p.python;
    r.share = w.blocked_ns > 0 ? p.blocked_ns / w.blocked_ns : 0;
    r.ms_per_step = total > 0 ? p.blocked_ns / total * (gil ? t.host_gil : t.host_wait) / 1e6 : 0;
    r.busy_share = p.busy_share();
    r.cpu_ms_per_step = p.cpu_per_step_ns / 1e6;
    r.wakeups = p.wakeups;
    if (p.off_cpu_in != BlockedIn::kUnknown && p.off_cpu_in != BlockedIn::kRunning) r.off_cpu_in = blocked_in_name(p.off_cpu_in);
    r.site = p.site;
    for (auto& [name, ns] : p.hot) r.hot.emplace_back(name, ns / steps / 1e6);
    out.parties.push_back(std::move(r));
  }
  for (auto& [name, ns] : w.sites) out.sites.emplace_back(name, ns / steps / 1e6);
  for (auto& [name, g] : w.child_groups) out.children.push_back({name, g.first, g.second / 1e6});
  return out;
}

}  // namespace inferscope::analyze::detail
