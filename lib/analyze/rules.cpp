// The bottleneck rules (DESIGN.md decision 8). Each rule reads the mean step's breakdown and the model's
// evidence, estimates the time per step its cause costs, and says what to change in terms of this trace.
// docs/analysis.md states every threshold used here; keep the two in step.
#include "analyze/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace inferscope::analyze {
namespace {

constexpr double kMinImpactPct = 5.0;      // a cause costing less than this share of the step is not reported
constexpr double kUncertainBelow = 0.5;    // findings under this confidence are marked uncertain
constexpr double kGpuBoundUtil = 0.80;     // GPU busy share from which the step is GPU-bound
constexpr double kSaturatedShare = 0.70;   // achieved / peak PCIe bandwidth from which the link is the limit

std::string fmt(const char* f, double v) {
  char b[256];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}
std::string fms(double v) { return fmt(v >= 10 ? "%.1f ms" : v >= 0.1 ? "%.2f ms" : "%.3f ms", v); }
std::string fpct(double v) { return fmt("%.0f %%", v); }
std::string fmb(double bytes) { return bytes >= 1e9 ? fmt("%.2f GB", bytes / 1e9) : fmt("%.1f MB", bytes / 1e6); }

struct Ctx {
  const Analysis& a;
  const detail::Model& m;
  double step_ms;
  double mean(double detail::StepMetrics::*f) const {
    double s = 0;
    for (auto& x : m.steps) s += x.*f;
    return m.steps.empty() ? 0 : s / double(m.steps.size()) / 1e6;
  }
  double mean_u(uint64_t detail::StepMetrics::*f) const {
    double s = 0;
    for (auto& x : m.steps) s += double(x.*f);
    return m.steps.empty() ? 0 : s / double(m.steps.size());
  }
};

Finding make(const Ctx& c, const char* cat, std::string title, double impact_ms, double confidence) {
  Finding f;
  f.category = cat;
  f.title = std::move(title);
  f.impact_ms = impact_ms;
  f.impact_pct = c.step_ms > 0 ? impact_ms / c.step_ms * 100 : 0;
  f.confidence = std::clamp(confidence, 0.0, 1.0);
  f.uncertain = f.confidence < kUncertainBelow;
  return f;
}

void sugg(Finding& f, const char* prio, std::string action, double impact_ms) {
  f.suggestions.push_back({std::move(action), prio, impact_ms});
}

// Up to three example spans: the steps where this cause was largest.
void examples(Finding& f, const Ctx& c, detail::Span detail::StepMetrics::*which, const char* what, double t0_ns) {
  std::vector<const detail::StepMetrics*> v;
  for (auto& s : c.m.steps)
    if ((s.*which).end > (s.*which).start) v.push_back(&s);
  std::sort(v.begin(), v.end(), [&](auto* x, auto* y) {
    return (x->*which).end - (x->*which).start > (y->*which).end - (y->*which).start;
  });
  for (size_t i = 0; i < v.size() && i < 3; ++i) {
    auto& sp = v[i]->*which;
    TimeSpan t;
    t.start_ms = (double(sp.start) - t0_ns) / 1e6;
    t.end_ms = (double(sp.end) - t0_ns) / 1e6;
    t.what = "step " + std::to_string(sp.step) + ": " + what + " for " + fms(double(sp.end - sp.start) / 1e6);
    f.examples.push_back(std::move(t));
  }
}

// "cudaStreamSynchronize from Model.generate (model.py:42) ×128, 41.0 ms; ...": the three (API, caller) pairs
// with the most host time over the trace, from a table's rows.
template <class Rows>
std::string callers_evidence(const Rows& rows) {
  std::vector<CallerRow> all;
  for (auto& r : rows) all.insert(all.end(), r.callers.begin(), r.callers.end());
  std::sort(all.begin(), all.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
  std::string s;
  for (size_t i = 0; i < all.size() && i < 3; ++i)
    s += (i ? "; " : "") + all[i].api + " from " + all[i].called_from + " \u00d7" + std::to_string(all[i].count) + ", " +
         fms(all[i].total_ms);
  return s.empty() ? s : "calls by caller over the trace: " + s;
}

std::string top_kernel(const Analysis& a, size_t i) { return i < a.kernels.size() ? a.kernels[i].name : "-"; }

}  // namespace

std::vector<Finding> run_rules(const Analysis& a, const detail::Model& m) {
  std::vector<Finding> out;
  if (m.steps.empty()) return out;
  const Ctx c{a, m, a.breakdown.step_ms};
  const Breakdown& b = a.breakdown;
  const double S = c.step_ms;
  if (S <= 0) return out;
  // The trace's time origin in ns: the representative step's start minus its offset in the Analysis.
  double trace_t0 = double(m.steps.front().start);
  if (a.representative.step.index < m.steps.size())
    trace_t0 = double(m.steps[a.representative.step.index].start) - a.representative.step.start_ms * 1e6;
  const std::string step_name = a.steps.name;
  const std::string hot = m.hot_host.empty() ? "" : m.hot_host.front().first;
  const double alloc_idle = c.mean(&detail::StepMetrics::alloc_idle);
  const double host_out_api = c.mean(&detail::StepMetrics::host_out_api);
  const double host_share = host_out_api / S;

  // ---- cpu_contention: the step thread wanted the CPU (or the GIL) and did not get it.
  double contention_ms = 0;
  {
    double deficit = 0, conf = 0;
    std::vector<std::string> ev;
    if (m.have_cpu_counters) {
      deficit = std::max(0.0, host_share - m.step_thread_cpu_util);
      contention_ms = host_share > 0 ? b.gpu_idle_waiting_on_host_ms * std::min(1.0, deficit / host_share) : 0;
      conf = 0.55 + 0.25 * std::min(1.0, deficit / 0.5) + (m.involuntary_per_step > 1 || m.other_busy_python_threads ? 0.1 : 0);
      ev.push_back("thread '" + m.step_thread_name + "' ran on a CPU " + fpct(m.step_thread_cpu_util * 100) +
                   " of the steps' wall time while it was outside CUDA calls " + fpct(host_share * 100) +
                   " of the time: it was runnable but not running (or waiting for the GIL) for the difference");
      if (deficit < 0.2) contention_ms = 0;
    } else if (m.other_busy_python_threads > 0) {
      contention_ms = b.gpu_idle_waiting_on_host_ms * std::min(0.5, m.other_python_busy_share);
      conf = 0.35;
      ev.push_back("no per-thread CPU counters in this trace; evidence is indirect (GIL)");
    }
    if (m.other_busy_python_threads > 0)
      ev.push_back(std::to_string(m.other_busy_python_threads) + " other Python thread(s) ran Python code during the steps (the busiest " +
                   fpct(m.other_python_busy_share * 100) + " of the steps' span): they compete for the GIL");
    if (m.step_thread_runqueue_share > 0.01)
      ev.push_back("the step thread waited in the run queue for a CPU " + fpct(m.step_thread_runqueue_share * 100) +
                   " of the time (schedstat)");
    if (m.involuntary_per_step > 0)
      ev.push_back(fmt("%.1f involuntary context switches of the step thread per step", m.involuntary_per_step));
    if (contention_ms / S * 100 >= kMinImpactPct) {
      Finding f = make(c, "cpu_contention", "Thread '" + m.step_thread_name + "' is delayed by other threads or the GIL",
                       contention_ms, conf);
      f.evidence = ev;
      f.metrics["step_thread_cpu_util"] = m.step_thread_cpu_util;
      f.metrics["host_outside_cuda_share"] = host_share;
      f.metrics["other_busy_python_threads"] = m.other_busy_python_threads;
      f.metrics["involuntary_switches_per_step"] = m.involuntary_per_step;
      f.metrics["runqueue_wait_share"] = m.step_thread_runqueue_share;
      examples(f, c, &detail::StepMetrics::worst_host_gap, "GPU idle while the host thread was delayed", trace_t0);
      sugg(f, "high", "Stop or throttle the busy background Python threads while '" + step_name +
                          "' runs (or move their work to a separate process with multiprocessing), so the inference thread keeps the GIL",
           contention_ms * 0.7);
      sugg(f, "medium", "Pin the inference thread to a dedicated core (os.sched_setaffinity / taskset) and keep other "
                        "work off it; check the machine's load (other processes, torch.set_num_threads too high)",
           contention_ms * 0.4);
      sugg(f, "medium", "Release the GIL in background work: do heavy work in NumPy/torch ops or C extensions that drop the "
                        "GIL, not in pure-Python loops",
           contention_ms * 0.3);
      sugg(f, "low", "Reduce torch intra-op threads (torch.set_num_threads) if they oversubscribe the cores", contention_ms * 0.1);
      out.push_back(std::move(f));
    } else {
      contention_ms = 0;
    }
  }

  // ---- cpu_bound: the GPU waits for host work outside CUDA calls.
  {
    double impact = std::max(0.0, b.gpu_idle_waiting_on_host_ms - alloc_idle - contention_ms);
    double pct = impact / S * 100;
    if (pct >= kMinImpactPct) {
      // A trace without GPU work (CPU-only run, or no GPU collector) is host work through and through.
      const bool gpu_seen = b.gpu_utilization > 0 || m.kernels_per_step > 0;
      Finding f = make(c, "cpu_bound",
                       gpu_seen ? "The GPU waits " + fms(impact) + " per step for host work outside CUDA calls"
                                : "Host work fills the step: " + fms(impact) + " per step, and no GPU work was recorded",
                       impact, 0.45 + 0.4 * std::min(1.0, pct / 50) + (m.host_frames ? 0.1 : 0));
      f.evidence.push_back("the GPU was idle " + fms(b.gpu_idle_waiting_on_host_ms) + " per step (" +
                           fpct(b.gpu_idle_waiting_on_host_ms / S * 100) + " of the " + fms(S) +
                           " step) while thread '" + m.step_thread_name + "' ran host code and had not launched the next work");
      f.evidence.push_back("CPU preprocessing (GPU idle, host outside CUDA calls): " + fms(b.cpu_preprocessing_ms) + " per step");
      std::string hot_list;
      for (size_t i = 0; i < m.hot_host.size() && i < 3; ++i)
        hot_list += (i ? ", " : "") + m.hot_host[i].first + " " + fms(m.hot_host[i].second / 1e6 / double(m.steps.size()));
      if (!hot_list.empty()) f.evidence.push_back("host self time per step inside the step: " + hot_list);
      else f.evidence.push_back("no Python frames or nested ranges inside the step: the host work is not named; run with Python tracing or add ISCOPE_RANGEs");
      f.metrics["gpu_idle_waiting_on_host_ms"] = b.gpu_idle_waiting_on_host_ms;
      f.metrics["cpu_preprocessing_ms"] = b.cpu_preprocessing_ms;
      f.metrics["gpu_utilization"] = b.gpu_utilization;
      examples(f, c, &detail::StepMetrics::worst_host_gap, "GPU idle waiting on host work", trace_t0);
      std::string what = hot.empty() ? "the host work in '" + step_name + "'" : hot;
      sugg(f, "high", "Move " + what + " out of the step's critical path: prepare the next batch on a background thread or a "
                      "DataLoader worker (num_workers>0) while the GPU runs the current one",
           impact * 0.8);
      sugg(f, "high", "Vectorise or port " + what + " to torch/NumPy ops (or run it on the GPU) instead of per-item Python",
           impact * 0.5);
      sugg(f, "medium", "Overlap: launch the GPU work first and do the host work of step N+1 while step N's kernels run "
                        "(non_blocking copies, no synchronization in between)",
           impact * 0.5);
      sugg(f, "low", "Profile " + what + " itself (py-spy / cProfile) to find its hot lines", impact * 0.2);
      out.push_back(std::move(f));
    }
  }

  // ---- launch_bound: many short kernels; the host's launch rate limits the GPU.
  {
    double impact = b.gpu_idle_gaps_between_kernels_ms;
    double pct = impact / S * 100;
    if (pct >= kMinImpactPct && m.kernels_per_step >= 10) {
      bool tiny = m.median_kernel_ns > 0 && m.median_kernel_ns < m.short_kernel_ns;
      Finding f = make(c, "launch_bound",
                       fmt("%.0f kernels per step", m.kernels_per_step) + " with short gaps: the host cannot launch them fast enough",
                       impact, 0.45 + 0.25 * std::min(1.0, pct / 30) + (tiny ? 0.2 : 0));
      f.evidence.push_back(fmt("%.0f kernels per step, median kernel ", m.kernels_per_step) +
                           fmt("%.1f us", m.median_kernel_ns / 1e3) + "; the GPU sat idle between kernels " + fms(impact) +
                           " per step (" + fpct(pct) + " of the step)");
      double launch_ms = c.mean(&detail::StepMetrics::launch_api_ns);
      f.evidence.push_back("host time in launch calls: " + fms(launch_ms) + " per step (" +
                           fmt("%.1f us per kernel", m.kernels_per_step > 0 ? launch_ms * 1e3 / m.kernels_per_step : 0) + ")");
      const bool named = !m.top_kernel_launcher.empty() && m.top_kernel_launcher != "-";
      if (named) f.evidence.push_back("most kernels launched from " + m.top_kernel_launcher);
      f.metrics["kernels_per_step"] = m.kernels_per_step;
      f.metrics["median_kernel_us"] = m.median_kernel_ns / 1e3;
      f.metrics["gpu_idle_gaps_between_kernels_ms"] = impact;
      f.metrics["launch_api_ms"] = launch_ms;
      sugg(f, "high", "Capture the step in a CUDA graph (torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")) so its " +
                          fmt("%.0f launches", m.kernels_per_step) + " become one",
           impact * 0.8);
      sugg(f, "high", "Fuse the small kernels launched from " + (named ? m.top_kernel_launcher : std::string("the step")) +
                          " (torch.compile, fused optimizers/ops, a custom kernel) — e.g. '" + top_kernel(a, 0) + "'",
           impact * 0.6);
      sugg(f, "medium", "Batch more work per launch (larger batch or sequence per step) so each kernel runs longer than its launch costs",
           impact * 0.5);
      sugg(f, "low", "Cut Python overhead between launches (no per-op .item()/.cpu(), no tensor creation inside the loop)", impact * 0.2);
      out.push_back(std::move(f));
    }
  }

  // ---- sync_bound: the GPU drained while the host was blocked in a synchronization.
  {
    double impact = b.gpu_idle_waiting_on_sync_ms;
    double pct = impact / S * 100;
    double syncs = c.mean_u(&detail::StepMetrics::syncs);
    if (pct >= kMinImpactPct && syncs >= 1) {
      Finding f = make(c, "sync_bound", fmt("%.0f host-device synchronizations per step leave the GPU idle", syncs), impact,
                       0.45 + 0.35 * std::min(1.0, pct / 30) + (syncs >= 2 ? 0.15 : 0));
      f.evidence.push_back(fmt("%.1f synchronizing calls per step", syncs) + " (mostly " + m.top_sync_api + " from " +
                           m.top_sync_caller + ")");
      f.evidence.push_back("the GPU ran out of work while the host was blocked in them and then waited for new launches: " +
                           fms(impact) + " per step (" + fpct(pct) + ")");
      f.evidence.push_back("host blocked in synchronizing calls: " + fms(c.mean(&detail::StepMetrics::sync_api_ns)) + " per step");
      if (std::string e = callers_evidence(a.syncs); !e.empty()) f.evidence.push_back(e);
      f.metrics["syncs_per_step"] = syncs;
      f.metrics["gpu_idle_waiting_on_sync_ms"] = impact;
      examples(f, c, &detail::StepMetrics::worst_sync_gap, "GPU idle after a synchronization", trace_t0);
      std::string who = m.top_sync_caller.empty() || m.top_sync_caller == "-" ? "the step" : m.top_sync_caller;
      sugg(f, "high", "Remove the synchronizations in " + who + ": .item(), .cpu(), .tolist(), print(tensor) and "
                      "torch.cuda.synchronize() each wait for the GPU; keep values on the GPU until the step ends",
           impact * 0.8);
      sugg(f, "high", "If a value is needed on the host, copy it with .to('cpu', non_blocking=True) into pinned memory and "
                      "read it one step later (or after a CUDA event), so the GPU keeps running",
           impact * 0.6);
      sugg(f, "medium", "Replace data-dependent host control flow (if tensor.item() > ...) with torch.where / masks on the GPU",
           impact * 0.4);
      sugg(f, "low", "Set torch.cuda.set_sync_debug_mode('warn') to find every implicit synchronization", impact * 0.1);
      out.push_back(std::move(f));
    }
  }

  // ---- h2d_bound / d2h_bound / pcie_saturation
  auto copy_rule = [&](bool h2d) {
    double t = h2d ? b.h2d_ms : b.d2h_ms;
    double pct = t / S * 100;
    if (pct < kMinImpactPct) return;
    uint64_t bytes = 0, pageable = 0;
    double busy_ms = 0;
    for (auto& r : a.copies)
      if (r.direction == (h2d ? "h2d" : "d2h")) {
        bytes += r.bytes;
        busy_ms += r.total_ms;
        if ((h2d ? r.src_memory : r.dst_memory) == "pageable") pageable += r.bytes;
      }
    double bw = busy_ms > 0 ? double(bytes) / (busy_ms * 1e6) : 0;  // GB/s
    double share = m.peak_h2d_gbps > 0 ? bw / m.peak_h2d_gbps : 0;
    double per_step_bytes = 0, per_step_pageable = 0;
    for (auto& s : m.steps) {
      per_step_bytes += double(h2d ? s.h2d_bytes : s.d2h_bytes);
      per_step_pageable += double(h2d ? s.h2d_pageable_bytes : s.d2h_pageable_bytes);
    }
    per_step_bytes /= double(m.steps.size());
    per_step_pageable /= double(m.steps.size());
    double copies_per_step = c.mean_u(h2d ? &detail::StepMetrics::copies_h2d : &detail::StepMetrics::copies_d2h);
    const char* dir = h2d ? "host-to-device" : "device-to-host";
    std::string copy_desc;
    for (auto& [d, who] : m.top_copies)
      if (d.rfind(h2d ? "H2D" : "D2H", 0) == 0) { copy_desc = d + " from " + who; break; }
    bool saturated = share >= kSaturatedShare;
    Finding f = saturated
                    ? make(c, "pcie_saturation", std::string("The PCIe link is saturated by ") + dir + " copies", t,
                           0.5 + 0.4 * std::min(1.0, (share - kSaturatedShare) / 0.3) - (m.peak_assumed ? 0.1 : 0))
                    : make(c, h2d ? "h2d_bound" : "d2h_bound", std::string(dir) + " copies take " + fms(t) + " per step",
                           t, 0.5 + 0.3 * std::min(1.0, pct / 40) + (pageable * 2 > bytes ? 0.15 : 0));
    f.evidence.push_back(fmb(per_step_bytes) + fmt(" per step in %.0f copies", copies_per_step) + "; the GPU did nothing else for " +
                         fms(t) + " per step (" + fpct(pct) + " of the step)");
    f.evidence.push_back(fmt("achieved %.1f GB/s", bw) + " against " + m.peak_note + fmt(" (%.0f %% of peak)", share * 100));
    if (pageable) f.evidence.push_back(fmb(double(pageable)) + " of the " + fmb(double(bytes)) +
                                       " were copied from pageable memory (staged through a driver buffer, slower and synchronous)");
    if (!copy_desc.empty()) f.evidence.push_back("largest: " + copy_desc);
    f.metrics["bytes_per_step"] = per_step_bytes;
    f.metrics["pageable_bytes_per_step"] = per_step_pageable;
    f.metrics["bandwidth_gbps"] = bw;
    f.metrics["peak_bandwidth_gbps"] = m.peak_h2d_gbps;
    f.metrics["copy_ms"] = t;
    std::string what = copy_desc.empty() ? std::string(h2d ? "the input copies" : "the output copies") : copy_desc;
    if (saturated) {
      sugg(f, "high", "Copy fewer bytes: " + what + " — send compact dtypes (uint8 images, fp16/bf16 instead of fp32), "
                      "crop/resize or tokenize on the other side", t * 0.5);
      sugg(f, "high", "Keep data resident on the GPU across steps (cache weights/embeddings/KV on the device) instead of re-copying", t * 0.5);
      sugg(f, "medium", "Overlap the copies with compute on a separate CUDA stream (non_blocking=True from pinned memory) so "
                        "the link runs while kernels do", t * 0.4);
      sugg(f, "low", "Check the slot: nvidia-smi -q shows the negotiated PCIe generation and width", t * 0.1);
    } else {
      if (pageable)
        sugg(f, "high", "Pin the host buffers: " + what + " comes from pageable memory; use tensor.pin_memory() "
                        "(DataLoader(pin_memory=True)) and .to('cuda', non_blocking=True)",
             t * (1 - std::min(1.0, share / kSaturatedShare)));
      sugg(f, "high", std::string("Overlap the ") + (h2d ? "input" : "output") + " copies with compute: issue them on a side "
                      "CUDA stream with non_blocking=True and prefetch step N+1's data during step N", t * 0.6);
      sugg(f, "medium", std::string("Move fewer bytes: ") + (h2d ? "preprocess on the GPU from compact inputs (uint8, fp16)"
                                                                 : "reduce on the GPU (argmax/top-k) and copy back only the result"),
           t * 0.4);
      // Batching only helps where there are many copies; otherwise keeping data resident is the next lever.
      if (copies_per_step >= 4)
        sugg(f, "medium", fmt("Batch the %.0f copies per step into fewer, larger ones (small copies pay a fixed cost each)", copies_per_step),
             t * 0.2);
      if (!pageable || copies_per_step < 4)
        sugg(f, "low", "Keep reused data resident on the GPU instead of copying it every step", t * 0.3);
    }
    out.push_back(std::move(f));
  };
  copy_rule(true);
  copy_rule(false);

  // ---- memory_alloc: device allocation/free (or host memory pressure) on the critical path.
  {
    double api = c.mean(&detail::StepMetrics::alloc_api_ns);
    double allocs = c.mean_u(&detail::StepMetrics::allocs);
    double impact = alloc_idle;  // allocation time that kept the GPU idle; overlapped calls cost nothing
    double pct = impact / S * 100;
    bool host_pressure = m.faults_per_step > 1000 || m.rss_growth_bytes > 256e6;
    if (pct >= kMinImpactPct || host_pressure) {
      Finding f = make(c, "memory_alloc",
                       pct >= kMinImpactPct ? fmt("%.0f device allocations/frees per step cost ", allocs) + fms(impact)
                                            : std::string("Host memory pressure during the steps"),
                       impact, pct >= kMinImpactPct ? 0.5 + 0.4 * std::min(1.0, pct / 20) : 0.35);
      if (allocs > 0)
        f.evidence.push_back(fmt("%.1f allocation/free calls per step", allocs) + " (mostly " + m.top_alloc_api + " from " +
                             m.top_alloc_caller + "), " + fms(api) + " of host time per step; the GPU was idle " +
                             fms(alloc_idle) + " per step meanwhile (cudaFree also synchronizes the device)");
      for (auto& r : a.allocations)
        f.evidence.push_back(r.op + " " + r.memory + ": " + std::to_string(r.count) + " events, " + fmb(double(r.bytes)) +
                             ", " + fms(r.api_ms) + " in API calls over the trace");
      if (std::string e = callers_evidence(a.allocations); !e.empty()) f.evidence.push_back(e);
      // The first CUDA call creates the context (hundreds of ms): a one-time cost, not a per-step one.
      const bool init = m.first_api_in_steps && m.first_api_ms >= 20 && m.first_api_ms >= 0.5 * impact * double(m.steps.size());
      if (init) {
        f.evidence.push_back("the step thread's first CUDA call, " + m.first_api_name + " (" + fms(m.first_api_ms) +
                             "), lies inside the analysed steps: most of it is creating the CUDA context, a one-time cost");
        f.confidence = std::max(0.0, f.confidence - 0.3);
        f.uncertain = f.confidence < kUncertainBelow;
      }
      if (m.rss_growth_bytes > 0) f.evidence.push_back("process RSS grew by " + fmb(m.rss_growth_bytes) + " over the steps");
      if (m.faults_per_step > 0) f.evidence.push_back(fmt("%.0f page faults per step", m.faults_per_step));
      f.metrics["alloc_calls_per_step"] = allocs;
      f.metrics["alloc_api_ms"] = api;
      f.metrics["gpu_idle_in_alloc_ms"] = alloc_idle;
      f.metrics["rss_growth_bytes"] = m.rss_growth_bytes;
      examples(f, c, &detail::StepMetrics::worst_alloc, std::string("host in " + m.top_alloc_api).c_str(), trace_t0);
      std::string who = m.top_alloc_caller.empty() || m.top_alloc_caller == "-" ? "the step" : m.top_alloc_caller;
      sugg(f, "high", "Allocate once and reuse: preallocate the buffers " + who + " creates each step (output tensors, "
                      "workspaces) outside the loop and write into them (out=...)", impact * 0.8);
      sugg(f, "high", "Keep PyTorch's caching allocator on: do not call torch.cuda.empty_cache() in the step and do not set "
                      "PYTORCH_NO_CUDA_MEMORY_CACHING=1", impact * 0.8);
      sugg(f, "medium", "Use stream-ordered allocation (cudaMallocAsync / PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) "
                        "instead of cudaMalloc/cudaFree, which synchronize the device", impact * 0.5);
      sugg(f, "low", "Keep shapes static across steps (pad to buckets) so cached blocks fit and nothing is reallocated", impact * 0.2);
      if (init)
        sugg(f, "high", "Warm up before measuring: initialise CUDA (e.g. torch.cuda.init() or a cudaFree(0)) and run a few "
                        "steps outside the measured region, and mark the steps with ISCOPE_RANGE/inferscope_py.scope",
             std::min(impact, m.first_api_ms / double(m.steps.size())));
      out.push_back(std::move(f));
    }
  }

  // ---- gpu_bound (informational): the GPU is busy; name the kernels that take its time.
  if (b.gpu_utilization >= kGpuBoundUtil && b.gpu_compute_ms / S >= 0.5) {
    double impact = b.gpu_compute_ms;
    Finding f = make(c, "gpu_bound", "The GPU is busy " + fpct(b.gpu_utilization * 100) +
                                         " of the step (healthy; the kernels themselves set the pace)",
                     impact, std::min(0.95, b.gpu_utilization));
    for (size_t i = 0; i < a.kernels.size() && i < 3; ++i)
      f.evidence.push_back("kernel '" + a.kernels[i].name + "': " + fpct(a.kernels[i].share * 100) + " of GPU time, " +
                           fmt("%.1f us mean", a.kernels[i].mean_us) + " x " + std::to_string(a.kernels[i].count) +
                           ", launched by " + a.kernels[i].launched_by);
    f.evidence.push_back("GPU compute " + fms(b.gpu_compute_ms) + " of the " + fms(S) + " step");
    f.metrics["gpu_utilization"] = b.gpu_utilization;
    f.metrics["gpu_compute_ms"] = b.gpu_compute_ms;
    std::string k0 = top_kernel(a, 0);
    sugg(f, "high", "Speed up '" + k0 + "': use lower precision (bf16/fp16 autocast, FP8 where supported) and tensor-core "
                    "friendly shapes (multiples of 8/16)", impact * 0.3);
    sugg(f, "medium", "Fuse memory-bound kernels around '" + k0 + "' (torch.compile, FlashAttention/SDPA for attention)", impact * 0.2);
    sugg(f, "medium", "Raise the batch size if latency allows: a busy GPU gains throughput from larger batches", impact * 0.1);
    sugg(f, "low", "Check the kernels with Nsight Compute for occupancy and memory-bandwidth limits", impact * 0.05);
    out.push_back(std::move(f));
  }

  std::stable_sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.impact_ms > y.impact_ms; });
  if (!out.empty()) out.front().primary = true;
  return out;
}

}  // namespace inferscope::analyze
