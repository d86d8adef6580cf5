// Stage "run findings": lib/analyze/run/run_findings.hpp.
#include "analyze/run/run_findings.hpp"

#include "analyze/run/rank_types.hpp"

#include <algorithm>

namespace inferscope::analyze {

using run_text::fmt;
using run_text::ms2;
using run_text::pct0;
using run_text::rank_name;

double overlap_saving(double compute_free, double exposed, double sm_share) {
  if (sm_share < 0) return std::max(0.0, std::min(compute_free, exposed));
  return std::max(0.0, std::min(compute_free, exposed * (1 - std::clamp(sm_share, 0.0, 1.0))));
}

namespace {

Suggestion suggestion(std::string action, double saving_ms, double step_ms, std::string model) {
  Suggestion s;
  s.action = std::move(action);
  s.estimated = !model.empty();
  s.impact_ms = s.estimated ? saving_ms : 0;
  s.model = std::move(model);
  s.priority = s.estimated && saving_ms >= kHighShare * step_ms ? "high" : s.estimated && saving_ms > 0 ? "medium" : "low";
  return s;
}

void finish(Finding& f, double step_ms) {
  f.impact_pct = step_ms > 0 ? f.impact_ms / step_ms * 100 : 0;
  std::stable_sort(f.suggestions.begin(), f.suggestions.end(), [](const Suggestion& a, const Suggestion& b) {
    auto rank = [](const std::string& p) { return p == "high" ? 0 : p == "medium" ? 1 : 2; };
    return rank(a.priority) < rank(b.priority);  // within a priority, the order written: the surest first
  });
}

}  // namespace

Finding collective_wait(const RunAnalysis& run, const RankRow& straggler, double late_share, const Excess& did,
                        const std::string& straggler_primary) {
  Finding f;
  f.category = "collective_wait";
  std::string waiters;
  double max_wait = 0;
  for (const auto& r : run.ranks)
    if (r.rank != straggler.rank) {
      waiters += (waiters.empty() ? "" : ", ") + rank_name(r.rank);
      max_wait = std::max(max_wait, r.wait_ms);
    }
  f.impact_ms = std::min(straggler.late_ms, run.step_ms);
  f.title = "The other ranks wait for " + rank_name(straggler.rank) + " in NCCL collectives: " + waiters + " " +
            (run.ranks.size() > 2 ? "wait up to " : "waits ") + ms2(max_wait) + " ms per step";
  f.confidence = 0.5 + 0.5 * late_share;
  f.evidence.push_back(rank_name(straggler.rank) + " arrived last at the collectives that waited, and delayed them by " +
                       ms2(straggler.late_ms) + " ms per step (" + pct0(late_share * 100) +
                       " % of all the delay of the run's collectives)");
  for (const auto& r : run.ranks)
    f.evidence.push_back(rank_name(r.rank) + ": step " + ms2(r.step_ms) + " ms, GPU compute " + ms2(r.compute_ms) +
                         " ms, in collectives " + ms2(r.comm_ms) + " ms (" + ms2(r.wait_ms) + " ms waiting for a later rank, " +
                         ms2(r.transfer_ms) + " ms moving data)");
  if (!did.kind.empty())
    f.evidence.push_back("What " + rank_name(straggler.rank) + " did instead: its " + did.what() + " took " + ms2(did.ms) +
                         " ms per step more than on any other rank");
  if (!straggler_primary.empty())
    f.evidence.push_back(rank_name(straggler.rank) + "'s own report: primary " + straggler_primary);
  f.metrics = {{"late_ms", straggler.late_ms}, {"late_share", late_share}, {"max_wait_ms", max_wait},
               {"straggler_rank", straggler.rank}, {"excess_ms", did.ms}};
  const std::string model = "ranks: " + rank_name(straggler.rank) + " arrives with the others";
  if (!did.kind.empty() && did.ms >= 0.5 * straggler.late_ms) {
    const std::string& name = did.name;
    if (did.kind == "kernel")
      f.suggestions.push_back(suggestion("Give " + rank_name(straggler.rank) + " the same GPU work as the others: its " +
                                             did.what() + " runs " + ms2(did.ms) + " ms per step longer; split that work evenly across the ranks",
                                         straggler.late_ms, run.step_ms, model));
    else
      f.suggestions.push_back(suggestion("Take " + name + " off " + rank_name(straggler.rank) +
                                             "'s step (vectorise it, or run it in a worker before the step): the other ranks wait "
                                             "in NCCL while it runs; sharing it evenly across the ranks saves less",
                                         straggler.late_ms, run.step_ms, model));
  } else {
    f.suggestions.push_back(suggestion("Find what makes " + rank_name(straggler.rank) + " late to its collectives (" +
                                           (straggler_primary.empty() ? std::string("its own report") : "its report says " + straggler_primary) +
                                           ") and remove it: the other ranks wait for it",
                                       straggler.late_ms, run.step_ms, model));
  }
  f.suggestions.push_back(suggestion("Do independent work while waiting: launch the collective with async_op=True as soon as "
                                     "its input is ready and wait() only where its result is used",
                                     0, run.step_ms, ""));
  f.suggestions.push_back(suggestion("Read " + rank_name(straggler.rank) + "'s own report (" + straggler.path +
                                         ") for the cause of its extra time",
                                     0, run.step_ms, ""));
  finish(f, run.step_ms);
  return f;
}

Finding communication(const RunAnalysis& run, const RankRow& typical, double exposed_ms, bool f32, double per_step,
                      double sm_share, const CollectiveRuns& runs, const GatherSelect& select) {
  Finding f;
  f.category = "communication";
  f.impact_ms = std::max({exposed_ms, runs.saving_ms, select.saving_ms});
  const double overlap_share = typical.comm_ms > 0 ? typical.overlap_ms / typical.comm_ms : 0;
  if (select.saving_ms > std::max(exposed_ms, runs.saving_ms))
    f.title = "Communication: " + fmt("%.1f", select.gathers) + " AllGather(s) per step gather a whole tensor only for an "
              "argmax or top-k, " + ms2(select.transfer_ms) + " ms per step moving it";
  else if (runs.saving_ms > exposed_ms)
    f.title = "Communication: " + fmt("%.0f", runs.collectives) + " collectives per step issued back to back take " +
              ms2(runs.span_ms) + " ms per step, " + ms2(runs.transfer_ms) + " ms of it moving data";
  else
    f.title = "Communication: " + ms2(exposed_ms) + " ms per step moving data in NCCL collectives with no compute beside it";
  f.confidence = run.steps_matched >= 5 ? 0.85 : 0.6;
  f.evidence.push_back("Per step on " + rank_name(typical.rank) + ": " + ms2(typical.comm_ms) + " ms in collectives, of which " +
                       ms2(typical.transfer_ms) + " ms moving data and " + ms2(typical.wait_ms) +
                       " ms waiting for another rank; " + pct0(overlap_share * 100) + " % of it overlaps compute");
  f.evidence.push_back("GPU compute per step " + ms2(typical.compute_ms) + " ms; " + fmt("%.1f", per_step) +
                       " collectives per step");
  for (const auto& c : run.collectives)
    f.evidence.push_back(c.op + ": " + fmt("%.1f", c.per_step) + " per step, " + ms2(c.transfer_ms) + " ms moving data");
  if (runs.runs > 0)
    f.evidence.push_back(fmt("%.0f", runs.collectives) + " collectives per step run back to back in " + fmt("%.1f", runs.runs) +
                         " run(s) (less GPU compute between two of them than the later one takes): " + ms2(runs.span_ms) +
                         " ms per step from the first start to the last end, of which " + ms2(runs.transfer_ms) +
                         " ms moving data, " + ms2(runs.wait_ms) + " ms waiting for the other ranks and " +
                         ms2(runs.compute_ms) + " ms of compute; the rest is each collective's launch and the gaps between them");
  if (select.gathers > 0)
    f.evidence.push_back(fmt("%.1f", select.gathers) + " AllGather(s) per step are read only by a selection (an argmax, "
                         "top-k, max or sort kernel after them): " + ms2(select.transfer_ms) + " ms per step gathering, " +
                         ms2(select.between_ms) + " ms of compute on the gathered tensor before the selection");
  f.metrics = {{"exposed_ms", exposed_ms}, {"select_after_gather_saving_ms", select.saving_ms}, {"overlap_share", overlap_share}, {"compute_ms", typical.compute_ms},
               {"collectives_per_step", per_step}, {"back_to_back_collectives", runs.collectives},
               {"coalescing_saving_ms", runs.saving_ms}};
  const double free_compute = std::max(0.0, typical.compute_ms - typical.overlap_ms);
  const double overlap = overlap_saving(free_compute, exposed_ms, sm_share);
  const std::string overlap_model =
      sm_share < 0 ? "ranks: collectives beside the compute not yet overlapped, NCCL's SM share unknown"
                   : "ranks: collectives beside the compute not yet overlapped, which runs on the " +
                         pct0((1 - std::clamp(sm_share, 0.0, 1.0)) * 100) + " % of SMs NCCL leaves it while it runs";
  // Collectives back to back with no matrix multiply between them (collective_runs.hpp) are unlikely to feed one
  // another (a chain computes each one's input between them), so coalescing them comes first; the suggestion
  // still says it needs them independent. Then the bytes: their saving
  // holds whatever the code does; the overlap's needs compute that does not wait for the collective's result,
  // which the trace cannot show.
  if (worth_coalescing(runs))
    f.suggestions.push_back(suggestion(
        "Coalesce the " + fmt("%.0f", runs.collectives) + " collectives per step that run back to back into fewer, larger "
        "ones: one collective over a flattened buffer (torch.cat, or one preallocated buffer the tensors are views of), "
        "split after it, as DDP's buckets do; each small collective pays its launch, NCCL's handshake and a wait for "
        "the slowest rank (no matrix multiply runs between them: their inputs look independent of one another)",
        runs.saving_ms, run.step_ms,
        "ranks: one collective per run of back-to-back collectives, moving the same bytes (at least this much: a larger "
        "collective also moves them faster)"));
  if (select.saving_ms > 0)
    f.suggestions.push_back(suggestion(
        "Select before gathering: each rank takes the argmax / top-k (values and indices) of its own shard and the ranks "
        "all_gather only those few bytes, then keep the best; today the full tensor is gathered (" +
            fmt("%.1f", select.gathers) + " AllGather(s) per step) only to be selected from",
        select.saving_ms, run.step_ms,
        "ranks: the gather moves the selected values only, and the copies of the gathered tensor before the selection go"));
  if (f32)
    f.suggestions.push_back(suggestion("Send half the bytes: reduce in bfloat16 instead of float32 (cast before the collective, "
                                       "or a bf16 compression hook)",
                                       exposed_ms / 2, run.step_ms, "ranks: transfer time proportional to the bytes"));
  else if (select.saving_ms <= 0)
    f.suggestions.push_back(suggestion("Send fewer bytes: reduce only what the next layer needs, in the narrowest dtype it accepts",
                                       0, run.step_ms, ""));
  f.suggestions.push_back(suggestion(
      "Overlap the collectives with compute that does not need their result (another micro-batch, an independent "
      "branch): launch all_reduce with async_op=True (or on a side stream) as soon as its tensor is ready and wait() "
      "only where the result is used; today " + pct0(overlap_share * 100) + " % of the collective time overlaps compute",
      overlap, run.step_ms, overlap_model));
  if (!worth_coalescing(runs))
    f.suggestions.push_back(suggestion(per_step >= 4 ? "Bucket the per-layer collectives into fewer, larger ones (one collective "
                                                       "over a flattened buffer)"
                                                     : "Check the interconnect: NCCL_DEBUG=INFO shows whether the ranks use "
                                                       "NVLink or fall back to PCIe or sockets",
                                       0, run.step_ms, ""));
  finish(f, run.step_ms);
  return f;
}


}  // namespace inferscope::analyze
