#include "analyze/aggregate.hpp"

#include "analyze/support/order_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace inferscope::analyze::detail {
namespace {

double ms(double ns) { return ns / 1e6; }

double median_sorted(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void add(TypicalStep& t, const StepMetrics& s) {
  std::apply([&](auto... f) { ((t.*f.second += double(s.*f.first)), ...); }, kAveragedStepFields);
}

void scale(TypicalStep& t, double k) {
  std::apply([&](auto... f) { ((t.*f.second *= k), ...); }, kAveragedStepFields);
}

}  // namespace

std::vector<size_t> typical_indexes(const StepSelection& sel) {
  std::vector<size_t> out;
  // Steps that are not alike are summed up by their mean, which is the headline: their typical step is the mean
  // of every steady step, the slow ones included, so that each finding's "per step" has the headline's base and
  // a saving predicted for the slow steps (a CUDA graph removes their slow launches too) is counted. The slow
  // steps are still listed (slow_steps).
  if (sel.not_alike) {
    for (size_t i = 0; i < sel.steady.size(); ++i)
      if (sel.steady[i]) out.push_back(i);
    return out;
  }
  size_t o = 0;
  for (size_t i = 0; i < sel.steady.size(); ++i) {
    while (o < sel.outliers.size() && sel.outliers[o] < i) ++o;
    if (sel.steady[i] && !(o < sel.outliers.size() && sel.outliers[o] == i)) out.push_back(i);
  }
  if (out.empty())
    for (size_t i = 0; i < sel.steady.size(); ++i)
      if (sel.steady[i]) out.push_back(i);
  return out;
}

TypicalStep typical_step(const std::vector<StepMetrics>& steps, const std::vector<size_t>& which) {
  TypicalStep t;
  size_t measured = 0;
  for (size_t i : which) {
    if (i >= steps.size()) continue;
    add(t, steps[i]);
    measured += steps[i].host_state_measured;
    ++t.steps;
  }
  // Counters start a little after the session and may miss a step at an edge: the split holds when most of
  // the typical steps had them (the others count their host time as running).
  t.host_state_measured = t.steps > 0 && measured * 2 > t.steps;
  if (t.steps) scale(t, 1.0 / double(t.steps));
  return t;
}

Breakdown breakdown_of(const TypicalStep& t) {
  Breakdown b;
  b.step_ms = ms(t.dur);
  b.cpu_preprocessing_ms = ms(t.cpu);
  b.h2d_ms = ms(t.h2d);
  b.gpu_compute_ms = ms(t.compute);
  b.gpu_comm_ms = ms(t.comm);
  b.d2h_ms = ms(t.d2h);
  b.sync_wait_ms = ms(t.sync_wait);
  b.framework_overhead_ms = ms(t.framework);
  b.idle_ms = ms(t.idle);
  b.gpu_idle_waiting_on_host_ms = ms(t.idle_host);
  b.gpu_idle_gaps_between_kernels_ms = ms(t.idle_gaps);
  b.gpu_idle_waiting_on_sync_ms = ms(t.idle_sync);
  b.gpu_idle_in_memory_ms = ms(t.idle_memory);
  b.host_running_ms = ms(t.host_running);
  b.host_contention_ms = ms(t.host_contention);
  b.host_waiting_ms = ms(t.host_wait);
  b.host_state_measured = t.host_state_measured;
  b.gpu_utilization = t.dur > 0 ? (t.compute + t.comm + t.h2d + t.d2h) / t.dur : 0;
  return b;
}

// Steps that are not alike: the mean is the headline and the spread is said in words (docs/analysis.md, "Steps
// that are not alike").
void describe_spread(StepStats& st, const StepSelection& sel) {
  st.alike = !sel.not_alike;
  st.basis = st.alike ? "median" : "mean";
  if (st.alike) return;
  char b[256];
  if (sel.modes.two) {
    st.fast_mode_ms = ms(sel.modes.fast_median_ns);
    st.slow_mode_ms = ms(sel.modes.slow_median_ns);
    st.fast_mode_steps = sel.modes.fast;
    st.slow_mode_steps = sel.modes.slow;
    std::snprintf(b, sizeof b, "the steps alternate between %.3g ms (%zu steps) and %.3g ms (%zu steps): the %s "
                  "ones wait for something the fast ones find ready", st.fast_mode_ms, sel.modes.fast, st.slow_mode_ms,
                  sel.modes.slow, "slow");
  } else {
    std::snprintf(b, sizeof b, "the steps are not alike: their mean (%.3g ms) is %.0f %% %s their median (%.3g ms)",
                  st.mean_ms, std::fabs(st.mean_ms - st.p50_ms) / st.p50_ms * 100,
                  st.mean_ms > st.p50_ms ? "above" : "below", st.p50_ms);
  }
  st.spread = b;
}

void fill_step_stats(StepStats& st, const std::vector<double>& durs, const StepSelection& sel,
                     const std::vector<double>& starts_ms) {
  std::vector<size_t> steady;
  for (size_t i = 0; i < durs.size(); ++i)
    if (i < sel.steady.size() && sel.steady[i]) steady.push_back(i);
  std::vector<double> sorted;
  for (size_t i : steady) sorted.push_back(durs[i]);
  std::sort(sorted.begin(), sorted.end());
  st.total = durs.size();
  st.warmup = sel.warmup;
  st.warmup_user = sel.user_skipped;
  st.warmup_reason = sel.reason;
  st.count = steady.size();
  st.typical = typical_indexes(sel).size();
  for (size_t i : steady) st.steady_durations_ms.push_back(ms(durs[i]));
  if (sorted.empty()) return;
  st.mean_ms = ms(std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(sorted.size()));
  st.p50_ms = ms(median_sorted(sorted));
  st.p90_ms = ms(percentile_sorted(sorted, 0.9));
  st.p99_ms = ms(percentile_sorted(sorted, 0.99));
  st.min_ms = ms(sorted.front());
  st.max_ms = ms(sorted.back());
  st.outlier_bound_ms = ms(sel.outlier_bound_ns);
  describe_spread(st, sel);
  for (size_t i : sel.outliers) {
    st.outlier_indexes.push_back(uint32_t(i));
    if (st.outliers.size() < 20) st.outliers.push_back({uint32_t(i), starts_ms[i], ms(durs[i])});
  }
  std::stable_sort(steady.begin(), steady.end(), [&](size_t x, size_t y) { return durs[x] > durs[y]; });
  for (size_t k = 0; k < steady.size() && k < 5; ++k)
    st.slowest.push_back({uint32_t(steady[k]), starts_ms[steady[k]], ms(durs[steady[k]])});
}

}  // namespace inferscope::analyze::detail
