// launch_bound: the GPU idled while the host was launching: inside launch calls, or in the short dispatch gaps
// between them (Python and framework overhead per op). Not "any gap between kernels": a long host gap is host
// work (cpu_bound), a gap after a sync is the sync's.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

std::optional<Finding> launch_bound(const RuleInput& in) {
  const double impact = in.t.idle_gaps / 1e6;
  if (!reported(in, impact) || in.t.kernels < in.th.launch_min_kernels) return std::nullopt;
  const double pct = impact / in.step_ms() * 100;
  const bool tiny = in.launchers.median_kernel_ns > 0 && in.launchers.median_kernel_ns < in.launchers.short_kernel_ns;
  Finding f = make_finding(in, Category::kLaunchBound,
                           fmt("%.0f kernels per step", in.t.kernels) + " with short gaps: the host cannot launch them fast enough",
                           impact, 0.45 + 0.25 * std::min(1.0, pct / 30) + (tiny ? 0.2 : 0));
  f.evidence.push_back(fmt("%.0f kernels per step, median kernel ", in.t.kernels) + fmt("%.1f us", in.launchers.median_kernel_ns / 1e3) +
                       "; the GPU sat idle while the host was launching " + fms(impact) + " per step (" + fpct(pct) + " of the step)");
  const double launch_ms = in.t.launch_api_ns / 1e6;
  f.evidence.push_back("host time in launch calls: " + fms(launch_ms) + " per step (" +
                       fmt("%.1f us per kernel", in.t.kernels > 0 ? launch_ms * 1e3 / in.t.kernels : 0) + ")");
  if (in.generation.detected)
    f.evidence.push_back(fmt("a generation loop: %.0f tokens per step, ", in.generation.tokens_per_step) +
                         fmt("%.0f kernels and ", in.generation.decode.kernels) +
                         fms(in.generation.decode.launch_ms) + " in launch calls per decode token");
  const bool named = !in.launchers.top_kernel_launcher.empty() && in.launchers.top_kernel_launcher != "-";
  if (named) f.evidence.push_back("most kernels launched from " + in.launchers.top_kernel_launcher);
  f.metrics["kernels_per_step"] = in.t.kernels;
  f.metrics["median_kernel_us"] = in.launchers.median_kernel_ns / 1e3;
  f.metrics["gpu_idle_launching_ms"] = impact;
  f.metrics["launch_api_ms"] = launch_ms;
  suggest_graph(f, in, graph_advice(in, "so its " + fmt("%.0f launches", in.t.kernels) + " become one"));
  // The example to fuse is a short kernel launched often, not the kernel with the most time (a large GEMM).
  const KernelRow* k0 = nullptr;
  for (const KernelRow& k : in.tables.kernels)
    if (k.mean_us * 1e3 < in.launchers.short_kernel_ns && !k.whole_graph && (!k0 || k.count > k0->count)) k0 = &k;
  suggest(f, "high", "Fuse the small kernels launched from " + (named ? in.launchers.top_kernel_launcher : std::string("the step")) +
                     (python_program(in) ? " (torch.compile, fused optimizers/ops, a custom kernel)"
                                         : " (one kernel doing the work of several, CUTLASS epilogues, a custom kernel)") +
                     (k0 ? ", e.g. '" + k0->name + "' (" + fmt("%.1f us", k0->mean_us) + " x " + std::to_string(k0->count) + ")" : std::string()) +
                     (in.chains.chains_per_step >= 1 ? fmt("; %.0f chains of elementwise kernels per step", in.chains.chains_per_step) +
                                                           " to fuse, most often " + in.chains.most_frequent
                                                     : std::string()));
  suggest(f, "medium", "Batch more work per launch (larger batch or sequence per step) so each kernel runs longer than its launch costs");
  suggest(f, in, "low", "Cut Python overhead between launches (no tensor creation or shape logic inside the loop)",
          {detail::kFactPython});
  return f;
}

}  // namespace inferscope::analyze::rules
