// Kernel names read for their family, tensor-core use, target architecture and alignment (kernel_traits.hpp).
// The patterns are those of the libraries an inference program's kernels come from: cuBLAS/cuBLASLt
// (sm90_xmma_gemm_..., ampere_..._gemm), CUTLASS (cutlass_75_tensorop_..._align1), FlashAttention and PyTorch's
// SDPA (flash_fwd_kernel, fmha_cutlass), PyTorch's ATen (vectorized_elementwise_kernel, reduce_kernel,
// direct_copy_kernel) and Triton as torch.compile names its kernels (triton_poi_/triton_red_/triton_per_/triton_tem_).
#include "analyze/kernel_traits.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <map>

namespace inferscope::analyze {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool has_any(const std::string& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (s.find(p) != std::string::npos) return true;
  return false;
}

const char* family_of(const std::string& n) {
  if (has_any(n, {"nccl"})) return "nccl";
  if (has_any(n, {"flash", "fmha", "attention", "attn", "sdpa", "triton_tem_fused_attention"})) return "attention";
  if (has_any(n, {"gemm", "gemv", "cutlass", "xmma", "nvjet", "cublas", "matmul", "wgmma", "triton_tem", "triton_mm",
                  "splitkreduce", "dot_kernel"}))
    return "gemm";
  if (has_any(n, {"copy", "memcpy", "transpose", "cat_array"})) return "copy";
  // ATen names its pointwise kernels "..._elementwise_...", also random fills ("normal_and_transform" is not a norm).
  if (has_any(n, {"elementwise", "pointwise", "triton_poi"})) return "elementwise";
  if (has_any(n, {"triton_red", "triton_per", "reduce", "softmax", "layer_norm", "layernorm", "rms_norm", "rmsnorm",
                  "batch_norm", "group_norm", "norm_kernel", "argmax", "argmin", "topk", "scan", "sort"}))
    return "reduction";
  if (has_any(n, {"vectorized", "unrolled", "fill"})) return "elementwise";
  return "other";
}

bool tensor_core_of(const std::string& n, std::string_view family) {
  if (family == "attention") return has_any(n, {"flash", "fmha", "mma", "cutlass", "tensorop"});
  if (family != "gemm") return false;
  if (has_any(n, {"ffma", "sgemm", "dgemm"}) && !has_any(n, {"tf32"})) return false;  // CUDA cores, fp32/fp64 FMA
  // nvjet: cuBLAS's Hopper kernels; sm90 xmma GEMMs without ffma run on the Hopper tensor cores too.
  return has_any(n, {"tensorop", "mma", "s1688", "s16816", "h1688", "h16816", "i8816", "tf32", "bf16", "f16", "fp16",
                     "e4m3", "e5m2", "fp8", "hgemm", "nvjet", "sm90_xmma", "tensor16x8"});
}

// "sm75", "sm_80", "cutlass_75_", "ampere_", "turing_", ...: the architecture the kernel was built for.
int sm_of(const std::string& n) {
  for (size_t i = 0; i + 3 < n.size(); ++i) {
    const bool starts = i == 0 || !std::isalnum(static_cast<unsigned char>(n[i - 1]));
    if (!starts) continue;
    size_t d = std::string::npos;
    if (n.compare(i, 2, "sm") == 0) d = i + 2 + (n[i + 2] == '_' ? 1 : 0);
    else if (n.compare(i, 8, "cutlass_") == 0) d = i + 8;
    if (d == std::string::npos || d + 1 >= n.size()) continue;
    if (std::isdigit(static_cast<unsigned char>(n[d])) && std::isdigit(static_cast<unsigned char>(n[d + 1])) &&
        (d + 2 >= n.size() || !std::isdigit(static_cast<unsigned char>(n[d + 2]))))
      return (n[d] - '0') * 10 + (n[d + 1] - '0');
  }
  static const std::pair<const char*, int> named[] = {{"hopper", 90}, {"ampere_", 80}, {"turing_", 75}, {"volta_", 70},
                                                      {"maxwell_", 52}};
  for (const auto& [word, sm] : named)
    if (n.find(word) != std::string::npos) return sm;
  return 0;
}

int alignment_of(const std::string& n) {
  const size_t at = n.find("align");
  if (at == std::string::npos) return 0;
  int v = 0;
  for (size_t i = at + 5; i < n.size() && std::isdigit(static_cast<unsigned char>(n[i])) && v < 1000; ++i) v = v * 10 + (n[i] - '0');
  return v;
}

}  // namespace

KernelTraits kernel_traits(std::string_view name) {
  const std::string n = lower(name);
  KernelTraits t;
  t.family = family_of(n);
  t.tensor_core = tensor_core_of(n, t.family);
  t.built_for_sm = sm_of(n);
  t.alignment = alignment_of(n);
  return t;
}

std::string_view kernel_base_name(std::string_view name) {
  name = name.substr(0, name.find_first_of("<("));
  if (name.rfind("void ", 0) == 0) name.remove_prefix(5);
  const size_t colon = name.rfind("::");
  return colon == std::string_view::npos ? name : name.substr(colon + 2);
}

std::vector<KernelFamilyRow> kernel_families(const std::vector<KernelRow>& kernels) {
  std::map<std::string, KernelFamilyRow> by;
  std::map<std::string, double> tc_ms;
  double total = 0;
  for (const KernelRow& k : kernels) {
    const KernelTraits t = k.whole_graph ? KernelTraits{} : kernel_traits(k.name);
    KernelFamilyRow& row = by[t.family];
    row.family = t.family;
    row.kernels += k.count;
    row.total_ms += k.total_ms;
    if (t.tensor_core) tc_ms[t.family] += k.total_ms;
    total += k.total_ms;
  }
  std::vector<KernelFamilyRow> out;
  for (const char* f : kKernelFamilies) {
    auto it = by.find(f);
    if (it == by.end()) continue;
    KernelFamilyRow row = it->second;
    row.share = total > 0 ? row.total_ms / total : 0;
    row.tensor_core_share = row.total_ms > 0 ? tc_ms[f] / row.total_ms : 0;
    out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelFamilyRow& a, const KernelFamilyRow& b) { return a.total_ms > b.total_ms; });
  return out;
}

int device_sm(const std::map<std::string, std::string>& process) {
  auto it = process.find("gpu.0.compute_capability");
  if (it == process.end()) return 0;
  const std::string& v = it->second;
  const size_t dot = v.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= v.size()) return 0;
  if (!std::isdigit(static_cast<unsigned char>(v[0])) || !std::isdigit(static_cast<unsigned char>(v[dot + 1]))) return 0;
  return std::atoi(v.c_str()) * 10 + (v[dot + 1] - '0');
}

}  // namespace inferscope::analyze
