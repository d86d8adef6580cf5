#include "analyze/step_policy.hpp"

#include "analyze/support/order_stats.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::analyze {
namespace {

// Hampel's identifier: 3 scaled MADs (1.4826·MAD estimates σ for normal data) from the median.
constexpr double kMadK = 3.0;
constexpr double kMadToSigma = 1.4826;
// Steps within 25 % of the median are never unusual: within one process, steps of the same work on the GPU
// hosts here vary by about ±10-20 % (docs/benchmarks.md); a run of near-identical steps has a MAD near 0 and
// would otherwise flag a step 2 % slower.
constexpr double kFloorShare = 0.25;
// At most this share of the steps is warm-up: if more look like it, the run never settled and calling most of
// it warm-up would hide that.
constexpr double kMaxWarmupShare = 0.5;


// Leading steps that are slower than `bound`, or that hold a one-time cost and are slower than the median
// (context creation makes its step slower; a first call that cost nothing does not make a step warm-up).
size_t detect_warmup(const StepPolicyInput& in, double bound, size_t cap) {
  const double med = median_of(in.durations_ns);
  size_t w = 0;
  while (w < cap) {
    const bool init = w < in.one_time_cost.size() && in.one_time_cost[w] && in.durations_ns[w] > med;
    if (!init && in.durations_ns[w] <= bound) break;
    ++w;
  }
  return w;
}

}  // namespace

double median_of(std::vector<double> v) { return median_in_place(v); }

double slow_step_bound(std::vector<double> d) {
  if (d.empty()) return 0;
  const double med = median_of(d);
  for (double& x : d) x = std::fabs(x - med);
  const double mad = median_of(std::move(d));
  return med + std::max(kMadK * kMadToSigma * mad, kFloorShare * med);
}

StepSelection select_steps(const StepPolicyInput& in, const StepPolicyOptions& opt) {
  StepSelection s;
  const size_t n = in.durations_ns.size();
  const size_t cap = n > 1 ? std::max<size_t>(1, size_t(double(n) * kMaxWarmupShare)) : 0;
  if (opt.skip_steps >= 0) {
    s.warmup = std::min(size_t(opt.skip_steps), n > 0 ? n - 1 : 0);  // one step is always left to describe
    s.user_skipped = true;
    s.skipped_fewer_than_asked = size_t(opt.skip_steps) > s.warmup;
    s.reason = s.skipped_fewer_than_asked
                   ? "--skip-steps / skip_steps asked to skip " + std::to_string(opt.skip_steps) + " step(s), but the run has " +
                         std::to_string(n) + ": the first " + std::to_string(s.warmup) +
                         " skipped, the last one kept to describe"
                   : "the first " + std::to_string(s.warmup) + " step(s) skipped as asked (--skip-steps / skip_steps)";
  } else {
    s.warmup = detect_warmup(in, slow_step_bound(in.durations_ns), cap);
    const bool any_marked = std::find(in.one_time_cost.begin(), in.one_time_cost.end(), true) != in.one_time_cost.end();
    s.reason = s.warmup ? "the first " + std::to_string(s.warmup) +
                              " step(s) were slower than median + max(3 scaled MADs, 25 %) of all steps" +
                              (any_marked ? " or held the first CUDA call" : "") + ": warm-up, reported apart"
                        : n > 1 ? "no leading step was unusually slow: every step is steady"
                                : "a single step: nothing to tell warm-up from the steady state";
  }
  s.steady.assign(n, false);
  std::vector<double> steady;
  for (size_t i = s.warmup; i < n; ++i) {
    s.steady[i] = true;
    steady.push_back(in.durations_ns[i]);
  }
  s.steady_median_ns = median_of(steady);
  s.outlier_bound_ns = slow_step_bound(steady);
  double sum = 0;
  for (double d : steady) sum += d;
  s.steady_mean_ns = steady.empty() ? 0 : sum / double(steady.size());
  s.modes = find_modes(steady);
  s.not_alike = s.modes.two || (s.steady_median_ns > 0 &&
                                std::fabs(s.steady_mean_ns - s.steady_median_ns) > kNotAlikeShare * s.steady_median_ns);
  // A slow mode is a state of the run, not noise: its steps stay typical. Outliers are rare by definition
  // (Hampel's bound is passed by ~0.1 % of normal data); a tenth of the steps above it is a second mode.
  if (steady.size() >= 3 && !s.modes.two)  // with fewer, "unusual" has no meaning
    for (size_t i = s.warmup; i < n; ++i)
      if (in.durations_ns[i] > s.outlier_bound_ns) s.outliers.push_back(i);
  return s;
}

StepModes find_modes(std::vector<double> d) {
  StepModes m;
  const size_t n = d.size();
  const size_t least = std::max<size_t>(2, size_t(std::ceil(kModeShare * double(n))));
  if (n < 2 * least) return m;
  std::sort(d.begin(), d.end());
  size_t cut = 0;
  double widest = 0;
  for (size_t i = least; i + least <= n; ++i) {
    if (d[i - 1] <= 0) continue;
    const double ratio = d[i] / d[i - 1];
    if (ratio > widest) {
      widest = ratio;
      cut = i;
    }
  }
  // The two groups must be apart: no step between the fast group's slowest and kModeGap times it. Without the gap,
  // one slow outlier among equal steps would drag the median of whatever group holds it above kModeRatio.
  if (!cut || widest < kModeGap) return m;
  const double fast = median_of(std::vector<double>(d.begin(), d.begin() + long(cut)));
  const double slow = median_of(std::vector<double>(d.begin() + long(cut), d.end()));
  if (fast <= 0 || slow < kModeRatio * fast) return m;
  m.two = true;
  m.fast_median_ns = fast;
  m.slow_median_ns = slow;
  m.fast = cut;
  m.slow = n - cut;
  return m;
}

}  // namespace inferscope::analyze
