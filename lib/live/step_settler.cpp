#include "live/step_settler.hpp"

#include "text/api_kind.hpp"

#include <algorithm>
#include <utility>

namespace inferscope::live {

using text::ApiKind;

const char* gpu_kind_name(GpuKind k) {
  switch (k) {
    case GpuKind::kMemcpy: return "memcpy";
    case GpuKind::kMemset: return "memset";
    default: return "kernel";
  }
}

namespace {

// Writes `v` at the ring's next slot, returning the end of the entry it overwrote (0 when none).
template <class T>
uint64_t ring_put(std::vector<T>& ring, size_t capacity, size_t& next, uint64_t& total, const T& v) {
  if (ring.empty()) ring.resize(capacity);
  const uint64_t evicted = total >= capacity ? ring[next].end : 0;
  ring[next] = v;
  next = (next + 1) % capacity;
  ++total;
  return evicted;
}

bool overlaps(uint64_t start, uint64_t end, const Span& s) { return start < s.end && end > s.start; }

}  // namespace

void StepSettler::add_gpu(const GpuSpan& g) {
  if (g.end < g.start) return;
  gpu_evicted_end_ = std::max(gpu_evicted_end_, ring_put(gpu_, kGpuSpanCapacity, gpu_next_, gpu_total_, g));
  watermark_ = std::max(watermark_, g.end);
}

void StepSettler::add_api(uint32_t thread, uint8_t api_kind, uint64_t start, uint64_t end) {
  const bool blocking = api_kind == ApiKind::kSync || api_kind == ApiKind::kCopySync;
  const bool queuing = api_kind == ApiKind::kLaunch || api_kind == ApiKind::kCopyAsync;
  if ((!blocking && !queuing) || end < start) return;
  api_evicted_end_ = std::max(api_evicted_end_,
                              ring_put(api_, kApiSpanCapacity, api_next_, api_total_, ApiSpan{thread, blocking, start, end}));
}

void StepSettler::add_step(const Span& step) {
  if (pending_.size() >= kPendingCapacity) {
    // Past the bound the oldest waiting step is given up: its GPU records may not have come yet (before any GPU
    // record it is simply dropped, as every step is then).
    const Span oldest = pending_.front();
    pending_.pop_front();
    if (gpu_seen()) give_up(oldest);
  }
  pending_.push_back(step);
}

std::vector<SettledStep> StepSettler::settle(uint64_t clock) {
  if (!gpu_seen()) return {};
  std::vector<Span> due;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (watermark_ >= it->end || clock >= it->end + wait_ticks_) {
      due.push_back(*it);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (const SettledStep& s : measure(due)) publish(s);
  return std::exchange(ready_, {});
}

void StepSettler::publish(const SettledStep& s) {
  if (ready_.size() >= kSettledCapacity) ready_.erase(ready_.begin());  // the Tap keeps no more than that anyway
  ready_.push_back(s);
  ++settled_total_;
  if (!s.complete) return void(++incomplete_);
  for (size_t c = 0; c < kCategories; ++c) seconds_total_[c] += double(s.ticks[c]) / ticks_per_ns_ * 1e-9;
}

void StepSettler::give_up(const Span& step) {
  SettledStep s;
  s.step = step;
  s.complete = false;
  publish(s);
}

namespace {

// The steps (by index into a list sorted by start) that an entry [start, end) may overlap: those starting before
// its end and no longer ago than the longest step before its start.
std::pair<size_t, size_t> candidates(const std::vector<uint64_t>& starts, uint64_t longest, uint64_t start,
                                     uint64_t end) {
  const uint64_t from = start > longest ? start - longest : 0;
  const size_t lo = size_t(std::lower_bound(starts.begin(), starts.end(), from) - starts.begin());
  const size_t hi = size_t(std::lower_bound(starts.begin(), starts.end(), end) - starts.begin());
  return {lo, hi};
}

}  // namespace

std::vector<SettledStep> StepSettler::measure(const std::vector<Span>& steps) const {
  if (steps.empty()) return {};
  std::vector<Span> sorted = steps;
  std::sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<uint64_t> starts;
  uint64_t longest = 0;
  for (const Span& s : sorted) {
    starts.push_back(s.start);
    longest = std::max(longest, s.end - s.start);
  }
  const size_t n = sorted.size();
  std::vector<std::vector<Interval>> gpu(n), sync(n), launch(n);
  for (size_t i = 0; i < gpu_.size() && i < gpu_total_; ++i) {
    const GpuSpan& g = gpu_[i];
    const auto [lo, hi] = candidates(starts, longest, g.start, g.end);
    for (size_t k = lo; k < hi; ++k)
      if (overlaps(g.start, g.end, sorted[k])) gpu[k].push_back({g.start, g.end});
  }
  for (size_t i = 0; i < api_.size() && i < api_total_; ++i) {
    const ApiSpan& a = api_[i];
    const auto [lo, hi] = candidates(starts, longest, a.start, a.end);
    for (size_t k = lo; k < hi; ++k)
      if (a.thread == sorted[k].thread && overlaps(a.start, a.end, sorted[k]))
        (a.blocking ? sync[k] : launch[k]).push_back({a.start, a.end});
  }
  std::vector<SettledStep> out(n);
  for (size_t k = 0; k < n; ++k) {
    const Span& step = sorted[k];
    out[k].step = step;
    // An overwritten entry that ended after the step began may have been part of it.
    out[k].complete = gpu_evicted_end_ <= step.start && api_evicted_end_ <= step.start;
    out[k].ticks = split_step({step.start, step.end}, gpu[k], sync[k], launch[k]);
  }
  return out;
}

std::vector<GpuSpan> StepSettler::gpu_between(uint64_t from, uint64_t to, size_t max) const {
  std::vector<GpuSpan> out;
  const size_t n = gpu_total_ < kGpuSpanCapacity ? size_t(gpu_total_) : kGpuSpanCapacity;
  for (size_t i = 0; i < n && out.size() < max; ++i) {
    const GpuSpan& g = gpu_[(gpu_next_ + kGpuSpanCapacity - 1 - i) % kGpuSpanCapacity];  // newest first
    if (g.end >= from && g.start <= to) out.push_back(g);
  }
  return out;
}

}  // namespace inferscope::live
