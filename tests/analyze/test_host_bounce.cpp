// Stage "host bounces" (lib/analyze/host_bounce.hpp): a device-to-host copy from one GPU followed within
// kBounceWindowNs by a host-to-device copy of the same bytes to another GPU is one GPU-to-GPU copy through host
// memory; same GPU, other sizes, later copies and copies in the wrong order are not.
#include "analyze/host_bounce.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace inferscope::analyze::detail;

namespace {

GpuOp copy(uint8_t kind, int64_t start_ms, uint32_t dur_us, uint32_t bytes, uint8_t device) {
  return GpuOp{start_ms * 1'000'000, dur_us * 1000, 0, bytes, kind, 0, 7, device};
}

}  // namespace

TEST_CASE("a device-to-host copy, then the same bytes to another GPU soon after: one bounce") {
  const std::vector<GpuOp> gpu = {
      copy(kD2H, 0, 500, 4096, 0),  copy(kH2D, 1, 400, 4096, 1),   // a bounce 0 -> 1
      copy(kD2H, 10, 500, 4096, 0), copy(kH2D, 11, 400, 4096, 0),  // back to the same GPU: not one
      copy(kD2H, 20, 500, 8192, 0), copy(kH2D, 21, 400, 4096, 1),  // other sizes: not one
      copy(kD2H, 30, 500, 100, 1),  copy(kH2D, 45, 400, 100, 0),   // 14.5 ms later: beyond the window
      copy(kH2D, 50, 400, 64, 1),   copy(kD2H, 51, 500, 64, 0),    // the wrong order: not one
      copy(kD2H, 60, 500, 2048, 1), copy(kH2D, 60, 400, 2048, 0),  // starts before the other ends: not one
  };
  const HostBounces b = find_host_bounces(gpu);
  CHECK(b.pairs == 1);
  CHECK(b.bytes == 4096);
  CHECK(b.d2h_ns == 500'000);
  CHECK(b.h2d_ns == 400'000);
  CHECK(b.from_device == 0);
  CHECK(b.to_device == 1);
  CHECK(b.h2d_bytes == 4096 + 4096 + 4096 + 100 + 64 + 2048);
  CHECK(b.share(true) == doctest::Approx(4096.0 / double(b.h2d_bytes)));
}

TEST_CASE("each device-to-host copy pairs once, with the latest one that fits") {
  const std::vector<GpuOp> gpu = {copy(kD2H, 0, 100, 512, 0), copy(kD2H, 2, 100, 512, 0), copy(kH2D, 3, 100, 512, 1),
                                  copy(kH2D, 4, 100, 512, 1), copy(kH2D, 5, 100, 512, 1)};
  const HostBounces b = find_host_bounces(gpu);
  CHECK(b.pairs == 2);  // the third host-to-device copy has no half left
  CHECK(find_host_bounces({}).pairs == 0);
}
