// Stage "generation": is the step a generation loop, and what does each token cost? A language model generates
// one token per call of its forward; HF `generate`, a hand-written decode loop and `model(...)` in a `for` loop
// all call it once per token inside the step. The stage finds that call among the Python calls inside the typical
// steps, splits each step into its tokens, and measures the first token (the prompt pass: prefill) apart from the
// rest (decode): time to first token, time per output token, tokens per second, and per phase what the tokens
// launch, wait for and copy.
//
//   std::optional<TokenFunction> tf = token_function(calls, windows, launch_starts, name_of_code, step_name);
//   GenerationLoop g = measure_generation(*tf, windows, step_calls, gpu, launch_of, step_thread);
//
// The reasons for the thresholds are written beside them; docs/analysis.md ("Generation loops") explains the
// stage to users.
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"
#include "text/token_names.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace inferscope::analyze::detail {

// What a function's name says of generation (lib/text/token_names.hpp), shared with the live tap.
using text::generating_function;
using text::generating_name;
using text::kMinTokenCalls;
using text::model_class_marker;
using text::split_qualname;

/// Steps measured, at most: 16 steps of 4 tokens or more give 48 decode intervals or more, enough for a stable
/// median and p90, and the extra pass over the step thread's Python calls stays bounded however long the run.
inline constexpr size_t kMaxGenerationSteps = 16;
/// Python calls collected inside those steps, at most (24 bytes each: 48 MB): eager HF models make a few hundred
/// traced calls per token, so this covers 16 steps of several hundred tokens; beyond it, later steps are left out.
inline constexpr size_t kMaxCollectedCalls = 2'000'000;
/// Functions whose outermost calls cover at least this share of the most-covering candidate's time, as often, are
/// the same per-token call seen through wrappers (a decorator, Module.__call__) or around the model's body (an LM
/// head model around its transformer): the innermost one whose own name marks it is named, else the innermost.
inline constexpr double kWrapperShare = 0.9;

/// One Python call inside a measured step: its code id, nesting depth and span (ns).
struct CallSpan {
  uint32_t code = 0;
  uint32_t depth = 0;
  int64_t start = 0, end = 0;
};

/// The per-token call: its code, qualified name, what marks it as generation, and its outermost calls per
/// measured step (by start; windows without enough calls hold none).
struct TokenFunction {
  uint32_t code = 0;
  std::string name;
  std::string marker;
  std::vector<std::vector<Span>> calls_by_step;
};

/// What says a repeated model call generates tokens, or "" for nothing: a model class of the generating kinds
/// (…ForCausalLM, …LMHeadModel, …ForConditionalGeneration, …Seq2SeqLM, a class named …LM), or a token function or
/// step whose name says generate/decode. Without a marker a repeated call is a layer, a micro-batch or a chunk,
/// and its "tokens" would be wrong.
std::string generation_marker(const std::string& token_function, const std::string& step_function);
/// Whether the calls `outer` (by start) each hold the per-token calls `inner` (by start): at least half of them
/// hold kMinTokenCalls or more. A `generate()` called a few times holds its model's forward once per token; the
/// step the user means is the generate call, not one token (steps.cpp).
bool holds_token_calls(std::span<const std::pair<int64_t, int64_t>> outer, std::span<const std::pair<int64_t, int64_t>> inner);

/// The function called at least kMinTokenCalls times in at least half of the `windows` (the measured steps, by
/// start), whose calls launch GPU work (at least half of them hold a launch: `launch_starts`, sorted), and which
/// covers the most time with its outermost calls; of those that are the same calls (kWrapperShare), the innermost
/// one whose name marks it as a model that generates, else the innermost.
/// nullopt when there is none or no marker says it generates tokens.
std::optional<TokenFunction> token_function(std::span<const CallSpan> calls, const std::vector<Span>& windows,
                                            std::span<const int64_t> launch_starts,
                                            const std::function<std::string(uint32_t)>& name_of_code,
                                            const std::string& step_function);

/// The loop's figures: each measured step (a window with calls) split into tokens. A token's window runs from its
/// call's start to the next call's start (the first from the step's start, the last to the step's end); the token
/// is done when the GPU work launched in its window has ended, or its call has returned if that is later.
/// `step_calls`: the step thread's CUDA calls by start; `gpu`: GPU activities; `launch_of`: the CUDA call that
/// launched a GPU activity (by correlation id), nullptr when none.
GenerationLoop measure_generation(const TokenFunction& tf, const std::vector<Span>& windows,
                                  std::span<const ApiOp* const> step_calls, std::span<const GpuOp> gpu,
                                  const std::function<const ApiOp*(uint32_t)>& launch_of, uint32_t step_thread);

}  // namespace inferscope::analyze::detail
