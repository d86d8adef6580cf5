// What each rank did inside its steps, by name (stage "rank work" of the run analysis): the Python functions and
// ranges (self time) and kernels (total time) of each steady step, so that what the straggler did instead is read
// from inside the matched steps only, not from the whole trace (one-off work before the steps, a warm-up, a
// checkpoint, is not in a step and cannot be named).
//
//   add_step_work(reader, trace.steps);             // read_rank_trace does it, on the dump's own clock
//   Excess did = straggler_excess(matched, r);      // matched[k][r]: rank r's k-th matched step
#pragma once

#include "analyze/duration_stats.hpp"
#include "analyze/run/rank_types.hpp"
#include "dump/clock_model.hpp"
#include "dump/visit.hpp"
#include "dump/reader.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace inferscope::analyze {

/// What the straggler did that the others did not, per matched step: the largest excess of one Python function,
/// range or kernel over the most any other rank spent in the same one.
struct Excess {
  std::string kind;  ///< "Python function", "range", "kernel"; "" when no excess was found
  std::string name;
  double ms = 0;     ///< per matched step
  std::string launched_by;  ///< for a kernel: where most of its launches came from on that rank, "" when unknown
  std::string what() const {
    return kind.empty() ? "" : kind + " " + name + (launched_by.empty() ? "" : " (launched by " + launched_by + ")");
  }
};

/// The steps whose work is kept: the first 256 of each rank, and the first 256 matched steps are compared. A step
/// keeps one entry per distinct function, range and kernel name it ran (hundreds, names of up to hundreds of
/// characters), so a run of 10,000 steps on 8 ranks would keep tens of millions of them; the analysis reads at most
/// 64 typical steps, and a mean over 256 is four times that.
inline constexpr size_t kMaxWorkSteps = 256;

/// Fills `steps[i].work_ns` (i < kMaxWorkSteps) from the records it is handed (dump::visit_records), each counted
/// in the step (by start, on the dump's own clock) that holds its start; records outside those steps are left out.
/// `steps` are in time order and must outlive it.
class StepWorkVisitor {
 public:
  StepWorkVisitor(const dump::DumpReader& r, const dump::ClockModel& clock, std::vector<RankStep>& steps);
  void on(const RangeRecord& rec, const dump::RecordContext& rc);
  void on(const PyCallRecord& rec, const dump::RecordContext& rc);
  void on(const GpuKernelRecord& rec, const dump::RecordContext& rc);

 private:
  RankStep* step_at(int64_t t);
  int64_t duration(uint64_t start, uint64_t end) const;
  const std::string& name_of(uint32_t id);
  const std::string& code_name(uint32_t code);
  void add(uint64_t start, const std::string& kind, const std::string& name, int64_t ns);

  const dump::DumpReader& r_;
  const dump::ClockModel& clock_;
  std::vector<RankStep>& steps_;
  size_t kept_;  // the first `kept_` steps get their work
  std::unordered_map<uint32_t, SelfTimer<int64_t>> range_self_, py_self_;  // by thread
  std::unordered_map<uint32_t, std::string> names_, code_names_;
};

/// The same in a pass of its own over `r`'s records.
void add_step_work(const dump::DumpReader& r, std::vector<RankStep>& steps);

/// Where the straggler's lateness comes from: its GPU ran more (its GPU compute per step exceeds every other
/// rank's by half its lateness or more), or anything else (host work before its collectives).
enum class Lateness { kHostWork, kGpuWork };

/// The largest excess of rank `straggler` over the matched steps `matched` (matched[k][r]: rank r's k-th matched
/// step) whose work every rank read (RankStep::work_read): per (kind, name), its mean per matched step less the
/// largest other rank's. Late from GPU work: the kernel with the largest excess (the host's extra time is its wait
/// for that kernel). Otherwise a Python function is preferred to a range (a range's self time holds the Python
/// calls inside it) unless the range's excess is over 1.25 times larger; a kernel wins when its excess is the
/// largest.
Excess straggler_excess(const std::vector<std::vector<const RankStep*>>& matched, size_t straggler,
                        Lateness late = Lateness::kHostWork);

}  // namespace inferscope::analyze
