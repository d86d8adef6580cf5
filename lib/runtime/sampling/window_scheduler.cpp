#include "runtime/sampling/window_scheduler.hpp"

#include <algorithm>
#include <limits>

namespace inferscope::runtime::sampling {

using dump::WindowReason;

WindowScheduler::WindowScheduler(const ScheduleOptions& options, uint64_t start_ticks) : o_(options) {
  // The settings model refuses these; a caller that bypasses it still gets a schedule that ends windows.
  o_.window_steps = std::max<uint32_t>(o_.window_steps, 1);
  o_.every_steps = std::max<uint32_t>(o_.every_steps, o_.window_steps + 1);
  next_periodic_ = o_.every_steps;
  next_timed_ = start_ticks + o_.every_ticks;
  if (o_.baseline_steps > 0) {  // open from the start: no request, the collectors start in full detail
    state_ = State::kOpen;
    reason_ = WindowReason::kBaseline;
    begin_ = start_ticks;
    remaining_ = o_.baseline_steps;
    next_periodic_ = std::numeric_limits<uint64_t>::max();  // due every_steps after the baseline closes
  }
}

void WindowScheduler::end_baseline() {
  if (state_ == State::kOpen && reason_ == WindowReason::kBaseline) request_close();
}

void WindowScheduler::push(const Request& r) {
  pending_.push_back(r);
  if (r.kind == Request::kOpen || r.kind == Request::kClose) switch_pending_ = true;
}

std::vector<Request> WindowScheduler::take() {
  std::vector<Request> out;
  out.swap(pending_);
  switch_pending_ = false;
  return out;
}

void WindowScheduler::request_open(WindowReason reason) {
  state_ = State::kOpening;
  reason_ = reason;
  push({.kind = Request::kOpen, .reason = reason, .step = steps_});
}

void WindowScheduler::request_close() {
  state_ = State::kClosing;
  push({.kind = Request::kClose, .reason = reason_, .steps = counted_, .slow_steps = counted_slow_});
}

void WindowScheduler::opened(uint64_t begin) {
  if (state_ != State::kOpening) return;
  state_ = State::kOpen;
  begin_ = begin;
  counted_ = counted_slow_ = 0;
  remaining_ = o_.window_steps;
}

void WindowScheduler::closed(uint64_t end) {
  if (state_ != State::kClosing) return;
  state_ = State::kOff;
  if (reason_ == WindowReason::kBaseline) {
    next_periodic_ = steps_ + o_.every_steps;
    next_timed_ = end + o_.every_ticks;
  }
  maybe_open();
}

// A periodic window that falls due while a slow-step window is open is that window: the duty cycle at most
// doubles (one slow-step window per period), it never stacks.
void WindowScheduler::maybe_open() {
  if (periodic_due_ && state_ != State::kOff && state_ != State::kClosing && reason_ == WindowReason::kSlowStep)
    periodic_due_ = false;
  if (state_ != State::kOff) return;
  if (periodic_due_) {
    periodic_due_ = trigger_due_ = false;
    request_open(WindowReason::kPeriodic);
  } else if (trigger_due_) {
    trigger_due_ = false;
    triggered_this_period_ = true;
    request_open(WindowReason::kSlowStep);
  }
}

// A step wholly inside the open window. A slow one keeps the window open for its neighbours after it.
void WindowScheduler::count_in_window(bool slow) {
  ++counted_;
  ++steps_in_windows_;
  if (slow) ++counted_slow_;
  if (reason_ == WindowReason::kTimed) return;  // a timed window ends by the clock
  remaining_ = remaining_ > 0 ? remaining_ - 1 : 0;
  if (slow && reason_ != WindowReason::kBaseline) remaining_ = std::max(remaining_, o_.neighbours);
  if (remaining_ == 0) request_close();
}

// A slow step outside every window: its always-on ranges and its neighbours' are kept (from the start of the
// step `neighbours` back), and a window opens for the steps after it, once per period.
void WindowScheduler::note_slow_outside(uint64_t index, uint64_t end) {
  if (!neighbours_open_) {
    neighbours_open_ = true;
    neighbours_first_ = index + 1 - recent_starts_.size();
    push({.kind = Request::kNeighboursBegin, .reason = WindowReason::kNeighbours, .step = neighbours_first_,
          .begin = recent_starts_.front()});
  }
  neighbours_left_ = o_.neighbours;
  if (neighbours_left_ == 0) follow_neighbours(end);
  if (!triggered_this_period_ && (state_ == State::kOff || state_ == State::kClosing)) trigger_due_ = true;
}

// One more step after a slow one outside a window; the last neighbour ends the light capture.
void WindowScheduler::follow_neighbours(uint64_t end) {
  if (neighbours_left_ > 1) {
    --neighbours_left_;
    return;
  }
  neighbours_left_ = 0;
  neighbours_open_ = false;
  push({.kind = Request::kNeighboursEnd, .reason = WindowReason::kNeighbours, .step = neighbours_first_, .end = end,
        .steps = static_cast<uint32_t>(steps_ - neighbours_first_)});
}

void WindowScheduler::step_ended(uint64_t start, uint64_t end, bool slow, double bound_ns, uint32_t thread) {
  const uint64_t index = steps_++;
  saw_steps_ = true;
  recent_starts_.push_back(start);
  while (recent_starts_.size() > size_t(o_.neighbours) + 1) recent_starts_.pop_front();
  const bool in_window = state_ == State::kOpen && start >= begin_;
  if (slow)
    push({.kind = Request::kSlowStep, .step = index, .begin = start, .end = end, .bound_ns = bound_ns,
          .in_window = in_window, .thread = thread});
  if (slow && !in_window) note_slow_outside(index, end);
  else if (neighbours_open_) follow_neighbours(end);
  if (in_window) count_in_window(slow);
  if (steps_ >= next_periodic_) {
    periodic_due_ = true;
    triggered_this_period_ = false;
    while (next_periodic_ <= steps_) next_periodic_ += o_.every_steps;
  }
  maybe_open();
}

void WindowScheduler::tick(uint64_t now) {
  // The baseline ends by its steps or by its share of the ring (end_baseline), never by the clock: a server that
  // loads for minutes before its first step still has its warm-up recorded.
  if (state_ == State::kOpen && now >= begin_ && reason_ != WindowReason::kBaseline) {
    const uint64_t limit = reason_ == WindowReason::kTimed ? o_.window_ticks : o_.every_ticks;
    if (limit && now - begin_ >= limit) request_close();
  }
  if (!saw_steps_ && o_.every_ticks && now >= next_timed_) {
    if (state_ == State::kOff) request_open(WindowReason::kTimed);
    while (next_timed_ <= now) next_timed_ += o_.every_ticks;
  }
}

uint64_t WindowScheduler::preroll_horizon() const {
  uint64_t h = recent_starts_.empty() ? std::numeric_limits<uint64_t>::max() : recent_starts_.front();
  for (const Request& r : pending_)
    if (r.kind == Request::kNeighboursBegin) h = std::min(h, r.begin);
  return h;
}

}  // namespace inferscope::runtime::sampling
