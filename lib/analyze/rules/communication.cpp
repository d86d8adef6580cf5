// communication: a rank of a multi-GPU run spends part of its step in NCCL collectives with no compute beside
// them. One rank's dump cannot tell waiting for a slower rank from moving data, so this finding estimates no
// saving: it says how much, which collectives, and how to get the split (the run across ranks, ranks.hpp, which
// names the rank the others wait for and estimates the savings).
#include "analyze/run/rank_types.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

std::optional<Finding> communication(const RuleInput& in) {
  const Breakdown& b = in.breakdown;
  if (b.gpu_comm_ms <= 0 || b.gpu_comm_ms / in.step_ms() * 100 < in.th.min_impact_pct) return std::nullopt;
  Finding f = make_finding(in, Category::kCommunication,
                           "NCCL collectives take " + fms(b.gpu_comm_ms) + " of the step with no compute beside them",
                           b.gpu_comm_ms, 0.7);
  f.evidence.push_back("Collectives alone on the GPU " + fms(b.gpu_comm_ms) + ", GPU compute " + fms(b.gpu_compute_ms) +
                       " of the " + fms(in.step_ms()) + " step");
  int shown = 0;
  for (const auto& k : in.tables.kernels)
    if (is_collective_kernel(k.name) && shown++ < 3)
      f.evidence.push_back("kernel '" + k.name + "': " + fmt("%.1f us mean", k.mean_us) + " x " + std::to_string(k.count) +
                           ", launched by " + k.launched_by);
  f.metrics["gpu_comm_ms"] = b.gpu_comm_ms;
  if (in.with_its_run) {  // its run is analysed beside it: the report's section on the run holds the split
    f.evidence.push_back("This dump is one rank: the section on the run across ranks splits its collectives' time into "
                         "waiting for a slower rank and moving data");
  } else {
    f.evidence.push_back("This dump is one rank: part of a collective's time may be waiting for another rank to arrive, "
                         "which only the ranks together show");
    suggest(f, "medium", "Analyse the ranks together to split waiting for a slower rank from moving data: iscope-analyze "
                         "the launcher's dump (recorded with iscope-run --follow-children), or every rank's dump in one "
                         "command (iscope-analyze rank0.iscope rank1.iscope)");
  }
  suggest(f, "medium", "Overlap the collectives with compute that does not need their result: all_reduce(async_op=True) "
                       "or a side stream, and wait() only where the result is used");
  suggest(f, "low", "Send fewer bytes: reduce in bf16 instead of fp32, or only what the next layer needs");
  return f;
}

}  // namespace inferscope::analyze::rules
