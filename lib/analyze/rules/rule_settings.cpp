// Built-in rules disabled or re-thresholded by name, custom rules beside them, one ranking (rule_settings.hpp).
#include "analyze/rules/rule_settings.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

namespace inferscope::analyze::rules {
namespace {

constexpr const char* kImpactRules =
    "cpu_contention, wait, cpu_bound, launch_bound, sync_bound, h2d_bound, d2h_bound, memory_alloc, communication, "
    "pipeline_bubble, gemm_fallback";

const ThresholdDef kThresholds[] = {
    {"min_impact_pct", "a cause under this share of the step (%) is not reported", &Thresholds::min_impact_pct, kImpactRules, 0, 100, "percent of the step"},
    {"uncertain_below", "a finding with a confidence under this is marked uncertain", &Thresholds::uncertain_below, "*"},
    {"gpu_bound_util", "GPU busy share of the step from which it is GPU-bound", &Thresholds::gpu_bound_util, "gpu_bound"},
    {"gpu_bound_compute", "... with kernels at least this share of the step", &Thresholds::gpu_bound_compute, "gpu_bound"},
    {"saturated_share", "achieved / peak PCIe bandwidth from which the link is the limit", &Thresholds::saturated_share,
     "h2d_bound, d2h_bound"},
    {"launch_min_kernels", "kernels per step under which launch overhead is not the story", &Thresholds::launch_min_kernels,
     "launch_bound", 0, 1e9, "kernels per step"},
    {"sync_min_per_step", "synchronizing calls per step from which sync_bound is considered", &Thresholds::sync_min_per_step,
     "sync_bound", 0, 1e9, "calls per step"},
    {"graph_launch_ns", "host cost of one CUDA graph launch in the replay of a graph capture (ns)", &Thresholds::graph_launch_ns,
     "cpu_bound, launch_bound", 0, 1e9, "ns"},
    {"max_suggested_workers", "worker processes cpu_bound suggests at most", &Thresholds::max_suggested_workers, "cpu_bound", 1, 1024, "processes"},
    {"between_launches_share", "share of cpu_bound's host work between launches from which a CUDA graph is its first fix",
     &Thresholds::between_launches_share, "cpu_bound"},
    {"host_pressure_faults", "page faults per step that mean host memory pressure", &Thresholds::host_pressure_faults,
     "memory_alloc", 0, 1e12, "page faults per step"},
    {"host_pressure_rss", "RSS growth over the steps (bytes) that means host memory pressure", &Thresholds::host_pressure_rss,
     "memory_alloc", 0, 1e15, "bytes"},
    {"quota_share_of_runqueue", "cgroup throttled time / the step thread's run-queue wait from which the CPU quota is the "
     "cause", &Thresholds::quota_share_of_runqueue, "cpu_contention"},
};

void apply(Thresholds& th, const ThresholdDef& def, double value) {
  std::visit([&](auto member) { th.*member = static_cast<std::remove_reference_t<decltype(th.*member)>>(value); }, def.member);
}

// Causes before descriptions of the run (informational); a cause whose cost was estimated before one whose cost was
// not (a rule file's rule without an impact); then by cost.
bool comes_first(const Finding& x, const Finding& y) {
  if (x.informational != y.informational) return !x.informational;
  const bool xe = x.impact_estimated && x.impact_ms > 0, ye = y.impact_estimated && y.impact_ms > 0;
  if (xe != ye) return xe;
  // A share of what each is per (the step, or a request): the same order as impact_ms among the step's findings.
  if (x.per != y.per) return x.impact_pct > y.impact_pct;
  return x.impact_ms > y.impact_ms;
}

}  // namespace

std::span<const ThresholdDef> threshold_table() { return kThresholds; }

const ThresholdDef* find_threshold(std::string_view name) {
  for (const ThresholdDef& d : kThresholds)
    if (name == d.name) return &d;
  return nullptr;
}

bool reads_threshold(const ThresholdDef& def, std::string_view rule) {
  const std::string_view list = def.read_by;
  if (list == "*") return true;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(", ", at), list.size());
    if (list.substr(at, end - at) == rule) return true;
    at = end + 2;
  }
  return false;
}

std::vector<std::string> builtin_rule_names() {
  std::vector<std::string> names;
  for (const RuleEntry& e : registry()) names.emplace_back(rule_name(e));
  return names;
}

Thresholds thresholds_for(const Thresholds& base, const RuleSettings& settings, const std::string& rule) {
  Thresholds th = base;
  for (const std::string& who : {std::string(), rule}) {
    auto it = settings.thresholds.find(who);
    if (it == settings.thresholds.end()) continue;
    for (const auto& [name, value] : it->second)
      if (const ThresholdDef* def = find_threshold(name); def && reads_threshold(*def, rule)) apply(th, *def, value);
  }
  return th;
}

RulesResult run_rules(const RuleInput& in, const RuleSettings& settings) {
  RulesResult out;
  if (in.steps.empty() || in.t.steps == 0 || in.t.dur <= 0) return out;
  for (const RuleEntry& e : registry()) {
    const std::string name = rule_name(e);
    if (settings.disabled.count(name)) continue;
    RuleInput own = in;
    own.th = thresholds_for(in.th, settings, name);
    if (auto f = e.rule(own)) {
      f->rule = name;
      keep_fitting_advice(*f, own);
      out.findings.push_back(std::move(*f));
    }
  }
  // A rule file's own rules read the thresholds every rule reads (uncertain_below), set for all of them.
  RuleInput custom_input = in;
  custom_input.th = thresholds_for(in.th, settings, "custom");
  for (const auto& rule : settings.custom)
    if (auto f = rule->evaluate(custom_input, out.warnings)) out.findings.push_back(std::move(*f));
  std::stable_sort(out.findings.begin(), out.findings.end(), comes_first);
  // A custom rule without an impact sorts after every finding with one; alone, it is not the primary cause either.
  if (!out.findings.empty() && !out.findings.front().informational && out.findings.front().impact_ms > 0)
    out.findings.front().primary = true;
  return out;
}

std::string thresholds_markdown() {
  std::string out = "Built-in rules, by the name a rule file disables or re-thresholds them with: ";
  const std::vector<std::string> names = builtin_rule_names();
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", `" : "`") + names[i] + "`";
  out += ".\n\n| threshold | default | allowed | read by | meaning |\n| --- | --- | --- | --- | --- |\n";
  const Thresholds defaults;
  for (const ThresholdDef& d : kThresholds) {
    char value[64];
    std::visit([&](auto member) { std::snprintf(value, sizeof(value), "%g", double(defaults.*member)); }, d.member);
    const std::string read_by = std::string_view(d.read_by) == "*" ? "every rule" : d.read_by;
    char allowed[128];
    std::snprintf(allowed, sizeof(allowed), "%g to %g (%s)", d.min, d.max, d.unit);
    out += "| `" + std::string(d.name) + "` | " + value + " | " + allowed + " | " + read_by + " | " + d.meaning + " |\n";
  }
  return out;
}

}  // namespace inferscope::analyze::rules
