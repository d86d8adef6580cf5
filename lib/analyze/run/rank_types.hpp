// What the run across ranks is made of (ranks.hpp analyses it): one rank's steps and their NCCL collectives as read
// from its dump, and the small functions on them that the run's parts share (rank_trace.cpp reads them, rank_work,
// collective_runs, gather_select, host_clocks and run_findings work on them). Types and helpers only: the analysis
// of a run is ranks.hpp's.
#pragma once

#include "analyze/analysis.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

}  // namespace inferscope::analyze
