// Stage "gather then select" of the run analysis: lib/analyze/run/gather_select.hpp says what it counts and why.
#include "analyze/run/gather_select.hpp"

#include <algorithm>

namespace inferscope::analyze {

GatherSelect gather_then_select(const std::vector<std::vector<const RankStep*>>& matched, size_t rank) {
  GatherSelect out;
  if (matched.empty()) return out;
  double gathers = 0, transfer = 0, between = 0;
  for (const auto& st : matched) {
    if (rank >= st.size()) return out;
    const size_t k = common_collectives(st);
    const RankStep& mine = *st[rank];
    for (size_t i = 0; i < k; ++i) {
      const CollectiveKernel& c = mine.collectives[i];
      if (!c.selected_at_ns) continue;
      gathers += 1;
      transfer += double(std::max<int64_t>(0, c.end_ns - c.start_ns) - waited_ns(c, last_arrival(st, i)));
      between += double(length_inside(mine.compute, c.end_ns, c.selected_at_ns));
    }
  }
  const double m = double(matched.size());
  out.gathers = gathers / m;
  out.transfer_ms = transfer / m / 1e6;
  out.between_ms = between / m / 1e6;
  out.saving_ms = out.transfer_ms + out.between_ms;
  return out;
}

}  // namespace inferscope::analyze
