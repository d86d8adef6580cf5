// The step's candidates (step_candidates.hpp).
#include "analyze/step_candidates.hpp"

#include "analyze/stages.hpp"

#include <cstdio>

namespace inferscope::analyze::detail {

std::vector<StepCandidate> step_candidates(const Context& cx, const Ingested& in, const std::string& except) {
  std::vector<StepCandidate> out;
  // Ranges: per (name, thread), as the detection counts them (a name repeated by a pool is not one step).
  std::map<std::pair<uint32_t, uint32_t>, StepCandidate> ranges;
  for (const Cand& c : in.top) {
    const bool nvtx = (c.name & kNvtxCand) != 0;
    StepCandidate& k = ranges[{c.name, c.thread}];
    if (k.name.empty()) {
      k.name = cx.name_of(c.name & ~kNvtxCand);
      k.kind = nvtx ? "nvtx range" : "range";
    }
    ++k.count;
    k.total_ms += double(c.end - c.start) / 1e6;
  }
  for (auto& [key, k] : ranges)
    if (k.count >= 2) out.push_back(std::move(k));
  // Python functions at depth <= 3, on the threads that launch GPU work (all threads when none does).
  bool any_launching = false;
  for (const ThreadState& t : in.ts) any_launching |= t.apis > 0;
  std::map<uint32_t, StepCandidate> functions;
  for (uint32_t th = 0; th < in.ts.size(); ++th) {
    const ThreadState& t = in.ts[th];
    if (any_launching && t.apis == 0) continue;
    t.shallow_py.for_each([&](uint64_t code, const std::pair<uint64_t, int64_t>& c) {
      if (c.first < 2 || cx.wait_point(uint32_t(code)) || t.coroutine_codes.find(code)) return;
      StepCandidate& k = functions[uint32_t(code)];
      if (k.name.empty()) {
        k.name = cx.code_name(uint32_t(code));
        k.kind = "function";
        k.launches = t.apis > 0;
      }
      if (c.first > k.count) {  // the busiest thread's count, as a step runs on one thread
        k.count = c.first;
        k.total_ms = double(c.second) / 1e6;
      }
    });
  }
  for (auto& [code, k] : functions) out.push_back(std::move(k));
  std::erase_if(out, [&](const StepCandidate& k) { return k.name == except || k.name.empty(); });
  std::stable_sort(out.begin(), out.end(), [](const StepCandidate& a, const StepCandidate& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.name < b.name;
  });
  if (out.size() > kStepCandidates) out.resize(kStepCandidates);
  return out;
}

std::string unknown_step_message(const std::string& path, const std::string& step, const std::vector<StepCandidate>& candidates) {
  std::string m = path + ": --step '" + step + "' names no range, scope or Python function in it";
  if (candidates.empty()) return m + ", and nothing in it repeats; record the program with a range around each step "
                                     "(ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\"))";
  m += "; the repeated ones, by the time they cover:";
  for (const StepCandidate& k : candidates) {
    char b[96];
    std::snprintf(b, sizeof b, " (%s, %llu, %.1f ms in all)", k.kind.c_str(), (unsigned long long)k.count, k.total_ms);
    m += "\n  --step '" + k.name + "'" + b;
  }
  return m;
}

}  // namespace inferscope::analyze::detail
