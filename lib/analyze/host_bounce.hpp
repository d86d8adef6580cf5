// Copies between two GPUs made through host memory: a device-to-host copy from one GPU, then a host-to-device copy
// of the same bytes to another (`h.cpu().to("cuda:1")`). Pinning those host buffers is not the fix; copying GPU to
// GPU is (a peer copy over NVLink or PCIe). The copy rules read this to say so (rules/copies.cpp).
//
//   detail::HostBounces b = detail::find_host_bounces(in.gpu);   // stage "host bounces", after order_gpu
#pragma once

#include "analyze/model.hpp"

#include <cstdint>
#include <span>

namespace inferscope::analyze::detail {

/// How soon after a device-to-host copy ends the host-to-device copy of its bytes to another GPU must start to
/// be its second half: the two are one expression (`.cpu().to(...)`), separated by the return of a synchronous
/// copy and one call, microseconds; 10 ms leaves room for a loaded host and still never pairs copies of
/// different steps of a model whose steps take longer.
inline constexpr int64_t kBounceWindowNs = 10'000'000;

struct HostBounces {
  uint64_t pairs = 0;
  uint64_t bytes = 0;          ///< bytes moved GPU to GPU this way (each pair counted once)
  double d2h_ns = 0, h2d_ns = 0;  ///< the two halves' GPU time
  uint64_t d2h_bytes = 0, h2d_bytes = 0;  ///< every device-to-host / host-to-device copy's bytes, for the share
  uint32_t from_device = 0, to_device = 0;  ///< the most common pair's GPUs
  /// The share of the direction's bytes that are halves of bounces.
  double share(bool h2d) const {
    const uint64_t all = h2d ? h2d_bytes : d2h_bytes;
    return all ? double(bytes) / double(all) : 0;
  }
};

/// Pairs every host-to-device copy with the latest unpaired device-to-host copy of the same size from another GPU
/// that ended at most kBounceWindowNs before it started. `gpu` in start order (order_gpu).
HostBounces find_host_bounces(std::span<const GpuOp> gpu);

}  // namespace inferscope::analyze::detail
