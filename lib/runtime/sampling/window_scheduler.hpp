// Sampled mode's window scheduler (docs/sampled-mode.md): which steps, or which stretches of time, are recorded
// in full detail. It is told when steps end (on the thread that ends one, under the sampler's lock) and how the
// clock moves (the writer, every cycle); it answers with requests the writer carries out: switch full detail on
// or off, keep a slow step's always-on ranges and its neighbours'. The writer confirms each switch with its
// time, so a window counts only steps that began after detail was on, and closes after they ended.
//
//   WindowScheduler s({.window_steps = 10, .every_steps = 500}, now);
//   s.step_ended(start, end, slow, bound);         // after step 499 ended: a kOpen request
//   for (Request r : s.take()) ...;                 // the writer switches the collectors on, then:
//   s.opened(now);                                  // steps that begin from here on count
//
// With baseline_steps (adaptive mode) the scheduler starts with a window open from start_ticks, reason kBaseline:
// the collectors record in full from the start, and the writer opens that window before the first step.
#pragma once

#include "dump/format.hpp"

#include <cstdint>
#include <deque>
#include <vector>

namespace inferscope::runtime::sampling {

struct ScheduleOptions {
  uint32_t window_steps = 10;  ///< steps counted per window
  uint32_t every_steps = 500;  ///< a window is due every this many steps (the first after this many)
  uint64_t window_ticks = 0;   ///< a timed window's length (while no step was seen)
  uint64_t every_ticks = 0;    ///< a timed window is due this often; also the longest a step window stays open
  uint32_t neighbours = 2;     ///< steps kept on each side of a slow step
  /// Adaptive mode: a window of full detail open from the start (reason kBaseline) until this many steps were
  /// counted; the periodic windows are due every_steps after it closes. 0: none (sampled mode).
  uint32_t baseline_steps = 0;
};

struct Request {
  enum Kind : uint8_t {
    kOpen,             ///< switch full detail on (reason); steps from index `step` on may count
    kClose,            ///< switch it off; the window counted `steps` steps, `slow_steps` of them slow
    kSlowStep,         ///< step `step` [begin, end] was slow (above bound_ns); `in_window`: inside a full window
    kNeighboursBegin,  ///< keep the always-on records from `begin` (the start of step `step`)
    kNeighboursEnd,    ///< ... up to `end`; they span `steps` steps
  };
  Kind kind;
  dump::WindowReason reason = dump::WindowReason::kPeriodic;
  uint64_t step = 0;
  uint64_t begin = 0, end = 0;
  uint32_t steps = 0, slow_steps = 0;
  double bound_ns = 0;
  bool in_window = false;
  uint32_t thread = 0;  ///< kSlowStep: the dump thread that ended it
};

class WindowScheduler {
 public:
  enum class State { kOff, kOpening, kOpen, kClosing };

  WindowScheduler(const ScheduleOptions& options, uint64_t start_ticks);

  /// A step [start, end] ended on dump thread `thread`; `slow` and `bound_ns` are the slow-step test's verdict.
  void step_ended(uint64_t start, uint64_t end, bool slow, double bound_ns, uint32_t thread = 0);
  /// The clock reads `now`: timed windows open and close, a step window open for a whole period closes.
  void tick(uint64_t now);
  /// The writer switched full detail on at `begin` (after a kOpen) / off at `end` (after a kClose).
  void opened(uint64_t begin);
  void closed(uint64_t end);
  /// Ends the baseline now (the writer found it holds its share of the ring); nothing when it is not open.
  void end_baseline();

  /// Requests made since the last call, oldest first.
  std::vector<Request> take();
  /// A request is waiting that switches detail (kOpen, kClose): the writer should come now, not next cycle.
  bool switch_pending() const { return switch_pending_; }
  /// The earliest time a slow step's neighbours can reach back to: a light capture not yet taken, or a later
  /// slow step's (UINT64_MAX when none can: no step seen).
  uint64_t preroll_horizon() const;

  State state() const { return state_; }
  dump::WindowReason reason() const { return reason_; }
  bool saw_steps() const { return saw_steps_; }
  uint64_t steps_seen() const { return steps_; }
  uint64_t steps_in_windows() const { return steps_in_windows_; }
  /// Steps (and slow ones) counted by the window open now.
  uint32_t counted() const { return counted_; }
  uint32_t counted_slow() const { return counted_slow_; }

 private:
  void count_in_window(bool slow);
  void note_slow_outside(uint64_t index, uint64_t end);
  void follow_neighbours(uint64_t end);
  void request_open(dump::WindowReason reason);
  void request_close();
  void maybe_open();
  void push(const Request& r);

  ScheduleOptions o_;
  State state_ = State::kOff;
  dump::WindowReason reason_ = dump::WindowReason::kPeriodic;
  uint64_t begin_ = 0;
  uint32_t counted_ = 0, counted_slow_ = 0, remaining_ = 0;
  uint64_t steps_ = 0, steps_in_windows_ = 0;
  bool saw_steps_ = false;
  uint64_t next_periodic_ = 0;  // steps_ at which the next periodic window is due
  uint64_t next_timed_ = 0;     // tick at which the next timed window is due
  bool periodic_due_ = false;
  bool trigger_due_ = false;    // a slow step outside a window asked for a window
  bool triggered_this_period_ = false;
  std::deque<uint64_t> recent_starts_;  // the last neighbours + 1 steps' starts, oldest first
  bool neighbours_open_ = false;        // a light capture is open
  uint32_t neighbours_left_ = 0;        // steps it still waits for
  uint64_t neighbours_first_ = 0;       // its first step
  std::vector<Request> pending_;
  bool switch_pending_ = false;
};

}  // namespace inferscope::runtime::sampling
