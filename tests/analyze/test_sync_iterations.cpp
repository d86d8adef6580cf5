// Loop iterations of a plain C++ CUDA program from its blocking calls (lib/analyze/sync_iterations.hpp).
#include "analyze/model.hpp"
#include "analyze/sync_iterations.hpp"

#include <doctest/doctest.h>

using namespace inferscope::analyze::detail;

namespace {

constexpr uint32_t kLaunchName = 1, kSyncName = 2, kH2DName = 3, kD2HName = 4;

struct Loop {
  std::vector<CallView> calls;
  int64_t now = 0;
  void call(uint32_t name, uint8_t kind, int64_t dur, int64_t gap_after = 1) {
    calls.push_back({now, now + dur, name, kind});
    now += dur + gap_after;
  }
  void launches(int n) {
    for (int i = 0; i < n; ++i) call(kLaunchName, kLaunch, 5);
  }
};

}  // namespace

TEST_CASE("one sync per iteration: each iteration ends at the sync") {
  Loop l;
  for (int i = 0; i < 6; ++i) {
    l.launches(10);
    l.call(kSyncName, kSync, 100, 50);  // the loop's own work after the sync
  }
  const SyncIterations it = sync_iterations(l.calls);
  REQUIRE(it.spans.size() == 6);
  CHECK(it.period == 1);
  CHECK(it.boundary_name == kSyncName);
  CHECK(it.spans[0].start == 0);
  CHECK(it.spans[0].end == l.calls[10].end);
  for (size_t k = 1; k < it.spans.size(); ++k) CHECK(it.spans[k].start == it.spans[k - 1].end);
  CHECK(it.spans[5].end == l.calls.back().end);
}

TEST_CASE("two blocking copies per iteration: the boundary is the one followed by the loop's own work") {
  Loop l;
  for (int i = 0; i < 5; ++i) {
    l.call(kH2DName, kCopySync, 20, 1);    // upload, then straight to the kernels
    l.launches(4);
    l.call(kD2HName, kCopySync, 20, 300);  // read back, then host post-processing
  }
  const SyncIterations it = sync_iterations(l.calls);
  REQUIRE(it.spans.size() == 5);
  CHECK(it.period == 2);
  CHECK(it.boundary_name == kD2HName);
  CHECK(it.spans[1].start == l.calls[5].end);  // the first iteration's read-back
  CHECK(it.spans[1].end == l.calls[11].end);
}

TEST_CASE("no iterations: too few, no repeating pattern, or no GPU work between the blocking calls") {
  SUBCASE("three iterations are too few") {
    Loop l;
    for (int i = 0; i < 3; ++i) {
      l.launches(3);
      l.call(kSyncName, kSync, 10);
    }
    CHECK(sync_iterations(l.calls).spans.empty());
  }
  SUBCASE("blocking calls that do not repeat within 8") {
    Loop l;
    for (uint32_t n = 10; n < 40; ++n) {
      l.launches(1);
      l.call(n, kSync, 10);
    }
    CHECK(sync_iterations(l.calls).spans.empty());
  }
  SUBCASE("a polling loop that launches nothing") {
    Loop l;
    for (int i = 0; i < 10; ++i) l.call(kSyncName, kSync, 10, 20);
    CHECK(sync_iterations(l.calls).spans.empty());
  }
  SUBCASE("no calls") { CHECK(sync_iterations({}).spans.empty()); }
}

TEST_CASE("an occasional extra read-back (one iteration in ten) keeps the period") {
  Loop l;
  for (int i = 0; i < 20; ++i) {
    l.launches(3);
    l.call(kSyncName, kSync, 10, 40);
    if (i == 9) l.call(kD2HName, kCopySync, 10, 5);  // a log line every so often
  }
  const SyncIterations it = sync_iterations(l.calls);
  CHECK(it.period == 1);
  CHECK(it.spans.size() >= 19);
}
