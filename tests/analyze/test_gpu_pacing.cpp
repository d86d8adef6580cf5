// Does the host run ahead of the GPU (lib/analyze/gpu_pacing.hpp)?
#include "analyze/gpu_pacing.hpp"

#include <doctest/doctest.h>

#include <cstddef>

using namespace inferscope::analyze::detail;

namespace {

constexpr int64_t us = 1'000;

struct Loop {
  std::vector<StepWindow> steps;
  std::vector<LaunchAt> launches;
  std::vector<GpuEnd> gpu;
  uint32_t corr = 1;
  /// A step range [start, start + host) whose one launch queues work that ends at gpu_end.
  void step(int64_t start, int64_t host, int64_t gpu_end) {
    steps.push_back({start, start + host});
    launches.push_back({start + 1, corr});
    gpu.push_back({corr++, gpu_end});
  }
};

}  // namespace

TEST_CASE("a loop that waits for its GPU work each step: not ahead, the pace is the ranges'") {
  Loop l;
  for (int i = 0; i < 10; ++i) l.step(i * 1000 * us, 900 * us, i * 1000 * us + 850 * us);  // work ends inside the range
  const GpuPacing p = gpu_pacing(l.steps, l.launches, l.gpu);
  CHECK_FALSE(p.host_ahead);
  CHECK(p.median_lag_ns == 0);
  REQUIRE(p.periods_ns.size() == 10);
  CHECK(p.periods_ns[0] == doctest::Approx(900 * us));
  CHECK(p.periods_ns[1] == doctest::Approx(1000 * us));
}

TEST_CASE("a loop that only queues: ranges of 120 us, the GPU takes 2.6 ms a step") {
  Loop l;
  for (int i = 0; i < 20; ++i) l.step(i * 130 * us, 120 * us, (i + 1) * 2600 * us);
  const GpuPacing p = gpu_pacing(l.steps, l.launches, l.gpu);
  CHECK(p.host_ahead);
  CHECK(p.paced_ns == doctest::Approx(2600 * us));
  REQUIRE(p.periods_ns.size() == 20);
  for (size_t i = 1; i < 20; ++i) CHECK(p.periods_ns[i] == doctest::Approx(2600 * us));
}

TEST_CASE("work of an earlier step that ends last adds no negative period; launches outside steps are ignored") {
  Loop l;
  l.step(0, 100 * us, 5000 * us);
  l.step(200 * us, 100 * us, 400 * us);  // its work ends before step 0's
  l.launches.push_back({150 * us, 99});   // between the steps
  l.gpu.push_back({99, 9000 * us});
  const GpuPacing p = gpu_pacing(l.steps, l.launches, l.gpu);
  REQUIRE(p.periods_ns.size() == 2);
  CHECK(p.periods_ns[0] == doctest::Approx(5000 * us));
  CHECK(p.periods_ns[1] == 0);
  CHECK(p.paced_ns == doctest::Approx(2500 * us));
}

TEST_CASE("no steps: nothing") { CHECK_FALSE(gpu_pacing({}, {}, {}).host_ahead); }
