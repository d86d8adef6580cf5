// The ranks of one multi-process run analysed together (docs/multi-gpu.md): one dump per rank (torchrun, MPI,
// a Python parent that spawns workers), each already analysed alone, are read once more for their NCCL
// collectives and compute kernels, and the ranks' steps and collectives are matched to say what a rank's
// collective time is made of (waiting for the slowest rank, or moving data), which rank the others wait for
// and what it did instead, and how much communication overlaps compute.
//
//   std::vector<RankTrace> t;
//   for (each rank's dump r and its Analysis a) t.push_back(read_rank_trace(r, a));
//   RunAnalysis run = analyze_ranks(t, analyses);   // analyses[i] is t[i]'s Analysis
//
// Clock: every dump's times are on its host's CLOCK_MONOTONIC (the reader fits the session clock to it), so
// the ranks of one host are on one clock to within the fits' residuals; the ranks of other hosts are put on the
// lowest rank's host's clock by an offset estimated from the collectives' ends (host_clocks.hpp), and not matched
// when too few collectives estimate it (RunAnalysis::host_clocks says which).
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/run/rank_types.hpp"
#include "dump/reader.hpp"

#include <vector>

namespace inferscope::analyze {

/// Reads the steady steps of `a` (the dump's analysis) out of `r` with the GPU work inside each.
RankTrace read_rank_trace(const dump::DumpReader& r, const Analysis& a);

/// The run across its ranks; `analyses[i]` is the analysis of `traces[i]`. Fewer than two ranks with steps:
/// ranks listed, nothing matched, no finding.
RunAnalysis analyze_ranks(const std::vector<RankTrace>& traces, const std::vector<const Analysis*>& analyses);

/// One matched step drawn across the ranks (RunAnalysis::timeline): the one whose slowest rank took the median
/// time of the matched steps. Per rank a lane with its step and one with its GPU work: compute, and each
/// collective split into the wait for the last rank to arrive and the transfer after. Times in ms from the
/// earliest rank's start of that step, on the host-wide clock the ranks share. `matched[k][r]` is rank r's step k.
RepresentativeStep run_timeline(const std::vector<std::vector<const RankStep*>>& matched, const std::vector<RankRow>& rows);

/// Marks `a` as a launcher when its run has a rank and it did no GPU work itself (torchrun's agent, mpirun, a
/// Python parent): its own findings, about its idle loop, are taken out, its headline latency becomes the run's
/// step (the slowest rank's), and the report is the run's. A rank analysed with its run keeps its findings (the
/// analysis says it is with its run through AnalyzeOptions::with_its_run, before its rules run).
void mark_launcher(Analysis& a);

}  // namespace inferscope::analyze
