#include "live/step_split.hpp"

#include <algorithm>

namespace inferscope::live {

const char* category_name(Category c) {
  switch (c) {
    case Category::kGpuBusy: return "gpu_busy";
    case Category::kSyncWait: return "sync_wait";
    case Category::kLaunch: return "launch";
    default: return "host";
  }
}

namespace {

struct Edge {
  uint64_t at;
  int delta;     // +1 an interval opens, -1 it closes
  uint8_t kind;  // Category index
};

void add_edges(std::vector<Edge>& edges, const std::vector<Interval>& v, Interval step, Category c) {
  for (const Interval& i : v) {
    const uint64_t a = std::max(i.start, step.start), b = std::min(i.end, step.end);
    if (a >= b) continue;
    edges.push_back({a, +1, uint8_t(c)});
    edges.push_back({b, -1, uint8_t(c)});
  }
}

}  // namespace

StepSplit split_step(Interval step, const std::vector<Interval>& gpu, const std::vector<Interval>& sync,
                     const std::vector<Interval>& launch) {
  StepSplit out{};
  if (step.end <= step.start) return out;
  std::vector<Edge> edges;
  edges.reserve(2 * (gpu.size() + sync.size() + launch.size()) + 1);
  add_edges(edges, gpu, step, Category::kGpuBusy);
  add_edges(edges, sync, step, Category::kSyncWait);
  add_edges(edges, launch, step, Category::kLaunch);
  edges.push_back({step.end, 0, uint8_t(Category::kHost)});  // closes the last segment
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<int, kCategories> open{};
  uint64_t at = step.start;
  for (const Edge& e : edges) {
    // The segment [at, e.at) belongs to the first category with an interval open over it.
    size_t c = 0;
    while (c + 1 < kCategories && open[c] == 0) ++c;
    out[c] += e.at - at;
    at = e.at;
    open[e.kind] += e.delta;
  }
  return out;
}

}  // namespace inferscope::live
