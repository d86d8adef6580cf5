// Stage "kernel chains" (kernel_chains.hpp).
#include "analyze/kernel_chains.hpp"

#include "analyze/kernel_traits.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace inferscope::analyze::detail {

KernelChains find_kernel_chains(std::span<const GpuOp> gpu, const std::vector<Span>& steps,
                                const std::function<const std::string&(uint32_t)>& name) {
  KernelChains out;
  if (steps.empty()) return out;
  std::unordered_map<uint32_t, bool> elementwise;  // by name id, classified once
  auto is_elementwise = [&](uint32_t id) {
    auto it = elementwise.find(id);
    if (it == elementwise.end()) it = elementwise.emplace(id, std::string_view(kernel_traits(name(id)).family) == "elementwise").first;
    return it->second;
  };
  std::map<std::string, size_t> signatures;
  size_t chains = 0, kernels = 0;
  double ns = 0;
  for (const Span& step : steps) {
    auto first = std::lower_bound(gpu.begin(), gpu.end(), step.start, [](const GpuOp& op, int64_t t) { return op.start < t; });
    std::map<uint16_t, std::vector<const GpuOp*>> run;  // per stream: the current run of elementwise kernels
    auto close = [&](std::vector<const GpuOp*>& r) {
      if (r.size() >= kMinChain) {
        ++chains;
        kernels += r.size();
        out.longest = std::max(out.longest, r.size());
        std::string sig;
        for (const GpuOp* k : r) {
          ns += k->dur;
          if (sig.size() < 200) sig += (sig.empty() ? "" : " -> ") + std::string(kernel_base_name(name(k->name_or_bytes)));
        }
        ++signatures[sig];
      }
      r.clear();
    };
    for (auto it = first; it != gpu.end() && it->start < step.end; ++it) {  // anything else on the stream ends a run
      auto& r = run[it->stream];
      if (it->kind == kKernel && is_elementwise(it->name_or_bytes)) r.push_back(&*it);
      else close(r);
    }
    for (auto& [stream, r] : run) close(r);
  }
  const double n = double(steps.size());
  out.chains_per_step = double(chains) / n;
  out.kernels_per_step = double(kernels) / n;
  out.ns_per_step = ns / n;
  const auto best = std::max_element(signatures.begin(), signatures.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best != signatures.end()) {
    out.most_frequent = best->first;
    out.most_frequent_per_step = double(best->second) / n;
  }
  return out;
}

}  // namespace inferscope::analyze::detail
