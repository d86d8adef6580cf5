// Collectives a rank issues back to back (stage "collective runs" of the run analysis): what coalescing them into
// one collective over a flattened buffer would save, from the matched steps alone.
//
//   CollectiveRuns runs = collective_runs(matched, rank);   // matched[k][r]: rank r's k-th matched step
//
// Two consecutive collectives of a step belong to one run when no matrix multiply (GEMM or attention kernel) ran
// between them on the rank's GPU and the compute between them is shorter than the later one's transfer time: what
// runs between them is then copies and elementwise work shorter than the data movement, the shape of a
// per-feature or per-tensor loop of small collectives. Per-layer tensor parallelism puts a layer's matmuls
// between its collectives, which read the previous collective's result: those are never joined, however short. Each collective of a run pays its own launch, NCCL's handshake
// and a wait for the later rank; one collective over the whole run pays them once. The saving counted is a floor:
// the run's span less the compute inside it, less all of its collectives' transfer time (kept whole: the bytes do
// not change, though one large collective moves them faster), less the waits: all of them when one rank is the
// run's straggler (it stays as late with one collective), one (the mean of the run's) when the ranks are late by
// turns (each collective's jitter adds a wait; one collective has one).
//
// Coalescing is suggested only where the saving is at least the runs' transfer time: then each collective's fixed
// costs outweigh the data it moves (latency-bound, the alpha of the alpha-beta model); where the transfer is
// larger, the bytes are the cost and fewer, larger collectives move the same bytes.
#pragma once

#include "analyze/run/rank_types.hpp"

#include <vector>

namespace inferscope::analyze {

struct CollectiveRuns {
  double collectives = 0;  ///< per step, in runs of two or more
  double runs = 0;         ///< per step
  double span_ms = 0;      ///< per step: first start to last end of each run, summed
  double compute_ms = 0;   ///< per step: GPU compute inside the runs (beside a collective or between two)
  double transfer_ms = 0;  ///< per step: the runs' collectives moving data (the last rank's arrival to the end)
  double wait_ms = 0;      ///< per step: the runs' collectives waiting on this rank for a later one
  double saving_ms = 0;    ///< per step: what one collective per run saves, at least (above)
};

/// Rank `rank`'s runs over the matched steps (each step's collectives matched by their order, as many as every
/// rank ran), as means per step.
/// `one_straggler`: the run has a straggler (ranks.cpp), whose lateness one collective would not remove.
CollectiveRuns collective_runs(const std::vector<std::vector<const RankStep*>>& matched, size_t rank, bool one_straggler);

/// Whether coalescing the runs is worth suggesting: a saving at least the runs' transfer time (above).
inline bool worth_coalescing(const CollectiveRuns& r) { return r.runs > 0 && r.saving_ms > 0 && r.saving_ms >= r.transfer_ms; }

}  // namespace inferscope::analyze
