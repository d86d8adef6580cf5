// The only place that combines steps: per-step measurements (StepMetrics) in, one typical step out.
//
// The typical step is the mean over the steady steps that are not slow outliers (step_policy.hpp): the warm-up
// and the outliers are reported on their own, so a mean over the rest is as robust as a median, and unlike a
// per-part median its parts still add up to the step. Latency statistics (median, p90, p99) are over all
// steady steps.
//
//   TypicalStep t = typical_step(model.steps, selection);
//   double launch_ms = t.idle_gaps / 1e6;
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"
#include "analyze/step_policy.hpp"

#include <cstddef>
#include <vector>

namespace inferscope::analyze::detail {


/// Indexes of the steps the typical step covers: steady and not outliers (all steady ones when every steady
/// step is an outlier, which cannot happen with a median-based bound but is kept total).
std::vector<size_t> typical_indexes(const StepSelection& sel);

TypicalStep typical_step(const std::vector<StepMetrics>& steps, const std::vector<size_t>& which);

/// The Analysis breakdown (milliseconds) of a typical step.
Breakdown breakdown_of(const TypicalStep& t);

/// Latency statistics over the steady steps: count, median-based headline, mean, p90, p99, min, max, slowest.
void fill_step_stats(StepStats& stats, const std::vector<double>& durations_ns, const StepSelection& sel,
                     const std::vector<double>& starts_ms);

}  // namespace inferscope::analyze::detail
