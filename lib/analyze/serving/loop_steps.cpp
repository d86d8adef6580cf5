// The event loop's callback holding each step instance (loop_steps.hpp).
#include "analyze/serving/loop_steps.hpp"

namespace inferscope::analyze::detail {

std::vector<LoopStep> enclosing_coroutine_runs(std::span<const std::pair<int64_t, int64_t>> instances,
                                               std::span<const CoroutineRun> runs) {
  std::vector<LoopStep> out;
  std::vector<size_t> open;  // runs that began and have not ended, outermost first
  std::vector<long> holder(instances.size(), -1);
  size_t next = 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    const auto [s, e] = instances[i];
    while (next < runs.size() && runs[next].start <= s) {
      while (!open.empty() && runs[open.back()].end <= runs[next].start) open.pop_back();
      open.push_back(next++);
    }
    while (!open.empty() && runs[open.back()].end < e) open.pop_back();
    if (!open.empty() && runs[open.back()].start <= s) holder[i] = long(open.back());
  }
  size_t inside = 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (holder[i] < 0) continue;
    ++inside;
    if (i > 0 && holder[i] == holder[i - 1]) return {};  // two instances in one run: the run is not one batch
  }
  if (inside * 2 < instances.size() || inside == 0) return {};
  for (size_t i = 0; i < instances.size(); ++i) {
    if (holder[i] < 0) {
      out.push_back({instances[i].first, instances[i].second, 0});
      continue;
    }
    const CoroutineRun& r = runs[size_t(holder[i])];
    out.push_back({r.start, r.end, r.code});
  }
  return out;
}

}  // namespace inferscope::analyze::detail
