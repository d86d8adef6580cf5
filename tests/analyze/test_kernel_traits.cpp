// Kernel names read for family, tensor cores, architecture and alignment (lib/analyze/kernel_traits.hpp), on names
// recorded on the H100 (tests/fixtures) and the misaligned LM-head GEMM of issue 27; the family table.
#include "analyze/analyzer.hpp"
#include "analyze/kernel_traits.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace inferscope::analyze;

TEST_CASE("families, tensor cores, architecture and alignment from real kernel names") {
  struct Case {
    const char* name;
    std::string family;
    bool tc;
    int sm, align;
  };
  const Case cases[] = {
      {"cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x3_nn_align1", "gemm", true, 75, 1},
      {"nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm", true, 90, 0},
      {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
       "gemm", false, 80, 0},
      {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel__5x_cudnn",
       "gemm", true, 80, 0},
      {"void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*)", "gemm", false, 0, 0},
      {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "gemm", true, 80, 0},
      {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>", "attention", true, 0, 0},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar>", "elementwise", false, 0, 0},
      {"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::normal_and_transform>",
       "elementwise", false, 0, 0},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>", "reduction", false, 0, 0},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>", "reduction", false, 0, 0},
      {"void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda>", "copy", false, 0, 0},
      {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", false, 0, 0},
      {"triton_poi_fused_add_mul_tanh_0", "elementwise", false, 0, 0},
      {"triton_red_fused_native_layer_norm_1", "reduction", false, 0, 0},
      {"my_custom_kernel(float*)", "other", false, 0, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const KernelTraits t = kernel_traits(c.name);
    CHECK(t.family == c.family);
    CHECK(t.tensor_core == c.tc);
    CHECK(t.built_for_sm == c.sm);
    CHECK(t.alignment == c.align);
  }
}

TEST_CASE("kernel time by family: shares of all kernel time, tensor-core share within each, largest first") {
  std::vector<KernelRow> rows(4);
  rows[0] = {"nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", 10, 60, 0, 0, "", false};
  rows[1] = {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_ffma", 10, 20, 0, 0, "", false};
  rows[2] = {"void at::native::vectorized_elementwise_kernel<4, add>", 100, 15, 0, 0, "", false};
  rows[3] = {"CUDA graph 3", 5, 5, 0, 0, "", true};  // a whole graph: its kernels are not named
  const auto f = kernel_families(rows);
  REQUIRE(f.size() == 3);
  CHECK(f[0].family == "gemm");
  CHECK(f[0].kernels == 20);
  CHECK(f[0].share == doctest::Approx(0.8));
  CHECK(f[0].tensor_core_share == doctest::Approx(0.75));
  CHECK(f[1].family == "elementwise");
  CHECK(f[2].family == "other");
  CHECK(f[2].share == doctest::Approx(0.05));
  CHECK(kernel_families({}).empty());
}

TEST_CASE("the device's compute capability from the process info") {
  CHECK(device_sm({{"gpu.0.compute_capability", "9.0"}}) == 90);
  CHECK(device_sm({{"gpu.0.compute_capability", "8.6"}}) == 86);
  CHECK(device_sm({{"gpu.0.compute_capability", "x"}}) == 0);
  CHECK(device_sm({}) == 0);
}

TEST_CASE("H100: the LM head of a 50,257 vocabulary (samples/llm/lm_head_misaligned.py) is a fallback GEMM, padded") {
  // Recorded 2026-11-27 on an NVIDIA H100 80GB HBM3 under iscope-run: GPT-2 small, batch 32 x 128, fp16. In-process
  // A/B on the same machine: padding the vocabulary to 50,304 took the step from 9.138 to 5.699 ms (-37.6 %).
  const Analysis a = analyze_file(std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/llm_lm_head_misaligned.iscope", {});
  CHECK(a.steps.count >= 50);  // the model's call, not the loop around it
  const Finding* f = nullptr;
  for (const Finding& x : a.findings)
    if (x.category == "gemm_fallback") f = &x;
  REQUIRE(f);
  CHECK(f->metrics.at("fallback_share") > 0.4);
  CHECK(f->impact_pct > 20);  // 4x per the two causes (align1, sm75 on sm90): a floor under the measured 37.6 %
  CHECK(f->suggestions.front().action.find("Pad the vocabulary to a multiple of 64") == 0);
  bool named = false;
  for (const auto& e : f->evidence) named |= e.find("cutlass_75_tensorop_f16_s1688gemm") != std::string::npos;
  CHECK(named);
  REQUIRE_FALSE(a.kernel_families.empty());
  CHECK(a.kernel_families.front().family == "gemm");
  CHECK(a.tensor_core_share > 0.5);
}
