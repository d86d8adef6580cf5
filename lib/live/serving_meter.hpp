// The serving meter (docs/live.md, "Serving metrics"): time to first token, time per output token and request
// latency, measured live from the Python records the tap drains, for the live page and /metrics. The analyzer's
// generation and requests stages (lib/analyze/generation/generation.hpp, lib/analyze/serving/requests.hpp) measure the same
// after the run, over the whole dump; the meter keeps only running histograms and what a thread's open calls need.
//
//   ServingMeter m(ticks_per_ns);
//   m.call(thread, code, name, depth, start, end);        // each Python call record, in the order drained
//   m.coroutine(thread, code, start, object, flags);       // each coroutine record (it follows its call's record)
//   ServingView v = m.view();                              // the histograms, to render
//
// Generation: a call whose name says it generates (generate, decode: token_names.hpp) that holds kMinTokenCalls or
// more calls of a generating model (a class such as GPT2LMHeadModel or LlamaForCausalLM) is one generation call. Its
// time to first token runs from its start to the end of the first model call, and each later model call's end after
// the one before is one output token's time. A thread's records arrive in end order, so the model calls are kept
// until the call holding them ends.
//
// Requests: the lives of an asyncio service's coroutines (a handler's first run to its return, the tracer's
// first-run and last-run flags), counted per coroutine for those that began at the loop's own level (not awaited
// from inside another coroutine's run). The coroutine with the most lives, kMinRequests or more, is the request, as
// the analyzer picks it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferscope::live {

/// The serving histograms' upper bounds, in seconds (Prometheus `le`; +Inf is implied): from 0.5 ms (one
/// handler's run on an idle asyncio loop, one token of a small model) to 60 s (a long generation), about 2.5 times
/// apart, so a quantile read from the buckets is within a factor 1.6 of the truth anywhere in that range.
inline constexpr std::array<double, 16> kServingBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,   0.5,   1.0,    2.5,   5.0,  10.0,  30.0,  60.0};
/// Model calls kept per thread while no generation call has ended: more than any generate() makes tokens for in
/// practice (max_new_tokens of 4096 and a few wrapping calls); the oldest go first.
inline constexpr size_t kMaxHeldTokenCalls = 16384;
/// Coroutine lives followed at once per thread (an asyncio server with this many requests in flight): more are not
/// followed until some end.
inline constexpr size_t kMaxOpenLives = 65536;
/// Coroutines whose lives are counted: the first ones seen beyond it are left out.
inline constexpr size_t kMaxCoroutineCodes = 256;
/// Lives of one coroutine needed before they are requests: the analyzer's kMinRequests
/// (lib/analyze/serving/requests.hpp; a unit test keeps the two equal).
inline constexpr size_t kMinRequestLives = 8;
/// Function names kept (each code's, the first time it is seen): beyond it, codes are classified but unnamed.
inline constexpr size_t kMaxCodeNames = 65536;

/// Values each histogram also keeps as they are (the newest), for the page's exact p50 and p90: a thousand values
/// give a p90 from the hundred largest, and cost 8 KiB per histogram in each snapshot.
inline constexpr size_t kRecentValues = 1024;

/// A running histogram in seconds over kServingBounds (for /metrics), and the newest values themselves (the page).
struct LatencyHistogram {
  std::array<uint64_t, kServingBounds.size()> buckets{};  ///< non-cumulative counts per bucket
  uint64_t over = 0;                                      ///< above the last bound
  uint64_t count = 0;
  double sum = 0;
  std::vector<double> recent;  ///< ring of the newest kRecentValues values (seconds)
  size_t recent_next = 0;
  void add(double seconds);
  /// The q-quantile (0..1) of the newest values (nearest rank); 0 when empty.
  double recent_quantile(double q) const;
};

/// What the meter has measured so far.
struct ServingView {
  // Generation calls.
  uint64_t generation_calls = 0, tokens = 0;
  std::string generation_name, token_name;  ///< the newest generation call's function and its model call
  LatencyHistogram ttft, tpot, generation_latency;
  // Requests: the coroutine with the most lives (kMinRequests or more), "" when none has that many.
  std::string request_name;
  LatencyHistogram request_latency;
};

class ServingMeter {
 public:
  explicit ServingMeter(double ticks_per_ns);

  /// A Python call record of dump thread `thread` (depth = its frames below it); `name` is its function's qualified
  /// name ("" when unknown), used the first time `code` is seen.
  void call(uint32_t thread, uint32_t code, const std::string& name, uint32_t depth, uint64_t start, uint64_t end);
  /// Whether `code` is already classified (the caller may then pass no name).
  bool knows(uint32_t code) const { return code < kind_.size() && kind_[code] != kUnknown; }
  /// A coroutine record of dump thread `thread`: the call record just before it on that thread ran `object`;
  /// `flags` are the record's aux (kCoroutineFirstRun, kCoroutineLastRun).
  void coroutine(uint32_t thread, uint32_t code, uint64_t start, uint64_t object, uint8_t flags);

  ServingView view() const;

 private:
  enum Kind : uint8_t { kUnknown = 0, kOther, kModel, kGenerating };
  struct Held {
    uint64_t start, end;
    uint32_t code;
  };
  struct LastCall {
    uint32_t code = 0, depth = 0;
    uint64_t start = 0, end = 0;
  };
  struct Life {
    uint32_t code = 0;
    uint64_t start = 0;
    bool top_level = false;
  };
  struct ThreadState {
    std::deque<Held> model_calls;  // outermost model calls not yet claimed by a generation call, by end
    LastCall last;
    std::unordered_map<uint64_t, Life> lives;  // by coroutine object
    uint32_t min_first_depth = UINT32_MAX;     // the shallowest first run of a coroutine seen: the loop's level
  };
  struct CodeLives {
    std::string name;
    LatencyHistogram latency;
  };
  Kind classify(uint32_t code, const std::string& name);
  void generation_ended(ThreadState& t, uint32_t code, uint64_t start, uint64_t end);
  double secs(uint64_t ticks) const { return double(ticks) / ticks_per_ns_ * 1e-9; }

  const double ticks_per_ns_;
  std::vector<Kind> kind_;                  // by code id
  std::unordered_map<uint32_t, std::string> names_;  // by code id, the first kMaxCodeNames seen
  std::map<uint32_t, ThreadState> threads_;
  std::map<uint32_t, CodeLives> lives_by_code_;
  ServingView gen_;  // the generation part of the view
};

}  // namespace inferscope::live
