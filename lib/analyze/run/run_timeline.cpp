// The run's timeline (ranks.hpp, run_timeline): one matched step drawn across the ranks on their shared clock,
// so a reader sees who arrived last at each collective and what the others did meanwhile.
#include "analyze/run/ranks.hpp"

#include <algorithm>
#include <cstdio>

namespace inferscope::analyze {
namespace {

// The step whose slowest rank took the median time of the matched steps: a step like the others, not the worst.
size_t median_step(const std::vector<std::vector<const RankStep*>>& matched) {
  std::vector<std::pair<int64_t, size_t>> slowest;
  for (size_t k = 0; k < matched.size(); ++k) {
    int64_t longest = 0;
    for (const RankStep* s : matched[k]) longest = std::max(longest, s->end_ns - s->start_ns);
    slowest.emplace_back(longest, k);
  }
  std::nth_element(slowest.begin(), slowest.begin() + slowest.size() / 2, slowest.end());
  return slowest[slowest.size() / 2].second;
}

std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f ms", ms);
  return b;
}

}  // namespace

RepresentativeStep run_timeline(const std::vector<std::vector<const RankStep*>>& matched, const std::vector<RankRow>& rows) {
  RepresentativeStep out;
  if (matched.empty()) return out;
  const std::vector<const RankStep*>& st = matched[median_step(matched)];
  int64_t origin = INT64_MAX, end = INT64_MIN;
  for (const RankStep* s : st) origin = std::min(origin, s->start_ns), end = std::max(end, s->end_ns);
  auto at = [&](int64_t ns) { return double(ns - origin) / 1e6; };
  out.step.index = uint32_t(st.front()->index);
  out.step.duration_ms = at(end);
  const size_t shared = common_collectives(st);
  for (size_t r = 0; r < st.size(); ++r) {
    const std::string rank = "rank " + std::to_string(r < rows.size() ? rows[r].rank : int(r));
    TimelineLane host{rank, false, {}};
    host.spans.push_back({at(st[r]->start_ns), at(st[r]->end_ns), "step " + std::to_string(st[r]->index), "range", 0});
    TimelineLane gpu{rank + " GPU", true, {}};
    for (const auto& [lo, hi] : st[r]->compute) gpu.spans.push_back({at(lo), at(hi), "compute", "kernel", 0});
    for (size_t i = 0; i < st[r]->collectives.size(); ++i) {
      const CollectiveKernel& c = st[r]->collectives[i];
      int64_t last = c.start_ns;
      int last_rank = -1;
      for (size_t q = 0; i < shared && q < st.size(); ++q)
        if (st[q]->collectives[i].start_ns > last) {
          last = st[q]->collectives[i].start_ns;
          last_rank = q < rows.size() ? rows[q].rank : int(q);
        }
      const int64_t waited_until = std::min(last, c.end_ns);
      if (waited_until > c.start_ns)
        gpu.spans.push_back({at(c.start_ns), at(waited_until),
                             c.op + ": waiting " + ms_text(double(waited_until - c.start_ns) / 1e6) + " for rank " +
                                 std::to_string(last_rank),
                             "collective_wait", 1});
      if (c.end_ns > waited_until) gpu.spans.push_back({at(waited_until), at(c.end_ns), c.op, "collective", 1});
    }
    out.lanes.push_back(std::move(host));
    out.lanes.push_back(std::move(gpu));
  }
  return out;
}

}  // namespace inferscope::analyze
