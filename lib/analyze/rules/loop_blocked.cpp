// loop_blocked: callbacks that hold an asyncio service's event loop longer than the slow-callback bound delay every
// request that became ready meanwhile (requests.hpp measures the delay and whom to blame). Its impact is per request:
// the loop's other callbacks do not slow the batch step, they slow the requests around it.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

std::optional<Finding> loop_blocked(const RuleInput& in) {
  const Requests& r = in.requests;
  if (!r.detected || r.mean_ms <= 0) return std::nullopt;
  const LoopCallbackRow* top = nullptr;
  double impact = 0;
  for (const LoopCallbackRow& c : r.callbacks) {
    if (c.slow == 0 || c.delay_ms <= 0) continue;
    impact += c.delay_ms;
    if (!top || c.delay_ms > top->delay_ms) top = &c;
  }
  // A handler that never awaits shows no wait in its own life: its request waited in the socket while the loop was
  // held. The arrival model then bounds the delay (requests.hpp: modeled_delay_ms, split by callback): requests
  // arriving at random times. Clients that wait for each answer before the next request (a closed loop) arrive
  // less often while the loop is held, and wait less: the bound is said, and the cost is not estimated.
  const bool modeled = r.delay_modeled;
  // A modeled delay comes before the handler runs, so the request a client sees lasts the handler and the delay.
  const double request_ms = modeled ? r.mean_ms + impact : r.mean_ms;
  if (!top || impact / request_ms * 100 < in.th.min_impact_pct) return std::nullopt;
  const double pct = impact / request_ms * 100;
  Finding f = make_finding(in, Category::kLoopBlocked,
                           modeled ? "'" + top->name + "' holds the event loop " + fpct(top->share * 100) +
                                         " of the time, in runs of up to " + fms(top->max_ms)
                                   : "'" + top->name + "' holds the event loop: each request waits " + fms(impact) + " for it",
                           modeled ? 0.0 : impact, 0.5 + 0.4 * std::min(1.0, pct / 40));
  f.per = "request";
  f.impact_pct = modeled ? 0.0 : pct;
  f.impact_estimated = !modeled;
  f.evidence.push_back(std::to_string(top->slow) + " of its " + std::to_string(top->runs) + " runs on the loop took longer than " +
                       fms(r.slow_callback_ms) + " (a tenth of the median request); the longest " + fms(top->max_ms) +
                       ", " + fms(top->total_ms) + " in all, " + fpct(top->share * 100) + " of the requests' span");
  f.evidence.push_back(std::to_string(r.count) + " requests of " + r.name + ": p50 " + fms(r.p50_ms) + ", p90 " + fms(r.p90_ms) +
                       ", p99 " + fms(r.p99_ms) + "; while callbacks this long held the loop, " +
                       (modeled ? "a request arriving at a random time would wait up to " + fms(impact) +
                                      " on average (half of each such callback, weighted by how long it held the loop; the "
                                      "handlers never await, so their own runs cannot show it, and clients that wait for "
                                      "each answer arrive less often while the loop is held)"
                                : "ready requests waited " + fms(impact) + " each on average") +
                       " (" + fpct(pct) + " of a request)");
  if (r.batched)
    f.evidence.push_back("the batch step had already served them: " + fms(r.split.delayed_ms) +
                         " per request passed between their batch's end and their own resumption");
  f.metrics["delay_per_request_ms"] = impact;
  f.metrics["request_ms"] = request_ms;  // what impact_pct and every saving here are a share of
  f.metrics["slow_callback_ms"] = r.slow_callback_ms;
  f.metrics["longest_callback_ms"] = top->max_ms;
  f.metrics["loop_busy_share"] = r.loop_busy_share;
  // The delay it causes is what leaves the requests once it no longer runs on the loop: attributed, not replayed.
  const char* model = modeled ? "the delay callbacks this long cause requests arriving at random times, removed (modeled)"
                              : "the delay it caused ready requests, removed (measured on the loop, not replayed)";
  if (python_program(in)) {
    f.suggestions.push_back({"Take the work in '" + top->name + "' off the event loop: await asyncio.to_thread(work, ...) "
                             "or loop.run_in_executor(pool, work, ...); a ProcessPoolExecutor when the work is pure Python "
                             "(parsing, validation), which holds the GIL in a thread too",
                             "high", modeled ? 0.0 : impact, !modeled, modeled ? "" : model, {detail::kFactPython}});
    suggest(f, in, "medium", "If it must stay on the loop, cut it into pieces with await asyncio.sleep(0) between them, so "
                             "ready requests run in between", {detail::kFactPython});
    suggest(f, in, "low", "In development, set loop.slow_callback_duration to " + fms(r.slow_callback_ms) +
                          " with asyncio debug mode on to catch new callbacks this long", {detail::kFactPython});
  } else {
    suggest(f, in, "high", "Take the work in '" + top->name + "' off the event loop's thread: hand it to a worker pool and "
                           "resume the request when it is done", {});
  }
  return f;
}

}  // namespace inferscope::analyze::rules
