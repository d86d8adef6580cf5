// slow_steps (informational): steady steps well above the median (step_policy.hpp's bound), each named with
// the part of the step that grew the most against the typical step.
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace inferscope::analyze::rules {
namespace {

// The part of a step that exceeds the typical step the most: (name, extra ns).
std::pair<const char*, double> what_grew(const detail::StepMetrics& s, const detail::TypicalStep& t) {
  // The parts of one step that add up to it (the host's share split by its state), so none counts twice.
  const std::array<std::pair<const char*, double>, 9> parts = {{
      {"GPU compute", s.compute - t.compute},
      {"host-to-device copies", s.h2d - t.h2d},
      {"device-to-host copies", s.d2h - t.d2h},
      {"host work outside CUDA calls", s.host_running - t.host_running},
      {"contention (run queue or GIL)", s.host_contention - t.host_contention},
      {"waiting (sleep, I/O, a queue)", s.host_wait - t.host_wait},
      {"launching (GPU idle in launch calls and dispatch)", s.idle_gaps - t.idle_gaps},
      {"synchronizations", s.idle_sync - t.idle_sync},
      {"allocations/frees", s.idle_memory - t.idle_memory},
  }};
  auto best = parts[0];
  for (const auto& p : parts)
    if (p.second > best.second) best = p;
  return best;
}

}  // namespace

std::optional<Finding> slow_steps(const RuleInput& in) {
  const auto& out = in.selection.outliers;
  if (out.empty()) return std::nullopt;
  Finding f = make_finding(in, Category::kSlowSteps,
                           std::to_string(out.size()) + " steady step(s) slower than " + fms(in.selection.outlier_bound_ns / 1e6) +
                               " (the median is " + fms(in.selection.steady_median_ns / 1e6) + ")",
                           0, 0.8);
  f.informational = true;
  std::vector<size_t> worst(out.begin(), out.end());
  std::stable_sort(worst.begin(), worst.end(), [&](size_t x, size_t y) { return in.steps[x].dur > in.steps[y].dur; });
  // In a sampled run a step is also named by its number in the run (the windows hold a few of many).
  auto label = [&](size_t i) {
    const auto& n = in.sampling.run_step;
    std::string l = "step " + std::to_string(i);
    if (i < n.size() && n[i] >= 0) l += " (step " + std::to_string(n[i]) + " of the run)";
    return l;
  };
  for (size_t k = 0; k < worst.size() && k < 3; ++k) {
    const auto& s = in.steps[worst[k]];
    auto [part, extra] = what_grew(s, in.t);
    f.evidence.push_back(label(worst[k]) + ": " + fms(double(s.dur) / 1e6) + "; most of the difference: " +
                         part + " (+" + fms(std::max(0.0, extra) / 1e6) + " against the typical step)");
    f.examples.push_back({(double(s.start) - in.trace_t0_ns) / 1e6, (double(s.start + s.dur) - in.trace_t0_ns) / 1e6,
                          "slow step " + std::to_string(worst[k])});
  }
  f.metrics["slow_steps"] = double(out.size());
  f.metrics["outlier_bound_ms"] = in.selection.outlier_bound_ns / 1e6;
  // Informational: it saves nothing in the typical step, so no suggestion of it is high.
  suggest(f, "medium", "Open the slowest step in the timeline (--perfetto) and compare it with a typical one");
  suggest(f, "medium", "Check for periodic work inside the loop: garbage collection (gc.freeze() after start-up), logging, "
                       "checkpointing, new input shapes that trigger recompilation or autotuning");
  suggest(f, "low", gpu_seen(in) ? "Check the machine: other processes, CPU frequency, GPU clocks and throttling (the system "
                                   "counters in the dump)"
                                 : "Check the machine: other processes and CPU frequency (the system counters in the dump)");
  return f;
}

}  // namespace inferscope::analyze::rules
