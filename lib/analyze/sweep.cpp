// Stage "per-step sweep": one linear sweep over the steps measures each one: the step thread's CUDA calls, the
// GPU's busy unions and idle gaps, and one cause per GPU-idle instant (idle_attribution.cpp) (docs/analysis.md
// section 4).
#include "analyze/idle_attribution.hpp"
#include "analyze/stages.hpp"

#include <array>

namespace inferscope::analyze::detail {
namespace {


// GPUs measured apart in a step's busy time; a process on more shares the last count with the rest.
constexpr size_t kDevicesApart = 8;

// Union length of intervals fed in start order, clipped to a window.
struct Union {
  int64_t cs = 0, ce = 0;
  bool open = false;
  int64_t total = 0;
  void add(int64_t s, int64_t e) {
    if (!open) { cs = s; ce = e; open = true; return; }
    if (s > ce) { total += ce - cs; cs = s; ce = e; }
    else ce = std::max(ce, e);
  }
  int64_t finish() { if (open) { total += ce - cs; open = false; } return total; }
};

// |[a,b) ∩ list| for a sorted disjoint list; `i` is a cursor that only moves forward over calls with
// increasing a.
int64_t overlap(const std::vector<Span>& list, size_t& i, int64_t a, int64_t b) {
  while (i < list.size() && list[i].end <= a) ++i;
  int64_t t = 0;
  for (size_t j = i; j < list.size() && list[j].start < b; ++j)
    t += std::max<int64_t>(0, std::min(b, list[j].end) - std::max(a, list[j].start));
  return t;
}

using Gaps = std::vector<std::pair<int64_t, int64_t>>;

// One worker's sweep over a run of consecutive steps; each part of a step's measurement is a member.
class StepSweeper {
 public:
  StepSweeper(const StepSet& ss, const std::vector<const ApiOp*>& sapi, const std::vector<Span>& cov,
              const Slab<GpuOp>& gpu, int64_t gpu_max_dur, bool host_frames)
      : steps(ss.steps), sapi(sapi), cov(cov), gpu(gpu), gpu_max_dur(gpu_max_dur), host_frames(host_frames) {}

  void run(Sweep& Z, size_t first, size_t last) const {
    if (first >= last) return;
    const int64_t S0 = steps[first].start;
    auto end_after = [&](const ApiOp* x, int64_t v) { return x->end() <= v; };
    Z.api_cursor = size_t(std::partition_point(sapi.begin(), sapi.end(), [&](const ApiOp* x) { return end_after(x, S0); }) - sapi.begin());
    Z.gap_cursor = Z.api_cursor;
    Z.cov_cursor = size_t(std::partition_point(cov.begin(), cov.end(), [&](const Span& x) { return x.end <= S0; }) - cov.begin());
    Z.gpu_cursor = size_t(std::lower_bound(gpu.begin(), gpu.end(), S0, [](const GpuOp& x, int64_t v) { return x.start < v; }) - gpu.begin());
    for (size_t k = Z.gpu_cursor; k-- > 0 && gpu[k].start >= S0 - gpu_max_dur;)
      if (gpu[k].end() > S0) Z.carry.push_back(uint32_t(k));
    std::reverse(Z.carry.begin(), Z.carry.end());
    Z.steps.reserve(last - first);
    for (size_t i = first; i < last; ++i) {
      const int64_t S = steps[i].start, E = steps[i].end;
      StepMetrics sm;
      sm.start = S;
      sm.dur = E - S;
      host_calls(Z, i, S, E, sm);
      Gaps gaps;
      gpu_busy(Z, S, E, sm, gaps);
      gap_breakdown(Z, i, gaps, sm);
      Z.steps.push_back(sm);
    }
  }

 private:
  void host_calls(Sweep& Z, size_t i, int64_t S, int64_t E, StepMetrics& sm) const {
    // Host: the step thread's CUDA calls.
    while (Z.api_cursor < sapi.size() && sapi[Z.api_cursor]->end() <= S) ++Z.api_cursor;
    double api_in_step = 0;
    for (size_t j = Z.api_cursor; j < sapi.size() && sapi[j]->start < E; ++j) {
      const ApiOp& x = *sapi[j];
      double d = double(std::min(E, x.end()) - std::max(S, x.start));
      if (d <= 0) continue;
      api_in_step += d;
      switch (x.kind) {
        case detail::kLaunch: sm.launch_api_ns += d; break;
        case detail::kSync: case detail::kCopySync: {
          ++sm.syncs;
          sm.sync_api_ns += d;
          Z.named.push_back({&x, d, false});
          break;
        }
        case detail::kAlloc: case detail::kFree: {
          ++sm.allocs;
          sm.alloc_api_ns += d;
          Z.named.push_back({&x, d, true});
          if (d > double(sm.worst_alloc.end - sm.worst_alloc.start)) sm.worst_alloc = {x.start, x.end(), uint32_t(i)};
          break;
        }
        default: break;
      }
    }
    sm.host_out_api = double(sm.dur) - api_in_step;
  }
  void gpu_busy(Sweep& Z, int64_t S, int64_t E, StepMetrics& sm, Gaps& gaps) const {
    // GPU: unions by precedence (compute > collectives > H2D > D2H) and the idle gaps between busy periods.
    Union uk, ukc, ukh, uall;
    std::array<Union, kDevicesApart> per_device;  // each GPU's busy time (the last one holds the rest)
    unsigned devices_seen = 0;
    int64_t busy_end = S;
    bool any = false;
    // The activities that overlap [S, E) in start order: those carried over (started earlier, still running
    // at S), then those starting before E. A cursor and a short Z.carry list keep this linear even when one
    // activity runs for seconds.
    while (Z.gpu_cursor < gpu.size() && gpu[Z.gpu_cursor].start < S) {
      if (gpu[Z.gpu_cursor].end() > S) Z.carry.push_back(uint32_t(Z.gpu_cursor));
      ++Z.gpu_cursor;
    }
    Z.carry.erase(std::remove_if(Z.carry.begin(), Z.carry.end(), [&](uint32_t k) { return gpu[k].end() <= S; }), Z.carry.end());
    auto visit = [&](const GpuOp* it) {
      int64_t s = std::max(S, it->start), e = std::min(E, it->end());
      if (e <= s) return;
      if (s > busy_end) gaps.emplace_back(busy_end, s);
      busy_end = std::max(busy_end, e);
      any = true;
      const bool collective = it->kind == detail::kCollective;
      const bool compute = (detail::is_compute_launch(it->kind) && !collective) || it->kind == detail::kMemset ||
                           it->kind == detail::kOtherCopy;
      if (compute) uk.add(s, e);
      if (compute || collective) ukc.add(s, e);
      if (compute || collective || it->kind == detail::kH2D) ukh.add(s, e);
      uall.add(s, e);
      const size_t d = std::min<size_t>(it->device, kDevicesApart - 1);
      per_device[d].add(s, e);
      devices_seen |= 1u << d;
      if (it->start < S) return;  // counted in the step it started in
      if (detail::is_kernel(it->kind)) {
        ++sm.kernels;
        sm.kernel_ns += it->dur;
        Z.kernel_stats.add(it->dur);
      } else if (it->kind == detail::kGraph) {
        // GPU compute, but not a kernel of its own: a graph of many kernels is one launch, never "tiny".
        sm.kernel_ns += it->dur;
      } else if (it->kind == detail::kH2D) {
        ++sm.copies_h2d;
        sm.h2d_bytes += it->name_or_bytes;
        if (it->host_mem == uint8_t(MemoryKind::kPageable)) sm.h2d_pageable_bytes += it->name_or_bytes;
      } else if (it->kind == detail::kD2H) {
        ++sm.copies_d2h;
        sm.d2h_bytes += it->name_or_bytes;
        if (it->host_mem == uint8_t(MemoryKind::kPageable)) sm.d2h_pageable_bytes += it->name_or_bytes;
      }
    };
    for (uint32_t k : Z.carry) visit(&gpu[k]);
    for (; Z.gpu_cursor < gpu.size() && gpu[Z.gpu_cursor].start < E; ++Z.gpu_cursor) {
      visit(&gpu[Z.gpu_cursor]);
      if (gpu[Z.gpu_cursor].end() > E) Z.carry.push_back(uint32_t(Z.gpu_cursor));
    }
    if (busy_end < E) gaps.emplace_back(busy_end, E);
    const double kc = double(uk.finish()), kcc = double(ukc.finish()), khc = double(ukh.finish()),
                 allc = double(uall.finish());
    sm.compute = kc;
    sm.comm = kcc - kc;
    for (size_t d = 0; d < kDevicesApart; ++d) {
      if (!(devices_seen & (1u << d))) continue;
      const double busy = double(per_device[d].finish());
      ++sm.devices;
      sm.device_busy_sum += busy;
      if (busy > sm.device_busy_max) sm.device_busy_max = busy, sm.busiest_device = uint8_t(d);
    }
    sm.h2d = khc - kcc;
    sm.d2h = allc - khc;
  }
  void gap_breakdown(Sweep& Z, size_t i, const Gaps& gaps, StepMetrics& sm) const {
    // Each gap: instant by instant (breakdown) and as a whole by its cause (GPU idle split).
    for (size_t g = 0; g < gaps.size(); ++g) {
      auto [ga, gb] = gaps[g];
      double len = double(gb - ga);
      double sync = 0, fw = 0;
      while (Z.gap_cursor < sapi.size() && sapi[Z.gap_cursor]->end() <= ga) ++Z.gap_cursor;
      for (auto it = sapi.begin() + Z.gap_cursor; it != sapi.end() && (*it)->start < gb; ++it) {
        double d = double(std::min(gb, (*it)->end()) - std::max(ga, (*it)->start));
        if (d <= 0) continue;
        uint8_t k = (*it)->kind;
        if (k == detail::kSync || k == detail::kCopySync) sync += d;
        else fw += d;
      }
      double rest = std::max(0.0, len - sync - fw);
      double host = host_frames ? std::min(rest, std::max(0.0, double(overlap(cov, Z.cov_cursor, ga, gb)) - sync - fw)) : rest;
      sm.sync_wait += sync;
      sm.framework += fw;
      sm.cpu += host;
      sm.idle += rest - host;
      IdleCauses causes = attribute_idle_gap(sapi, Z.gap_cursor, ga, gb, kDispatchGapNs);
      sm.idle_host += causes.host;
      sm.idle_gaps += causes.launch;
      sm.idle_sync += causes.sync;
      sm.idle_memory += causes.memory;
      if (causes.sync > 0 && len > double(sm.worst_sync_gap.end - sm.worst_sync_gap.start)) sm.worst_sync_gap = {ga, gb, uint32_t(i)};
      const Span& lh = causes.longest_host;
      if (lh.end - lh.start > sm.worst_host_gap.end - sm.worst_host_gap.start) sm.worst_host_gap = {lh.start, lh.end, uint32_t(i)};
    }
  }

  const std::vector<Cand>& steps;
  const std::vector<const ApiOp*>& sapi;
  const std::vector<Span>& cov;
  const Slab<GpuOp>& gpu;
  const int64_t gpu_max_dur;
  const bool host_frames;
};

}  // namespace

FirstCall first_call(const Context& cx, const StepSet& ss, const std::vector<const ApiOp*>& sapi) {
  FirstCall first;
  if (!sapi.empty()) {
    first.name = cx.name_of(sapi.front()->name);
    first.ms = ms(sapi.front()->dur);
    size_t hint = 0;
    first.in_steps = ss.step_of(sapi.front()->start, sapi.front()->end(), hint) >= 0 || ss.whole;
  }
  return first;
}

std::vector<const ApiOp*> step_calls(const Slab<ApiOp>& apis, uint32_t step_thread, unsigned W) {
  std::vector<const ApiOp*> sapi;  // step thread's calls by start
  {  // picked out by blocks on the worker threads: counted, then each block written in place, in order
    const size_t n = apis.size(), parts = std::clamp<size_t>(n / 4096, 1, W);
    const uint16_t th = uint16_t(std::min<uint32_t>(step_thread, 0xffff));
    std::vector<size_t> at(parts + 1, 0);
    run_parallel(parts, [&](size_t w) {
      for (size_t i = n * w / parts; i < n * (w + 1) / parts; ++i) at[w + 1] += apis[i].thread == th;
    });
    for (size_t w = 0; w < parts; ++w) at[w + 1] += at[w];
    sapi.resize(at[parts]);
    run_parallel(parts, [&](size_t w) {
      size_t k = at[w];
      for (size_t i = n * w / parts; i < n * (w + 1) / parts; ++i)
        if (apis[i].thread == th) sapi[k++] = &apis[i];
    });
  }
  auto by_start = [](auto* x, auto* y) { return x->start < y->start; };
  if (!std::is_sorted(sapi.begin(), sapi.end(), by_start)) std::sort(sapi.begin(), sapi.end(), by_start);
  {  // Keep the outermost call where calls nest (a driver call inside a runtime call): host time counts once.
    size_t k = 0;
    int64_t end = std::numeric_limits<int64_t>::min();
    for (const ApiOp* x : sapi)
      if (x->start >= end) {
        sapi[k++] = x;
        end = x->end();
      }
    sapi.resize(k);
  }
  return sapi;
}

// On W workers over runs of consecutive steps. Each starts its cursors where one sweep from the first step
// would have them (the calls' and frames' ends are sorted: one thread's calls do not overlap; the GPU carry
// list holds, in order, the activities that started before the run's first step and end after its start);
// the results are joined in step order.
std::vector<Sweep> sweep_steps(const StepSet& ss, const std::vector<const ApiOp*>& sapi, const std::vector<Span>& cov,
                               const Slab<GpuOp>& gpu, int64_t gpu_max_dur, bool host_frames, unsigned W) {
  const auto& steps = ss.steps;
  const size_t n_sweep = std::max<size_t>(1, std::min<size_t>(W, steps.size() / 8));  // a few steps: not worth threads
  std::vector<Sweep> sweeps(n_sweep);
  const StepSweeper sweeper(ss, sapi, cov, gpu, gpu_max_dur, host_frames);
  run_parallel(n_sweep, [&](size_t w) {
    sweeper.run(sweeps[w], steps.size() * w / n_sweep, steps.size() * (w + 1) / n_sweep);
  });
  return sweeps;
}

SweptSteps join_sweeps(const Context& cx, std::vector<Sweep>& sweeps, Launchers& who, const Attribution& at) {
  SweptSteps out;
  LaunchSummary& m = out.launchers;
  const auto& kernels_by_launcher = at.kernels_by_launcher;
  const auto& copy_launchers = at.copy_launchers;
  const auto& labels = who.labels;
  size_t n = 0;  // steps
  for (auto& Z : sweeps) n += Z.steps.size();
  out.steps.reserve(n);
  DurationStats kernel_stats;
  std::map<std::string, std::pair<double, std::map<std::string, uint64_t>>> sync_by_api, alloc_by_api;
  for (auto& Z : sweeps) {
    out.steps.insert(out.steps.end(), Z.steps.begin(), Z.steps.end());
    kernel_stats.merge(Z.kernel_stats);
    for (const Named& x : Z.named) {
      auto& s = (x.alloc ? alloc_by_api : sync_by_api)[cx.name_of(x.api->name)];
      s.first += x.d;
      ++s.second[who.label(x.api)];
    }
  }
  // Breakdown inputs: the median kernel, the top launchers of kernels, syncs, allocations and copies.
  m.median_kernel_ns = kernel_stats.percentile(0.5);
  m.short_kernel_ns = cx.opt.launch_bound_max_kernel_us * 1e3;
  if (!kernels_by_launcher.empty())
    m.top_kernel_launcher = labels[std::max_element(kernels_by_launcher.begin(), kernels_by_launcher.end()) - kernels_by_launcher.begin()];
  auto top_of = [](const std::map<std::string, std::pair<double, std::map<std::string, uint64_t>>>& mm,
                   std::string& api, std::string& who) {
    double best = -1;
    for (auto& [n, x] : mm)
      if (x.first > best) {
        best = x.first;
        api = n;
        who = std::max_element(x.second.begin(), x.second.end(), [](auto& p, auto& q) { return p.second < q.second; })->first;
      }
  };
  top_of(sync_by_api, m.top_sync_api, m.top_sync_caller);
  top_of(alloc_by_api, m.top_alloc_api, m.top_alloc_caller);
  {
    std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::pair<std::string, std::string>>> v;  // ((bytes, n), key)
    for (auto& [k, x] : copy_launchers) v.push_back({x, k});
    std::sort(v.begin(), v.end(), [](auto& p, auto& q) { return p.first.first > q.first.first; });
    for (size_t i = 0; i < v.size() && i < 3; ++i) {
      m.top_copies.push_back(v[i].second);
      m.top_copy_bytes.push_back(v[i].first.first);
      m.top_copy_counts.push_back(v[i].first.second);
    }
  }
  return out;
}

}  // namespace inferscope::analyze::detail
