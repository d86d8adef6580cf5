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
#include "dump/reader.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::analyze {

/// A whole number the process info holds (pid, rank, world_size, sm_count); nullopt when absent, not a number,
/// or over `max`.
std::optional<uint64_t> process_number(std::string_view text, uint64_t max = UINT32_MAX);

/// An NCCL kernel: a collective (or a send/receive) the GPU ran for this rank.
bool is_collective_kernel(std::string_view kernel_name);
/// "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv"; "collective" when the name
/// says none of them.
std::string collective_op(std::string_view kernel_name);
/// A kernel that picks a few elements of its input and their indices: an argmax, an argmin or a top-k (PyTorch's
/// ArgMaxOps, ArgMinOps and topk kernels). Gathering a tensor across ranks only to pick from it moves far more than
/// the pick needs. (A max or min reduction, or a sort, is left out: amax scaling and sorting follow gathers for
/// other reasons.)
bool is_selection_kernel(std::string_view kernel_name);

/// Length (ns) of the merged, sorted intervals `sorted` inside [lo, hi).
int64_t length_inside(const std::vector<std::pair<int64_t, int64_t>>& sorted, int64_t lo, int64_t hi);

/// One collective kernel, on the host-wide clock (ns).
struct CollectiveKernel {
  std::string op;
  bool fp32 = false;   ///< its name says it reduces float32 (ncclDevKernel_AllReduce_Sum_f32_RING_LL)
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device = 0;
  uint32_t blocks = 0;  ///< its grid: NCCL runs one block per channel, each on an SM of its own
  /// For an AllGather: the start of the first selection kernel (is_selection_kernel) on its device after it, before
  /// the step's next collective and before any matrix multiply, 0 when none: what it gathered was only picked from.
  int64_t selected_at_ns = 0;
  /// A matrix multiply or attention kernel (kernel_traits: gemm, attention) started on its device between the
  /// step's previous collective (or the step's start) and this one: a layer's compute, likely reading what the
  /// previous collective produced.
  bool matmul_before = false;
};

/// One steady step of one rank.
struct RankStep {
  uint64_t index = 0;  ///< among all its steps, warm-up included (StepStats::spans)
  int64_t start_ns = 0, end_ns = 0;
  std::vector<CollectiveKernel> collectives;  ///< by start
  double compute_ns = 0;  ///< time with a non-collective kernel, memset or copy running on this rank's GPUs
  double comm_ns = 0;     ///< time with a collective running (their union)
  double overlap_ns = 0;  ///< time with both
  /// The non-collective GPU work inside the step, merged and clipped to it (for the run's timeline).
  std::vector<std::pair<int64_t, int64_t>> compute;
  /// What the rank's threads and GPUs did inside the step, by (kind, name): "Python function", "range" (self time)
  /// and "kernel" (total time), each counted in the step that holds its start. What the straggler did instead is
  /// read from these, over the matched steps only.
  std::map<std::pair<std::string, std::string>, double> work_ns;
  bool work_read = false;  ///< work_ns was filled (the first kMaxWorkSteps steady steps only, rank_work.hpp)
};

/// What the run analysis reads of one rank's dump (stage "rank trace").
struct RankTrace {
  std::string path;
  int rank = -1;            ///< from the process info's `rank` (torchrun, MPI, Slurm); -1: not said
  int world_size = 0;       ///< from the process info's `world_size`; 0: not said
  std::string step_name;    ///< its steps' name: ranks of one run step the same range
  uint64_t pid = 0;
  std::string hostname;
  std::vector<uint32_t> devices;  ///< the GPUs its kernels ran on
  uint32_t sm_count = 0;          ///< SMs of its first GPU (process info gpu.N.sm_count, else known by name; 0: unknown)
  std::vector<RankStep> steps;    ///< its steady steps, in time order
};

/// Every time of `t` moved by `by` ns (onto another host's clock, or a converted trace's times to its origin).
void shift_times(RankTrace& t, int64_t by);

/// How many collectives every rank of one matched step ran (step[r]: rank r's): collectives are matched by their
/// order inside the step, so only that many are.
size_t common_collectives(const std::vector<const RankStep*>& step);
/// When the last rank arrived at the matched step's i-th collective: the latest start of its kernels.
int64_t last_arrival(const std::vector<const RankStep*>& step, size_t i);
/// How long collective `c` waited for the last arrival `last`, at most its whole kernel; the rest moved data.
inline int64_t waited_ns(const CollectiveKernel& c, int64_t last) {
  return std::clamp<int64_t>(last - c.start_ns, 0, std::max<int64_t>(0, c.end_ns - c.start_ns));
}

/// The SMs of a GPU model known by its name (H100, H200, A100, L40S), for dumps recorded before gpu.N.sm_count was
/// written; 0 when the name is not one of them.
uint32_t known_sm_count(std::string_view gpu_name);

/// The time saved per step by overlapping `exposed` ms of collectives with `compute_free` ms of compute not yet
/// beside them, when NCCL's blocks take `sm_share` of the SMs while it runs: in the transfer's time the compute
/// gets through exposed * (1 - sm_share) of its work, so that much (at most all of it) is hidden;
/// sm_share < 0: unknown, an ideal overlap (the smaller of the two).
double overlap_saving(double compute_free, double exposed, double sm_share);

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
/// step (the slowest rank's), and the report is the run's. A rank analysed with two ranks or more of its run keeps
/// its findings, but its communication finding no longer asks for the run analysis the report already holds.
void mark_launcher(Analysis& a);

}  // namespace inferscope::analyze
