// The rule registry and the ranking of their findings.
#include "analyze/rules/rule.hpp"
#include "analyze/rules/rule_settings.hpp"

#include <iterator>

namespace inferscope::analyze::rules {

// Category follows analysis.hpp's kCategories, the names the JSON uses: one list, not two to keep in step.
static_assert(std::size(kCategories) == size_t(Category::kLoopBlocked) + 1);
const char* category_name(Category c) { return kCategories[size_t(c)]; }
const char* rule_name(const RuleEntry& e) { return e.name ? e.name : category_name(e.category); }

std::span<const RuleEntry> registry() {
  static constexpr RuleEntry entries[] = {
      {Category::kCpuContention, &cpu_contention}, {Category::kWait, &host_wait},
      {Category::kCpuBound, &cpu_bound},           {Category::kLaunchBound, &launch_bound},
      {Category::kSyncBound, &sync_bound},         {Category::kH2dBound, &h2d_bound},
      {Category::kD2hBound, &d2h_bound},           {Category::kMemoryAlloc, &memory_alloc},
      {Category::kGpuBound, &gpu_bound},           {Category::kCommunication, &communication},
      {Category::kPipelineBubble, &pipeline_bubble}, {Category::kGemmFallback, &gemm_fallback},
      {Category::kWarmup, &warmup},
      {Category::kSlowSteps, &slow_steps},
      {Category::kLoopBlocked, &loop_blocked},
      {Category::kWait, &batch_wait, "batch_wait"},
  };
  return entries;
}

double trace_origin_ns(const std::vector<detail::StepMetrics>& steps, const StepInstance& representative) {
  if (steps.empty()) return 0;
  const size_t rep = representative.index;
  if (rep < steps.size()) return double(steps[rep].start) - representative.start_ms * 1e6;
  return double(steps.front().start);
}

std::vector<Finding> run_all(const RuleInput& in) { return run_rules(in, RuleSettings{}).findings; }

}  // namespace inferscope::analyze::rules
