// Stages "GPU order and launch index" and "attribution and alignment": the GPU activities in start order, the
// launch call of each correlation id, the launcher labels, and what each launcher queued on the GPU; the
// clock alignment checks (docs/analysis.md sections 2 and 5).
#include "analyze/stages.hpp"

#include <atomic>

namespace inferscope::analyze::detail {

// On W threads: the GPU activities are checked for start order and sorted when they are not (by every
// field, a total order, so blocks sorted apart and merged give exactly what one sort gives); the launch index
// is filled by blocks of calls, the latest call winning for a repeated correlation id as in one pass.
void order_gpu(Slab<GpuOp>& gpu, unsigned W) {
  const size_t n = gpu.size(), parts = std::clamp<size_t>(n / 512, 1, W);
  std::vector<size_t> cut(parts + 1);
  for (size_t w = 0; w <= parts; ++w) cut[w] = n * w / parts;
  std::vector<uint8_t> ordered(parts, 1);
  run_parallel(parts, [&](size_t w) {
    ordered[w] = std::is_sorted(gpu.begin() + (cut[w] ? cut[w] - 1 : 0), gpu.begin() + cut[w + 1],
                                [](const GpuOp& x, const GpuOp& y) { return x.start < y.start; });
  });
  if (std::find(ordered.begin(), ordered.end(), 0) != ordered.end()) {
    auto total = [](const GpuOp& x, const GpuOp& y) {
      return std::tie(x.start, x.corr, x.dur, x.name_or_bytes, x.kind, x.host_mem, x.stream) <
             std::tie(y.start, y.corr, y.dur, y.name_or_bytes, y.kind, y.host_mem, y.stream);
    };
    run_parallel(parts, [&](size_t w) { std::sort(gpu.begin() + cut[w], gpu.begin() + cut[w + 1], total); });
    for (size_t width = 1; width < parts; width *= 2) {
      std::vector<size_t> left;
      for (size_t w = 0; w + width < parts; w += 2 * width) left.push_back(w);
      run_parallel(left.size(), [&](size_t k) {
        const size_t w = left[k];
        std::inplace_merge(gpu.begin() + cut[w], gpu.begin() + cut[w + width],
                           gpu.begin() + cut[std::min(parts, w + 2 * width)], total);
      });
    }
  }
}

LaunchIndex index_launches(const Slab<ApiOp>& apis, uint32_t cmin, uint32_t cmax, unsigned W) {
  LaunchIndex li;
  li.apis = &apis;
  li.cmin = cmin;
  li.cmax = cmax;
  auto& dense = li.dense;
  auto& sparse = li.sparse;
  const bool use_dense = li.use_dense = cmin <= cmax && uint64_t(cmax - cmin) <= 4 * uint64_t(apis.size()) + 4096;
  if (use_dense) {
    dense.assign(size_t(cmax - cmin) + 1, UINT32_MAX);
    const size_t n = apis.size(), parts = std::clamp<size_t>(n / 512, 1, W);
    // Plain (relaxed) stores first; where blocks share an id (rare) a later block may have lost the race, so a
    // second walk raises every slot to its largest index.
    for (int round = 0; round < (parts > 1 ? 2 : 1); ++round)
      run_parallel(parts, [&](size_t w) {
        for (size_t i = n * w / parts; i < n * (w + 1) / parts; ++i) {
          if (!apis[i].corr) continue;
          std::atomic_ref<uint32_t> slot(dense[apis[i].corr - cmin]);
          uint32_t cur = slot.load(std::memory_order_relaxed);
          if (round == 0 && cur == UINT32_MAX) {
            slot.store(uint32_t(i), std::memory_order_relaxed);
            continue;
          }
          while ((cur == UINT32_MAX || cur < i) &&
                 !slot.compare_exchange_weak(cur, uint32_t(i), std::memory_order_relaxed)) {
          }
        }
      });
  } else {
    for (uint32_t i = 0; i < apis.size(); ++i)
      if (apis[i].corr) sparse[apis[i].corr] = i;
  }
  return li;
}

uint32_t Launchers::intern(const ApiOp* api, CacheSlot& slot, const std::tuple<uint32_t, uint32_t, uint32_t>& key) {
  auto it = label_ids.find(key);
  if (it == label_ids.end()) {
    std::string s;
    auto part = [&](const std::string& x) { s += (s.empty() ? "" : " / ") + x; };
    if (api->py) part(cx.code_where(api->py));
    // The step range itself says nothing about who launched the work.
    if (api->range && api->range != api->layer && cx.name_of(api->range) != step_name) part("range " + cx.name_of(api->range));
    if (api->layer) part("layer " + cx.name_of(api->layer));
    uint32_t id = 0;
    if (!s.empty()) {
      id = uint32_t(labels.size());
      labels.push_back(std::move(s));
    }
    it = label_ids.emplace(key, id).first;
  }
  slot.key = key;
  slot.id = it->second;
  return slot.id;
}

namespace {

// What each launcher queued (kernels, copies, layers) and the launch-after-start checks.
void attribute_activities(const Context& cx, const Ingested& in, const LaunchIndex& li, Launchers& who, Attribution& at,
                          double& worst) {
  const auto& gpu = in.gpu;
  auto& al = at.alignment;
  auto& max_gpu_dur = at.max_gpu_dur;
  auto& kernel_by_launcher = at.kernel_by_launcher;
  auto& kernels_by_launcher = at.kernels_by_launcher;
  auto& layer_gpu = at.layer_gpu;
  auto& layer_kernels = at.layer_kernels;
  auto& copy_launchers = at.copy_launchers;
  (void)cx;
  for (auto& op : gpu) {
    max_gpu_dur = std::max<int64_t>(max_gpu_dur, op.dur);
    const ApiOp* api = li.launch_of(op.corr);
    if (api) {
      ++al.kernels_checked;
      double v = double(api->start - op.start);
      if (v > worst) worst = v;
      if (v > 1000) ++al.violations_over_1us;
    }
    if (detail::is_compute_launch(op.kind)) {
      if (api) {
        uint32_t lid = who.id(api);
        kernel_by_launcher[uint64_t(detail::launch_work_key(op.kind, op.name_or_bytes)) << 32 | lid] += op.dur;
        if (lid >= kernels_by_launcher.size()) kernels_by_launcher.resize(lid + 1, 0);
        ++kernels_by_launcher[lid];
      }
      if (api && api->layer) {
        layer_gpu[api->layer] += op.dur;
        ++layer_kernels[api->layer];
      }
    } else if (op.kind == detail::kH2D || op.kind == detail::kD2H) {
      char d[96];
      std::snprintf(d, sizeof(d), "%s %s copy of %.1f MB", op.kind == detail::kH2D ? "H2D" : "D2H",
                    memory_name(op.host_mem), double(op.name_or_bytes) / 1e6);
      auto& x = copy_launchers[{d, api ? who.label(api) : std::string("-")}];
      x.first += op.name_or_bytes;
      ++x.second;
      if (api && api->layer) layer_gpu[api->layer] += op.dur;
    }
  }
}

// Syncs: a device-wide synchronization must return after all GPU work launched before it ended.
void check_syncs(const Context& cx, const Ingested& in, Alignment& al, double& worst) {
  const auto& apis = in.apis;
  const auto& gpu = in.gpu;
  // Memory O(syncs): bucket the GPU work by the first device sync launched after it, then a prefix max.
  std::vector<const ApiOp*> syncs;
  for (auto& api : apis) {
    if (api.kind != detail::kSync || !api.corr) continue;
    const std::string& n = cx.name_of(api.name);
    if (n.find("DeviceSynchronize") != std::string::npos || n.find("CtxSynchronize") != std::string::npos)
      syncs.push_back(&api);
  }
  std::sort(syncs.begin(), syncs.end(), [](auto* x, auto* y) { return x->corr < y->corr; });
  std::vector<int64_t> before(syncs.size(), std::numeric_limits<int64_t>::min());  // max end launched before sync i
  std::vector<uint8_t> any_before(syncs.size(), 0);
  if (!syncs.empty())
    for (auto& op : gpu) {
      if (!op.corr) continue;
      auto it = std::upper_bound(syncs.begin(), syncs.end(), op.corr, [](uint32_t c, const ApiOp* x) { return c < x->corr; });
      if (it == syncs.end()) continue;
      size_t i = size_t(it - syncs.begin());
      before[i] = std::max(before[i], op.end());
      any_before[i] = 1;
    }
  uint64_t sync_checked = 0, sync_bad = 0;
  double sync_worst = 0;
  int64_t run_max = std::numeric_limits<int64_t>::min();
  bool run_any = false;
  for (size_t i = 0; i < syncs.size(); ++i) {
    run_max = std::max(run_max, before[i]);
    run_any |= any_before[i] != 0;
    if (!run_any) continue;
    ++sync_checked;
    double v = double(run_max) - double(syncs[i]->end());  // in double: hostile timestamps must not overflow
    if (v > sync_worst) sync_worst = v;
    if (v > 1000) ++sync_bad;
  }
  al.kernels_checked += sync_checked;
  al.violations_over_1us += sync_bad;
  worst = std::max(worst, sync_worst);
  if (sync_checked)
    al.note = std::to_string(sync_checked) + " device synchronizations checked (worst " +
              std::to_string(int64_t(std::min(sync_worst, 9e18))) + " ns after the sync returned). ";
}

}  // namespace

Attribution attribute(const Context& cx, const Ingested& in, const LaunchIndex& li, Launchers& who) {
  Attribution at;
  at.layer_gpu.assign(cx.nstr, 0.0);
  at.layer_kernels.assign(cx.nstr, 0);
  Alignment& al = at.alignment;
  double worst = 0;
  const uint64_t clock_checks = in.clock_checks, clock_bad = in.clock_bad;
  const double clock_worst_ns = in.clock_worst_ns;
  attribute_activities(cx, in, li, who, at, worst);
  check_syncs(cx, in, al, worst);
  al.max_violation_us = worst / 1e3;
  al.violation_pct = al.kernels_checked ? 100.0 * double(al.violations_over_1us) / double(al.kernels_checked) : 0;
  if (clock_checks) {
    al.note += std::to_string(clock_checks) + " CUDA-event round trips: worst " + std::to_string(clock_worst_ns / 1e3) +
               " us of GPU timestamp before the host call. ";
    al.max_violation_us = std::max(al.max_violation_us, clock_worst_ns / 1e3);
    al.violations_over_1us += clock_bad;
  }
  al.ok = al.max_violation_us <= 1.0 && al.violation_pct < 1.0;
  if (in.gpu.size() == 0 && !clock_checks)
    ;  // nothing to align: the reports say so
  else if (al.kernels_checked == 0 && !clock_checks)
    al.note += "no GPU activity with a matching launch call: alignment not measured.";
  else
    al.note += "Causality checked on " + std::to_string(al.kernels_checked) + " GPU activities/syncs.";
  if (!al.ok)
    at.warning = ("CPU/GPU clock alignment error exceeds the budget: worst " + std::to_string(al.max_violation_us) +
                  " us, " + std::to_string(al.violation_pct) + " % of checks over 1 us; GPU-to-CPU attribution "
                  "and idle gaps below that size are unreliable");
  return at;
}

}  // namespace inferscope::analyze::detail
