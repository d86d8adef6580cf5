// The GPU side of the live tap (lib/live/step_settler.cpp, step_split.cpp, render_gpu.cpp): the busy share of a
// step, the rule that makes a step wait for its late GPU records, the split of a step's time into categories,
// and how /metrics and /data show them, or say there is no GPU activity. Ticks are ns here (1 tick per ns).
#include "live/render.hpp"
#include "live/render_gpu.hpp"
#include "live/tap.hpp"

#include <inferscope/records.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::live;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kStep = 1, kSync = 10, kLaunch = 11, kCopy = 12;
constexpr uint32_t kMain = 3, kGpuChannel = 9;

std::string names(uint32_t id) {
  switch (id) {
    case kStep: return "step";
    case kSync: return "cudaStreamSynchronize";
    case kLaunch: return "cudaLaunchKernel";
    case kCopy: return "cudaMemcpy";
    default: return "other";
  }
}

template <class R>
void put(std::vector<uint8_t>& buf, const R& r) {
  const auto* p = reinterpret_cast<const uint8_t*>(&r);
  buf.insert(buf.end(), p, p + sizeof(r));
}

void range(std::vector<uint8_t>& buf, uint32_t name, uint64_t start, uint64_t end) {
  put(buf, RangeRecord{{RecordKind::kRange, 0, sizeof(RangeRecord)}, name, start, end});
}

void kernel(std::vector<uint8_t>& buf, uint32_t stream, uint64_t start, uint64_t end) {
  GpuKernelRecord k{};
  k.h = {RecordKind::kGpuKernel, 0, sizeof(GpuKernelRecord)};
  k.start = start;
  k.end = end;
  k.stream = stream;
  put(buf, k);
}

void copy(std::vector<uint8_t>& buf, uint32_t stream, uint64_t start, uint64_t end) {
  GpuMemcpyRecord c{};
  c.h = {RecordKind::kGpuMemcpy, uint8_t(CopyKind::kHtoD), sizeof(GpuMemcpyRecord)};
  c.start = start;
  c.end = end;
  c.stream = stream;
  put(buf, c);
}

void api(std::vector<uint8_t>& buf, uint32_t name, uint64_t start, uint64_t end, uint32_t os_tid = 0) {
  CudaApiRecord a{};
  a.h = {RecordKind::kCudaApi, uint8_t(ApiDomain::kRuntime), sizeof(CudaApiRecord)};
  a.name = name;
  a.start = start;
  a.end = end;
  a.os_tid = os_tid;
  put(buf, a);
}

void feed(Tap& tap, uint32_t thread, const std::vector<uint8_t>& buf) { tap.observe(thread, buf.data(), buf.size()); }

// The samples of a Prometheus text exposition, "name{labels}" -> value; every sample's family has a TYPE line.
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> out;
  std::map<std::string, std::string> types;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    const std::string key = line.substr(0, space);
    std::string family = key.substr(0, key.find('{'));
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!types.count(family) && family.size() > std::strlen(suffix) &&
          family.compare(family.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        family.resize(family.size() - std::strlen(suffix));
    INFO(line);
    CHECK(types.count(family) == 1);
    out[key] = std::stod(line.substr(space + 1));
  }
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("split_step: the GPU's union first, then sync calls, then launch calls, the rest host") {
  const std::vector<Interval> gpu = {{10, 30}, {20, 40}, {90, 150}};  // two streams overlap; one runs past the end
  const std::vector<Interval> sync = {{30, 60}};                       // 30..40 is GPU busy already
  const std::vector<Interval> launch = {{5, 15}};                      // 10..15 is GPU busy already
  const StepSplit s = split_step({0, 100}, gpu, sync, launch);
  CHECK(s[size_t(Category::kGpuBusy)] == 40);
  CHECK(s[size_t(Category::kSyncWait)] == 20);
  CHECK(s[size_t(Category::kLaunch)] == 5);
  CHECK(s[size_t(Category::kHost)] == 35);
  CHECK(split_step({0, 100}, {}, {}, {})[size_t(Category::kHost)] == 100);
  CHECK(split_step({50, 50}, gpu, sync, launch) == StepSplit{});
  CHECK(std::string(category_name(Category::kSyncWait)) == "sync_wait");
}

TEST_CASE("no GPU record: nothing settles, /data says gpu null and /metrics has no GPU series") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> buf;
  api(buf, kSync, 10 * kMs, 90 * kMs);
  range(buf, kStep, 0, 100 * kMs);
  feed(tap, kMain, buf);
  tap.advance(5000 * kMs);  // far past any bound: still nothing to settle against
  const Snapshot s = tap.snapshot();
  CHECK_FALSE(s.gpu_seen);
  CHECK(s.settled.empty());
  CHECK(has(render_data_json(s), "\"gpu\":null"));
  CHECK(has(render_data_json(s), "\"gpu\":[]"));  // the timeline's GPU lanes
  const std::string m = render_metrics(s);
  CHECK_FALSE(has(m, "inferscope_gpu"));
  CHECK_FALSE(has(m, "inferscope_step_time_seconds_total"));
  CHECK(has(render_page(""), "no GPU activity recorded"));
}

TEST_CASE("a step waits for its late kernels until one ends past it, then splits its time") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> host;
  api(host, kLaunch, 1 * kMs, 2 * kMs);
  api(host, kSync, 2 * kMs, 80 * kMs);
  range(host, kStep, 0, 100 * kMs);
  feed(tap, kMain, host);
  tap.advance(100 * kMs);

  // A cycle later the GPU channel brings the step's kernels: two streams overlapping, ending before the step does.
  std::vector<uint8_t> gpu;
  kernel(gpu, 7, 2 * kMs, 50 * kMs);
  copy(gpu, 8, 40 * kMs, 70 * kMs);
  feed(tap, kGpuChannel, gpu);
  tap.advance(150 * kMs);
  Snapshot s = tap.snapshot();
  CHECK(s.gpu_seen);
  CHECK(s.gpu_records == 2);
  CHECK(s.steps_pending == 1);  // the watermark (70 ms) is before the step's end: more may come
  CHECK(s.settled.empty());
  CHECK(has(render_data_json(s), "\"busy_p50\":null"));
  CHECK(parse_metrics(render_metrics(s)).count("inferscope_gpu_busy_ratio") == 0);  // nothing measured yet

  // The next cycle's records reach past the step's end: the step settles.
  gpu.clear();
  kernel(gpu, 7, 120 * kMs, 130 * kMs);
  feed(tap, kGpuChannel, gpu);
  tap.advance(160 * kMs);
  s = tap.snapshot();
  CHECK(s.steps_pending == 0);
  REQUIRE(s.settled.size() == 1);
  const StepSplit& t = s.settled[0].ticks;
  CHECK(t[size_t(Category::kGpuBusy)] == 68 * kMs);   // 2..70, the overlap counted once
  CHECK(t[size_t(Category::kSyncWait)] == 10 * kMs);  // 70..80: blocked in the sync with the GPU idle
  CHECK(t[size_t(Category::kLaunch)] == 1 * kMs);
  CHECK(t[size_t(Category::kHost)] == 21 * kMs);

  const std::string d = render_data_json(s);
  CHECK(has(d, "\"busy_p50\":0.68"));
  CHECK(has(d, "\"busy_ratio\":0.68"));
  CHECK(has(d, "\"bottleneck\":{\"category\":\"gpu_busy\",\"share\":0.68}"));
  CHECK(has(d, "{\"name\":\"sync_wait\",\"share\":0.1,\"ms_per_step\":10}"));
  CHECK(has(d, "{\"device\":0,\"stream\":8,\"kind\":\"memcpy\",\"start_ms\":40,\"dur_ms\":30}"));

  const auto m = parse_metrics(render_metrics(s));
  CHECK(m.at("inferscope_gpu_busy_seconds_total") == doctest::Approx(0.068));
  CHECK(m.at("inferscope_gpu_busy_ratio") == doctest::Approx(0.68));
  CHECK(m.at("inferscope_gpu_records_total") == 3);
  CHECK(m.at("inferscope_step_time_seconds_total{category=\"gpu_busy\"}") == doctest::Approx(0.068));
  CHECK(m.at("inferscope_step_time_seconds_total{category=\"sync_wait\"}") == doctest::Approx(0.010));
  CHECK(m.at("inferscope_step_time_seconds_total{category=\"launch\"}") == doctest::Approx(0.001));
  CHECK(m.at("inferscope_step_time_seconds_total{category=\"host\"}") == doctest::Approx(0.021));
  // The categories add up to the settled steps' time: the denominator of the share in docs/live.md.
  double sum = 0;
  for (const char* c : {"gpu_busy", "sync_wait", "launch", "host"})
    sum += m.at(std::string("inferscope_step_time_seconds_total{category=\"") + c + "\"}");
  CHECK(sum == doctest::Approx(m.at("inferscope_step_duration_seconds_sum")));
}

TEST_CASE("a kernel across a step boundary counts in both; with no later GPU record the bound settles") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> host, gpu;
  range(host, kStep, 0, 100 * kMs);
  range(host, kStep, 100 * kMs, 200 * kMs);
  feed(tap, kMain, host);
  kernel(gpu, 7, 90 * kMs, 110 * kMs);
  feed(tap, kGpuChannel, gpu);
  tap.advance(200 * kMs + 999 * kMs);  // the first step settles on the watermark, the second waits (< 1 s)
  Snapshot s = tap.snapshot();
  REQUIRE(s.settled.size() == 1);
  CHECK(s.settled[0].ticks[size_t(Category::kGpuBusy)] == 10 * kMs);
  CHECK(s.steps_pending == 1);
  tap.advance(200 * kMs + 1000 * kMs);  // the bound: the GPU went idle before the second step ended
  s = tap.snapshot();
  REQUIRE(s.settled.size() == 2);
  CHECK(s.settled[1].ticks[size_t(Category::kGpuBusy)] == 10 * kMs);
  CHECK(s.settled[1].ticks[size_t(Category::kHost)] == 90 * kMs);
  CHECK(has(render_data_json(s), "\"busy_p50\":0.1"));
}

TEST_CASE("API calls from the gpu channel count on the thread their OS id names; others' calls do not") {
  Tap tap(kStep, 0, 1.0, names);
  tap.set_thread_name(kMain, "main", 555);
  std::vector<uint8_t> host, gpu;
  range(host, kStep, 0, 100 * kMs);
  feed(tap, kMain, host);
  api(gpu, kCopy, 10 * kMs, 40 * kMs, 555);  // a blocking cudaMemcpy of the step's thread
  api(gpu, kSync, 50 * kMs, 90 * kMs, 777);  // another thread's sync: not the step's time
  kernel(gpu, 7, 150 * kMs, 160 * kMs);
  feed(tap, kGpuChannel, gpu);
  tap.advance(160 * kMs);
  const Snapshot s = tap.snapshot();
  REQUIRE(s.settled.size() == 1);
  CHECK(s.settled[0].ticks[size_t(Category::kSyncWait)] == 30 * kMs);
  CHECK(s.settled[0].ticks[size_t(Category::kHost)] == 70 * kMs);
  CHECK(has(render_data_json(s), "\"bottleneck\":{\"category\":\"host\",\"share\":0.7}"));
}

TEST_CASE("a step whose GPU records were overwritten before it settled is left out, not shown as idle") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> host, gpu;
  range(host, kStep, 0, 100 * kMs);
  feed(tap, kMain, host);
  kernel(gpu, 7, 10 * kMs, 90 * kMs);
  for (size_t i = 0; i < kGpuSpanCapacity; ++i) kernel(gpu, 7, 200 * kMs + i, 200 * kMs + i + 1);
  feed(tap, kGpuChannel, gpu);
  tap.advance(300 * kMs);
  const Snapshot s = tap.snapshot();
  CHECK(s.steps_settled == 1);
  CHECK(s.steps_incomplete == 1);
  CHECK(gpu_window(s).empty());
  CHECK(has(render_data_json(s), "\"steps_incomplete\":1"));
  const auto m = parse_metrics(render_metrics(s));
  CHECK(m.at("inferscope_gpu_busy_seconds_total") == 0);
  CHECK(m.at("inferscope_step_time_seconds_total{category=\"host\"}") == 0);
  // No complete step settled: the timeline follows the newest steps up to now (its GPU lanes the newest activities,
  // capped), rather than a step whose GPU side was lost.
  CHECK(s.timeline_to == 0);
  CHECK(s.gpu_spans.size() == kTimelineGpuSpans);
}

TEST_CASE("the timeline's copy of GPU activities is capped at the newest kTimelineGpuSpans") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> host, gpu;
  range(host, kStep, 0, 100 * kMs);
  feed(tap, kMain, host);
  for (size_t i = 0; i < kTimelineGpuSpans + 10; ++i) kernel(gpu, 7, kMs + i * 1000, kMs + i * 1000 + 500);
  kernel(gpu, 7, 150 * kMs, 151 * kMs);  // past the step's end: it settles
  feed(tap, kGpuChannel, gpu);
  tap.advance(200 * kMs);
  const Snapshot s = tap.snapshot();
  REQUIRE(s.steps_settled == 1);
  CHECK(s.gpu_spans.size() == kTimelineGpuSpans);
}

TEST_CASE("past kPendingCapacity waiting steps the oldest is given up: incomplete, never measured with what came") {
  Tap tap(kStep, 0, 1.0, names);
  std::vector<uint8_t> gpu, host;
  kernel(gpu, 7, 0, 1 * kMs);  // a first GPU record: steps now wait for theirs
  feed(tap, kGpuChannel, gpu);
  // kPendingCapacity + 1 steps of 0.1 ms after it (103 ms in all, inside the 1 s bound), their kernels (90 us
  // into each) not yet arrived.
  constexpr uint64_t kStepNs = 100'000, kFrom = 10 * kMs;
  const uint64_t last_end = kFrom + (kPendingCapacity + 1) * kStepNs;
  for (size_t i = 0; i <= kPendingCapacity; ++i) range(host, kStep, kFrom + i * kStepNs, kFrom + (i + 1) * kStepNs);
  feed(tap, kMain, host);
  tap.advance(last_end);
  Snapshot s = tap.snapshot();
  CHECK(s.steps_settled == 1);
  CHECK(s.steps_incomplete == 1);
  CHECK(s.steps_pending == kPendingCapacity);
  // Their kernels arrive: every other step settles complete and GPU-busy 90 %; the given-up one stays out. (The
  // last step's kernel ends before the step does, so the watermark never reaches it: it still waits.)
  gpu.clear();
  for (size_t i = 0; i <= kPendingCapacity; ++i) kernel(gpu, 7, kFrom + i * kStepNs, kFrom + i * kStepNs + 90'000);
  feed(tap, kGpuChannel, gpu);
  tap.advance(last_end + kMs);
  s = tap.snapshot();
  CHECK(s.steps_settled == kPendingCapacity);
  CHECK(s.steps_incomplete == 1);
  CHECK(s.steps_pending == 1);
  const auto m = parse_metrics(render_metrics(s));
  CHECK(m.at("inferscope_gpu_busy_seconds_total") == doctest::Approx((kPendingCapacity - 1) * 90e-6));
}

TEST_CASE("the timeline shows the newest settled steps with their GPU activities, not the newest steps with none yet") {
  Tap tap(kStep, 0, 1.0, names);
  // Ten 10 ms steps, each with a kernel from 2 to 8 ms into it; the GPU channel has delivered the first seven
  // steps' kernels only (the last three steps' arrive later, as CUPTI's records do).
  std::vector<uint8_t> host, gpu;
  for (uint64_t i = 0; i < 10; ++i) {
    range(host, kStep, i * 10 * kMs, (i + 1) * 10 * kMs);
    if (i < 7) kernel(gpu, 7, i * 10 * kMs + 2 * kMs, i * 10 * kMs + 8 * kMs);
  }
  feed(tap, kMain, host);
  feed(tap, kGpuChannel, gpu);
  tap.advance(100 * kMs);
  Snapshot s = tap.snapshot();
  // Steps 0-5 settled (step 6's kernel ends before its end: more may come, the watermark says so).
  REQUIRE(s.settled.size() == 6);
  CHECK(s.timeline_from == 10 * kMs);  // the newest five settled: steps 1 to 5
  CHECK(s.timeline_to == 60 * kMs);
  const std::string d = render_data_json(s);
  CHECK(has(d, "\"timeline\":{\"from_ms\":10,\"to_ms\":60,"));
  CHECK(has(d, "{\"device\":0,\"stream\":7,\"kind\":\"kernel\",\"start_ms\":52,\"dur_ms\":6}"));  // step 5's kernel
  CHECK_FALSE(has(d, "\"start_ms\":62,"));  // step 6's kernel: its step has not settled, it is not shown
  CHECK_FALSE(has(d, "\"start_ms\":90,"));  // nor step 9, the newest step, whose GPU side has not arrived
  CHECK(s.gpu_spans.size() == 5);
  // The steps drawn are the five settled ones: not step 0, which ends where the range starts, nor step 6, which
  // starts where it ends and has not settled.
  const std::string timeline = d.substr(d.find("\"timeline\":"));
  for (const char* drawn : {"\"start_ms\":10,\"dur_ms\":10,\"step\":true", "\"start_ms\":50,\"dur_ms\":10,\"step\":true"})
    CHECK_MESSAGE(has(timeline, drawn), drawn);
  CHECK_FALSE(has(timeline, "\"start_ms\":0,\"dur_ms\":10,\"step\":true"));
  CHECK_FALSE(has(timeline, "\"start_ms\":60,\"dur_ms\":10,\"step\":true"));

  // Before any step settled the timeline follows the newest steps up to now.
  Tap fresh(kStep, 0, 1.0, names);
  feed(fresh, kMain, host);
  fresh.advance(100 * kMs);
  const Snapshot f = fresh.snapshot();
  CHECK(f.timeline_to == 0);
  CHECK(has(render_data_json(f), "\"timeline\":{\"from_ms\":50,\"to_ms\":100,"));
}
