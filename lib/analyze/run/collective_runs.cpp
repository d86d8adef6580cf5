// Stage "collective runs" of the run analysis: lib/analyze/run/collective_runs.hpp says what a run is and why.
#include "analyze/run/collective_runs.hpp"

#include <algorithm>

namespace inferscope::analyze {
namespace {

struct RunSum {
  size_t n = 0;
  int64_t first_start = 0, last_end = 0, transfer = 0, wait = 0;
};

}  // namespace

CollectiveRuns collective_runs(const std::vector<std::vector<const RankStep*>>& matched, size_t rank, bool one_straggler) {
  CollectiveRuns out;
  if (matched.empty()) return out;
  double collectives = 0, runs = 0, span = 0, compute = 0, transfer = 0, wait = 0, saving = 0;
  for (const auto& st : matched) {
    if (rank >= st.size()) return out;
    const size_t k = common_collectives(st);
    const RankStep& mine = *st[rank];
    auto close = [&](const RunSum& r) {
      if (r.n < 2) return;
      const double sp = double(r.last_end - r.first_start);
      const double cp = double(length_inside(mine.compute, r.first_start, r.last_end));
      collectives += double(r.n), runs += 1, span += sp, compute += cp, transfer += double(r.transfer), wait += double(r.wait);
      const double waits_kept = one_straggler ? double(r.wait) : double(r.wait) / double(r.n);
      saving += std::max(0.0, sp - cp - double(r.transfer) - waits_kept);
    };
    RunSum run;
    for (size_t i = 0; i < k; ++i) {
      const CollectiveKernel& c = mine.collectives[i];
      const int64_t w = waited_ns(c, last_arrival(st, i)), t = std::max<int64_t>(0, c.end_ns - c.start_ns) - w;
      // The compute between the two is measured against the later one's transfer, not its whole kernel: a rank
      // that waits long in every collective would otherwise join a per-layer chain into a run.
      const bool joins = run.n > 0 && !c.matmul_before && length_inside(mine.compute, run.last_end, c.start_ns) < t;
      if (!joins) {
        close(run);
        run = RunSum{0, c.start_ns, c.end_ns, 0, 0};
      }
      ++run.n;
      run.last_end = std::max(run.last_end, c.end_ns);
      run.transfer += t;
      run.wait += w;
    }
    close(run);
  }
  const double m = double(matched.size());
  out.collectives = collectives / m;
  out.runs = runs / m;
  out.span_ms = span / m / 1e6;
  out.compute_ms = compute / m / 1e6;
  out.transfer_ms = transfer / m / 1e6;
  out.wait_ms = wait / m / 1e6;
  out.saving_ms = saving / m / 1e6;
  return out;
}

}  // namespace inferscope::analyze
