// The rule registry and the ranking of their findings.
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <iterator>

namespace inferscope::analyze::rules {

// Category follows analysis.hpp's kCategories, the names the JSON uses: one list, not two to keep in step.
static_assert(std::size(kCategories) == size_t(Category::kSlowSteps) + 1);
const char* category_name(Category c) { return kCategories[size_t(c)]; }

std::span<const RuleEntry> registry() {
  static constexpr RuleEntry entries[] = {
      {Category::kCpuContention, &cpu_contention}, {Category::kWait, &host_wait},
      {Category::kCpuBound, &cpu_bound},           {Category::kLaunchBound, &launch_bound},
      {Category::kSyncBound, &sync_bound},         {Category::kH2dBound, &h2d_bound},
      {Category::kD2hBound, &d2h_bound},           {Category::kMemoryAlloc, &memory_alloc},
      {Category::kGpuBound, &gpu_bound},           {Category::kWarmup, &warmup},
      {Category::kSlowSteps, &slow_steps},
  };
  return entries;
}

namespace {
// The trace's time origin in ns: the representative step's start minus its offset in the Analysis.
double trace_origin_ns(const Analysis& a, const detail::Model& m) {
  if (m.steps.empty()) return 0;
  const size_t rep = a.representative.step.index;
  if (rep < m.steps.size()) return double(m.steps[rep].start) - a.representative.step.start_ms * 1e6;
  return double(m.steps.front().start);
}
}  // namespace

std::vector<Finding> run_all(const Analysis& a, const detail::Model& m, const detail::WaitAttribution& waits,
                             const Thresholds& th) {
  std::vector<Finding> out;
  if (m.steps.empty() || m.typical.steps == 0 || m.typical.dur <= 0) return out;
  const RuleInput in{a, m, m.typical, waits, th, m.typical.dur / 1e6, trace_origin_ns(a, m)};
  for (const RuleEntry& e : registry())
    if (auto f = e.rule(in)) out.push_back(std::move(*f));
  std::stable_sort(out.begin(), out.end(), [](const Finding& x, const Finding& y) {
    if (x.informational != y.informational) return !x.informational;
    return x.impact_ms > y.impact_ms;
  });
  if (!out.empty() && !out.front().informational) out.front().primary = true;
  return out;
}

}  // namespace inferscope::analyze::rules
