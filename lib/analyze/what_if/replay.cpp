// What-if replay of one step (replay.hpp; docs/analysis.md, "What-if replay"). One forward pass: host ops are
// replayed in call order and each only depends on work queued before it, so every piece of GPU work can be
// placed on its stream the moment its call is replayed.
#include "analyze/what_if/replay.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::analyze::replay {
namespace {

int64_t non_negative(int64_t v) { return v < 0 ? 0 : v; }

bool is_wait_kind(OpKind k) { return k == OpKind::kSync || k == OpKind::kCopySync; }

bool is_alloc_kind(OpKind k) { return k == OpKind::kAlloc || k == OpKind::kFree; }

/// Index of the op that still waits under remove_syncs: the step must read its result before it ends.
size_t last_wait_op(const StepGraph& g) {
  for (size_t i = g.host.size(); i-- > 0;)
    if (is_wait_kind(g.host[i].kind)) return i;
  return g.host.size();
}

class Replayer {
 public:
  Replayer(const StepGraph& g, const Change& c)
      : g_(g), c_(c), busy_at_start_(non_negative(g.gpu_busy_at_start_ns)), queued_(g.gpu.size(), false),
        keeps_waiting_(c.remove_syncs || c.merge_reads ? last_wait_op(g) : g.host.size()) {}

  int64_t run() {
    for (size_t i = 0; i < g_.host.size(); ++i) replay_op(i);
    now_ += c_.only_after_read ? non_negative(g_.tail_ns) : scaled_gap(non_negative(g_.tail_ns));
    return std::max({now_, gpu_end_, moved_work_floor()});
  }

 private:
  void replay_op(size_t i) {
    const HostOp& op = g_.host[i];
    now_ += gap_before(i);
    if (is_wait_kind(op.kind)) read_seen_ = true;
    const int64_t call_start = now_;
    const int64_t own_end = call_start + own_cost(i);
    // A launch's work is ready when the call returns; a blocking copy queues its copy once its own cost is paid.
    const int64_t copy_end = read_merged(i) ? -1 : queue_work(op, own_end);
    if (!waits(i)) {
      now_ = own_end;
    } else if (op.kind == OpKind::kFree) {
      // cudaFree waits for the device first and unmaps after: recorded calls return their own cost
      // (milliseconds for blocks of hundreds of MB) after the GPU went idle, not while it ran.
      now_ = std::max(call_start, wait_target(op, copy_end)) + (own_end - call_start);
    } else {
      // A sync's own cost is microseconds; where it falls does not matter.
      now_ = std::max(own_end, wait_target(op, copy_end));
    }
  }

  int64_t gap_before(size_t i) {
    const int64_t gap = non_negative(g_.host[i].gap_before_ns);
    if ((c_.collapse_launches || c_.keep_launching_code) && gap_inside_graph(g_, i))
      return c_.collapse_launches ? 0 : gap;
    if (c_.only_after_read && !(read_seen_ && g_.host[i].kind == OpKind::kLaunch)) return gap;
    return scaled_gap(gap);
  }

  int64_t scaled_gap(int64_t gap) {
    if (c_.host_gap_scale == 1.0 || gap < non_negative(c_.min_scaled_gap_ns)) return gap;
    const double scale = std::isfinite(c_.host_gap_scale) ? std::max(0.0, c_.host_gap_scale) : 1.0;
    const int64_t kept = std::llround(static_cast<double>(gap) * scale);
    if (kept < gap) moved_ns_ += gap - kept;
    return kept;
  }

  /// Workers that took the moved host work over deliver one step's worth every moved_ns_ / workers.
  int64_t moved_work_floor() const {
    if (c_.moved_work_workers <= 0) return 0;
    return (moved_ns_ + c_.moved_work_workers - 1) / c_.moved_work_workers;
  }

  /// The call's cost on the host beyond any wait for the GPU, after the change.
  int64_t own_cost(size_t i) {
    const HostOp& op = g_.host[i];
    const int64_t dur = non_negative(op.dur_ns);
    const int64_t own = dur - std::clamp(op.wait_ns, int64_t{0}, dur);
    if (allocs_gone() && is_alloc_kind(op.kind)) return 0;
    if (h2d_gone(op) || read_merged(i)) return 0;
    if (c_.collapse_launches && op.kind == OpKind::kLaunch) {
      // The whole graph is launched once, where its first launch was.
      if (graph_launched_) return 0;
      graph_launched_ = true;
      return non_negative(c_.graph_launch_ns);
    }
    // Pinned memory needs no staging through a driver buffer: the call keeps only its launch-like part.
    if (c_.pin_copies && queues_pageable_copy(op)) return std::min(own, non_negative(c_.pinned_call_ns));
    return own;
  }

  bool queues_h2d_copy(const HostOp& op) const {
    return std::any_of(op.work.begin(), op.work.end(), [&](uint32_t w) { return w < g_.gpu.size() && g_.gpu[w].h2d; });
  }
  /// The data of its copies stays on the GPU: the call is gone (remove_h2d).
  bool h2d_gone(const HostOp& op) const { return c_.remove_h2d && queues_h2d_copy(op); }
  /// A read merged into the step's last one (merge_reads): a blocking op but the last, or a call queueing only
  /// device-to-host copies before the last read.
  bool read_merged(size_t i) const {
    if (!c_.merge_reads || i >= keeps_waiting_) return false;
    const HostOp& op = g_.host[i];
    if (is_wait_kind(op.kind)) return true;
    return !op.work.empty() && std::all_of(op.work.begin(), op.work.end(), [&](uint32_t w) {
      return w < g_.gpu.size() && g_.gpu[w].d2h;
    });
  }

  bool queues_pageable_copy(const HostOp& op) const {
    return std::any_of(op.work.begin(), op.work.end(), [&](uint32_t w) {
      return w < g_.gpu.size() && g_.gpu[w].copy && g_.gpu[w].pageable;
    });
  }

  /// A captured graph's memory is allocated once, at capture (PyTorch: the graph's private pool; plain
  /// cudaMalloc cannot be captured at all): its replays allocate and free nothing, as with remove_allocs.
  bool allocs_gone() const { return c_.remove_allocs || c_.collapse_launches; }

  bool waits(size_t i) const {
    const OpKind k = g_.host[i].kind;
    if (k == OpKind::kFree) return !allocs_gone();
    if (!is_wait_kind(k) || h2d_gone(g_.host[i]) || read_merged(i)) return false;
    return !c_.remove_syncs || i == keeps_waiting_;
  }

  /// When the GPU work the op waits for is done. `copy_end`: end of the op's own work (-1: it queued none).
  int64_t wait_target(const HostOp& op, int64_t copy_end) const {
    if (op.kind == OpKind::kCopySync && copy_end >= 0) return copy_end;
    if (op.kind == OpKind::kSync && op.sync_stream >= 0) return stream_free(static_cast<size_t>(op.sync_stream));
    return device_free_;
  }

  /// Places the op's work on its streams, ready at `ready`; returns the latest end (-1: nothing queued).
  int64_t queue_work(const HostOp& op, int64_t ready) {
    int64_t last_end = -1;
    for (uint32_t w : op.work) {
      if (w >= g_.gpu.size() || queued_[w]) continue;  // a bad index or a piece queued twice: replay it once
      queued_[w] = true;
      const GpuWork& work = g_.gpu[w];
      if (c_.remove_h2d && work.h2d) continue;  // the data is already on the GPU
      int64_t& free_at = stream_slot(work.stream);
      const int64_t end = std::max(ready, free_at) + gpu_duration(work);
      free_at = end;
      device_free_ = std::max(device_free_, end);
      gpu_end_ = std::max(gpu_end_, end);
      last_end = std::max(last_end, end);
    }
    return last_end;
  }

  int64_t gpu_duration(const GpuWork& w) const {
    const int64_t recorded = non_negative(w.dur_ns);
    if (!c_.pin_copies || !w.copy || !w.pageable || w.bytes == 0 || !(c_.pinned_gbps > 0)) return recorded;
    // GB/s is bytes per ns. A pinned copy is never modelled slower than the pageable one that was measured.
    const double pinned = static_cast<double>(w.bytes) / c_.pinned_gbps;
    return pinned < static_cast<double>(recorded) ? std::llround(pinned) : recorded;
  }

  int64_t& stream_slot(uint16_t s) {
    if (s >= streams_.size()) streams_.resize(size_t{s} + 1, busy_at_start_);
    return streams_[s];
  }

  int64_t stream_free(size_t s) const { return s < streams_.size() ? streams_[s] : busy_at_start_; }

  const StepGraph& g_;
  const Change& c_;
  const int64_t busy_at_start_;  // every stream: we do not know which one the previous step's work ran on
  std::vector<bool> queued_;
  const size_t keeps_waiting_;   // host.size(): every wait is kept
  std::vector<int64_t> streams_;  // per stream: when its queued work is done
  int64_t device_free_ = busy_at_start_;
  int64_t gpu_end_ = 0;           // end of the work queued in this step
  int64_t now_ = 0;               // the host thread's clock
  int64_t moved_ns_ = 0;          // host gap time host_gap_scale took off the thread
  bool graph_launched_ = false;
  bool read_seen_ = false;  // a blocking op has run in the step (only_after_read)
};

}  // namespace

int64_t simulate(const StepGraph& g, const Change& c) { return Replayer(g, c).run(); }

// A replayed graph runs none of the host code between the launches it captured: the code that issues them (a
// model's forward, however long its Python). Allocations between them are gone too (allocs_gone above), so the
// gaps around them count as between the launches. Gaps next to any other call (a sync), before the first launch
// and after the last stay.
bool gap_inside_graph(const StepGraph& g, size_t i) {
  if (i == 0 || i >= g.host.size()) return false;
  size_t next = i;  // the launch the gap leads to, past allocation calls
  while (next < g.host.size() && is_alloc_kind(g.host[next].kind)) ++next;
  size_t prev = i;  // one past the op before the gap, before allocation calls
  while (prev > 0 && is_alloc_kind(g.host[prev - 1].kind)) --prev;
  if (next == g.host.size() || prev == 0) return false;
  const HostOp& to = g.host[next];
  if (to.kind != OpKind::kLaunch || g.host[prev - 1].kind != OpKind::kLaunch) return false;
  return std::none_of(to.work.begin(), to.work.end(), [&](uint32_t w) { return w < g.gpu.size() && g.gpu[w].copy; });
}

int64_t saving_ns(const StepGraph& g, const Change& c) {
  const int64_t base = simulate(g);
  if (base <= 0) return 0;
  const int64_t mod = simulate(g, c);
  // In the recorded step's time scale: a model off by a factor on the whole step is off by that factor here too.
  const double scale = g.recorded_ns > 0 ? static_cast<double>(g.recorded_ns) / static_cast<double>(base) : 1.0;
  const double before = static_cast<double>(base) * scale;
  // The floor is a measured pace (another party delivers a step's input no faster), already in recorded time.
  const double after = std::max(static_cast<double>(mod) * scale, static_cast<double>(non_negative(c.min_step_ns)));
  return before > after ? std::llround(before - after) : 0;
}

}  // namespace inferscope::analyze::replay
