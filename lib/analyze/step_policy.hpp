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

/// Steady steps that fall into two groups of clearly different length: a loop fed by a producer that cannot keep
/// up takes a batch from its queue at once for a while, then waits long for the next one.
struct StepModes {
  bool two = false;            ///< the steps split into a fast and a slow group (docs/analysis.md gives the rule)
  double fast_median_ns = 0, slow_median_ns = 0;
  size_t fast = 0, slow = 0;   ///< steps in each group
};

struct StepSelection {
  size_t warmup = 0;                ///< the first `warmup` steps are the warm-up
  std::vector<bool> steady;         ///< per step: not warm-up
  std::vector<size_t> outliers;     ///< steady steps slower than the outlier bound, in time order
  double steady_median_ns = 0;
  double outlier_bound_ns = 0;      ///< steps above this are outliers (0: no steady steps)
  bool user_skipped = false;        ///< the warm-up count came from the user
  std::string reason;               ///< one sentence: how the warm-up was chosen
  StepModes modes;                  ///< two modes among the steady steps (then the slow ones are not outliers)
  double steady_mean_ns = 0;
  /// The steady steps are not alike: two modes, or a mean more than kNotAlikeShare away from the median. The
  /// typical step is then the mean of every steady step (its slow ones are what the run costs, not noise).
  bool not_alike = false;
  /// The user asked to skip as many steps as the run has, or more: `warmup` is one fewer, and `reason` says so.
  bool skipped_fewer_than_asked = false;
};

/// Robust bound above which a step is unusually slow: median + max(k·1.4826·MAD, floor·median).
/// The median (the mean of the two middle values for an even count); 0 for none.
double median_of(std::vector<double> v);

double slow_step_bound(std::vector<double> durations_ns);

StepSelection select_steps(const StepPolicyInput& in, const StepPolicyOptions& opt);

/// Two groups among `durations_ns` (any order): split at the widest ratio between neighbours in sorted order, that
/// ratio at least kModeGap (an empty stretch between them), each group at least kModeShare of the steps (and 2), the
/// slow group's median at least kModeRatio times the fast one's.
StepModes find_modes(std::vector<double> durations_ns);

/// Mean and median further apart than this share of the median: the steps are not alike (and a median describes
/// neither the typical step nor what the run costs per step).
inline constexpr double kNotAlikeShare = 0.15;
inline constexpr double kModeShare = 0.10;
inline constexpr double kModeRatio = 2.0;
inline constexpr double kModeGap = 1.5;

}  // namespace inferscope::analyze
