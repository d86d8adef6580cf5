// sync_bound: host-device synchronizations drain the GPU: it idles while the host is in the synchronizing call
// and while it refills the queue afterwards (launches and dispatch gaps until the host does real work).
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

/// Synchronizations per step from which reading values one at a time is the pattern to name (an .item() per
/// sequence or per element): eight reads are already seven waits more than one transfer would make.
constexpr double kPerItemSyncs = 8;

std::optional<Finding> sync_bound(const RuleInput& in) {
  const double impact = in.t.idle_sync / 1e6;
  const double syncs = in.t.syncs;
  if (!reported(in, impact) || syncs < in.th.sync_min_per_step) return std::nullopt;
  const double pct = impact / in.step_ms() * 100;
  Finding f = make_finding(in, Category::kSyncBound, fmt("%.0f host-device synchronizations per step leave the GPU idle", syncs),
                           impact, 0.45 + 0.35 * std::min(1.0, pct / 30) + (syncs >= 2 ? 0.15 : 0));
  f.evidence.push_back(fmt("%.1f synchronizing calls per step", syncs) + " (mostly " + in.launchers.top_sync_api + " from " +
                       in.launchers.top_sync_caller + ")");
  f.evidence.push_back("the GPU ran out of work at them and waited for the host to refill it: " + fms(impact) +
                       " per step (" + fpct(pct) + ")");
  f.evidence.push_back("host blocked in synchronizing calls: " + fms(in.t.sync_api_ns / 1e6) + " per step");
  if (std::string e = callers_evidence(in.tables.syncs); !e.empty()) f.evidence.push_back(e);
  f.metrics["syncs_per_step"] = syncs;
  f.metrics["gpu_idle_after_sync_ms"] = impact;
  add_examples(f, in, &detail::StepMetrics::worst_sync_gap, "GPU idle around a synchronization");
  replay::Change no_syncs;
  no_syncs.remove_syncs = true;
  const char* replayed = "every synchronization but the step's last no longer waits";
  const bool py = python_program(in);
  const std::string who = in.launchers.top_sync_caller.empty() || in.launchers.top_sync_caller == "-" ? "the step" : in.launchers.top_sync_caller;
  // Many reads per step, one value each (an .item() per sequence, per token): gathered, they are one transfer. The
  // replay merges them: each read's calls cost nothing and wait for nothing, but the last, which reads everything.
  replay::Change one_read;
  one_read.merge_reads = true;
  if (syncs >= kPerItemSyncs)
    suggest_replayed(f, in, "high", fmt("Read the values with one transfer per step instead of %.0f: ", syncs) + who +
                     (py ? " reads them one at a time (.item() per element or per sequence), each a wait for the GPU; "
                           "gather them into one tensor on the GPU and read it once (.tolist() or one .cpu()), or decide "
                           "on the GPU (torch.where, masks) and read only the result"
                         : " reads them one at a time, each a synchronous copy; copy them all with one cudaMemcpyAsync "
                           "into a pinned buffer and wait once (an event or one stream synchronization)"),
                     one_read, "the step's reads made one: the calls of every read but the last (its copy and its "
                     "synchronization) gone, the last one waiting for everything", {});
  // The loop's own reads between the model calls (the stop check, streaming a token), not blocking calls inside the
  // model's forward (routing, cache bookkeeping), which the loop cannot move.
  if (in.generation.detected && in.generation.decode.syncs >= 1 &&
      in.generation.decode.call_syncs * 2 < in.generation.decode.syncs) {
    // A generation loop that reads every token back: the stopping check and the streaming are what block.
    const GenerationLoop& g = in.generation;
    f.evidence.push_back(fmt("%.1f blocking calls per generated token", g.decode.syncs) +
                         fmt(" (%.3f ms blocked per token)", g.decode.sync_ms));
    suggest_replayed(f, in, "high", "Stop reading every token back: keep the stopping check on the GPU (finished |= "
                     "next_token == eos) and read it every 16 tokens, and hand tokens to the client in batches (one "
                     ".tolist() per batch) instead of .item() per token", no_syncs, replayed, {detail::kFactPython});
  } else if (py) {
    suggest_replayed(f, in, "high", "Remove the synchronizations in " + who + ": .item(), .cpu(), .tolist(), print(tensor) and "
                     "torch.cuda.synchronize() each wait for the GPU; keep values on the GPU until the step ends",
                     no_syncs, replayed, {detail::kFactPython});
  } else {
    suggest_replayed(f, in, "high", "Remove the synchronizations in " + who + ": cudaDeviceSynchronize, "
                     "cudaStreamSynchronize and synchronous cudaMemcpy each wait for the GPU; queue the work and wait once, "
                     "where the step needs its result", no_syncs, replayed, {detail::kFactCpp});
  }
  if (py)
    suggest_replayed(f, in, "high", "If a value is needed on the host, copy it with .to('cpu', non_blocking=True) into "
                     "pinned memory and read it one step later (or after a CUDA event), so the GPU keeps running",
                     no_syncs, replayed, {detail::kFactPython});
  else
    suggest_replayed(f, in, "high", "If a value is needed on the host, cudaMemcpyAsync it into pinned memory, record an "
                     "event and read it one step later (cudaEventQuery / cudaEventSynchronize), so the GPU keeps running",
                     no_syncs, replayed, {detail::kFactCpp});
  suggest(f, in, "medium", py ? "Replace data-dependent host control flow (if tensor.item() > ...) with torch.where / masks "
                                "on the GPU, or check the condition every N iterations"
                              : "Replace data-dependent host control flow with work on the GPU, or check the condition "
                                "every N iterations", {});
  if (py) suggest(f, in, "low", "Set torch.cuda.set_sync_debug_mode('warn') to find every implicit synchronization",
                  {detail::kFactPython});
  return f;
}

}  // namespace inferscope::analyze::rules
