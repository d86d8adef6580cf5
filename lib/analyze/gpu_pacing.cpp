#include "analyze/gpu_pacing.hpp"

#include "analyze/step_policy.hpp"

#include <algorithm>

namespace inferscope::analyze::detail {
namespace {

// The step holding time t, or -1.
long step_at(const std::vector<StepWindow>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, const StepWindow& s) { return v < s.start; });
  if (it == steps.begin()) return -1;
  --it;
  return t < it->end ? long(it - steps.begin()) : -1;
}

// Per step: when its GPU work ended (its range's end when it queued none).
std::vector<int64_t> completions(const std::vector<StepWindow>& steps, std::vector<LaunchAt>& launches,
                                 const std::vector<GpuEnd>& gpu) {
  std::vector<std::pair<uint32_t, uint32_t>> step_of_corr;  // (corr, step)
  for (const LaunchAt& l : launches)
    if (long s = step_at(steps, l.at); s >= 0) step_of_corr.emplace_back(l.corr, uint32_t(s));
  std::sort(step_of_corr.begin(), step_of_corr.end());
  std::vector<int64_t> done(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) done[i] = steps[i].end;
  for (const GpuEnd& g : gpu) {
    auto it = std::lower_bound(step_of_corr.begin(), step_of_corr.end(), std::make_pair(g.corr, 0u));
    if (it != step_of_corr.end() && it->first == g.corr) done[it->second] = std::max(done[it->second], g.end);
  }
  return done;
}

}  // namespace

GpuPacing gpu_pacing(const std::vector<StepWindow>& steps, std::vector<LaunchAt> launches, const std::vector<GpuEnd>& gpu) {
  GpuPacing p;
  if (steps.empty()) return p;
  const std::vector<int64_t> done = completions(steps, launches, gpu);
  std::vector<double> lag, len;
  int64_t reached = steps.front().start;  // the latest completion so far
  for (size_t i = 0; i < steps.size(); ++i) {
    lag.push_back(double(done[i] - steps[i].end));
    len.push_back(double(steps[i].end - steps[i].start));
    // A step whose work completed before an earlier step's (another stream) adds nothing: the periods add up
    // to the span from the first start to the last completion.
    p.periods_ns.push_back(double(std::max<int64_t>(0, done[i] - reached)));
    reached = std::max(reached, done[i]);
  }
  p.median_lag_ns = median_of(lag);
  p.host_ahead = p.median_lag_ns > 0 && p.median_lag_ns > median_of(len);
  p.paced_ns = double(reached - steps.front().start) / double(steps.size());
  return p;
}

}  // namespace inferscope::analyze::detail
