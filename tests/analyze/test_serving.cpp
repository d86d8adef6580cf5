// The step the user means in generation and serving programs (issue: generate() called at a script's top level, an
// asyncio batching server): the stages "coroutines" and "requests" (lib/analyze/serving/), the generation call as
// the step (steps.cpp), the event loop's callback as the batch step, and --step that names nothing. Pure functions
// on planted spans first, then whole dumps written by the simulator the way the tracer writes them.
#include "analyze/analyzer.hpp"
#include "analyze/generation/generation.hpp"
#include "analyze/serving/coroutines.hpp"
#include "analyze/support/order_stats.hpp"
#include "analyze/serving/engine_batches.hpp"
#include "analyze/serving/loop_steps.hpp"
#include "analyze/serving/requests.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::analyze;
using namespace inferscope::analyze::detail;

namespace {

constexpr int64_t kUs = 1'000, kMs = 1'000'000;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("iscope_serving_" + name + ".iscope")).string();
}

}  // namespace

TEST_CASE("coroutine_lives: one object's runs joined, a new life at each first run, top level unless inside another") {
  // Object 7 (a task) runs twice; object 9 is awaited inside 7's first run (nested), and runs once more inside 7's
  // second run; then object 7's address is reused by a new coroutine that begins (first) at 50.
  const std::vector<CoroutineRun> runs = {
      {1, 0, 0, 10, 7, true}, {2, 1, 2, 8, 9, true}, {1, 0, 20, 30, 7, false},
      {2, 1, 21, 29, 9, false}, {3, 0, 50, 55, 7, true}};
  const std::vector<CoroutineLife> lives = coroutine_lives(runs);
  REQUIRE(lives.size() == 3);
  CHECK(lives[0].code == 1);
  CHECK(lives[0].start == 0);
  CHECK(lives[0].end == 30);
  CHECK(lives[0].top_level);
  CHECK(lives[0].runs.size() == 2);
  CHECK(lives[1].code == 2);
  CHECK_FALSE(lives[1].top_level);  // awaited from inside object 7's run
  CHECK(lives[1].end == 29);
  CHECK(lives[2].code == 3);        // the address reused: a life of its own
  CHECK(lives[2].began_in_trace);
  CHECK(lives[2].start == 50);
}

TEST_CASE("enclosing_coroutine_runs: each instance by the innermost run holding it; none when a run holds two") {
  const std::vector<CoroutineRun> runs = {{1, 0, 0, 100, 5, false}, {2, 1, 10, 90, 6, false}, {1, 0, 200, 300, 5, false}};
  const std::vector<std::pair<int64_t, int64_t>> inst = {{20, 80}, {210, 260}};
  const std::vector<LoopStep> s = enclosing_coroutine_runs(inst, runs);
  REQUIRE(s.size() == 2);
  CHECK(s[0].start == 10);  // the innermost: the coroutine that calls the model, not the one awaiting it
  CHECK(s[0].end == 90);
  CHECK(s[0].code == 2);
  CHECK(s[1].start == 200);
  CHECK(s[1].code == 1);
  const std::vector<std::pair<int64_t, int64_t>> two_in_one = {{20, 40}, {50, 80}};
  CHECK(enclosing_coroutine_runs(two_in_one, runs).empty());
  const std::vector<std::pair<int64_t, int64_t>> outside = {{400, 450}, {500, 550}, {210, 260}};
  CHECK(enclosing_coroutine_runs(outside, runs).empty());  // fewer than half inside a run
}

TEST_CASE("holds_token_calls: a call holding kMinTokenCalls per-token calls in at least half of its calls") {
  std::vector<std::pair<int64_t, int64_t>> outer = {{0, 100}, {200, 300}};
  std::vector<std::pair<int64_t, int64_t>> inner;
  for (int64_t t = 0; t < 8; ++t) inner.push_back({10 + t * 10, 15 + t * 10});
  CHECK(holds_token_calls(outer, inner));  // one of two holds 8: half
  outer.push_back({400, 500});
  CHECK_FALSE(holds_token_calls(outer, inner));  // one of three
  CHECK_FALSE(holds_token_calls({}, inner));
  CHECK(generating_name("GenerationMixin.generate"));
  CHECK(generating_name("serve.<locals>.decode_tokens"));
  CHECK_FALSE(generating_name("Server.handle"));
}

TEST_CASE("measure_requests: a batched request's suspension split by the step that served it") {
  CoroutineActivity act;
  act.found = true;
  // One request (code 1): runs [0,1) and [30,31); the batch step that served it [15,25), an earlier one [2,8);
  // a callback of another coroutine [25,29) held the loop after the step.
  for (int i = 0; i < int(kMinRequests); ++i) {
    const int64_t o = i * 1000;
    act.runs.push_back({1, 0, o + 0, o + 1, uint64_t(100 + i), true});
    act.runs.push_back({1, 0, o + 30, o + 31, uint64_t(100 + i), false});
    act.callbacks.push_back({1, o + 0, o + 1});
    act.callbacks.push_back({9, o + 25, o + 29});
    act.callbacks.push_back({1, o + 30, o + 31});
  }
  std::sort(act.runs.begin(), act.runs.end(), [](auto& a, auto& b) { return a.start < b.start; });
  act.lives = coroutine_lives(act.runs);
  std::vector<Span> steps;
  for (int i = 0; i < int(kMinRequests); ++i) {
    const int64_t o = i * 1000;
    steps.push_back({o + 2, o + 8, 0});
    steps.push_back({o + 15, o + 25, 0});
  }
  const Requests r = measure_requests(act, steps, [](uint32_t c) { return c == 1 ? "handle" : "other"; });
  REQUIRE(r.detected);
  CHECK(r.name == "handle");
  CHECK(r.count == kMinRequests);
  CHECK(r.batched);
  CHECK(r.requests_per_step == doctest::Approx(1.0));
  CHECK(r.mean_ms == doctest::Approx(31e-6));
  CHECK(r.split.running_ms == doctest::Approx(2e-6));
  CHECK(r.split.queued_ms == doctest::Approx(6e-6));      // [2,8): an earlier batch ran
  CHECK(r.split.batch_wait_ms == doctest::Approx(8e-6));  // [1,15) less the 6 queued
  CHECK(r.split.in_batch_ms == doctest::Approx(10e-6));   // [15,25)
  CHECK(r.split.delayed_ms == doctest::Approx(5e-6));     // [25,30)
  const double sum = r.split.running_ms + r.split.queued_ms + r.split.batch_wait_ms + r.split.in_batch_ms +
                     r.split.delayed_ms + r.split.other_ms;
  CHECK(sum == doctest::Approx(r.mean_ms));  // the parts add up to the latency
  bool blamed = false;
  for (const auto& c : r.callbacks)
    if (c.name == "other") blamed = c.delay_ms == doctest::Approx(4e-6);  // it ran 4 of the 5 delayed units
  CHECK(blamed);
}

namespace {

// A continuous-batching engine: request i arrives just before step i and streams its output over the `streamed`
// steps from i on (it resumes after each); step k costs 1000 ns plus 200 ns per request in its batch.
struct Engine {
  CoroutineActivity act;
  std::vector<Span> steps;
  std::vector<const CoroutineLife*> requests;
};
Engine continuous_engine(int requests, int streamed) {
  Engine e;
  e.act.found = true;
  const int n_steps = requests + streamed - 1;
  int64_t t = 1000;
  for (int k = 0; k < n_steps; ++k) {
    int batch = 0;
    for (int i = 0; i < requests; ++i) batch += i <= k && k < i + streamed;
    e.steps.push_back({t, t + 1000 + 200 * batch, 0});
    t = e.steps.back().end + 100;
  }
  for (int i = 0; i < requests; ++i) {
    const int64_t a = e.steps[size_t(i)].start - 50;
    e.act.runs.push_back({1, 0, a, a + 1, uint64_t(100 + i), true});
    for (int k = i; k < i + streamed; ++k)
      e.act.runs.push_back({1, 0, e.steps[size_t(k)].end + 1, e.steps[size_t(k)].end + 2, uint64_t(100 + i), false});
  }
  std::sort(e.act.runs.begin(), e.act.runs.end(), [](auto& a, auto& b) { return a.start < b.start; });
  e.act.lives = coroutine_lives(e.act.runs);
  for (const CoroutineLife& l : e.act.lives) e.requests.push_back(&l);
  return e;
}

}  // namespace

TEST_CASE("engine_batches: step time against batch size, and a streamed request's first token and later tokens") {
  const Engine e = continuous_engine(12, 6);
  REQUIRE(e.requests.size() == 12);
  const EngineBatches b = engine_batches(e.act, e.requests, e.steps);
  // Batches ramp 1..6, hold at 6, fall to 1: sizes 1 and 2 have two steps each (under kMinStepsPerBatchRow, no row);
  // 3-4 has four, 5-8 nine.
  REQUIRE(b.by_batch.size() == 2);
  CHECK(b.by_batch[0].batch == "3-4");
  CHECK(b.by_batch[0].steps == 4);
  CHECK(b.by_batch[0].mean_batch == doctest::Approx(3.5));
  CHECK(b.by_batch[0].mean_ms == doctest::Approx((1000 + 200 * 3.5) / 1e6));
  CHECK(b.by_batch[1].batch == "5-8");
  CHECK(b.by_batch[1].steps == 9);
  // The line over every serving step (the rows' cut does not drop points) is the engine's cost model exactly.
  CHECK(b.fixed_ms == doctest::Approx(1000 / 1e6));
  CHECK(b.per_request_ms == doctest::Approx(200 / 1e6));
  CHECK(b.fit_r2 == doctest::Approx(1.0));
  REQUIRE(b.streamed);
  CHECK(b.streamed_requests == 12);
  CHECK(b.steps_per_request == doctest::Approx(6.0));
  // Request 0: arrived 50 ns before step 0 (batch 1: 1200 ns) began.
  std::vector<double> ttft, tpot;
  for (int i = 0; i < 12; ++i) {
    ttft.push_back(double(e.steps[size_t(i)].end - (e.steps[size_t(i)].start - 50)) / 1e6);
    tpot.push_back(double(e.steps[size_t(i + 5)].end - e.steps[size_t(i)].end) / 5 / 1e6);
  }
  std::sort(ttft.begin(), ttft.end());
  std::sort(tpot.begin(), tpot.end());
  CHECK(b.ttft_p50_ms == doctest::Approx(percentile_sorted(ttft, 0.5)));
  CHECK(b.ttft_p90_ms == doctest::Approx(percentile_sorted(ttft, 0.9)));
  CHECK(b.tpot_p50_ms == doctest::Approx(percentile_sorted(tpot, 0.5)));
  CHECK(b.tpot_p90_ms > b.tpot_p50_ms);  // the requests in the full batches pay the most per token
}

TEST_CASE("engine_batches: requests served by one step each are not streamed; one batch size has no table") {
  const Engine e = continuous_engine(12, 1);  // every step serves the one request that arrived before it
  const EngineBatches b = engine_batches(e.act, e.requests, e.steps);
  CHECK_FALSE(b.streamed);
  CHECK(b.streamed_requests == 0);
  CHECK(b.by_batch.empty());  // every batch is 1: nothing to set step time against
  CHECK(b.per_request_ms == 0);
}

TEST_CASE("measure_requests: a batched service carries its engine batches") {
  const Engine e = continuous_engine(12, 6);
  const Requests r = measure_requests(e.act, e.steps, [](uint32_t) { return "generate_stream"; });
  REQUIRE(r.batched);
  CHECK(r.engine.streamed);
  CHECK(r.engine.by_batch.size() == 2);
}

TEST_CASE("measure_requests: fewer than kMinRequests lives, or lives nested in another run, are no requests") {
  CoroutineActivity act;
  act.found = true;
  for (int i = 0; i + 1 < int(kMinRequests); ++i) act.runs.push_back({1, 0, i * 10, i * 10 + 5, uint64_t(i + 1), true});
  act.lives = coroutine_lives(act.runs);
  CHECK_FALSE(measure_requests(act, {}, [](uint32_t) { return "x"; }).detected);
}

namespace {

// An asyncio batching server on one thread, as the tracer records it: per cycle, 8 requests arrive (the handler's
// first run puts the request on a queue), the batcher task resumes and runs the model for the batch (three kernels,
// then the results read back), a 2.5 ms stats callback holds the loop, then each request resumes and returns. The
// first batch pays a 30 ms warm-up.
std::string write_batching_server(int cycles, int per_batch) {
  const std::string path = temp_path("batcher");
  dump::DumpBuilder b(path);
  testsupport::Sim sim(b, "MainThread");
  for (int c = 0; c < cycles; ++c) {
    for (int r = 0; r < per_batch; ++r)
      sim.coro("handle", 1000 + uint64_t(r), true, [&] { sim.host(200 * kUs); });
    sim.host(1 * kMs);  // the batching window: the loop waits in select
    sim.coro("Batcher.run", 42, c == 0, [&] {
      sim.host(300 * kUs);  // stack the batch
      sim.py("Model.forward", [&] {
        if (c == 0) sim.host(30 * kMs);
        for (int k = 0; k < 3; ++k) sim.launch("gemm_kernel", 1 * kMs);
      });
      sim.sync("cudaStreamSynchronize");  // the results read back
      sim.host(200 * kUs);                // set the futures
    });
    sim.py("log_stats", [&] { sim.host(2500 * kUs); });
    for (int r = 0; r < per_batch; ++r)
      sim.coro("handle", 1000 + uint64_t(r), false, [&] { sim.host(100 * kUs); });
    sim.host(500 * kUs);
  }
  return path;
}

// generate() called at a script's top level, six times: <module> holds GenerationMixin.generate, which holds one
// GPT2LMHeadModel.forward per token (four kernels each), an argmax launched and its token read back after each.
// `stop_check`: a stopping criterion called after each token that copies the ids to the host and scans them for
// 2 ms, so that it, not the model's forward, covers the most time of the per-token calls.
std::string write_top_level_generate(int calls, int tokens, bool stop_check = false) {
  const std::string path = temp_path("generate");
  dump::DumpBuilder b(path);
  testsupport::Sim sim(b, "MainThread");
  sim.py("<module>", [&] {
    for (int c = 0; c < calls; ++c)
      sim.py("GenerationMixin.generate", [&] {
        sim.host(c == 0 ? 40 * kMs : 1 * kMs);
        for (int t = 0; t < tokens; ++t) {
          sim.py("GPT2LMHeadModel.forward", [&] {
            sim.py("GPT2Model.forward", [&] {
              for (int k = 0; k < 4; ++k) sim.launch("gemv_kernel", (t == 0 ? 400 : 60) * kUs, 20 * kUs);
            });
          }, "transformers/models/gpt2/modeling_gpt2.py");
          sim.launch("argmax_kernel", 5 * kUs);
          sim.sync("cudaStreamSynchronize");
          sim.host(150 * kUs);
          if (stop_check)
            sim.py("BlocklistCriteria.__call__", [&] {
              sim.launch("copy_kernel", 2 * kUs);
              sim.sync("cudaStreamSynchronize");
              sim.host(2 * kMs);
            });
        }
      }, "transformers/generation/utils.py");
  }, "script.py", 1);
  return path;
}

}  // namespace

TEST_CASE("an asyncio batching server: the step is the batcher's cycle, the requests are split by its callback") {
  const std::string path = write_batching_server(24, 8);
  const Analysis a = analyze_file(path, {});
  CHECK(a.steps.name == "Batcher.run");
  CHECK(a.steps.total == 24);
  CHECK(a.steps.chosen_because.find("batch cycles") != std::string::npos);
  // The cycle: from the first request queued (after its 0.2 ms run) through the 7 other arrivals (1.4 ms), the 1 ms
  // window, and the batch callback (0.3 ms to stack, 3 ms of kernels, the read back, 0.2 ms to set the futures).
  CHECK(a.end_to_end_ms == doctest::Approx(1.4 + 1.0 + 3.5).epsilon(0.05));
  REQUIRE(a.requests.detected);
  CHECK(a.requests.name == "handle");
  CHECK(a.requests.batched);
  CHECK(a.requests.requests_per_step == doctest::Approx(8.0));
  CHECK(a.requests.count == 24 * 8);
  CHECK(a.requests.split.in_batch_ms > 3.0);
  CHECK(a.requests.split.delayed_ms > 2.5);  // the stats callback, then the requests resumed before it
  bool stats_named = false;
  for (const auto& c : a.requests.callbacks)
    if (c.name == "log_stats") stats_named = c.slow > 0 && c.delay_ms > 2.0;
  CHECK(stats_named);
  // Every batch leaves full (8, the most any took): the wait before it is a window that buys nothing.
  CHECK(a.requests.max_per_step == 8);
  CHECK(a.requests.full_share == doctest::Approx(1.0));
  const Finding* wait = nullptr;
  const Finding* held = nullptr;
  for (const Finding& f : a.findings) {
    if (f.rule == "batch_wait") wait = &f;
    if (f.rule == "loop_blocked") held = &f;
  }
  REQUIRE(wait);
  CHECK(wait->per == "request");
  CHECK(wait->impact_ms == doctest::Approx(a.requests.split.batch_wait_ms));
  CHECK(wait->title.find("though their batches are full") != std::string::npos);
  REQUIRE(held);  // the stats callback, 2.5 ms, over a tenth of the median request
  CHECK(held->title.find("log_stats") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("generate() at a script's top level: the step is the generate call, with its tokens") {
  const std::string path = write_top_level_generate(6, 8);
  const Analysis a = analyze_file(path, {});
  CHECK(a.steps.name == "GenerationMixin.generate");
  CHECK(a.steps.total == 6);
  CHECK(a.steps.warmup >= 1);  // the first call pays the warm-up
  CAPTURE(a.steps.chosen_because);
  CHECK(a.steps.chosen_because.find("GPT2LMHeadModel.forward") != std::string::npos);
  REQUIRE(a.generation.detected);
  CHECK(a.generation.token_function == "GPT2LMHeadModel.forward");
  CHECK(a.generation.tokens_per_step == doctest::Approx(8));
  CHECK(a.generation.ttft_ms > a.generation.tpot_ms);  // the first token waits for the call's set-up and the prompt
  CHECK_FALSE(a.requests.detected);
  bool forward_is_candidate = false;
  for (const auto& c : a.steps.candidates) forward_is_candidate |= c.name == "GPT2LMHeadModel.forward";
  CHECK(forward_is_candidate);
  std::filesystem::remove(path);
}

TEST_CASE("generate() with a stopping criterion that covers more time than the model: still the generate call") {
  const std::string path = write_top_level_generate(6, 8, true);
  const Analysis a = analyze_file(path, {});
  CHECK(a.steps.name == "GenerationMixin.generate");
  CHECK(a.steps.total == 6);
  REQUIRE(a.generation.detected);
  CHECK(a.generation.token_function == "GPT2LMHeadModel.forward");  // the model's call, not the criterion
  CHECK(a.generation.tokens_per_step == doctest::Approx(8));
  std::filesystem::remove(path);
}

TEST_CASE("a function named generate that repeats a helper but no model call is no generation call") {
  const std::string path = temp_path("generate-helper");
  {
    dump::DumpBuilder b(path);
    testsupport::Sim sim(b, "MainThread");
    for (int c = 0; c < 4; ++c)
      sim.py("generate_report", [&] {
        for (int t = 0; t < 12; ++t)
          sim.py("render_chart", [&] {
            sim.launch("plot_kernel", 300 * kUs);
            sim.sync("cudaStreamSynchronize");
            sim.host(1 * kMs);
          });
      });
  }
  const Analysis a = analyze_file(path, {});
  CHECK(a.steps.name == "render_chart");
  CHECK_FALSE(a.generation.detected);
  std::filesystem::remove(path);
}

TEST_CASE("--step that names nothing is refused, naming the candidates") {
  const std::string path = write_top_level_generate(3, 6);
  AnalyzeOptions o;
  o.step = "generate_text";
  try {
    (void)analyze_file(path, o);
    FAIL("a step that names nothing was analysed");
  } catch (const UnknownStep& e) {
    const std::string m = e.what();
    CHECK(m.find(path) != std::string::npos);
    CHECK(m.find("--step 'GenerationMixin.generate'") != std::string::npos);
  }
  o.step = "generate";  // the last part of a qualified name picks it
  const Analysis a = analyze_file(path, o);
  CHECK(a.steps.name == "generate");
  CHECK(a.steps.total == 3);
  std::filesystem::remove(path);
}
