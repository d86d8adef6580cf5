// Chains of elementwise kernels: runs of three or more elementwise kernels one after another on one stream inside a
// typical step, each reading and writing its whole tensor, where one fused kernel (torch.compile, a fused op) would
// read and write it once. HTA calls the repeated ones frequent kernel sequences; here the chains are counted per
// step and the most frequent one is named. gpu_bound and launch_bound suggest fusing them (rules/).
//
//   KernelChains c = find_kernel_chains(gpu_ops_in_start_order, typical_steps, [&](uint32_t id) { return name(id); });
#pragma once

#include "analyze/model.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace inferscope::analyze::detail {

/// The shortest run of elementwise kernels counted as a chain: two kernels are one add after a multiply, common
/// and cheap; from three on a fused kernel saves at least two round trips of the tensor through memory.
inline constexpr size_t kMinChain = 3;

struct KernelChains {
  double chains_per_step = 0;
  double kernels_per_step = 0;  ///< kernels inside chains
  double ns_per_step = 0;       ///< their GPU time
  size_t longest = 0;           ///< kernels in the longest chain
  std::string most_frequent;    ///< the most frequent chain's kernel names, "a -> b -> c" ("" = none)
  double most_frequent_per_step = 0;
};

/// The chains inside `steps` (typical steps' windows). `gpu` in start order; `name` gives a kernel's name by id.
KernelChains find_kernel_chains(std::span<const GpuOp> gpu, const std::vector<Span>& steps,
                                const std::function<const std::string&(uint32_t)>& name);

}  // namespace inferscope::analyze::detail
