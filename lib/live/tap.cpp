#include "live/tap.hpp"

#include <inferscope/records.hpp>

#include <cstring>

namespace inferscope::live {

namespace {
constexpr size_t kMaxNames = 4096;  // distinct names kept; a program that makes more shows the rest as "?"
}

Tap::Tap(uint32_t step_name, uint64_t origin_ticks, double ticks_per_ns, std::function<std::string(uint32_t)> resolve,
         size_t step_capacity, size_t span_capacity)
    : step_name_(step_name), origin_(origin_ticks), ticks_per_ns_(ticks_per_ns > 0 ? ticks_per_ns : 1.0),
      resolve_(std::move(resolve)), steps_(step_capacity ? step_capacity : 1), spans_(span_capacity ? span_capacity : 1) {}

void Tap::observe(uint32_t thread, const uint8_t* p, size_t bytes) {
  std::lock_guard lk(mu_);
  for (size_t o = 0; o + sizeof(RecordHeader) <= bytes;) {
    RecordHeader h;
    std::memcpy(&h, p + o, sizeof(h));
    if (h.size == 0 || o + h.size > bytes) break;  // never loop on a corrupt chunk
    if (h.kind != RecordKind::kPad) ++records_;
    if ((h.kind == RecordKind::kRange || h.kind == RecordKind::kNvtxRange) && h.size >= sizeof(RangeRecord)) {
      RangeRecord r;
      std::memcpy(&r, p + o, sizeof(r));
      add_range(thread, r.name, h.aux, r.start, r.end);
    }
    o += h.size;
  }
}

void Tap::add_range(uint32_t thread, uint32_t name, uint32_t depth, uint64_t start, uint64_t end) {
  const Span s{thread, name, depth, start, end};
  if (end > now_) now_ = end;
  remember_name(name);
  if (name == step_name_) return add_step(s);
  spans_[spans_next_] = s;
  spans_next_ = (spans_next_ + 1) % spans_.size();
  ++spans_total_;
}

void Tap::add_step(const Span& s) {
  steps_[steps_next_] = s;
  steps_next_ = (steps_next_ + 1) % steps_.size();
  ++steps_total_;
  const double seconds = double(s.end - s.start) / ticks_per_ns_ * 1e-9;
  sum_ += seconds;
  for (size_t i = 0; i < kBucketBounds.size(); ++i)
    if (seconds <= kBucketBounds[i]) return void(++buckets_[i]);
  ++over_;
}

void Tap::remember_name(uint32_t id) {
  if (names_.count(id) || names_.size() >= kMaxNames) return;
  names_[id] = resolve_ ? resolve_(id) : std::to_string(id);
}

void Tap::set_dropped(uint64_t records) {
  std::lock_guard lk(mu_);
  dropped_ = records;
}

void Tap::set_thread_name(uint32_t thread, const std::string& name) {
  std::lock_guard lk(mu_);
  threads_[thread] = name;
}

void Tap::set_state(const std::string& state) {
  std::lock_guard lk(mu_);
  state_ = state;
}

std::vector<Span> ring_tail(const std::vector<Span>& ring, size_t next, uint64_t total) {
  const size_t n = total < ring.size() ? size_t(total) : ring.size();
  std::vector<Span> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(ring[(next + ring.size() - n + i) % ring.size()]);
  return out;
}

Snapshot Tap::snapshot() const {
  std::lock_guard lk(mu_);
  Snapshot s;
  s.steps = ring_tail(steps_, steps_next_, steps_total_);
  s.spans = ring_tail(spans_, spans_next_, spans_total_);
  s.names = names_;
  s.threads = threads_;
  s.steps_total = steps_total_;
  s.step_seconds_sum = sum_;
  s.buckets = buckets_;
  s.steps_over_last_bound = over_;
  s.records_total = records_;
  s.dropped_records = dropped_;
  s.origin_ticks = origin_;
  s.now_ticks = now_;
  s.ticks_per_ns = ticks_per_ns_;
  s.state = state_;
  return s;
}

}  // namespace inferscope::live
