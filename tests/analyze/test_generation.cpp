// Stage "generation" (lib/analyze/generation/generation.hpp): which call is the per-token one, and what each token costs; on
// planted calls and operations, on a planted torch.profiler trace whose TTFT and TPOT are known, on real H100
// recordings of two decode loops (an InferScope dump and a torch.profiler trace), and on every other real recording
// in tests/fixtures, none of which is a generation loop.
#include "analyze/analyzer.hpp"
#include "analyze/generation/generation.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

using namespace inferscope::analyze;
using namespace inferscope::analyze::detail;

namespace {

std::string fixture(const char* name) { return std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/" + name; }

// Planted Python calls: `steps` windows of 10 ms; in each, `tokens` calls of `token` (code 1) 1 ms apart, each
// holding `inner` calls of code 2 and a launch; between the token calls, a launch of their own (the argmax).
struct Planted {
  std::vector<CallSpan> calls;
  std::vector<Span> windows;
  std::vector<int64_t> launches;
  std::map<uint32_t, std::string> names{{1, "LlamaForCausalLM.forward"}, {2, "LlamaDecoderLayer.forward"},
                                        {3, "wrapper"}, {4, "main.<locals>.run"}};
  std::string name(uint32_t code) const { return names.count(code) ? names.at(code) : "?"; }
};

constexpr int64_t kMs = 1'000'000;

Planted token_loop(size_t steps, size_t tokens, bool launch_between = true) {
  Planted p;
  for (size_t s = 0; s < steps; ++s) {
    const int64_t w = int64_t(s) * 20 * kMs;
    p.windows.push_back({w, w + 10 * kMs, uint32_t(s)});
    for (size_t t = 0; t < tokens; ++t) {
      const int64_t c = w + int64_t(t) * kMs + 100'000;
      p.calls.push_back({3, 4, c - 1000, c + 801'000});  // a wrapper around each call
      p.calls.push_back({1, 5, c, c + 800'000});
      for (int l = 0; l < 4; ++l) {
        const int64_t ls = c + 10'000 + l * 190'000;
        p.calls.push_back({2, 6, ls, ls + 180'000});
        p.launches.push_back(ls + 1000);
      }
      if (launch_between) p.launches.push_back(c + 850'000);
    }
  }
  std::sort(p.launches.begin(), p.launches.end());
  return p;
}

// measure_generation over planted CUDA calls (all on thread 0, by start) and the GPU work they launched.
GenerationLoop measure_planted(const TokenFunction& tf, const std::vector<Span>& windows, const std::vector<ApiOp>& apis,
                               const std::vector<GpuOp>& gpu) {
  std::vector<const ApiOp*> calls;
  for (const ApiOp& a : apis) calls.push_back(&a);
  auto launch_of = [&](uint32_t c) -> const ApiOp* {
    for (const ApiOp& a : apis)
      if (a.corr == c) return &a;
    return nullptr;
  };
  return measure_generation(tf, windows, calls, gpu, launch_of, 0);
}

}  // namespace

TEST_CASE("markers: a generating model class, or a name that says generate/decode; never a layer") {
  CHECK(model_class_marker("GPT2LMHeadModel.forward") == "model class GPT2LMHeadModel");
  CHECK(model_class_marker("LlamaForCausalLM.forward") == "model class LlamaForCausalLM");
  CHECK(model_class_marker("T5ForConditionalGeneration.forward") == "model class T5ForConditionalGeneration");
  CHECK(model_class_marker("TinyLM.forward") == "model class TinyLM");
  CHECK(model_class_marker("nn.Module: GPT2LMHeadModel_0") == "model class GPT2LMHeadModel");  // torch.profiler's name
  CHECK(model_class_marker("LlamaDecoderLayer.forward").empty());
  CHECK(model_class_marker("GPT2Model.forward").empty());
  CHECK(generation_marker("Net.forward", "main.<locals>.generate") == "step main.<locals>.generate");
  CHECK(generation_marker("Decoder.decode_step", "serve") == "function Decoder.decode_step");
  CHECK(generation_marker("TransformerDecoderLayer.forward", "serve").empty());  // the class says decoder, not the function
  CHECK(generation_marker("Net.forward", "run_once").empty());
}

TEST_CASE("token_function: the model call repeated in every step, named past its wrapper and its layers") {
  const Planted p = token_loop(5, 6);
  auto tf = token_function(p.calls, p.windows, p.launches, [&](uint32_t c) { return p.name(c); }, "main.<locals>.run");
  REQUIRE(tf);
  CHECK(tf->name == "LlamaForCausalLM.forward");  // not the wrapper around it, nor the layers inside it
  CHECK(tf->marker == "model class LlamaForCausalLM");
  REQUIRE(tf->calls_by_step.size() == 5);
  for (const auto& v : tf->calls_by_step) CHECK(v.size() == 6);
}

TEST_CASE("token_function: fewer than kMinTokenCalls per step, or no marker, is no generation loop") {
  const Planted few = token_loop(5, kMinTokenCalls - 1);
  CHECK_FALSE(token_function(few.calls, few.windows, few.launches, [&](uint32_t c) { return few.name(c); }, "generate"));
  Planted unnamed = token_loop(5, 6);
  unnamed.names[1] = "Net.forward";
  unnamed.names[2] = "Block.forward";
  CHECK_FALSE(token_function(unnamed.calls, unnamed.windows, unnamed.launches, [&](uint32_t c) { return unnamed.name(c); },
                             "main.<locals>.run"));
  // The step's name marks it, and the loop is shaped like one over tokens: the innermost of the same calls.
  auto tf = token_function(unnamed.calls, unnamed.windows, unnamed.launches, [&](uint32_t c) { return unnamed.name(c); },
                           "main.<locals>.generate");
  REQUIRE(tf);
  CHECK(tf->name == "Net.forward");
  CHECK(tf->marker == "step main.<locals>.generate");
}

TEST_CASE("token_function: an encoder-decoder's model call, though a module both halves run covers more") {
  // T5: per step the encoder runs once (T5Stack.forward, code 5) before 6 tokens, each a call of
  // T5ForConditionalGeneration.forward (code 1) holding the decoder's T5Stack.forward: 7 calls of code 5.
  Planted p = token_loop(5, 6);
  p.names[1] = "T5ForConditionalGeneration.forward";
  p.names[5] = "T5Stack.forward";
  std::vector<CallSpan> calls;
  for (const CallSpan& c : p.calls)
    if (c.code == 1) calls.push_back(c), calls.push_back({5, 6, c.start + 1000, c.end - 1000});
  for (const Span& w : p.windows) calls.push_back({5, 3, w.start + 1000, w.start + 99'000});  // the encoder
  auto tf = token_function(calls, p.windows, p.launches, [&](uint32_t c) { return p.name(c); }, "main.<locals>.run");
  REQUIRE(tf);
  CHECK(tf->name == "T5ForConditionalGeneration.forward");
  CHECK(tf->calls_by_step.front().size() == 6);
}

TEST_CASE("token_function: a masked LM called per position scores, it does not generate") {
  Planted p = token_loop(5, 6);
  p.names[1] = "BertForMaskedLM.forward";
  CHECK(model_class_marker("BertForMaskedLM.forward").empty());
  CHECK_FALSE(token_function(p.calls, p.windows, p.launches, [&](uint32_t c) { return p.name(c); }, "main.<locals>.run"));
}

TEST_CASE("token_function: calls starting in the same microsecond nest, the outer one counted") {
  // torch.profiler's timestamps: an inner call of the same function starting with its outer one.
  Planted p = token_loop(5, 6);
  std::vector<CallSpan> calls = p.calls;
  for (const CallSpan& c : p.calls)
    if (c.code == 1) calls.push_back({1, 7, c.start, c.start + 400'000});
  auto tf = token_function(calls, p.windows, p.launches, [&](uint32_t c) { return p.name(c); }, "main.<locals>.run");
  REQUIRE(tf);
  for (const auto& v : tf->calls_by_step) {
    REQUIRE(v.size() == 6);
    CHECK(v.front().end - v.front().start == 800'000);
  }
}

TEST_CASE("token_function: a step named for tokens whose repeated calls are layers is no generation loop") {
  // One forward per step, its 6 blocks back to back: nothing is launched between them (no next token is picked).
  Planted layers = token_loop(5, 6, /*launch_between=*/false);
  layers.names[1] = "Block.forward";
  layers.names[2] = "Linear.forward";
  CHECK_FALSE(token_function(layers.calls, layers.windows, layers.launches, [&](uint32_t c) { return layers.name(c); },
                             "main.<locals>.next_tokens"));
  // Projections inside attention blocks: a function called twice per step holds two of them each time.
  Planted proj = token_loop(5, 8);
  proj.names[1] = "Conv1D.forward";
  proj.names[2] = "x";
  std::vector<CallSpan> calls = proj.calls;
  for (const Span& w : proj.windows)
    for (int b = 0; b < 2; ++b)  // two blocks, each around four of the eight calls
      calls.push_back({7, 3, w.start + 50'000 + b * 4 * kMs, w.start + 50'000 + (b + 1) * 4 * kMs});
  proj.names[7] = "GPT2Attention.forward";
  CHECK_FALSE(token_function(calls, proj.windows, proj.launches, [&](uint32_t c) { return proj.name(c); },
                             "main.<locals>.next_tokens"));
}

TEST_CASE("measure_generation: TTFT, TPOT and tokens/s from when each token's GPU work ends") {
  // Two steps of 4 tokens. Each token's call takes 1 ms on the host and launches one kernel and a sync; the
  // kernel runs 3 ms for the first token (the prompt) and 1.5 ms after; calls follow 2 ms apart.
  TokenFunction tf{.code = 1, .name = "LlamaForCausalLM.forward", .marker = "model class LlamaForCausalLM"};
  std::vector<Span> windows;
  std::vector<ApiOp> apis;
  std::vector<GpuOp> gpu;
  uint32_t corr = 1;
  for (int s = 0; s < 2; ++s) {
    const int64_t w = s * 100 * kMs;
    windows.push_back({w, w + 20 * kMs, uint32_t(s)});
    tf.calls_by_step.emplace_back();
    int64_t gpu_free = w;
    for (int t = 0; t < 4; ++t) {
      const int64_t c = w + kMs + t * 4 * kMs;
      tf.calls_by_step.back().push_back({c, c + kMs, 0});
      apis.push_back({.start = c + 100'000, .dur = 10'000, .corr = corr, .name = 0, .thread = 0, .kind = kLaunch});
      const int64_t ks = std::max(c + 200'000, gpu_free);
      const uint32_t kd = uint32_t(t == 0 ? 3 * kMs : 3 * kMs / 2);
      gpu.push_back({.start = ks, .dur = kd, .corr = corr, .name_or_bytes = 0, .kind = kKernel, .host_mem = 0, .stream = 7});
      gpu_free = ks + kd;
      ++corr;
      apis.push_back({.start = c + 2 * kMs, .dur = 500'000, .corr = corr++, .name = 0, .thread = 0, .kind = kSync});
    }
  }
  const GenerationLoop g = measure_planted(tf, windows, apis, gpu);
  REQUIRE(g.detected);
  CHECK(g.steps == 2);
  CHECK(g.tokens_per_step == 4);
  // Token 0: its kernel runs 1.2 to 4.2 ms after the step's start: TTFT 4.2 ms. Token t starts at 1 + 4t ms, its
  // kernel at +0.2 ms for 1.5 ms: done at 2.7 + 4t, so 4 ms apart from token 1 on, 2.7 + 4 - 4.2 = 2.5 ms for token 1.
  CHECK(g.ttft_ms == doctest::Approx(4.2));
  CHECK(g.tpot_ms == doctest::Approx(4.0));
  CHECK(g.decode.tokens == 6);
  CHECK(g.prefill.tokens == 2);
  CHECK(g.prefill.gpu_ms == doctest::Approx(3.0));
  CHECK(g.decode.gpu_ms == doctest::Approx(1.5));
  CHECK(g.decode.kernels == doctest::Approx(1.0));
  CHECK(g.decode.syncs == doctest::Approx(1.0));
  CHECK(g.decode.sync_ms == doctest::Approx(0.5));
  CHECK(g.decode.launch_ms == doctest::Approx(0.01));
  // The 4th token is done at 14.7 ms: 4 tokens in 14.7 ms.
  CHECK(g.tokens_per_s == doctest::Approx(4 / 14.7e-3));
}

TEST_CASE("measure_generation: steps of different lengths, a token that launches nothing, the work after the loop") {
  // Step 0: 4 tokens; step 1: 5 tokens, its third launching nothing. Calls 1 ms long, 2 ms apart; each launch's
  // kernel runs 0.5 ms right after it. Each step ends 50 ms after its last call with an output read-back (a sync),
  // which is no token's.
  TokenFunction tf{.code = 1, .name = "LlamaForCausalLM.forward", .marker = "model class LlamaForCausalLM"};
  std::vector<Span> windows;
  std::vector<ApiOp> apis;
  std::vector<GpuOp> gpu;
  uint32_t corr = 1;
  for (int s = 0; s < 2; ++s) {
    const int64_t w = s * 100 * kMs;
    const int n = s == 0 ? 4 : 5;
    tf.calls_by_step.emplace_back();
    for (int t = 0; t < n; ++t) {
      const int64_t c = w + t * 2 * kMs;
      tf.calls_by_step.back().push_back({c, c + kMs, 0});
      if (s == 1 && t == 2) continue;
      apis.push_back({.start = c + 100'000, .dur = 10'000, .corr = corr, .name = 0, .thread = 0, .kind = kLaunch});
      gpu.push_back({.start = c + 110'000, .dur = 500'000, .corr = corr++, .name_or_bytes = 0, .kind = kKernel, .host_mem = 0, .stream = 7});
    }
    const int64_t end = w + (n - 1) * 2 * kMs + 51 * kMs;
    apis.push_back({.start = end - 10'000, .dur = 10'000, .corr = corr++, .name = 0, .thread = 0, .kind = kSync});
    windows.push_back({w, end, uint32_t(s)});
  }
  const GenerationLoop g = measure_planted(tf, windows, apis, gpu);
  REQUIRE(g.detected);
  CHECK(g.tokens_per_step == doctest::Approx(4.5));
  CHECK(g.decode.tokens == 3 + 4);
  // Every token is done when its call returns (its kernel ends earlier): 2 ms apart, the silent one too.
  CHECK(g.tpot_ms == doctest::Approx(2.0));
  CHECK(g.tpot_ms_p90 == doctest::Approx(2.0));
  CHECK(g.ttft_ms == doctest::Approx(1.0));
  // The read-back 50 ms after the loop is no token's: no blocking call per token.
  CHECK(g.decode.syncs == doctest::Approx(0));
  CHECK(g.decode.call_kernels == doctest::Approx(g.decode.kernels));
}

TEST_CASE("a planted torch.profiler generate loop: the planted TTFT, TPOT and tokens/s come back exactly") {
  // tests/analyze/make_kineto_fixtures.py, generate_loop(): 6 tokens per step, TTFT 179 us, TPOT 89 us.
  const Analysis a = analyze_file(fixture("kineto_generate.json.gz"), {});
  const GenerationLoop& g = a.generation;
  REQUIRE(g.detected);
  CHECK(g.token_function == "nn.Module: GPT2LMHeadModel_0");
  CHECK(g.tokens_per_step == 6);
  CHECK(g.ttft_ms == doctest::Approx(0.179));
  CHECK(g.tpot_ms == doctest::Approx(0.089));
  CHECK(g.tpot_ms_p90 == doctest::Approx(0.089));
  CHECK(g.tokens_per_s == doctest::Approx(6 / 624e-6));
  CHECK(g.decode.kernels == doctest::Approx(6));  // 5 in the model, the argmax
  CHECK(g.decode.syncs == doctest::Approx(1));
}

TEST_CASE("real decode loops recorded on an H100: tokens split, and their times add up to the step") {
  struct Case {
    const char* file;
    const char* token_function;
    double tokens;
  };
  // samples/validation/decode_item.py under iscope-run (32 tokens, no KV cache, two .item() per token), and the
  // sync-bound decoder of scripts/record-kineto-traces.py under torch.profiler (6 tokens, one .item() each).
  for (const Case& c : {Case{"llm_decode_item.iscope", "GPT2LMHeadModel.forward", 32},
                        Case{"kineto_real_sync_bound.json.gz", "nn.Module: GPT2LMHeadModel_0", 6}}) {
    CAPTURE(c.file);
    const Analysis a = analyze_file(fixture(c.file), {});
    const GenerationLoop& g = a.generation;
    REQUIRE(g.detected);
    CHECK(g.token_function == c.token_function);
    CHECK(g.tokens_per_step == c.tokens);
    CHECK(g.steps >= 3);
    CHECK(g.decode.syncs >= 1);
    // The first token and the later ones cover the step, less what follows the last token (detokenising).
    const double covered = g.ttft_ms + (g.tokens_per_step - 1) * g.tpot_ms;
    CHECK(covered <= a.steps.p90_ms * 1.05);
    CHECK(covered >= a.steps.min_ms * 0.85);
    CHECK(g.tokens_per_s == doctest::Approx(g.tokens_per_step * 1000 / covered).epsilon(0.1));
  }
}

TEST_CASE("no other real recording in tests/fixtures is taken for a generation loop") {
  // Among them: a GPT-2 scorer whose step is named next_tokens (one forward per step, its projections repeated),
  // the LM-head model called once per step, CUDA-graph, multi-thread and multi-GPU programs, and torch.profiler
  // traces (a decode loop whose per-token function samples on the host, launching nothing between its calls).
  size_t checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures")) {
    const std::string name = e.path().filename().string();
    const bool trace = name.starts_with("kineto_");  // torch.profiler traces: .json, .json.gz
    if ((e.path().extension() != ".iscope" && !trace) || name == "llm_decode_item.iscope" ||
        name == "kineto_generate.json.gz" || name == "kineto_real_sync_bound.json.gz")
      continue;
    CAPTURE(name);
    CHECK_FALSE(analyze_file(e.path().string(), {}).generation.detected);
    ++checked;
  }
  CHECK(checked >= 25);
}
