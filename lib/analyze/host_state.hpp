// What the step thread was doing while it was outside CUDA calls: running, runnable but not running
// (waiting for a CPU), waiting for the GIL, or blocked by its own choice (sleep, I/O, a queue, a lock). From
// the system collector's cumulative per-thread counters (thread.sched.run_ns / thread.sched.wait_ns from
// schedstat, else thread.cpu.*_ns), interpolated at a step's bounds. docs/analysis.md, "Host state", gives
// the assumptions.
//
//   ThreadCounters st = ...;                       // the step thread's series
//   HostShares h = host_shares(S, E, host_ns, st, others, true);
//   double contention = idle_host_ns * (h.runnable + h.gil);
#pragma once

#include "analyze/model.hpp"

#include <inferscope/records.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::analyze::detail {

/// A cumulative counter's samples (time ns, value), in time order; linear between samples, flat outside.
struct CumulativeSeries {
  std::vector<std::pair<int64_t, double>> points;
  double at(int64_t t) const;
  double delta(int64_t a, int64_t b) const { return b > a ? at(b) - at(a) : 0; }
};

struct ThreadCounters {
  std::vector<CumulativeSeries> on_cpu;  ///< summed: schedstat run time, or user + system time
  bool on_cpu_exact = false;             ///< on_cpu is schedstat's (ns), not user + system (clock ticks)
  CumulativeSeries runnable;             ///< schedstat run-queue wait (empty when absent)
  bool python = false;                   ///< the thread ran Python frames during the steps
  double on_cpu_delta(int64_t a, int64_t b) const;
  bool has_on_cpu() const;
};

/// Shares of the step thread's time outside CUDA calls; they add up to 1 when `measured`.
struct HostShares {
  double running = 1, runnable = 0, gil = 0, blocked = 0;
  bool measured = false;  ///< false: no counters covered the step; everything counts as running
};

/// For the step [s, e) in which the step thread spent `host_ns` outside CUDA calls, measured over the part of
/// the step its counters' samples cover (host time assumed spread evenly over the step). Off-CPU time is assumed to
/// fall outside CUDA calls (a CUDA sync spins by default). Blocked time is GIL waiting in the proportion other
/// Python threads were on a CPU meanwhile (one of them holds the GIL while it runs Python), only when the step
/// thread runs Python itself.
HostShares host_shares(int64_t s, int64_t e, double host_ns, const ThreadCounters& step_thread,
                       const std::vector<ThreadCounters>& others, bool step_thread_python);

/// schedstat credits a run-queue wait when the wait ends (the thread gets a CPU), not while it lasts: a sample
/// taken during a long wait (a cgroup throttled for the rest of its period) shows that time as neither on a CPU nor
/// runnable, as if the thread had blocked, and the next sample credits more than its interval's wall time. This
/// moves each such excess back over the intervals just before it that had unaccounted time (latest first, none
/// that ended before the credited time could have begun): as on-CPU time as far as the interval credited more
/// on-CPU time than its length (on-CPU time is credited at most a tick late), the rest as run-queue wait. Only with
/// schedstat (`on_cpu_exact`) and a run-queue series, and only when every value is finite; `on_cpu` becomes one
/// series (their sum). Time that no later interval claims stays blocked.
void credit_pending_waits(ThreadCounters& st);

/// Splits each step's GPU-idle host time (StepMetrics::idle_host) into running, contention (run queue + GIL)
/// and wait (blocked by its own choice) by host_shares() over that step.
void split_idle_host(std::vector<StepMetrics>& steps, const ThreadCounters& step_thread,
                     const std::vector<ThreadCounters>& others, bool step_thread_python);

// The counters the analyzer reads are matched by their exact names (include/inferscope/counter_names.hpp), the
// ones the system sampler writes: no input format the analyzer takes has counters of other names (Chrome and
// Kineto traces' counter events are skipped), so nothing needs looser matching.

/// True for a thread-scope counter name that is cumulative on-CPU time (schedstat run, or user/system time).
bool is_on_cpu_counter(const std::string& name, bool& schedstat);
/// True for schedstat's run-queue wait.
bool is_runnable_counter(const std::string& name);

/// The cumulative series of the steps' counter evidence (counters.cpp) a sample feeds: the step thread's
/// run-queue wait and involuntary context switches, the process's resident set and page faults.
enum class EvidenceSeries : uint8_t { kNone, kRunQueueWait, kInvoluntarySwitches, kRss, kPageFaults };
EvidenceSeries evidence_series(const std::string& name, CounterScope scope, uint32_t target, uint32_t step_thread);

}  // namespace inferscope::analyze::detail
