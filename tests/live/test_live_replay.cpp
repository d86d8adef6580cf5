// The live tap fed real H100 recordings (tests/fixtures: planted_h2d_bound, 20 steps each copying 36 ms of data
// to the GPU; mg_pipeline_two_gpus, two GPUs in one process) chunk by chunk, its GPU records arriving after their activity ended, as CUPTI hands
// them over while the page is served. Every step the tap settles must then read the GPU busy time that the whole
// recording shows for it, computed here independently (the union of every GPU activity inside the step, with all
// records known): the settling rule (a step waits for a GPU record that ends after it, or 1 s;
// lib/live/step_settler.hpp) holds on a real run's records, not only on the made-up ones of test_live_gpu.cpp.
#include "dump/reader.hpp"
#include "live/tap.hpp"
#include "replay_tap.hpp"

#include <inferscope/records.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace inferscope;
using namespace inferscope::live;

namespace {

std::string fixture(const char* name) { return std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/" + name; }

uint32_t string_id(const dump::DumpReader& r, const std::string& text) {
  for (uint32_t id = 0; id < r.string_count(); ++id)
    if (r.string_at(id) == text) return id;
  return 0;
}

struct Interval {
  uint64_t start, end;
};

// Busy ticks of [from, to) covered by the union of `xs`.
uint64_t union_inside(std::vector<Interval> xs, uint64_t from, uint64_t to) {
  std::sort(xs.begin(), xs.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  uint64_t busy = 0, cur_s = 0, cur_e = 0;
  bool open = false;
  for (const Interval& x : xs) {
    const uint64_t s = std::max(x.start, from), e = std::min(x.end, to);
    if (s >= e) continue;
    if (open && s <= cur_e) {
      cur_e = std::max(cur_e, e);
      continue;
    }
    if (open) busy += cur_e - cur_s;
    cur_s = s, cur_e = e, open = true;
  }
  return busy + (open ? cur_e - cur_s : 0);
}

struct Replayed {
  std::vector<SettledStep> settled;  // as the tap shows them at the end, oldest first
  uint64_t steps_total = 0;
  std::vector<Interval> gpu;  // every GPU activity of the recording
  std::set<std::pair<uint64_t, uint64_t>> steps;  // every step range: (start, end)
};

// Reads a record's time span when it is a GPU activity (kernel, copy, memset).
bool gpu_span(const RecordHeader& h, const uint8_t* p, uint64_t& start, uint64_t& end) {
  if (h.kind == RecordKind::kGpuKernel) {
    GpuKernelRecord k;
    std::memcpy(&k, p, sizeof(k));
    start = k.start, end = k.end;
  } else if (h.kind == RecordKind::kGpuMemcpy) {
    GpuMemcpyRecord k;
    std::memcpy(&k, p, sizeof(k));
    start = k.start, end = k.end;
  } else if (h.kind == RecordKind::kGpuMemset) {
    GpuMemsetRecord k;
    std::memcpy(&k, p, sizeof(k));
    start = k.start, end = k.end;
  } else {
    return false;
  }
  return true;
}

struct GpuRecord {
  uint64_t end;
  std::vector<uint8_t> bytes;
};

// Feeds the tap the recording's chunks in file order, except the GPU channel's records: each reaches the tap
// `lag_ns` after its activity ended, in a chunk of its own before the first chunk drained that much later, as
// CUPTI hands records over while the page is served (lib/runtime/live.cpp asks for them every 250 ms). In the
// file itself they are one chunk at the end: CUPTI's own periodic flush hands over only full buffers.
Replayed replay(const dump::DumpReader& r, uint64_t lag_ns) {
  const uint32_t step = string_id(r, "step");
  REQUIRE(step != 0);
  const auto& cal = r.calibration();
  REQUIRE(cal.size() >= 2);
  // The session's tick rate, as the runtime gives it to the tap (lib/runtime/live.cpp): the 1 s time-out is in ticks.
  const double rate = double(cal.back().ticks - cal.front().ticks) / double(cal.back().monotonic_ns - cal.front().monotonic_ns);
  const uint64_t lag = uint64_t(double(lag_ns) * rate);
  Tap tap(step, cal.front().ticks, rate, [&](uint32_t id) { return r.string_at(id); });
  for (const auto& [id, t] : r.threads()) tap.set_thread_name(id, t.name, t.os_tid);
  Replayed out;
  uint32_t gpu_thread = 0;
  std::vector<GpuRecord> gpu;
  std::vector<const dump::EventsChunkRef*> others;
  for (const dump::EventsChunkRef& c : r.event_chunks()) {
    const auto t = r.threads().find(c.thread_id);
    if (t == r.threads().end() || !t->second.is_channel() || t->second.name != "gpu") {
      others.push_back(&c);
      continue;
    }
    gpu_thread = c.thread_id;
    r.for_each_record_in(c, [&](uint32_t, const RecordHeader& h, const uint8_t* p) {
      uint64_t s = 0, e = 0;
      if (!gpu_span(h, p, s, e)) return;
      out.gpu.push_back({s, e});
      gpu.push_back({e, std::vector<uint8_t>(p, p + h.size)});
    });
  }
  std::sort(gpu.begin(), gpu.end(), [](const GpuRecord& a, const GpuRecord& b) { return a.end < b.end; });
  size_t next_gpu = 0;
  auto deliver_until = [&](uint64_t clock) {
    std::vector<uint8_t> chunk;
    for (; next_gpu < gpu.size() && gpu[next_gpu].end + lag <= clock; ++next_gpu)
      chunk.insert(chunk.end(), gpu[next_gpu].bytes.begin(), gpu[next_gpu].bytes.end());
    if (!chunk.empty()) tap.observe(gpu_thread, chunk.data(), chunk.size());
  };
  uint64_t clock = 0;  // the writer's clock: no earlier than the newest record it has drained
  for (const dump::EventsChunkRef* c : others) {
    r.for_each_record_in(*c, [&](uint32_t, const RecordHeader& h, const uint8_t* p) {
      if (h.kind != RecordKind::kRange) return;
      RangeRecord x;
      std::memcpy(&x, p, sizeof(x));
      clock = std::max(clock, x.end);
      if (x.name == step) out.steps.insert({x.start, x.end});
    });
    deliver_until(clock);
    std::vector<uint8_t> bytes(c->length);
    r.read_at(c->offset, bytes.data(), bytes.size());
    tap.observe(c->thread_id, bytes.data(), bytes.size());
    tap.advance(clock);
  }
  deliver_until(~0ull - lag);  // the session's end: the rest arrives
  tap.advance(clock);
  const Snapshot snap = tap.snapshot();
  out.settled = snap.settled;
  out.steps_total = snap.steps_total;
  return out;
}

}  // namespace

TEST_CASE("live tap replaying an H100 recording: each settled step's GPU busy time is the recording's own") {
  dump::DumpReader r(fixture("planted_h2d_bound.iscope"));
  // Records handed over as soon as they end, and a quarter of a second later (the page's delivery period): either
  // way every step waits for its records and reads exactly the busy time the whole recording shows.
  for (uint64_t lag_ms : {0u, 250u, 900u}) {
    CAPTURE(lag_ms);
    const Replayed x = replay(r, lag_ms * 1'000'000);
    REQUIRE(x.steps_total == x.steps.size());
    REQUIRE(!x.gpu.empty());
    // The last step may still wait for a record that ends after it (none comes once the program has stopped).
    CHECK(x.settled.size() + 1 >= x.steps.size());
    REQUIRE(x.settled.size() >= 10);
    size_t busy_steps = 0;
    for (const SettledStep& s : x.settled) {
      CAPTURE(s.step.start);
      CHECK(x.steps.count({s.step.start, s.step.end}) == 1);
      CHECK(s.complete);
      const uint64_t expected = union_inside(x.gpu, s.step.start, s.step.end);
      CHECK(s.ticks[size_t(Category::kGpuBusy)] == expected);
      uint64_t sum = 0;
      for (uint64_t t : s.ticks) sum += t;
      CHECK(sum == s.step.end - s.step.start);  // the categories split the step, nothing more or less
      busy_steps += expected * 2 > s.step.end - s.step.start;
    }
    // The program copies 36 ms of data to the GPU per step: its steps are busy (h2d_bound, 98 % in the analyzer).
    CHECK(busy_steps * 10 >= x.settled.size() * 9);
  }
}

TEST_CASE("live tap replaying two H100s in one process: the busy time is the union over both GPUs") {
  // mg_pipeline_two_gpus: two pipeline stages on cuda:0 and cuda:1 taking turns, 23 steps of 79 ms.
  dump::DumpReader r(fixture("mg_pipeline_two_gpus.iscope"));
  const Replayed x = replay(r, 250'000'000);
  REQUIRE(x.settled.size() >= 15);
  for (const SettledStep& s : x.settled) {
    CAPTURE(s.step.start);
    CHECK(s.complete);
    CHECK(s.ticks[size_t(Category::kGpuBusy)] == union_inside(x.gpu, s.step.start, s.step.end));
  }
}

TEST_CASE("live tap replaying an H100 recording: records later than the 1 s bound are missed, never over-counted") {
  dump::DumpReader r(fixture("mg_pipeline_two_gpus.iscope"));
  // Handed over 1.2 s late: once the first record is in, the steps that ended more than 1 s before settle by the
  // time-out, before their own records come (the recording holds 1.8 s of steps, so some do).
  const Replayed x = replay(r, 1'200'000'000);
  REQUIRE(x.settled.size() >= 10);
  size_t short_of = 0;
  for (const SettledStep& s : x.settled) {
    const uint64_t expected = union_inside(x.gpu, s.step.start, s.step.end);
    CHECK(s.ticks[size_t(Category::kGpuBusy)] <= expected);
    short_of += s.ticks[size_t(Category::kGpuBusy)] < expected;
  }
  CHECK(short_of >= 1);  // why the page asks CUPTI for its records every 250 ms, well inside the bound
}

namespace {

// The serving meter's view at the end of a recording fed to the tap chunk by chunk (replay_tap.hpp).
ServingView replay_serving(const dump::DumpReader& r) { return replay_to_end(r).serving; }

// A number of the program's own last line (its timers, printed as JSON), stored beside the fixture.
double own(const char* file, const std::string& key) {
  std::ifstream in(fixture(file));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::strtod(text.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace

// hf_generate_fixed: samples/serving/hf_generate_streamer.py --fixed --calls 6 (GPT-2, 48 new tokens per call, a
// streamer stamping each token), recorded on an H200 without CUPTI, its own timers beside it. The program leaves
// its 2 warm-up calls out of its figures; the meter counts every call, and its medians hold regardless.
TEST_CASE("live serving metrics replaying a GPU recording of generate(): within 15 % of the program's own timers") {
  dump::DumpReader r(fixture("live/hf_generate_fixed.iscope"));
  const ServingView v = replay_serving(r);
  CHECK(v.generation_name == "GenerationMixin.generate");
  CHECK(v.token_name == "GPT2LMHeadModel.forward");
  CHECK(v.generation_calls == 8);  // 2 warm-up calls and 6 timed ones
  CHECK(v.tokens == 8 * 48);
  const double ttft = own("live/hf_generate_fixed.own.json", "ttft_ms_p50"), tpot = own("live/hf_generate_fixed.own.json", "tpot_ms_p50");
  const double call = own("live/hf_generate_fixed.own.json", "call_ms_p50");
  CHECK(v.ttft.recent_quantile(0.5) * 1e3 == doctest::Approx(ttft).epsilon(0.15));
  CHECK(v.tpot.recent_quantile(0.5) * 1e3 == doctest::Approx(tpot).epsilon(0.15));
  CHECK(v.generation_latency.recent_quantile(0.5) * 1e3 == doctest::Approx(call).epsilon(0.15));
  CHECK(v.request_name.empty());  // no asyncio here
}

// aiohttp_batcher_small: samples/serving/aiohttp_batcher.py --requests 3000 --warmup 300 (an aiohttp server whose
// batcher waits out an 8 ms window; client processes), recorded on an H200 without CUPTI. Its own request latency is
// timed inside the handler, from its first line to its response.
TEST_CASE("live serving metrics replaying a GPU recording of an aiohttp batching server: the handler's requests") {
  dump::DumpReader r(fixture("live/aiohttp_batcher_small.iscope"));
  const ServingView v = replay_serving(r);
  CHECK(v.generation_calls == 0);
  CHECK(v.request_name == "classify");
  CHECK(v.request_latency.count >= 3000);  // and the warm-up's
  CHECK(v.request_latency.recent_quantile(0.5) * 1e3 ==
        doctest::Approx(own("live/aiohttp_batcher_small.own.json", "request_ms_p50")).epsilon(0.15));
}
