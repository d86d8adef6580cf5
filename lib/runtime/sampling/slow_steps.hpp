// Sampled mode's slow-step test (docs/sampled-mode.md, "Slow steps"): a step is slow when it lasts longer than a
// fixed threshold, or longer than `factor` times a running percentile of the steps' own durations. It runs on the
// thread that ends a step, so its work per step is constant but for one recomputation every `refresh` steps.
//
//   SlowStepDetector d({.threshold_ns = 50e6, .factor = 3, .percentile = 99});
//   if (d.observe(duration_ns)) keep_it_with_its_neighbours();
#pragma once

#include <cstddef>
#include <vector>

namespace inferscope::runtime::sampling {

struct SlowStepOptions {
  double threshold_ns = 0;  ///< longer than this is slow (0: no fixed threshold)
  double factor = 0;        ///< longer than factor x the running percentile is slow (0: off)
  double percentile = 99;   ///< of the durations of the last `history` steps
  size_t history = 1024;
  size_t refresh = 32;      ///< steps between recomputations of the percentile
};

class SlowStepDetector {
 public:
  explicit SlowStepDetector(const SlowStepOptions& options);

  /// Whether a step of `dur_ns` is slow, judged against the steps before it; the step then joins the history
  /// (slow ones too: the percentile is of the steps' own durations, whatever they are).
  bool observe(double dur_ns);
  /// The bound the last observed step had to exceed to be slow (0: no criterion applied yet).
  double last_bound_ns() const { return last_bound_; }
  /// The running percentile (0 until the history holds min_history() steps).
  double running_ns() const { return running_; }
  /// Steps the history must hold before the factor applies: twice what the percentile needs to be below the
  /// largest duration (200 for p99), at least 16 and at most the history.
  size_t min_history() const;

 private:
  double bound() const;
  void recompute();

  SlowStepOptions o_;
  std::vector<double> ring_;     // the last `history` durations
  std::vector<double> scratch_;  // recompute()'s copy
  size_t next_ = 0, filled_ = 0, since_refresh_ = 0;
  double running_ = 0;
  double last_bound_ = 0;
};

}  // namespace inferscope::runtime::sampling
