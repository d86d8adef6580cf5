// Which steps a verdict describes: the warm-up at the start of a run is a state of its own, not noise to be
// averaged in (a 325 ms first step with CUDA context creation made a 9.6 ms step read as 97 ms). The policy
// splits the steps into warm-up (leading steps, skipped by the user or detected), steady steps, and the slow
// outliers among the steady ones. docs/analysis.md, "Steps", gives every threshold and its reason.
//
//   StepPolicyInput in{durations_ns, first_cuda_call_step};
//   StepSelection s = select_steps(in, {});
//   // s.warmup leading steps; s.steady[i] for the rest; s.outliers: slow steady steps
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace inferscope::analyze {

struct StepPolicyOptions {
  /// Leading steps to skip as warm-up; -1: detect.
  int skip_steps = -1;
};

struct StepPolicyInput {
  std::vector<double> durations_ns;  ///< every step, in time order
  /// Steps that pay a one-time cost: the one holding the step thread's first CUDA call (context creation),
  /// for example. A leading step marked here is warm-up whatever its duration.
  std::vector<bool> one_time_cost;
};

struct StepSelection {
  size_t warmup = 0;                ///< the first `warmup` steps are the warm-up
  std::vector<bool> steady;         ///< per step: not warm-up
  std::vector<size_t> outliers;     ///< steady steps slower than the outlier bound, in time order
  double steady_median_ns = 0;
  double outlier_bound_ns = 0;      ///< steps above this are outliers (0: no steady steps)
  bool user_skipped = false;        ///< the warm-up count came from the user
  std::string reason;               ///< one sentence: how the warm-up was chosen
};

/// Robust bound above which a step is unusually slow: median + max(k·1.4826·MAD, floor·median).
/// The median (the mean of the two middle values for an even count); 0 for none.
double median_of(std::vector<double> v);

double slow_step_bound(std::vector<double> durations_ns);

StepSelection select_steps(const StepPolicyInput& in, const StepPolicyOptions& opt);

}  // namespace inferscope::analyze
