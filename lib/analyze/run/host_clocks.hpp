// The clocks of a run's hosts (stage "host clocks" of the run analysis, docs/multi-gpu.md "Clock"). The ranks of
// one host share its CLOCK_MONOTONIC, which every dump's times are on; two hosts' clocks differ by an unknown
// offset (each counts from its own boot). The trace itself measures it: a collective ends on every rank within
// microseconds of each other (it completes once the last data has arrived everywhere), so for a rank of host B
// and one of the reference host A, each collective matched between them gives (end on B - end on A) = offset +
// a few microseconds. The median of these is the offset; its precision is the larger of their spread and how far
// causality lets the true offset lie from it (no rank's kernel ends before every other rank's has started).
//
//   std::vector<HostClock> clocks = host_clocks(traces, rows);   // empty on one host
//   if (all_estimated(clocks)) for (t : traces) aligned.push_back(on_reference_clock(*t, offset_ns_of(clocks, t->hostname)));
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/run/rank_types.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace inferscope::analyze {

/// The fewest matched collectives an offset is estimated from. The median and the median absolute deviation ignore
/// up to half their samples, but with a handful of samples two or three collectives whose end one rank saw late (a
/// kernel preempted or a launch delayed on one GPU) already are that half. Eight keeps the estimate on the
/// undisturbed majority when up to three are off, and a run with a collective in each step reaches it within its
/// first 8 steady steps: fewer means a run without collectives to speak of, whose ranks are better left unmatched
/// than put on a guessed clock.
inline constexpr size_t kMinClockCollectives = 8;

/// A clock's offset against another, estimated from per-collective differences.
struct ClockOffset {
  bool estimated = false;   ///< at least kMinClockCollectives differences
  double offset_ns = 0;     ///< their median
  double precision_ns = 0;  ///< see estimate_clock_offset
  size_t used = 0;          ///< differences read
};

/// One collective matched between a rank of host A and a rank of host B, each time on its own host's clock.
struct MatchedCollective {
  int64_t start_a = 0, end_a = 0, start_b = 0, end_b = 0;
  /// Every rank's data reaches every other (AllReduce, AllGather, ReduceScatter, AllToAll): neither kernel can end
  /// before the other has started. Not so for a Broadcast, Reduce or send/receive (one direction only).
  bool both_ways = true;
};

/// The offset of B's clock against A's from the matched collectives: the median of (end_b - end_a), robust to the
/// few collectives one rank saw end late. Precision, the larger of:
/// - the spread: the differences' median absolute deviation times 1.4826, which for normally spread noise is their
///   standard deviation, but unlike it is not inflated by those few outliers. It is the spread of one difference,
///   not the standard error of the median (spread / sqrt(n)), which would shrink with more collectives;
/// - the causal bound: the ends are not noise around the offset but differ systematically (the rank that receives a
///   ring's last chunk ends last, every time: on the H100 fixtures by about 10 us, five times the spread), which no
///   spread shows. What bounds it: in a both-ways collective neither kernel ends before the other started, so the
///   offset lies in [start_b - end_a, end_b - start_a] for each, and in their intersection over all of them; the
///   farther end of that interval from the median is how wrong the median can be. The tightest of those come from
///   the collectives a rank arrived at last, so the interval is about two of the shortest transfers wide.
/// Fewer than kMinClockCollectives: not estimated.
ClockOffset estimate_clock_offset(const std::vector<MatchedCollective>& collectives);

/// The collectives of ranks `a` and `b` matched for the estimate: the k-th collective of the steps of one index that
/// are steady on both (the index, not the time, matches them: the clocks differ) and ran as many collectives on both
/// (a step where they did not may hold one the other rank ran elsewhere; it is skipped), when both are the same
/// operation. Only AllReduce, AllGather, ReduceScatter and AllToAll count as both ways.
std::vector<MatchedCollective> matched_collectives(const RankTrace& a, const RankTrace& b);

/// Each host of the ranks, the reference (the host of `traces[0]`, the lowest rank) first, then in rank order, with
/// its clock against the reference's estimated between the first rank of each. `rows[i]` is `traces[i]`'s row
/// (its rank number). Empty when every rank ran on one host.
std::vector<HostClock> host_clocks(const std::vector<const RankTrace*>& traces, const std::vector<RankRow>& rows);

/// Whether every host's offset is known (true for none: one host).
bool all_estimated(const std::vector<HostClock>& clocks);

/// The offset of `hostname`'s clock against the reference's in ns (0: the reference, a host not listed, one host).
int64_t offset_ns_of(const std::vector<HostClock>& clocks, const std::string& hostname);

/// `t` with every time moved by -offset_ns: from its host's clock onto the reference host's.
RankTrace on_reference_clock(RankTrace t, int64_t offset_ns);

}  // namespace inferscope::analyze
