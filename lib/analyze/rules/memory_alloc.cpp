// memory_alloc: device allocation and release on the critical path (the GPU idles inside the calls and while
// the host refills it after a cudaFree, which synchronizes the device), or host memory pressure.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

void add_evidence(Finding& f, const RuleInput& in) {
  if (in.t.allocs > 0)
    f.evidence.push_back(fmt("%.1f allocation/free calls per step", in.t.allocs) + " (mostly " + in.launchers.top_alloc_api + " from " +
                         in.launchers.top_alloc_caller + "), " + fms(in.t.alloc_api_ns / 1e6) + " of host time per step; the GPU was "
                         "idle " + fms(in.t.idle_memory / 1e6) + " per step in them and refilling after them (cudaFree "
                         "synchronizes the device)");
  for (const auto& r : in.tables.allocations)
    f.evidence.push_back(r.op + " " + r.memory + ": " + std::to_string(r.count) + " events, " + fmb(double(r.bytes)) + ", " +
                         fms(r.api_ms) + " in API calls over the trace");
  if (std::string e = callers_evidence(in.tables.allocations); !e.empty()) f.evidence.push_back(e);
  if (in.counters.rss_growth_bytes > 0) f.evidence.push_back("process RSS grew by " + fmb(in.counters.rss_growth_bytes) + " over the steps");
  if (in.counters.faults_per_step > 0) f.evidence.push_back(fmt("%.0f page faults per step", in.counters.faults_per_step));
  f.metrics["alloc_calls_per_step"] = in.t.allocs;
  f.metrics["alloc_api_ms"] = in.t.alloc_api_ns / 1e6;
  f.metrics["gpu_idle_in_memory_ms"] = in.t.idle_memory / 1e6;
  f.metrics["rss_growth_bytes"] = in.counters.rss_growth_bytes;
}

}  // namespace

std::optional<Finding> memory_alloc(const RuleInput& in) {
  const double impact = in.t.idle_memory / 1e6, pct = impact / in.step_ms() * 100;
  const bool host_pressure = in.counters.faults_per_step > in.th.host_pressure_faults || in.counters.rss_growth_bytes > in.th.host_pressure_rss;
  const bool device = reported(in, impact);
  if (!device && !host_pressure) return std::nullopt;
  Finding f = make_finding(in, Category::kMemoryAlloc,
                           device ? fmt("%.0f device allocations/frees per step cost ", in.t.allocs) + fms(impact)
                                  : std::string("Host memory pressure during the steps"),
                           impact, device ? 0.5 + 0.4 * std::min(1.0, pct / 20) : 0.35);
  add_evidence(f, in);
  // Host memory pressure with no device cost in the step at all: evidence to read, not a cause with a cost to fix.
  if (!device && impact <= 0) {
    f.informational = true;
    f.evidence.push_back("it costs the typical step no measured time: described, not ranked as a cause");
    return f;
  }
  // The first CUDA call creates the context (hundreds of ms): a one-time cost. It is inside the analysed steps
  // only when the warm-up could not be left out (the whole trace is one step, or --skip-steps 0).
  const bool init = in.first_call.in_steps && in.selection.warmup == 0 && in.first_call.ms >= 20 &&
                    in.first_call.ms >= 0.5 * impact * double(in.t.steps);
  if (init) {
    f.evidence.push_back("the step thread's first CUDA call, " + in.first_call.name + " (" + fms(in.first_call.ms) +
                         "), lies inside the analysed steps: most of it is creating the CUDA context, a one-time cost");
    f.confidence = std::max(0.0, f.confidence - 0.3);
    f.uncertain = f.confidence < in.th.uncertain_below;
  }
  add_examples(f, in, &detail::StepMetrics::worst_alloc, "host in " + in.launchers.top_alloc_api);
  replay::Change cached;
  cached.remove_allocs = true;
  const std::string who = in.launchers.top_alloc_caller.empty() || in.launchers.top_alloc_caller == "-" ? "the step" : in.launchers.top_alloc_caller;
  const char* model = "allocations and frees served from a cache (no call, no synchronization)";
  const bool py = python_program(in);
  if (py)
    suggest_replayed(f, in, "high", "Keep PyTorch's caching allocator on: do not call torch.cuda.empty_cache() in the step "
                     "and do not set PYTORCH_NO_CUDA_MEMORY_CACHING=1", cached, model, {detail::kFactPython});
  suggest_replayed(f, in, "high", "Allocate once and reuse: preallocate the buffers " + who + " creates each step (output "
                   "tensors, workspaces) outside the loop and write into them" + std::string(py ? " (out=...)" : ""),
                   cached, model, {});
  suggest(f, in, "medium", py ? "Use stream-ordered allocation (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) instead of "
                                "cudaMalloc/cudaFree, which synchronize the device"
                              : "Use stream-ordered allocation (cudaMallocAsync / cudaFreeAsync, or a memory pool) instead "
                                "of cudaMalloc/cudaFree, which synchronize the device", {});
  suggest(f, in, "low", "Keep shapes static across steps (pad to buckets) so cached blocks fit and nothing is reallocated", {});
  if (init)
    suggest(f, in, "high", std::string("Warm up before measuring: initialise CUDA (") +
                           (py ? "torch.cuda.init() or a cudaFree(0)" : "a cudaFree(0)") + ") and run a few steps "
                           "outside the measured region, and mark the steps with " +
                           (py ? "inferscope_py.scope(\"step\")" : "ISCOPE_RANGE(\"step\")"), {});
  return f;
}

}  // namespace inferscope::analyze::rules
