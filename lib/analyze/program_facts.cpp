// Stage "program facts" (program_facts.hpp).
#include "analyze/program_facts.hpp"

#include "text/api_kind.hpp"

#include <algorithm>
#include <cstdio>

namespace inferscope::analyze::detail {
namespace {

std::string fixed0(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}

std::string pct(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", share * 100);
  return b;
}

// The program's own file name from its command line: "python3 serve.py" -> python; "./server" -> not.
bool python_interpreter(const std::string& cmdline) {
  const std::string first = cmdline.substr(0, cmdline.find(' '));
  const std::string base = first.substr(first.rfind('/') == std::string::npos ? 0 : first.rfind('/') + 1);
  return base.rfind("python", 0) == 0;
}

}  // namespace

HostAfterRead host_after_read(std::span<const ApiOp* const> calls, std::span<const Span> windows) {
  HostAfterRead out;
  for (const Span& w : windows) {
    auto it = std::lower_bound(calls.begin(), calls.end(), w.start, [](const ApiOp* a, int64_t v) { return a->start < v; });
    int64_t at = w.start;  // the end of the previous call (the step's start before the first)
    bool read = false;
    for (; it != calls.end() && (*it)->start < w.end; ++it) {
      const ApiOp& a = **it;
      const int64_t gap = a.start - at;
      if (gap >= kDispatchGapNs) {
        out.host_ns += double(gap);
        // The next call queues GPU work (a launch, or the copy of what the host made, the next token's id).
        if (read && (a.kind == kLaunch || a.kind == kCopyAsync)) out.after_read_ns += double(gap);
      }
      if (a.kind == kSync || a.kind == kCopySync) read = true;
      at = std::max(at, a.end());
    }
    // The step's tail, after its last call: what the iteration does before the next one's launches (the next input
    // made, the last output written), which no launch of this step waits for.
    if (w.end - at >= kDispatchGapNs) out.host_ns += double(w.end - at);
  }
  return out;
}

ProgramFacts program_facts(const ProgramFactsInput& in) {
  ProgramFacts f;
  if (in.python_frames || python_interpreter(in.cmdline))
    f.holds[kFactPython] = in.python_frames ? "Python functions were recorded" : "the program is a Python interpreter";
  else
    f.holds[kFactCpp] = "no Python frame was recorded and the program is not a Python interpreter";
  if (in.dataloader) f.holds[kFactDataLoader] = "a torch DataLoader's iterator or its worker processes were seen";
  if (in.host.host_ns > 0) {
    const double share = in.host.after_read_ns / in.host.host_ns;
    if (share >= kDependentHostShare)
      f.holds[kFactDependentHost] = pct(share) + " of the step's host work comes after it read GPU results back and "
                                    "before its next launch: it needs this step's results";
    else
      f.holds[kFactPrefetchable] = pct(1 - share) + " of the step's host work comes before any read of its GPU results: "
                                   "it does not need them, so it can be done ahead";
  }
  if (in.matmul_ns > 0) {
    const double off = 1 - in.matmul_tensor_core_ns / in.matmul_ns;
    if (off >= kFp32MatmulShare)
      f.holds[kFactFp32Matmul] = pct(off) + " of matrix-kernel time runs off tensor cores";
  }
  if (!in.backward) f.holds[kFactInference] = "no backward pass or optimizer step was seen";
  if (in.generation && in.generation->detected) {
    const GenerationLoop& g = *in.generation;
    f.holds[kFactGeneration] = "each step generates tokens, one call of " + g.token_function + " per token";
    if (g.decode.d2d_copies >= 1)
      f.holds[kFactGrowingCache] = fixed0(g.decode.d2d_copies) + " device-to-device copies per decode token: a KV "
                                   "cache grown by concatenation, whose shapes change every token";
  }
  const bool same_work = in.fewest_kernels > 0 && double(in.most_kernels) <= kSameKernelsRatio * double(in.fewest_kernels);
  if (!f.has(kFactGrowingCache) && same_work)
    f.holds[kFactStaticShapes] = "every typical step launches " + fixed0(double(in.fewest_kernels)) +
                                 (in.most_kernels > in.fewest_kernels ? " to " + fixed0(double(in.most_kernels)) : std::string()) +
                                 " kernels, and no KV cache grows";
  return f;
}

}  // namespace inferscope::analyze::detail
