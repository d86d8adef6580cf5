// Stage "engine batches": a batching engine's step time against its batch size, and, for a continuous-batching
// engine whose requests stream their output across many engine steps, each request's time to first token and time
// per output token. Read off the requests (requests.hpp) and the steps that served them: a step's batch is the
// requests it resumed (a batcher sets the futures of its batch as the step ends), a request's first token is the
// end of the first step that served it, and each later serving step is one more token (or chunk) of its output.
//
//   request  ├── queued ──┤ step 1 ├─┤ step 2 ├─┤ step 3 ├── ... ┤ step n ├
//            start        first token: end of step 1       time per output token: (end n - end 1) / (n - 1)
//
//   EngineBatches e = engine_batches(activity, requests, steps);
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"
#include "analyze/serving/coroutines.hpp"

#include <span>

namespace inferscope::analyze::detail {

/// Steps a batch-size row needs before its mean is shown: fewer is one batch's luck (a warm-up, a GC pause). Three
/// is the fewest that has a middle value.
inline constexpr size_t kMinStepsPerBatchRow = 3;
/// Requests need several serving steps each to be streamed (continuous batching): at least this share of them
/// (the same majority that makes requests batched, requests.hpp's kBatchedShare). A request served by one step
/// (static or dynamic batching) has its whole answer at once: no first token to tell from the last.
inline constexpr double kStreamedShare = 0.5;

/// The step that served a suspension [g0, g1) of a request: the last step to end inside it; -1 when none did.
/// `steps` by start (and so by end: a batcher's steps do not overlap).
long serving_step(std::span<const Span> steps, int64_t g0, int64_t g1);

/// `requests`: the request lives measure_requests kept (top-level, begun in the trace), `steps` the steps found.
EngineBatches engine_batches(const CoroutineActivity& act, std::span<const CoroutineLife* const> requests,
                             std::span<const Span> steps);

}  // namespace inferscope::analyze::detail
