// warmup (informational): the leading steps left out of the verdict, with what they spent their time on. They
// never count in a per-step impact; the finding says what the first requests of a fresh process pay.
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

// "325.1 ms: 290.2 ms in CUDA calls, 20.0 ms GPU compute, 14.9 ms host"; without GPU work only the duration.
std::string spent(const RuleInput& in, const detail::StepMetrics& s) {
  if (!gpu_seen(in)) return fms(double(s.dur) / 1e6);
  const double api = double(s.dur) - s.host_out_api;
  return fms(double(s.dur) / 1e6) + ": " + fms(api / 1e6) + " in CUDA calls, " + fms(s.compute / 1e6) + " GPU compute, " +
         fms(s.host_out_api / 1e6) + " host outside CUDA calls";
}

// An informational finding saves nothing in the steady steps the verdict is about: none of its suggestions is high.
void add_suggestions(Finding& f, const RuleInput& in) {
  if (gpu_seen(in)) {
    suggest(f, "medium", "Warm up at start-up, before taking traffic: run a few dummy steps of every input shape (CUDA context, "
                       "cuBLAS/cuDNN handles, kernel loading and autotuning happen once)");
    // Autotuning is named by the framework the program runs: PyTorch's switches for Python, cuDNN's and cuBLASLt's
    // own for a native program.
    suggest(f, "medium", python_program(in)
                             ? "If first-request latency matters, load CUDA modules eagerly (CUDA_MODULE_LOADING=EAGER) and "
                               "keep shapes fixed so autotuning (cudnn.benchmark, torch.compile) does not run again"
                             : "If first-request latency matters, load CUDA modules eagerly (CUDA_MODULE_LOADING=EAGER) and "
                               "keep shapes fixed so algorithm searches (cuDNN's Find, cuBLASLt heuristics) are not repeated");
  } else {
    suggest(f, "medium", "Warm up at start-up, before taking traffic: run a few dummy steps (imports, lazy initialization, "
                       "caches and JIT compilation happen once)");
  }
  suggest(f, "low", "Pass --skip-steps N (or the setting skip_steps) to choose the warm-up yourself when detection is wrong");
}

}  // namespace

std::optional<Finding> warmup(const RuleInput& in) {
  const size_t n = in.selection.warmup;
  if (n == 0 || in.steps.size() <= n) return std::nullopt;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += double(in.steps[i].dur);
  const double steady = in.selection.steady_median_ns;
  Finding f = make_finding(in, Category::kWarmup,
                           "Warm-up: the first " + std::to_string(n) + " step(s) took " + fms(total / 1e6) + " (a steady step: " +
                               fms(steady / 1e6) + "); left out of every number above",
                           0, 0.9);
  f.informational = true;
  f.evidence.push_back(in.selection.reason);
  for (size_t i = 0; i < n && i < 5; ++i) f.evidence.push_back("step " + std::to_string(i) + " " + spent(in, in.steps[i]));
  if (in.first_call.in_steps && !in.first_call.name.empty())
    f.evidence.push_back("the step thread's first CUDA call, " + in.first_call.name + " (" + fms(in.first_call.ms) +
                         "), lies in a step: a first call creates the CUDA context, a one-time cost");
  f.metrics["warmup_steps"] = double(n);
  f.metrics["warmup_ms"] = total / 1e6;
  f.metrics["steady_step_ms"] = steady / 1e6;
  for (size_t i = 0; i < n && i < 3; ++i)
    f.examples.push_back({(double(in.steps[i].start) - in.trace_t0_ns) / 1e6,
                          (double(in.steps[i].start + in.steps[i].dur) - in.trace_t0_ns) / 1e6, "warm-up step " + std::to_string(i)});
  add_suggestions(f, in);
  return f;
}

}  // namespace inferscope::analyze::rules
