// Whom the step waits on (docs/analysis.md, "Whom the step waits on"): the stages that find the instants in which
// the step thread was blocked while the GPU had nothing to do, where it was blocked, and which thread, process
// or lock holder it waited for. Internal to lib/analyze. Each stage takes typed inputs and returns a typed result:
//
//   ActivitySet act = read_activity(cx, in.counters, step_thread, python_threads);   // thread_activity.cpp
//   WaitWindows w = find_wait_windows(typical_steps, act.step, step_calls, gpu_busy); // wait_windows.cpp
//   WaitFrames f = read_wait_frames(cx, w, step_thread, steady_span);                 // wait_frames.cpp
//   WaitAttribution who = attribute_waits(w, f, act, child_frames);                   // wait_attribution.cpp
#pragma once

#include "analyze/host_state.hpp"
#include "analyze/model.hpp"

#include <inferscope/counter_names.hpp>
#include <inferscope/wait_points.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::analyze {
struct ParentFacts;  // children.hpp
}  // namespace inferscope::analyze

namespace inferscope::analyze::detail {

struct Context;
struct CounterSample;

// ---------------------------------------------------------------- thread_activity.cpp
/// A union of intervals, in time order.
using Intervals = std::vector<std::pair<int64_t, int64_t>>;

/// A level (not cumulative) series: the value holds from its sample until the next.
struct LevelSeries {
  std::vector<std::pair<int64_t, int64_t>> points;  ///< (ns, value), in time order
  /// The value at t (the latest sample at or before t); `none` before the first.
  int64_t at(int64_t t, int64_t none) const;
  /// How long within [a, b) the series held `value`.
  double time_at_value(int64_t a, int64_t b, int64_t value) const;
};

/// When one thread or process of the run was on a CPU.
struct Activity {
  enum class Kind : uint8_t { kThread, kOsThread, kChild };
  Kind kind = Kind::kThread;
  uint32_t id = 0;      ///< dump thread id (kThread), OS thread id (kOsThread), process id (kChild)
  uint32_t os_id = 0;   ///< OS thread id, or the process id
  uint32_t parent = 0;  ///< kChild: the process that started it
  std::string name;     ///< thread name (threading's, set_thread_name, else the kernel's), or a child's comm
  bool python = false;  ///< it recorded Python calls: running, it holds the GIL
  CumulativeSeries run;   ///< time on a CPU (ns): schedstat's, else user + system time in clock ticks
  bool exact = false;     ///< `run` is schedstat's
  CumulativeSeries runq;  ///< time waiting for a CPU (schedstat), when recorded
  LevelSeries blocked_in; ///< what it was blocked in (thread.blocked_in, BlockedIn values): threads the session knows
  /// Time on a CPU in [a, b) (0 without samples around it).
  double run_in(int64_t a, int64_t b) const;
};

struct ActivitySet {
  Activity step;                        ///< the step thread (run-queue credits moved back: credit_pending_waits)
  std::vector<Activity> others;         ///< the process's other threads with CPU samples
  std::vector<Activity> children;       ///< the processes it started
  std::map<uint32_t, Intervals> cuda_calls;  ///< other dump threads' CUDA calls (a union, by start)
  double thread_sample_ms = 0;          ///< how often known threads were read (0: every round only)
  double round_ms = 0;                  ///< the system collector's round (0: unknown)
  bool measured() const { return step.run.points.size() >= 2; }
};

/// The activity of every thread and child process from the system counters. `python_threads`: dump thread ids
/// that recorded Python calls.
ActivitySet read_activity(const Context& cx, const std::vector<CounterSample>& counters, uint32_t step_thread,
                          const std::vector<uint8_t>& python_threads);

/// A CUDA call at least this long may block its thread (a synchronization, a blocking copy; torch makes those
/// without the GIL); launches and async copies return in microseconds, on a CPU. Long calls tell a lock's holder
/// from the GIL's (wait_attribution.cpp); short ones hold none of a thread's blocked time (wait_windows.cpp).
inline constexpr int64_t kLongCudaCallNs = 200'000;

// ---------------------------------------------------------------- wait_windows.cpp
/// An interval of a typical step in which the GPU was idle, the step thread was outside CUDA calls, and it was
/// blocked (off a CPU and not waiting for one) for the share `blocked` of the time.
struct WaitPiece {
  int64_t start = 0, end = 0;
  uint32_t step = 0;     ///< index into the steps
  float blocked = 0;     ///< (0, 1]
  /// It lies in a host gap shorter than kDispatchGapNs between two CUDA calls, which the idle attribution gives
  /// to the launch path (launch_bound) unless the step thread was blocked there (split_waits).
  bool dispatch_gap = false;
  /// The step thread's samples around it: the resolution at which its blocked time is known (both 0: the piece's
  /// own bounds). Other threads' activity is measured over the same interval (attribute_waits).
  int64_t sample_start = 0, sample_end = 0;
  double blocked_ns() const { return double(end - start) * blocked; }
};

struct WaitWindows {
  std::vector<WaitPiece> pieces;  ///< in time order, disjoint
  bool measured = false;          ///< the step thread's CPU samples covered the steps
};

/// One typical step's window and what the step thread and GPU did in it.
struct WaitStep {
  uint32_t step = 0;
  int64_t start = 0, end = 0;
};

/// The pieces of `steps` (time order) in which the step thread was blocked outside `calls` (the step thread's CUDA
/// calls, by start) while `gpu_busy` (by start, merged) had nothing running. Blocked shares under `min_blocked`
/// are left out (a thread on a CPU all but a scheduler tick).
WaitWindows find_wait_windows(const std::vector<WaitStep>& steps, const Activity& step_thread,
                              const Intervals& calls, const Intervals& gpu_busy, double min_blocked = 0.05,
                              int64_t dispatch_gap_ns = kDispatchGapNs);

// ---------------------------------------------------------------- wait_frames.cpp
/// A call of a wait point (wait_points.hpp) on some thread.
struct WaitCall {
  int64_t start = 0, end = 0;
  uint32_t thread = 0;  ///< dump thread id
  uint32_t code = 0;    ///< Python code id
  const WaitPoint* point = nullptr;
};

/// What a thread's frames covered during the wait pieces (weighted by the pieces' blocked share), by the
/// innermost frame: Python functions by code id, ranges by name (string id).
struct FrameTime {
  std::map<uint32_t, double> py_ns, range_ns;
  double total_ns() const;
};

struct WaitFrames {
  /// Per piece (WaitWindows::pieces order): the step thread's innermost Python frame and innermost range
  /// covering most of it (0: none).
  std::vector<uint32_t> piece_py, piece_range;
  FrameTime step;                                ///< the step thread's frames during the waits
  std::map<uint32_t, FrameTime> others;          ///< other threads' frames during the waits, by dump thread id
  std::vector<WaitCall> step_waits;              ///< the step thread's wait calls overlapping the pieces
  std::vector<WaitCall> wakes;                   ///< other threads' wake calls in the steady span, by end
  std::vector<WaitCall> other_waits;             ///< other threads' wait calls overlapping the pieces, by start
  uint64_t calls_dropped = 0;                    ///< wake/wait calls beyond the cap (counted, not kept)
};

/// Reads the application threads' frames again (each thread's chunks in order, threads in parallel) for the
/// pieces of `w`, and the wait and wake calls of wait points in [span_start, span_end).
WaitFrames read_wait_frames(const Context& cx, const WaitWindows& w, uint32_t step_thread, int64_t span_start,
                            int64_t span_end);

// ---------------------------------------------------------------- wait_attribution.cpp
/// The hottest Python functions of a child process's own dump during the waits (when it was recorded,
/// --follow-children): qualified name and self time.
struct ChildFrames {
  uint32_t pid = 0;
  std::vector<std::pair<std::string, double>> hot_ns;  ///< by self time, descending
};

/// The hot Python functions, during [span_start, span_end) (CLOCK_MONOTONIC ns), of the child processes whose
/// dumps lie beside `parent_path` (child_dump_paths: those the dump of `parent` has as children); children without
/// Python calls there are left out.
std::vector<ChildFrames> read_child_frames(const std::string& parent_path, const ParentFacts& parent,
                                           int64_t span_start, int64_t span_end);

/// Who a piece of the step thread's wait went to.
struct WaitParty {
  enum class Kind : uint8_t {
    kThreads,       ///< one thread, or a pool of like-named threads, of this process
    kGil,           ///< Python threads that held the GIL the step thread waited for
    kProcesses,     ///< child processes (DataLoader workers, a pool)
    kOwnSleep,      ///< the step thread slept (time.sleep, a polling interval)
    kOwnIo,         ///< the step thread read, wrote or polled a file, pipe or socket
    kUnknown,       ///< blocked, and nobody else was seen working
    kLock,          ///< a thread holding a lock the step thread waited for, outside any wait point: it ran, and sat in
                    ///< CUDA calls (where torch releases the GIL) while the step thread stayed blocked
  };
  Kind kind = Kind::kUnknown;
  std::string name;                  ///< "producer", "pt_data_worker", "ThreadPoolExecutor-0_*"
  std::vector<uint32_t> members;     ///< dump thread ids / OS thread ids / pids
  std::vector<std::string> member_names;  ///< their own names, in `members` order
  bool python = false;               ///< threads that run Python (they hold the GIL while they run)
  double blocked_ns = 0;             ///< attributed blocked time over the typical steps (piece weights)
  double cpu_ns = 0;                 ///< the members' CPU time during those pieces
  double span_ns = 0;                ///< the pieces' wall time
  double cpu_per_step_ns = 0;        ///< the members' CPU time over the steady span, per steady step
  uint64_t wakeups = 0;              ///< times one of them ended the step thread's wait (a wake call)
  /// What its members were blocked in while off a CPU during those pieces (thread.blocked_in), by blocked time:
  /// a producer that sleeps or reads while the step waits is told from one that computes.
  BlockedIn off_cpu_in = BlockedIn::kUnknown;
  double off_cpu_share = 0;          ///< of the members' time in the pieces, the share off a CPU in off_cpu_in
  std::vector<std::pair<std::string, double>> hot;  ///< what they ran during the waits (name, ns), descending
  std::string site;                  ///< the step thread's innermost frame while it waited on them
  WaitKind site_kind = WaitKind::kQueue;
  bool site_is_wait_point = false;
  /// The members' CPU share during the pieces attributed to them, per member (1 = one CPU all the time).
  double busy_share() const { return span_ns > 0 && !members.empty() ? cpu_ns / span_ns / double(members.size()) : 0; }
};

struct WaitAttribution {
  bool measured = false;         ///< the step thread's per-thread CPU samples covered the typical steps
  double blocked_ns = 0;         ///< blocked time in the pieces over the typical steps
  std::vector<WaitParty> parties;  ///< by blocked time, descending
  /// Per step (WaitStep::step): blocked time in the pieces and the GIL's part of it, in long host gaps and in
  /// dispatch gaps (WaitPiece::dispatch_gap).
  struct StepBlocked {
    double blocked = 0, gil = 0, gap_blocked = 0, gap_gil = 0;
  };
  std::map<uint32_t, StepBlocked> per_step;
  std::vector<std::pair<std::string, double>> sites;  ///< the step thread's innermost frames while blocked, descending
  double thread_sample_ms = 0, round_ms = 0;
  /// The CPU time per typical step of every child process group over the steady span, by name (for worker counts).
  std::map<std::string, std::pair<size_t, double>> child_groups;  ///< name -> (processes, CPU ns per step)
};

/// Gives each piece's blocked time to the parties seen working meanwhile (docs/analysis.md gives the rules).
/// `typical_steps`: how many steps the pieces cover (to divide per step); `code_name`/`range_name`: labels.
/// What attribute_waits needs besides the stages' results: how the steps are counted and how ids are named.
struct WaitNaming {
  size_t typical_steps = 1;          ///< steps the pieces cover
  size_t steady_steps = 1;           ///< steps in [span_start, span_end)
  int64_t span_start = 0, span_end = 0;  ///< the steady steps' span (child processes' CPU per step)
  std::vector<WaitStep> steps;       ///< the typical steps (lock holders are told from the GIL's over them)
  std::function<std::string(uint32_t)> code_name;   ///< a Python code id's qualified name
  std::function<std::string(uint32_t)> range_name;  ///< a range's name (string id)
  std::function<const WaitPoint*(uint32_t)> wait_point;  ///< the wait point a code id is, or nullptr
};

WaitAttribution attribute_waits(const WaitWindows& w, const WaitFrames& f, const ActivitySet& act,
                                const std::vector<ChildFrames>& child_frames, const WaitNaming& naming);

/// The name a pool's threads share: a thread name less a trailing number and its separator ("featurize_3" ->
/// "featurize_*", "ThreadPoolExecutor-0_2" -> "ThreadPoolExecutor-0_*", "preproc-1" -> "preproc-*"); a name with
/// no trailing number is its own.
std::string pool_name(const std::string& thread_name);

}  // namespace inferscope::analyze::detail
