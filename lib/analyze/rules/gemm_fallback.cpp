// gemm_fallback: GEMMs that run on a kernel the library chose because the fast ones do not fit: operands aligned to
// fewer elements than a 16-byte load holds (CUTLASS's ..._align1/_align2: some dimension or leading dimension is
// not a multiple of 8 for fp16/bf16), or a kernel built for an architecture older than Ampere on an Ampere or newer
// GPU (cutlass_75_... on an H100: no asynchronous copies, no Hopper tensor-core instructions). The classic case is
// a language model's LM head with a vocabulary of 50,257. The finding names the kernels, what their names say, who
// launched them, and the padding that brings the fast kernels back. Its impact is half the fallback kernels' time
// (kFallbackSlowdown); the padding's saving is that much when the GPU sets the step's pace, else not estimated.
#include "analyze/kernel_traits.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

/// The architecture from which a GEMM kernel counts as built for an older GPU: Ampere (8.0) brought the
/// asynchronous copies and the mma shapes cuBLAS's current kernels use; a pre-Ampere kernel on an Ampere or newer
/// GPU is a fallback, while sm80 kernels on a Hopper are cuBLAS's ordinary choice for many shapes.
constexpr int kModernSm = 80;

/// How much slower a fallback GEMM is than the kernel its aligned shape gets: NVIDIA's "Matrix Multiplication
/// Background" guide shows fp16 GEMMs whose K is not a multiple of 8 running at a half to a sixth of the aligned
/// throughput, since they lose the 16-byte loads the tensor-core kernels are built on. The lower end, 2x, so the
/// impact (half the fallback kernels' time) does not overstate what padding brings.
constexpr double kFallbackSlowdown = 2.0;

bool sixteen_bit(const std::string& lower_name) {
  return lower_name.find("f16") != std::string::npos || lower_name.find("bf16") != std::string::npos ||
         lower_name.find("h1688") != std::string::npos || lower_name.find("hgemm") != std::string::npos;
}

// What the name says is slow about it; "" when nothing.
std::string why_fallback(const KernelRow& k, int device) {
  const KernelTraits t = kernel_traits(k.name);
  if (std::string_view(t.family) != "gemm") return "";
  std::string lower = k.name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  // A 16-byte load holds 8 fp16/bf16 elements: alignment below that loses the tensor-core kernels' vector loads.
  // fp32 SIMT kernels (cutlass_80_simt_sgemm_..._align1) are left alone: they have no faster path to lose.
  const int needed = 8;
  std::string why;
  if (sixteen_bit(lower) && t.alignment > 0 && t.alignment < needed)
    why = "align" + std::to_string(t.alignment) + ": its operands are aligned to " + std::to_string(t.alignment) +
          " element" + (t.alignment == 1 ? "" : "s") + ", so one of M, N, K (or a leading dimension) is not a multiple of " +
          std::to_string(needed);
  if (device >= kModernSm && t.built_for_sm > 0 && t.built_for_sm < kModernSm)
    why += (why.empty() ? "" : "; ") + std::string("built for sm") + std::to_string(t.built_for_sm) + " on a GPU of compute capability " +
           std::to_string(device / 10) + "." + std::to_string(device % 10) + ", without the newer tensor-core paths";
  return why;
}

bool head_like(const std::string& launcher) {
  std::string l = launcher;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  return l.find("lm_head") != std::string::npos || l.find("vocab") != std::string::npos ||
         l.find("logits") != std::string::npos || l.find("head") != std::string::npos;
}

}  // namespace

std::optional<Finding> gemm_fallback(const RuleInput& in) {
  const int device = device_sm(in.process);
  std::vector<std::pair<const KernelRow*, std::string>> slow;
  double share = 0;
  for (const KernelRow& k : in.tables.kernels)
    if (std::string why = why_fallback(k, device); !why.empty()) {
      slow.emplace_back(&k, std::move(why));
      share += k.share;
    }
  if (slow.empty()) return std::nullopt;
  const double slow_ms = share * in.t.kernel_ns / 1e6;  // their share of the typical step's kernel time
  const double impact = slow_ms * (1 - 1 / kFallbackSlowdown);
  if (!reported(in, impact)) return std::nullopt;
  const KernelRow& top = *slow.front().first;
  Finding f = make_finding(in, Category::kGemmFallback,
                           "GEMMs on a fallback kernel take " + fpct(share * 100) + " of GPU time: " + slow.front().second.substr(0, slow.front().second.find(':')),
                           impact, 0.6 + 0.3 * std::min(1.0, share / 0.3));
  for (size_t i = 0; i < slow.size() && i < 3; ++i) {
    const KernelRow& k = *slow[i].first;
    f.evidence.push_back("kernel '" + k.name + "': " + fpct(k.share * 100) + " of GPU time, " + fmt("%.1f us mean", k.mean_us) +
                         " x " + std::to_string(k.count) + ", launched by " + k.launched_by + "; " + slow[i].second);
  }
  f.evidence.push_back("the fallback kernels take " + fms(slow_ms) + " of the " + fms(in.t.kernel_ns / 1e6) +
                       " of kernel time per step; an aligned shape lets the library pick its fast kernels, at least " +
                       fmt("%.0fx", kFallbackSlowdown) + " faster: " + fms(impact) + " per step");
  f.metrics["fallback_share"] = share;
  f.metrics["fallback_ms"] = slow_ms;
  f.metrics["device_sm"] = device;
  // When the GPU sets the pace, the kernels' time saved is the step's; otherwise the host hides some of it.
  const bool gpu_paced = in.breakdown.gpu_utilization >= in.th.gpu_bound_util;
  auto pad = [&](std::string action) {
    if (!gpu_paced) return suggest(f, "high", std::move(action));
    f.suggestions.push_back({std::move(action), "high", impact, true,
                             fmt("the fallback kernels at 1/%.0f of their time, on a GPU-paced step", kFallbackSlowdown)});
  };
  if (head_like(top.launched_by))
    pad("Pad the vocabulary to a multiple of 64 so the LM head's GEMM is aligned (launched by " + top.launched_by +
        "): model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64), e.g. 50,257 -> 50,304; the extra "
        "logits are never sampled (mask them, or slice the logits to the real vocabulary)");
  else
    pad("Pad the dimension of the GEMMs launched by " + top.launched_by + " that is not a multiple of 8 (hidden or "
        "intermediate size, heads x head_dim, vocabulary) to a multiple of 64, at least 8 for fp16/bf16");
  suggest(f, "medium", "Pad batch x sequence to a multiple of 8 (tokenizer(..., pad_to_multiple_of=8)) so the token "
                       "dimension of every GEMM is aligned too");
  suggest(f, "low", "Confirm each GEMM's m, n, k: CUBLASLT_LOG_LEVEL=2 prints them, or profile the kernel with Nsight Compute");
  return f;
}

}  // namespace inferscope::analyze::rules
