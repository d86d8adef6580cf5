// Stage "program facts", its part that reads the trace: the inputs of program_facts (program_facts.hpp) from the
// ingested records, the tables and the typical steps.
#include "analyze/aggregate.hpp"
#include "analyze/kernel_traits.hpp"
#include "analyze/program_facts.hpp"
#include "analyze/stages.hpp"

#include <cctype>
#include <cstring>

namespace inferscope::analyze::detail {
namespace {

bool has_ci(const std::string& s, const char* needle) {
  const size_t n = std::strlen(needle);
  if (s.size() < n) return false;
  for (size_t i = 0; i + n <= s.size(); ++i) {
    size_t k = 0;
    while (k < n && std::tolower(static_cast<unsigned char>(s[i + k])) == needle[k]) ++k;
    if (k == n) return true;
  }
  return false;
}

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

}  // namespace

ProgramFacts find_program_facts(const Context& cx, const Ingested& in, const StepSet& ss, const std::vector<StepMetrics>& steps,
                                const std::vector<const ApiOp*>& sapi, const Tables& tables, const GenerationLoop& generation,
                                const std::map<std::string, std::string>& process) {
  ProgramFactsInput x;
  for (const ThreadState& t : in.ts) x.python_frames |= t.py_calls > 0;
  if (auto it = process.find("cmdline"); it != process.end()) x.cmdline = it->second;
  for (const auto& [id, code] : cx.r.code_table()) {
    if (const WaitPoint* w = cx.wait_point(id); w && w->kind == WaitKind::kDataLoader) x.dataloader = true;
    if (ends_with(code.qualname, ".backward") || ends_with(code.qualname, "Optimizer.step") ||
        ends_with(code.qualname, ".zero_grad"))
      x.backward = true;
  }
  for (const auto& [id, t] : cx.r.threads())
    if (t.name.rfind("pt_data_worker", 0) == 0) x.dataloader = true;
  for (const KernelRow& k : tables.kernels) {
    if (has_ci(k.name, "backward")) x.backward = true;
    const KernelTraits tr = kernel_traits(k.name);
    if (std::strcmp(tr.family, "gemm") != 0 && std::strcmp(tr.family, "attention") != 0) continue;
    x.matmul_ns += k.total_ms * 1e6;
    if (tr.tensor_core) x.matmul_tensor_core_ns += k.total_ms * 1e6;
  }
  std::vector<Span> windows;
  for (size_t i : typical_indexes(ss.selection))
    if (i < steps.size()) windows.push_back({steps[i].start, steps[i].start + steps[i].dur, uint32_t(i)});
  std::sort(windows.begin(), windows.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  if (!ss.whole) x.host = host_after_read(sapi, windows);
  for (const Span& w : windows) {
    const uint64_t k = steps[w.step].kernels;
    x.fewest_kernels = x.fewest_kernels ? std::min(x.fewest_kernels, k) : k;
    x.most_kernels = std::max(x.most_kernels, k);
  }
  x.generation = &generation;
  return program_facts(x);
}

}  // namespace inferscope::analyze::detail
