// Stage "wait windows" (waits.hpp): the pieces of the typical steps in which the GPU had nothing to do, the step
// thread was outside CUDA calls and it was blocked: off a CPU and not waiting for one. The step thread's
// schedstat series are piecewise linear between their samples (every millisecond where the collector read the
// thread between rounds), so within a segment between two samples the thread ran a share r, waited in the run
// queue a share q, and was blocked the rest, 1 - r - q: time that lies outside its short CUDA calls.
#include "analyze/waits/waits.hpp"

#include <algorithm>

namespace inferscope::analyze::detail {
namespace {

// [a, b) minus the union `minus` (sorted by start, disjoint), appended to `out`.
void subtract(int64_t a, int64_t b, const Intervals& minus, size_t& cursor, Intervals& out) {
  while (cursor < minus.size() && minus[cursor].second <= a) ++cursor;
  int64_t at = a;
  for (size_t i = cursor; i < minus.size() && minus[i].first < b; ++i) {
    if (minus[i].first > at) out.emplace_back(at, std::min(b, minus[i].first));
    at = std::max(at, minus[i].second);
    if (at >= b) return;
  }
  if (at < b) out.emplace_back(at, b);
}

// Sample times of the step thread's on-CPU and run-queue series inside (s, e), with s and e.
std::vector<int64_t> breakpoints(const Activity& t, int64_t s, int64_t e) {
  std::vector<int64_t> v{s, e};
  for (const CumulativeSeries* series : {&t.run, &t.runq}) {
    auto it = std::upper_bound(series->points.begin(), series->points.end(), s,
                               [](int64_t x, const auto& p) { return x < p.first; });
    for (; it != series->points.end() && it->first < e; ++it) v.push_back(it->first);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Whether the host gap around [x, y) (from the end of the call before it to the start of the call after it) is a
// dispatch gap: shorter than `gap_ns`, with a call on both sides.
bool in_dispatch_gap(const Intervals& calls, int64_t x, int64_t y, int64_t gap_ns) {
  auto next = std::lower_bound(calls.begin(), calls.end(), y, [](const auto& c, int64_t v) { return c.first < v; });
  if (next == calls.end() || next == calls.begin()) return false;
  const auto prev = std::prev(next);
  return prev->second <= x && next->first - prev->second < gap_ns;
}

// The union of the calls shorter than kLongCudaCallNs (sorted by start; calls may nest or overlap).
Intervals short_calls_union(const Intervals& calls) {
  Intervals out;
  for (const auto& [a, b] : calls) {
    if (b - a >= kLongCudaCallNs || b <= a) continue;
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

// How much of [a, b) the union `u` (sorted, disjoint) covers; `cursor` only moves forward, for intervals in order.
double covered(const Intervals& u, int64_t a, int64_t b, size_t& cursor) {
  while (cursor < u.size() && u[cursor].second <= a) ++cursor;
  double sum = 0;
  for (size_t i = cursor; i < u.size() && u[i].first < b; ++i) sum += double(std::min(b, u[i].second) - std::max(a, u[i].first));
  return sum;
}

}  // namespace

WaitWindows find_wait_windows(const std::vector<WaitStep>& steps, const Activity& st, const Intervals& calls,
                              const Intervals& gpu_busy, double min_blocked, int64_t dispatch_gap_ns) {
  WaitWindows w;
  if (st.run.points.size() < 2) return w;
  const int64_t covered_from = st.run.points.front().first, covered_to = st.run.points.back().first;
  size_t call_cursor = 0, gpu_cursor = 0, short_cursor = 0;
  const Intervals short_calls = short_calls_union(calls);
  for (const WaitStep& step : steps) {
    const int64_t s = std::max(step.start, covered_from), e = std::min(step.end, covered_to);
    if (e <= s) continue;
    w.measured = true;
    // The GPU idle, then the step thread outside its calls, inside the step.
    Intervals idle, free;
    subtract(s, e, gpu_busy, gpu_cursor, idle);
    for (auto& [a, b] : idle) {
      size_t c = call_cursor;
      subtract(a, b, calls, c, free);
    }
    while (call_cursor < calls.size() && calls[call_cursor].second <= s) ++call_cursor;
    if (free.empty()) continue;
    const std::vector<int64_t> bp = breakpoints(st, s, e);
    size_t f = 0;
    for (size_t i = 0; i + 1 < bp.size() && f < free.size(); ++i) {
      const int64_t a = bp[i], b = bp[i + 1];
      const double len = double(b - a);
      const double ran = std::clamp(st.run.delta(a, b) / len, 0.0, 1.0);
      const double queued = std::clamp(st.runq.points.size() >= 2 ? st.runq.delta(a, b) / len : 0.0, 0.0, 1.0 - ran);
      const double raw = 1.0 - ran - queued;
      while (f < free.size() && free[f].second <= a) ++f;
      if (raw < min_blocked) continue;
      // A thread blocks outside its short CUDA calls: a launch or an async copy returns in microseconds, on a
      // CPU; only a long call (a synchronization, which may block) can hold some of it. The interval's blocked
      // time lies in the rest of the interval, not spread over all of it: in a launch-bound step half of each
      // millisecond is launches, and the GIL waits between them would read as half what they were.
      const double can_block = len - covered(short_calls, a, b, short_cursor);
      const double blocked = can_block > 0 ? std::min(1.0, raw * len / can_block) : raw;
      for (size_t k = f; k < free.size() && free[k].first < b; ++k) {
        const int64_t x = std::max(a, free[k].first), y = std::min(b, free[k].second);
        if (y <= x) continue;
        const bool gap = in_dispatch_gap(calls, x, y, dispatch_gap_ns);
        if (!w.pieces.empty() && w.pieces.back().end == x && w.pieces.back().step == step.step &&
            w.pieces.back().blocked == float(blocked) && w.pieces.back().dispatch_gap == gap) {
          w.pieces.back().end = y;
          w.pieces.back().sample_end = b;
        } else {
          w.pieces.push_back({x, y, step.step, float(blocked), gap, a, b});
        }
      }
    }
  }
  return w;
}

}  // namespace inferscope::analyze::detail
