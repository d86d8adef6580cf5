// Stage "program facts": what the trace shows about the program that a suggestion may need to be true (docs/
// analysis.md, "Advice needs evidence"). A suggestion declares what it needs (Suggestion::needs, by these names), a
// rule offers it only where the facts hold, and the report linter checks every report against them: advice that
// does not fit the code (DataLoader workers for a C++ server, lower precision for GEMMs already on tensor cores,
// prefetching for work that needs this step's results) is never given.
//
//   ProgramFacts f = program_facts(ProgramFactsInput{...});
//   if (f.holds(kFactDataLoader)) ...
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/model.hpp"

#include <span>
#include <string>
#include <vector>

namespace inferscope::analyze::detail {

// The facts, by the names suggestions declare and the JSON report writes (one list: kFactNames).
inline constexpr const char* kFactPython = "python";            ///< Python code ran (frames recorded, or a Python interpreter)
inline constexpr const char* kFactCpp = "cpp";                  ///< no Python: a native program
inline constexpr const char* kFactDataLoader = "dataloader";    ///< a torch DataLoader fed the program
inline constexpr const char* kFactPrefetchable = "prefetchable";  ///< the step's host work does not follow a read of its own GPU results
inline constexpr const char* kFactDependentHost = "host_work_after_read";  ///< most of it does: it needs this step's results
inline constexpr const char* kFactFp32Matmul = "fp32_matmul";   ///< matrix kernels off tensor cores carry a fifth of their time or more
inline constexpr const char* kFactInference = "inference";      ///< no backward pass or optimizer step was seen
inline constexpr const char* kFactGeneration = "generation";    ///< a generation loop (tokens per step)
inline constexpr const char* kFactGrowingCache = "growing_kv_cache";  ///< its KV cache grows by copies every token (shapes change)
inline constexpr const char* kFactStaticShapes = "static_shapes";     ///< every typical step launches as many kernels, and no cache grows
inline constexpr const char* kFactNames[] = {kFactPython, kFactCpp, kFactDataLoader, kFactPrefetchable, kFactDependentHost,
                                             kFactFp32Matmul, kFactInference, kFactGeneration, kFactGrowingCache,
                                             kFactStaticShapes};

/// Host work that follows a read of the step's GPU results and precedes its next launch needs those results (the
/// next token sampled on the host from the logits just read): no worker can prepare it ahead. At least this share
/// of the step's host work makes it "after read".
inline constexpr double kDependentHostShare = 0.5;
/// A step whose shapes are fixed launches the same kernels every time: kernel counts of the typical steps within this
/// ratio of each other (an op every Nth step moves a count of hundreds by a few) are the same work. A count that moves
/// more follows the step's shapes (a batch whose members change, a sequence that grows), which one CUDA graph cannot replay.
inline constexpr double kSameKernelsRatio = 1.05;
/// Matrix kernels off tensor cores must carry this share of matrix-kernel time before lower precision is advice:
/// a few fp32 GEMMs beside many half-precision ones (a final projection kept in fp32 on purpose) are not the cost.
inline constexpr double kFp32MatmulShare = 0.2;

/// The step thread's host time between its CUDA calls in the typical steps, and the part of it that follows a read.
struct HostAfterRead {
  double host_ns = 0;       ///< gaps of kDispatchGapNs or more between calls (or from the step's start to its first, or
                            ///< from its last to its end)
  double after_read_ns = 0; ///< of those, gaps after a blocking read (a synchronization or a synchronous copy) in the same step and before a call that queues GPU work (a launch, an asynchronous copy)
};
/// `calls`: the step thread's CUDA calls by start; `windows`: the typical steps.
HostAfterRead host_after_read(std::span<const ApiOp* const> calls, std::span<const Span> windows);

struct ProgramFactsInput {
  bool python_frames = false;  ///< Python call records on any thread
  std::string cmdline;         ///< the process's command line
  bool dataloader = false;     ///< a DataLoader iterator's code, or its worker processes, were seen
  HostAfterRead host;
  double matmul_ns = 0, matmul_tensor_core_ns = 0;  ///< GEMM and attention kernels, and those on tensor cores
  bool backward = false;       ///< a backward pass or an optimizer step was seen (kernels or Python code)
  uint64_t fewest_kernels = 0, most_kernels = 0;  ///< kernels launched per typical step, the least and the most
  const GenerationLoop* generation = nullptr;
};

/// Which facts hold, each with the sentence that says why (for the report's evidence).
ProgramFacts program_facts(const ProgramFactsInput& in);

}  // namespace inferscope::analyze::detail
