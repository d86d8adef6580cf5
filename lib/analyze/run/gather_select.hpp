// AllGathers whose result is only selected from (stage "gather then select" of the run analysis): a rank gathers
// a sharded tensor, full size, and then takes its argmax, top-k, max or sort (RankStep's collectives'
// selected_at_ns), as a vocabulary-parallel head does when it gathers every rank's logits to pick a token. Each
// rank could select within its own shard first and gather only the few values and indices selected.
//
//   GatherSelect g = gather_then_select(matched, rank);   // matched[k][r]: rank r's k-th matched step
//
// The saving counted, per step: each such AllGather's transfer time (the last rank's arrival to its end: the
// selected values and indices are a few bytes) and the GPU compute between its end and the selection (the layout
// copies and casts of the gathered tensor, which then handle only the selected elements; no matrix multiply runs
// there, or the gather is not paired: RankStep's selected_at_ns). What the selection itself costs, and any cast
// before the gather, is kept; the small gather that replaces it still pays a collective's fixed latency (tens of
// microseconds), which is counted as saved.
#pragma once

#include "analyze/run/rank_types.hpp"

#include <vector>

namespace inferscope::analyze {

struct GatherSelect {
  double gathers = 0;      ///< per step: AllGathers only selected from
  double transfer_ms = 0;  ///< per step: their transfer time
  double between_ms = 0;   ///< per step: GPU compute between each and its selection
  double saving_ms = 0;    ///< per step: transfer_ms + between_ms
};

/// Rank `rank`'s AllGathers that a selection read, over the matched steps (as many collectives as every rank ran),
/// as means per step.
GatherSelect gather_then_select(const std::vector<std::vector<const RankStep*>>& matched, size_t rank);

}  // namespace inferscope::analyze
