// batch_wait: an asyncio batcher's requests wait for their batch while no batch runs (requests.hpp's "waiting for
// its batch"): the batcher holds them for a batching window. When nearly every batch leaves full (the most requests
// a batch ever took), waiting longer never made a batch larger: the window costs the requests their wait and
// buys nothing. Its impact is per request, as the wait is the requests'.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

/// Batches that leave full this often are full by the time the window ends: waiting for more buys nothing. A tenth
/// of batches left short (a burst's tail, the last batch of a run) still counts as full.
constexpr double kFullShare = 0.9;

std::optional<Finding> batch_wait(const RuleInput& in) {
  const Requests& r = in.requests;
  if (!r.detected || !r.batched || r.mean_ms <= 0) return std::nullopt;
  const double impact = r.split.batch_wait_ms;
  const double pct = impact / r.mean_ms * 100;
  if (pct < in.th.min_impact_pct) return std::nullopt;
  const bool full = r.max_per_step > 1 && r.full_share >= kFullShare;
  Finding f = make_finding(in, Category::kWait,
                           "Requests wait " + fms(impact) + " each for their batch while no batch runs" +
                               std::string(full ? ", though their batches are full" : " (the batching window)"),
                           impact, 0.5 + 0.3 * std::min(1.0, pct / 40) + (full ? 0.15 : 0));
  f.per = "request";
  f.impact_pct = pct;
  f.evidence.push_back(std::to_string(r.count) + " requests of " + r.name + ": " + fms(impact) + " of their mean " +
                       fms(r.mean_ms) + " passed after they were queued and before the batch that served them began, with "
                       "no other batch running (" + fpct(pct) + ")");
  f.evidence.push_back(fmt("%.1f requests per batch", r.requests_per_step) + ", at most " + std::to_string(r.max_per_step) +
                       "; " + fpct(r.full_share * 100) + " of the batches took that most; from a batch's first request "
                       "to its start: " + fms(r.batch_gap_ms) + " (median)");
  if (full)
    f.evidence.push_back("the batches are full when they start, so the wait before them is a window that does not end "
                         "when the batch is full");
  f.metrics["batch_wait_ms"] = impact;
  f.metrics["requests_per_batch"] = r.requests_per_step;
  f.metrics["full_batch_share"] = r.full_share;
  // Launching a full batch at once removes the wait of its requests; a batch that is not full still waits its window.
  // A batcher that is never idle also shortens its cycle from the step (the window and the batch) to the batch alone,
  // and a request queued behind earlier batches waits for as many cycles as before, each that much shorter.
  const double cycle = in.stats.p50_ms, batch = r.batch_ms;
  const double shorter = cycle > 0 && batch > 0 && batch < cycle ? 1 - batch / cycle : 0;
  const double saving = (full ? impact : impact * r.full_share) + r.split.queued_ms * shorter;
  const char* model = "the requests' wait for a batch already full removed, and their queueing behind earlier batches "
                      "shortened as the batcher's cycle shrinks to its batch (measured on the requests, not replayed)";
  if (python_program(in)) {
    f.suggestions.push_back({"Start a batch as soon as it is full: wait for more requests only while it is not full and its "
                             "window has not run out (take what is queued with queue.get_nowait(), then await "
                             "asyncio.wait_for(queue.get(), remaining)), instead of sleeping the whole window before every batch",
                             "high", saving, true, model, {detail::kFactPython}});
    suggest(f, in, "medium", "Size the window to the arrival rate: a window longer than the time " + std::to_string(r.max_per_step) +
                             " requests take to arrive only adds latency", {});
  } else {
    suggest(f, in, "high", "Start a batch as soon as it is full: wait only while it is not full and its window has not run out",
            {});
  }
  suggest(f, in, "low", "Let the next batch collect while the current one runs (a second batch in flight), so no request "
                        "waits for a batch to be built", {});
  return f;
}

}  // namespace inferscope::analyze::rules
