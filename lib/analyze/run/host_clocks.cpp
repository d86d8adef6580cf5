#include "analyze/run/host_clocks.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

namespace inferscope::analyze {
namespace {

double median_of(std::vector<double>& v) {  // reorders v
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  const double upper = v[mid];
  if (n % 2) return upper;
  return (*std::max_element(v.begin(), v.begin() + long(mid)) + upper) / 2;
}

// 1 / (the standard normal's 75th percentile): the MAD of normally spread samples times this is their standard
// deviation.
constexpr double kMadToSigma = 1.4826;

}  // namespace

ClockOffset estimate_clock_offset(const std::vector<MatchedCollective>& collectives) {
  ClockOffset out;
  out.used = collectives.size();
  if (collectives.size() < kMinClockCollectives) return out;
  std::vector<double> d;
  int64_t lo = INT64_MIN, hi = INT64_MAX;  // the offsets causality allows
  bool bounded = false;
  for (const MatchedCollective& c : collectives) {
    d.push_back(double(c.end_b - c.end_a));
    if (!c.both_ways) continue;
    bounded = true;
    lo = std::max(lo, c.start_b - c.end_a);
    hi = std::min(hi, c.end_b - c.start_a);
  }
  out.offset_ns = median_of(d);
  for (double& x : d) x = std::fabs(x - out.offset_ns);
  out.precision_ns = kMadToSigma * median_of(d);
  if (bounded && lo <= hi)  // none both ways: nothing bounds it; an empty interval: timestamps that contradict it (damage); the spread alone is said
    out.precision_ns = std::max({out.precision_ns, out.offset_ns - double(lo), double(hi) - out.offset_ns});
  out.estimated = true;
  return out;
}

std::vector<MatchedCollective> matched_collectives(const RankTrace& a, const RankTrace& b) {
  std::map<uint64_t, const RankStep*> of_b;
  for (const RankStep& s : b.steps) of_b[s.index] = &s;
  std::vector<MatchedCollective> out;
  for (const RankStep& sa : a.steps) {
    auto it = of_b.find(sa.index);
    if (it == of_b.end() || it->second->collectives.size() != sa.collectives.size()) continue;
    for (size_t k = 0; k < sa.collectives.size(); ++k) {
      const CollectiveKernel &x = sa.collectives[k], &y = it->second->collectives[k];
      if (x.op != y.op) continue;  // not the same collective: the ranks ran them in another order
      // Data both ways only for the operations known to send it so; an unnamed one (NCCL's generic kernel may be a
      // send/receive) gives no causal bound, which would otherwise claim a precision it may not have.
      const bool both_ways = x.op == "AllReduce" || x.op == "AllGather" || x.op == "ReduceScatter" || x.op == "AllToAll";
      out.push_back({x.start_ns, x.end_ns, y.start_ns, y.end_ns, both_ways});
    }
  }
  return out;
}

std::vector<HostClock> host_clocks(const std::vector<const RankTrace*>& traces, const std::vector<RankRow>& rows) {
  std::vector<HostClock> clocks;
  std::vector<const RankTrace*> first;  // each host's first rank
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string& host = traces[i]->hostname;
    auto it = std::find_if(clocks.begin(), clocks.end(), [&](const HostClock& c) { return c.hostname == host; });
    if (it == clocks.end()) {
      clocks.push_back({host, "", clocks.empty(), clocks.empty(), 0, 0, 0});
      first.push_back(traces[i]);
      it = clocks.end() - 1;
    }
    it->ranks += (it->ranks.empty() ? "" : ",") + std::to_string(rows[i].rank);
  }
  if (clocks.size() < 2) return {};
  for (size_t h = 1; h < clocks.size(); ++h) {
    const ClockOffset o = estimate_clock_offset(matched_collectives(*first[0], *first[h]));
    clocks[h].estimated = o.estimated;
    clocks[h].offset_ms = o.offset_ns / 1e6;
    clocks[h].precision_us = o.precision_ns / 1e3;
    clocks[h].collectives_used = o.used;
  }
  return clocks;
}

bool all_estimated(const std::vector<HostClock>& clocks) {
  return std::all_of(clocks.begin(), clocks.end(), [](const HostClock& c) { return c.estimated; });
}

int64_t offset_ns_of(const std::vector<HostClock>& clocks, const std::string& hostname) {
  for (const HostClock& c : clocks)
    if (c.hostname == hostname) return c.estimated ? std::llround(c.offset_ms * 1e6) : 0;
  return 0;
}

RankTrace on_reference_clock(RankTrace t, int64_t offset_ns) {
  shift_times(t, -offset_ns);
  return t;
}

}  // namespace inferscope::analyze
