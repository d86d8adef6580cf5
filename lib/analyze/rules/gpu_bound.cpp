// gpu_bound (informational in tone, ranked like any other): the GPU is busy most of the step; name the kernels
// that take its time. How much faster a kernel can run is not in the trace: savings are estimated only where a
// model says it (elementwise chains fused; fp32 matrix kernels moved to TF32 tensor cores, at the datasheet ratio).
#include "analyze/kernel_traits.hpp"
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <string_view>

namespace inferscope::analyze::rules {
namespace {

/// Chains of elementwise kernels worth a suggestion: 5 % of the step's kernel time, the floor of every rule's
/// impact, so a chain fused away saves something a reader could see.
constexpr double kChainShare = 0.05;

/// The datasheet ratio of dense TF32 tensor-core throughput to FP32 throughput, by compute capability: how much faster
/// a compute-bound fp32 GEMM runs once TF32 is allowed. 0: not known for this GPU (no saving is estimated). A100
/// (sm_80): 156 / 19.5 TFLOPS; H100 and H200 (sm_90): 495 / 67 TFLOPS.
double tf32_over_fp32(int sm) {
  if (sm == 80) return 156.0 / 19.5;
  if (sm == 90) return 495.0 / 67.0;
  return 0;
}

/// Per step, the time of the matrix kernels that run off tensor cores (the tables' share of kernel time, applied to
/// the typical step's kernel time).
double fp32_matmul_ns(const RuleInput& in) {
  double all = 0, off = 0;
  for (const KernelRow& k : in.tables.kernels) {
    all += k.total_ms;
    const KernelTraits t = kernel_traits(k.name);
    const std::string_view fam = t.family;
    if ((fam == "gemm" || fam == "attention") && !t.tensor_core) off += k.total_ms;
  }
  return all > 0 ? in.t.kernel_ns * off / all : 0;
}

}  // namespace

std::optional<Finding> gpu_bound(const RuleInput& in) {
  const Breakdown& b = in.breakdown;
  // Busy computing or copying: a GPU inside an NCCL collective is waiting for other ranks or moving data
  // (communication's), which no faster kernel shortens.
  double busy = std::max(0.0, b.gpu_utilization - b.gpu_comm_ms / in.step_ms());
  // Several GPUs in one process: busy is the busiest one's share, not their union (two GPUs taking turns are each
  // idle half the step: pipeline_bubble's).
  if (in.t.devices >= 1.5 && in.t.dur > 0) busy = std::min(busy, in.t.device_busy_max / in.t.dur);
  if (busy < in.th.gpu_bound_util || b.gpu_compute_ms / in.step_ms() < in.th.gpu_bound_compute) return std::nullopt;
  const double impact = b.gpu_compute_ms;
  Finding f = make_finding(in, Category::kGpuBound, "The GPU is busy " + fpct(busy * 100) +
                                                        " of the step (healthy; the kernels themselves set the pace)",
                           impact, std::min(0.95, busy));
  const auto& k = in.tables.kernels;
  for (size_t i = 0; i < k.size() && i < 3; ++i)
    f.evidence.push_back("kernel '" + k[i].name + "': " + fpct(k[i].share * 100) + " of GPU time, " +
                         fmt("%.1f us mean", k[i].mean_us) + " x " + std::to_string(k[i].count) + ", launched by " + k[i].launched_by);
  f.evidence.push_back("GPU compute " + fms(b.gpu_compute_ms) + " of the " + fms(in.step_ms()) + " step");
  // What the GPU time is made of: families and tensor-core use (kernel_traits.hpp).
  const std::vector<KernelFamilyRow> families = kernel_families(k);
  if (!families.empty()) {
    std::string line = "kernel time by family: ";
    double tc = 0;
    for (size_t i = 0; i < families.size(); ++i) {
      line += (i ? ", " : "") + families[i].family + " " + fpct(families[i].share * 100);
      tc += families[i].share * families[i].tensor_core_share;
    }
    f.evidence.push_back(line + "; " + fpct(tc * 100) + " of it in tensor-core kernels");
    f.metrics["tensor_core_share"] = tc;
  }
  f.metrics["gpu_utilization"] = busy;
  f.metrics["gpu_compute_ms"] = b.gpu_compute_ms;
  const std::string k0 = k.empty() ? "-" : k.front().name;
  // A graph traced at graph level hides which of its kernels take the time: say so, and how to see them.
  if (!k.empty() && k.front().whole_graph) {
    f.evidence.push_back("'" + k0 + "' is a whole CUDA graph launch, recorded as one unit (graph_nodes is off): "
                         "its kernels are not timed one by one");
    suggest(f, "high", "Find the kernels that take the time inside '" + k0 + "': record a few steps again with "
                       "graph_nodes=true (iscope-run --set graph_nodes=true), which times every node of every launch");
  }
  // Lower precision only where matrix kernels run off tensor cores: GEMMs already in fp16/bf16 on tensor cores gain
  // nothing from it (FP8 aside, which changes numerics and is a model decision). The saving: those kernels' time at
  // the datasheet's TF32-to-FP32 ratio for this GPU, in a step the GPU paces (an upper bound: a GEMM limited by memory
  // gains less); TF32 changes numerics (a 10-bit mantissa in the products), which the suggestion says.
  const std::string lower = "Speed up '" + k0 + "': run the matrix work on tensor cores (" +
                            (python_program(in) ? "torch.backends.cuda.matmul.allow_tf32 = True, or "
                                                  "torch.set_float32_matmul_precision(\"high\"), for TF32; "
                                                  "torch.autocast(\"cuda\", dtype=torch.bfloat16) for bf16"
                                                : "cuBLAS with CUBLAS_COMPUTE_32F_FAST_TF32, or bf16 inputs") +
                            "); TF32 keeps fp32 ranges with a shorter mantissa in the products, so compare the outputs "
                            "once";
  if (const double k = tf32_over_fp32(device_sm(in.process)); k > 0 && in.facts.has(detail::kFactFp32Matmul)) {
    const double saving = std::min(in.step_ms(), fp32_matmul_ns(in) / 1e6 * (1 - 1 / k));
    Suggestion s{lower, "high", saving, saving > 0,
                 fmt("the fp32 matrix kernels' time divided by %.1f, the datasheet ratio of TF32 tensor-core to FP32 "
                     "throughput on this GPU, in a step the GPU paces (an upper bound: memory-bound GEMMs gain less)", k),
                 {detail::kFactFp32Matmul}};
    if (python_program(in)) s.try_knob = "allow_tf32=true";  // a torch flag: measurable with iscope-run --try
    f.suggestions.push_back(std::move(s));
  } else {
    const size_t before = f.suggestions.size();
    suggest(f, in, "high", lower, {detail::kFactFp32Matmul});
    if (f.suggestions.size() > before && python_program(in)) f.suggestions.back().try_knob = "allow_tf32=true";
  }
  // Matrix work already on tensor cores: no precision left to give, the work itself is what to cut.
  const bool tensor_core_matmul = std::any_of(families.begin(), families.end(), [](const KernelFamilyRow& r) {
    return (r.family == "gemm" || r.family == "attention") && r.tensor_core_share >= 0.5;
  });
  if (!in.facts.has(detail::kFactFp32Matmul) && tensor_core_matmul)
    suggest(f, "medium", "The matrix kernels already run on tensor cores: cut the work itself (a smaller or distilled model, "
                         "fewer tokens per step, a KV cache) or check with Nsight Compute that '" + k0 +
                         "' reaches the GPU's memory or compute roof");
  const detail::KernelChains& c = in.chains;
  if (c.chains_per_step >= 1 && c.ns_per_step >= kChainShare * in.t.kernel_ns) {
    f.evidence.push_back(fmt("%.0f chains of elementwise kernels per step", c.chains_per_step) + fmt(" (%.0f kernels, ", c.kernels_per_step) +
                         fms(c.ns_per_step / 1e6) + " of kernel time; the longest " + std::to_string(c.longest) +
                         " kernels); most frequent: " + c.most_frequent + fmt(" (%.0f per step)", c.most_frequent_per_step));
    f.metrics["elementwise_chain_ms"] = c.ns_per_step / 1e6;
    // Fused, a chain reads and writes its tensors once: about the time of one of its kernels.
    const double saving = c.ns_per_step / 1e6 * (1 - c.chains_per_step / c.kernels_per_step);
    f.suggestions.push_back({"Fuse the chains of elementwise kernels (" + c.most_frequent + ", ...): " +
                                 std::string(python_program(in) ? "torch.compile the module, or use fused ops (F.gelu, "
                                                                  "nn.LayerNorm, F.scaled_dot_product_attention) for "
                                                                  "hand-written formulas"
                                                                : "one kernel for each chain of elementwise operations"),
                             "high", saving, true, "each chain fused into one kernel of its kernels' mean time, GPU-paced step"});
  }
  suggest(f, "medium", "Fuse memory-bound kernels around '" + k0 + "'" +
                       (python_program(in) ? " (torch.compile, FlashAttention/SDPA for attention)" : " (one kernel for a chain of elementwise ops)"));
  suggest(f, "medium", "Raise the batch size if latency allows: a busy GPU gains throughput from larger batches");
  suggest(f, "low", "Check the kernels with Nsight Compute for occupancy and memory-bandwidth limits");
  return f;
}

}  // namespace inferscope::analyze::rules
