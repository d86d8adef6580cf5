// Stage "kernel chains" (lib/analyze/kernel_chains.hpp): runs of three or more elementwise kernels on one stream
// inside the typical steps, per step, with the most frequent one named.
#include "analyze/kernel_chains.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace inferscope::analyze::detail;

namespace {

const std::vector<std::string> kNames = {
    "",
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<c10::Half>>(int, Mul)",  // 1
    "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda>(int, Tanh)",     // 2
    "void at::native::elementwise_kernel<128, 2, at::native::AddFunctor<c10::Half>>(int, Add)",        // 3
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64",                                        // 4
};
const std::string& name(uint32_t id) { return kNames.at(id); }

GpuOp kernel(int64_t start_us, uint32_t dur_us, uint32_t name_id, uint16_t stream = 7) {
  return GpuOp{start_us * 1000, dur_us * 1000, 0, name_id, kKernel, 0, stream, 0};
}

}  // namespace

TEST_CASE("three or more elementwise kernels in a row on one stream are a chain; anything else between ends it") {
  // Two steps of 1 ms. Step 1: gemm, mul, tanh, add (a chain of 3), gemm, mul, add (2: not a chain).
  // Step 2: mul, tanh, add, mul (a chain of 4); on another stream mul, add (2).
  const std::vector<GpuOp> gpu = {
      kernel(0, 50, 4),    kernel(60, 10, 1), kernel(80, 10, 2),  kernel(100, 10, 3), kernel(120, 50, 4),
      kernel(200, 10, 1),  kernel(220, 10, 3),
      kernel(1000, 10, 1), kernel(1005, 10, 1, 9), kernel(1020, 10, 2), kernel(1030, 10, 3, 9), kernel(1040, 10, 3),
      kernel(1060, 10, 1),
  };
  const std::vector<Span> steps = {{0, 1'000'000, 0}, {1'000'000, 2'000'000, 1}};
  const KernelChains c = find_kernel_chains(gpu, steps, name);
  CHECK(c.chains_per_step == doctest::Approx(1));  // two chains over two steps
  CHECK(c.kernels_per_step == doctest::Approx(3.5));
  CHECK(c.ns_per_step == doctest::Approx(35'000));
  CHECK(c.longest == 4);
  CHECK(c.most_frequent == "vectorized_elementwise_kernel -> vectorized_elementwise_kernel -> elementwise_kernel");
  CHECK(c.most_frequent_per_step == doctest::Approx(0.5));
  CHECK(find_kernel_chains(gpu, {}, name).chains_per_step == 0);
}
