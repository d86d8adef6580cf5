#include "live/step_settler.hpp"

#include "analyze/api_kind.hpp"

#include <algorithm>
#include <utility>

namespace inferscope::live {

using analyze::detail::ApiKind;

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
    // Past the bound the oldest waiting step settles with what has arrived (before any GPU record: dropped).
    const Span oldest = pending_.front();
    pending_.pop_front();
    if (gpu_seen()) settle_one(oldest);
  }
  pending_.push_back(step);
}

std::vector<SettledStep> StepSettler::settle(uint64_t clock) {
  if (!gpu_seen()) return {};
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (watermark_ >= it->end || clock >= it->end + wait_ticks_) {
      settle_one(*it);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return std::exchange(ready_, {});
}

void StepSettler::settle_one(const Span& step) {
  const SettledStep s = measure(step);
  if (ready_.size() >= kSettledCapacity) ready_.erase(ready_.begin());  // the Tap keeps no more than that anyway
  ready_.push_back(s);
  ++settled_total_;
  if (!s.complete) return void(++incomplete_);
  for (size_t c = 0; c < kCategories; ++c) seconds_total_[c] += double(s.ticks[c]) / ticks_per_ns_ * 1e-9;
}

SettledStep StepSettler::measure(const Span& step) const {
  SettledStep out;
  out.step = step;
  // An overwritten entry that ended after the step began may have been part of it.
  out.complete = gpu_evicted_end_ <= step.start && api_evicted_end_ <= step.start;
  std::vector<Interval> gpu, sync, launch;
  for (size_t i = 0; i < gpu_.size() && i < gpu_total_; ++i)
    if (overlaps(gpu_[i].start, gpu_[i].end, step)) gpu.push_back({gpu_[i].start, gpu_[i].end});
  for (size_t i = 0; i < api_.size() && i < api_total_; ++i) {
    const ApiSpan& a = api_[i];
    if (a.thread == step.thread && overlaps(a.start, a.end, step)) (a.blocking ? sync : launch).push_back({a.start, a.end});
  }
  out.ticks = split_step({step.start, step.end}, gpu, sync, launch);
  return out;
}

std::vector<GpuSpan> StepSettler::gpu_since(uint64_t from, size_t max) const {
  std::vector<GpuSpan> out;
  const size_t n = gpu_total_ < kGpuSpanCapacity ? size_t(gpu_total_) : kGpuSpanCapacity;
  for (size_t i = 0; i < n && out.size() < max; ++i) {
    const GpuSpan& g = gpu_[(gpu_next_ + kGpuSpanCapacity - 1 - i) % kGpuSpanCapacity];  // newest first
    if (g.end >= from) out.push_back(g);
  }
  return out;
}

}  // namespace inferscope::live
