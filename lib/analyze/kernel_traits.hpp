// What a kernel's name says about it: its family (GEMM, attention, elementwise, reduction, copy, NCCL), whether it
// runs on tensor cores, the architecture it was built for (cutlass_75_..., sm80_xmma_...) and the alignment its
// operands were required to have (..._align1: one element, so some dimension is not a multiple of 8). Names are
// all a trace has; the rules name what they find and the reports group kernel time by family.
//
//   KernelTraits t = kernel_traits("cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x3_nn_align1");
//   // t.family == "gemm", t.tensor_core, t.built_for_sm == 75, t.alignment == 1
#pragma once

#include "analyze/analysis.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::analyze {

struct KernelTraits {
  const char* family = "other";  ///< "gemm", "attention", "elementwise", "reduction", "copy", "nccl", "other"
  bool tensor_core = false;      ///< built on tensor-core instructions (mma, xmma, wgmma, tensorop, s16816, ...)
  int built_for_sm = 0;          ///< the architecture in its name (75 for cutlass_75_/sm75, 80 for sm80_/ampere_); 0: unknown
  int alignment = 0;             ///< elements, from "alignN"; 0: not said
};

KernelTraits kernel_traits(std::string_view name);

/// A kernel's name without its return type, namespaces, template arguments and parameters:
/// "void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)" -> "vectorized_elementwise_kernel".
std::string_view kernel_base_name(std::string_view name);

/// The families in the order the reports list them when equal.
inline constexpr const char* kKernelFamilies[] = {"gemm", "attention", "elementwise", "reduction", "copy", "nccl", "other"};

/// Kernel time by family, from every kernel row (whole-graph launches are "other": their kernels are not named),
/// largest first; families without a kernel are left out.
std::vector<KernelFamilyRow> kernel_families(const std::vector<KernelRow>& kernels);

/// The compute capability of the trace's first GPU as major*10+minor (90 for "9.0"); 0 when the dump does not say.
int device_sm(const std::map<std::string, std::string>& process);

}  // namespace inferscope::analyze
