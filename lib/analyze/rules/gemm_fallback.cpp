// gemm_fallback: GEMMs that run on a kernel the library chose because the fast ones do not fit: operands aligned to
// fewer elements than a 16-byte load holds (CUTLASS's ..._align1/_align2: some dimension or leading dimension is
// not a multiple of 8 for fp16/bf16), or a kernel built for an architecture older than Ampere on an Ampere or newer
// GPU (cutlass_75_... on an H100: no asynchronous copies, no Hopper tensor-core instructions). The classic case is
// a language model's LM head with a vocabulary of 50,257. The finding names the kernels, what their names say, who
// launched them, and the padding that brings the fast kernels back. Its impact is the time the fallback kernels
// lose at kSlowdownPerCause per cause; the padding's saving is that much when the GPU sets the step's pace, else
// not estimated.
#include "analyze/kernel_traits.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace inferscope::analyze::rules {
namespace {

/// The architecture from which a GEMM kernel counts as built for an older GPU: Ampere (8.0) brought the
/// asynchronous copies and the mma shapes cuBLAS's current kernels use; a pre-Ampere kernel on an Ampere or newer
/// GPU is a fallback, while sm80 kernels on a Hopper are cuBLAS's ordinary choice for many shapes.
constexpr int kModernSm = 80;

/// How much slower a fallback GEMM is than the kernel its aligned shape gets, per cause, the lower end of each:
/// - operands aligned below 16 bytes: NVIDIA's "Matrix Multiplication Background" guide shows fp16 GEMMs whose K is
///   not a multiple of 8 at a half to a sixth of the aligned throughput (no 16-byte loads for the tensor cores);
/// - a kernel built before Ampere on an Ampere or newer GPU: no asynchronous copies into shared memory and the
///   older, smaller mma shapes, which NVIDIA's Ampere and Hopper tuning guides credit with at least 2x per SM.
/// Both at once (cutlass_75_..._align1 on an H100): 4x. Measured on the H100 (docs/planted-bottlenecks.md,
/// samples/llm/lm_head_misaligned.py): the padding saved more than this predicts, so the impact stays a floor.
constexpr double kSlowdownPerCause = 2.0;

bool sixteen_bit(const std::string& lower_name) {
  return lower_name.find("f16") != std::string::npos || lower_name.find("bf16") != std::string::npos ||
         lower_name.find("h1688") != std::string::npos || lower_name.find("hgemm") != std::string::npos;
}

// What the name says is slow about it ("" when nothing), and how many of the two causes it has.
std::string why_fallback(const KernelRow& k, int device, int* causes = nullptr) {
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
  if (causes) *causes = why.empty() ? 0 : 1;
  if (device >= kModernSm && t.built_for_sm > 0 && t.built_for_sm < kModernSm) {
    if (causes) ++*causes;
    why += (why.empty() ? "" : "; ") + std::string("built for sm") + std::to_string(t.built_for_sm) + " on a GPU of compute capability " +
           std::to_string(device / 10) + "." + std::to_string(device % 10) + ", without the newer tensor-core paths";
  }
  return why;
}

bool has_lower(std::string s, std::initializer_list<const char*> parts) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* p : parts)
    if (s.find(p) != std::string::npos) return true;
  return false;
}

// A language model's LM head: its launcher says so (a layer lm_head), or the program runs a causal language model
// (transformers' ...LMHeadModel / ...ForCausalLM), whose only GEMM with the vocabulary as a dimension is the head.
// nn.Linear's innermost frame is Linear.forward for every layer, so the launcher alone rarely tells.
bool language_model_head(const RuleInput& in, const std::string& launcher) {
  if (has_lower(launcher, {"lm_head", "vocab", "logits"})) return true;
  for (const PythonRow& p : in.tables.python)
    if (has_lower(p.qualname, {"lmheadmodel", "forcausallm", "lm_head"})) return true;
  return false;
}

}  // namespace

std::optional<Finding> gemm_fallback(const RuleInput& in) {
  const int device = device_sm(in.process);
  std::vector<std::pair<const KernelRow*, std::string>> slow;
  double share = 0, saved_share = 0;
  for (const KernelRow& k : in.tables.kernels) {
    int causes = 0;
    if (std::string why = why_fallback(k, device, &causes); !why.empty()) {
      slow.emplace_back(&k, std::move(why));
      share += k.share;
      saved_share += k.share * (1 - 1 / std::pow(kSlowdownPerCause, causes));
    }
  }
  if (slow.empty()) return std::nullopt;
  const double kernel_ms = in.t.kernel_ns / 1e6;
  const double slow_ms = share * kernel_ms;  // their share of the typical step's kernel time
  const double impact = saved_share * kernel_ms;
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
                       fmt("%.0fx", kSlowdownPerCause) + " faster per cause: " + fms(impact) + " per step");
  f.metrics["fallback_share"] = share;
  f.metrics["fallback_ms"] = slow_ms;
  f.metrics["device_sm"] = device;
  // When the GPU sets the pace, the kernels' time saved is the step's; otherwise the host hides some of it.
  const bool gpu_paced = in.breakdown.gpu_utilization >= in.th.gpu_bound_util;
  auto pad = [&](std::string action) {
    if (!gpu_paced) return suggest(f, "high", std::move(action));
    f.suggestions.push_back({std::move(action), "high", impact, true,
                             fmt("the fallback kernels %.0fx faster per cause, on a GPU-paced step", kSlowdownPerCause)});
  };
  if (language_model_head(in, top.launched_by))
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
