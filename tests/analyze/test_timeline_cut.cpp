// The representative timeline's cut (lib/analyze/timeline_cut.hpp): which spans a step too busy to draw whole keeps.
#include "analyze/timeline_cut.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace inferscope::analyze;
using inferscope::analyze::detail::cut_timeline;

namespace {

size_t count(const TimelineLane& l, const std::string& category) {
  size_t n = 0;
  for (const auto& s : l.spans) n += s.category == category;
  return n;
}

// A launch-bound decode step as the issue met it: the step's range, 4 per-token calls of `Model.forward`, 400 wide
// Python frames under them, and 300 launches of 2 us kernels on the GPU, each joined to its call.
std::map<std::string, TimelineLane> busy_step() {
  std::map<std::string, TimelineLane> lanes;
  TimelineLane& host = lanes["thread main (1)"];
  host.name = "thread main (1)";
  TimelineLane& gpu = lanes["GPU stream 7"];
  gpu.name = "GPU stream 7";
  gpu.gpu = true;
  host.spans.push_back({0, 40, "step", "range", 0});
  for (int t = 0; t < 4; ++t) host.spans.push_back({t * 10.0, t * 10.0 + 9.5, "Model.forward", "python", 1});
  for (int i = 0; i < 400; ++i) host.spans.push_back({i * 0.1, i * 0.1 + 0.09, "Module._call_impl", "python", 2});
  for (uint32_t k = 1; k <= 300; ++k) {
    const double at = k * 0.13;
    host.spans.push_back({at, at + 0.004, "cudaLaunchKernel", "api", 3, k});
    gpu.spans.push_back({at + 0.01, at + 0.01 + 0.002 + k * 1e-6, "elementwise_kernel", "kernel", 0, k});
  }
  host.spans.push_back({39.0, 39.5, "cudaStreamSynchronize", "sync", 3});
  return lanes;
}

}  // namespace

TEST_CASE("timeline cut: GPU work and the calls that launched it stay, Python frames go first") {
  auto lanes = busy_step();
  const auto cut = cut_timeline(lanes, 400, "Model.forward");
  CHECK(cut.before == 1 + 4 + 400 + 600 + 1);
  CHECK(cut.kept <= 400);
  const TimelineLane& host = lanes.at("thread main (1)");
  const TimelineLane& gpu = lanes.at("GPU stream 7");
  CHECK(count(host, "range") == 1);
  CHECK(count(host, "python") >= 4);  // the per-token calls, the token boundaries
  size_t calls = 0;
  for (const auto& s : host.spans) calls += s.label == "Model.forward";
  CHECK(calls == 4);
  // 395 places after the structure: 197 kernels, each with its launch call, the longest first.
  CHECK(count(gpu, "kernel") == 197);
  CHECK(count(host, "api") == 197);
  for (const auto& k : gpu.spans) CHECK(k.correlation > 300 - 197);
  // The 400 wide Python frames that a cut by width alone kept are what goes.
  size_t frames = 0;
  for (const auto& s : host.spans) frames += s.label == "Module._call_impl";
  CHECK(frames == 0);
  // Spans keep their order within a lane.
  for (size_t i = 1; i < gpu.spans.size(); ++i) CHECK(gpu.spans[i - 1].start_ms <= gpu.spans[i].start_ms);
}

TEST_CASE("timeline cut: with room for the GPU work, the longest Python frames fill the rest") {
  auto lanes = busy_step();
  const auto cut = cut_timeline(lanes, 1000, "");
  CHECK(cut.kept == 1000);
  CHECK(count(lanes.at("GPU stream 7"), "kernel") == 300);
  CHECK(count(lanes.at("thread main (1)"), "api") == 300);
  CHECK(count(lanes.at("thread main (1)"), "sync") == 1);
  CHECK(count(lanes.at("thread main (1)"), "python") == 1000 - 1 - 600 - 1);
}

TEST_CASE("timeline cut: nothing is cut when the step fits") {
  auto lanes = busy_step();
  const auto cut = cut_timeline(lanes, 5000, "Model.forward");
  CHECK(cut.kept == cut.before);
  CHECK(lanes.at("thread main (1)").spans.size() == 1 + 4 + 400 + 300 + 1);
}
