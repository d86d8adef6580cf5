// The serving meter (lib/live/serving_meter.hpp) and what the live server renders from it: generation calls with
// their first token and output tokens, asyncio requests from their coroutines' first and last runs.
#include "analyze/serving/requests.hpp"
#include "live/render.hpp"
#include "live/serving_meter.hpp"
#include "live/tap.hpp"

#include <inferscope/records.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <vector>

using namespace inferscope;
using namespace inferscope::live;

namespace {

constexpr uint64_t kMs = 1'000'000;  // ticks are ns here

const std::map<uint32_t, std::string> kCodes = {{1, "GenerationMixin.generate"}, {2, "GPT2LMHeadModel.forward"},
                                                {3, "GPT2Model.forward"}, {4, "prepare_inputs_for_generation"},
                                                {5, "Service.score"}, {6, "Batcher.run"}, {7, "decode_step"},
                                                {8, "Service.helper"}};
std::string code_name(uint32_t c) {
  auto it = kCodes.find(c);
  return it == kCodes.end() ? "" : it->second;
}

// Feeds a meter the records of one generate() call on `thread` from `t0`: per token, the model call (4 ms; its
// GPT2Model.forward inside, recorded first as the tracer writes it) and a 1 ms prepare_inputs_for_generation; the
// first token's model call takes 20 ms (the prompt). Returns the call's end.
uint64_t generate(ServingMeter& m, uint32_t thread, uint64_t t0, int tokens) {
  uint64_t t = t0 + 2 * kMs;  // set-up
  for (int i = 0; i < tokens; ++i) {
    m.call(thread, 4, code_name(4), 2, t, t + kMs);
    t += kMs;
    const uint64_t d = (i == 0 ? 20 : 4) * kMs;
    m.call(thread, 3, code_name(3), 3, t + kMs / 10, t + d - kMs / 10);
    m.call(thread, 2, code_name(2), 2, t, t + d);
    t += d;
  }
  m.call(thread, 1, code_name(1), 1, t0, t + kMs);
  return t + kMs;
}

void put(std::vector<uint8_t>& buf, const void* r, size_t n) {
  const auto* p = static_cast<const uint8_t*>(r);
  buf.insert(buf.end(), p, p + n);
}

}  // namespace

TEST_CASE("serving meter: a generate call's first token, output tokens and latency") {
  ServingMeter m(1.0);
  uint64_t t = 0;
  for (int c = 0; c < 3; ++c) t = generate(m, 1, t + 5 * kMs, 8);
  const ServingView v = m.view();
  CHECK(v.generation_calls == 3);
  CHECK(v.tokens == 24);
  CHECK(v.generation_name == "GenerationMixin.generate");
  CHECK(v.token_name == "GPT2LMHeadModel.forward");  // the model class, not its GPT2Model inside
  // First token: 2 ms set-up + 1 ms prepare + 20 ms model call.
  CHECK(v.ttft.count == 3);
  CHECK(v.ttft.recent_quantile(0.5) == doctest::Approx(0.023));
  // Each later token: 1 ms prepare + 4 ms model call between consecutive model calls' ends.
  CHECK(v.tpot.count == 21);
  CHECK(v.tpot.recent_quantile(0.9) == doctest::Approx(0.005));
  CHECK(v.generation_latency.recent_quantile(0.5) == doctest::Approx((2 + 21 + 7 * 5 + 1) * 1e-3));
  CHECK(v.request_name.empty());
}

TEST_CASE("serving meter: a per-token decode_step leaves its model call to the generate call around it") {
  ServingMeter m(1.0);
  uint64_t t = 0;
  for (int i = 0; i < 6; ++i) {
    m.call(1, 2, code_name(2), 3, t, t + 3 * kMs);
    m.call(1, 7, code_name(7), 2, t, t + 4 * kMs);  // decode_step: generating, one model call
    t += 4 * kMs;
  }
  m.call(1, 1, code_name(1), 1, 0, t);
  const ServingView v = m.view();
  CHECK(v.generation_calls == 1);
  CHECK(v.tokens == 6);
}

TEST_CASE("serving meter: fewer than four model calls is no generation, and a call around calls of generate is none") {
  ServingMeter m(1.0);
  uint64_t t = 0;
  for (int i = 0; i < 3; ++i) {
    m.call(1, 2, code_name(2), 2, t, t + kMs);
    t += kMs;
  }
  m.call(1, 1, code_name(1), 1, 0, t);
  CHECK(m.view().generation_calls == 0);
  // Five generate() calls inside one generate_all(): five generations, not one of five "tokens".
  ServingMeter n(1.0);
  uint64_t u = 0;
  for (int c = 0; c < 5; ++c) u = generate(n, 1, u, 4);
  n.call(1, 9, "generate_all", 0, 0, u + kMs);
  CHECK(n.view().generation_calls == 5);
  CHECK(n.view().tokens == 20);
}

TEST_CASE("serving meter: requests are the top-level coroutine lives, from the first run to the return") {
  ServingMeter m(1.0);
  for (int r = 0; r < 10; ++r) {
    const uint64_t t = uint64_t(r) * 100 * kMs, obj = 0x1000 + uint64_t(r % 3) * 0x100;  // addresses reused
    // The handler's first run (depth 4: the loop's level), an awaited helper inside it (depth 5), then, after
    // waiting for its batch, the run that returns.
    m.call(1, 8, code_name(8), 5, t + kMs, t + 2 * kMs);
    m.coroutine(1, 8, t + kMs, obj + 8, kCoroutineFirstRun | kCoroutineLastRun);
    m.call(1, 5, code_name(5), 4, t, t + 3 * kMs);
    m.coroutine(1, 5, t, obj, kCoroutineFirstRun);
    m.call(1, 5, code_name(5), 4, t + 10 * kMs, t + 12 * kMs);
    m.coroutine(1, 5, t + 10 * kMs, obj, kCoroutineLastRun);
  }
  // The batcher: one life that never returns.
  m.call(1, 6, code_name(6), 4, 0, kMs);
  m.coroutine(1, 6, 0, 0x9000, kCoroutineFirstRun);
  ServingView v = m.view();
  CHECK(v.request_name == "Service.score");
  CHECK(v.request_latency.count == 10);
  CHECK(v.request_latency.recent_quantile(0.5) == doctest::Approx(0.012));
  CHECK(v.generation_calls == 0);
  // A coroutine record whose call record was lost times nothing.
  m.coroutine(1, 5, 123, 0x5000, kCoroutineFirstRun | kCoroutineLastRun);
  CHECK(m.view().request_latency.count == 10);
}

TEST_CASE("serving meter: fewer lives than the analyzer's minimum are no requests") {
  CHECK(kMinRequestLives == analyze::detail::kMinRequests);
  ServingMeter m(1.0);
  for (uint64_t r = 0; r + 1 < kMinRequestLives; ++r) {
    m.call(1, 5, code_name(5), 4, r * kMs, r * kMs + 10);
    m.coroutine(1, 5, r * kMs, 0x1000, kCoroutineFirstRun | kCoroutineLastRun);
  }
  CHECK(m.view().request_name.empty());
}

TEST_CASE("latency histogram: buckets by upper bound, the newest values kept for exact quantiles") {
  LatencyHistogram h;
  h.add(0.0004);
  h.add(0.0005);  // on a bound: counted in it (le)
  h.add(100.0);   // over the last bound
  h.add(-1.0);    // nonsense: ignored
  CHECK(h.count == 3);
  CHECK(h.buckets[0] == 2);
  CHECK(h.over == 1);
  for (int i = 0; i < 2000; ++i) h.add(0.001 * (i % 10));
  CHECK(h.recent.size() == kRecentValues);
  CHECK(h.recent.size() == kRecentValues);  // only the newest: the four first values are gone
  CHECK(h.recent_quantile(0.0) == doctest::Approx(0.0));
  CHECK(h.recent_quantile(1.0) == doctest::Approx(0.009));
  CHECK(h.recent_quantile(0.5) >= 0.004 - 1e-12);
  CHECK(h.recent_quantile(0.5) <= 0.005 + 1e-12);
}

TEST_CASE("tap: Python and coroutine records reach the serving meter; /metrics and /data carry it") {
  Tap tap(99, 0, 1.0, [](uint32_t) { return std::string("?"); });
  tap.set_code_names(code_name);
  std::vector<uint8_t> buf;
  auto call = [&](uint32_t code, uint8_t depth, uint64_t s, uint64_t e) {
    const PyCallRecord r{{RecordKind::kPyCall, depth, sizeof(PyCallRecord)}, code, s, e};
    put(buf, &r, sizeof r);
  };
  auto coro = [&](uint32_t code, uint64_t s, uint64_t obj, uint8_t flags) {
    const PyCoroutineRecord r{{RecordKind::kPyCoroutine, flags, sizeof(PyCoroutineRecord)}, code, s, obj};
    put(buf, &r, sizeof r);
  };
  // Ten requests, each holding one generate() of 5 tokens (2 ms each, 10 ms the first).
  for (uint64_t q = 0; q < 10; ++q) {
    const uint64_t t = q * 100 * kMs;
    uint64_t u = t + kMs;
    for (int i = 0; i < 5; ++i) {
      const uint64_t d = (i ? 2 : 10) * kMs;
      call(2, 6, u, u + d);
      u += d;
    }
    call(1, 5, t + kMs, u);
    call(5, 4, t, u + kMs);
    coro(5, t, 0x7000, kCoroutineFirstRun | kCoroutineLastRun);
  }
  tap.observe(1, buf.data(), buf.size());
  const Snapshot s = tap.snapshot();
  CHECK(s.serving.generation_calls == 10);
  CHECK(s.serving.request_latency.count == 10);
  const std::string m = render_metrics(s);
  CHECK(m.find("inferscope_time_to_first_token_seconds_bucket{le=\"0.01\"} 10\n") != std::string::npos);
  CHECK(m.find("inferscope_time_per_output_token_seconds_count 40\n") != std::string::npos);
  CHECK(m.find("inferscope_time_per_output_token_seconds_bucket{le=\"0.0025\"} 40\n") != std::string::npos);
  CHECK(m.find("inferscope_e2e_request_latency_seconds_count 10\n") != std::string::npos);
  CHECK(m.find("inferscope_e2e_request_latency_seconds_bucket{le=\"0.025\"} 10\n") != std::string::npos);
  CHECK(m.find("inferscope_generation_tokens_total 50\n") != std::string::npos);
  CHECK(m.find("request=\"Service.score\",generation=\"GenerationMixin.generate\",token=\"GPT2LMHeadModel.forward\","
               "request_source=\"asyncio\"} 1\n") != std::string::npos);
  const std::string d = render_data_json(s);
  CHECK(d.find("\"serving\":{\"generation\":{\"calls\":10,\"tokens\":50") != std::string::npos);
  CHECK(d.find("\"ttft_p50_ms\":10,") != std::string::npos);
  CHECK(d.find("\"requests\":{\"function\":\"Service.score\",\"count\":10,\"latency_p50_ms\":20,") != std::string::npos);
}

TEST_CASE("tap: a program with neither generation nor requests gets no serving part") {
  Tap tap(99, 0, 1.0, [](uint32_t) { return std::string("?"); });
  tap.set_code_names(code_name);
  std::vector<uint8_t> buf;
  const PyCallRecord r{{RecordKind::kPyCall, 1, sizeof(PyCallRecord)}, 8, 0, kMs};
  put(buf, &r, sizeof r);
  tap.observe(1, buf.data(), buf.size());
  const Snapshot s = tap.snapshot();
  CHECK(render_metrics(s).find("inferscope_time_to_first_token") == std::string::npos);
  CHECK(render_metrics(s).find("inferscope_e2e_request_latency") == std::string::npos);
  CHECK(render_data_json(s).find("\"serving\":null") != std::string::npos);
}
