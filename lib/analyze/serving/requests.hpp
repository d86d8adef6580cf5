// Stage "requests": the requests of an asyncio service and what held them up. A request is the life of the
// coroutine the event loop runs once per request (coroutines.hpp): an HTTP handler (aiohttp, Starlette/FastAPI call
// the user's `async def`), or a task per request. Its latency runs from its first run to its last; in between it
// was suspended, and the steps the analysis found (a batcher's batch step) say why:
//
//   suspended ───────────────────────────────────────────────────────────────┐
//   | queued: earlier batches ran | batch wait: no step ran | in its batch | delayed: the loop ran others |
//                                                          step start     step end              it resumes
//
// The step that served a suspension is the last one to end before the request resumed (a batcher sets the
// futures of its batch as it ends). A suspension that no step ended is "other" (I/O, a sleep, a client's pace).
// Without a batch step, the part of a suspension spent while another callback held the loop longer than the
// slow-callback bound is counted as delayed: the request may have been ready then, and nothing else could run.
//
//   std::vector<int64_t> first_queued;
//   Requests r = measure_requests(activity, steps, name_of, &first_queued);
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"
#include "analyze/serving/coroutines.hpp"

#include <functional>
#include <span>
#include <string>

namespace inferscope::analyze::detail {

/// Lives of one coroutine needed before they are requests: the same count a repeated function needs to be a step
/// (a median, a p90 and a warm-up to leave out; steps.cpp's kMinRepeats).
inline constexpr size_t kMinRequests = 8;
/// A callback holds the loop when it runs longer than this share of the median request, and at least
/// kSlowCallbackFloorMs: every request that becomes ready meanwhile waits for it, so a callback that long adds a
/// tenth of a typical request to each of them, which a p99 shows. Below a millisecond a Python callback is the
/// ordinary cost of handling one message (a small JSON body, a launch). asyncio's debug mode warns from 100 ms,
/// and only while debugging.
inline constexpr double kSlowCallbackShare = 0.1;
inline constexpr double kSlowCallbackFloorMs = 1.0;
/// A service with no requests found: callbacks longer than this are still named (asyncio's debug default / 10).
inline constexpr double kSlowCallbackNoRequestsMs = 10.0;
/// Requests need a batch step to be "batched": at least half of them resumed right after a step ended.
inline constexpr double kBatchedShare = 0.5;

/// The requests of `activity` and their split by `steps` (all steps found, by start; empty: none). detected = false
/// when no coroutine has kMinRequests top-level lives begun in the trace. `first_queued`, when given and the
/// requests are batched: for each step, the earliest time a request it served began waiting for it (-1: none), the
/// start of the batcher's cycle for that batch (batch_cycles, loop_steps.hpp).
Requests measure_requests(const CoroutineActivity& activity, std::span<const Span> steps,
                          const std::function<std::string(uint32_t)>& name_of, std::vector<int64_t>* first_queued = nullptr);

}  // namespace inferscope::analyze::detail
