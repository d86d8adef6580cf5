#include "live/tap.hpp"

#include "text/api_kind.hpp"

#include <inferscope/records.hpp>

#include <algorithm>
#include <cstring>

namespace inferscope::live {

namespace {
constexpr size_t kMaxNames = 4096;  // distinct names kept; a program that makes more shows the rest as "?"
}

Tap::Tap(uint32_t step_name, uint64_t origin_ticks, double ticks_per_ns, std::function<std::string(uint32_t)> resolve,
         size_t step_capacity, size_t span_capacity)
    : step_name_(step_name), origin_(origin_ticks), ticks_per_ns_(ticks_per_ns > 0 ? ticks_per_ns : 1.0),
      resolve_(std::move(resolve)), steps_(step_capacity ? step_capacity : 1), spans_(span_capacity ? span_capacity : 1),
      serving_(ticks_per_ns_), gpu_(ticks_per_ns_) {
  step_text_ = resolve_ ? resolve_(step_name_) : std::string("step");
}

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
    } else if (h.kind == RecordKind::kGpuKernel || h.kind == RecordKind::kGpuMemcpy || h.kind == RecordKind::kGpuMemset) {
      add_gpu(h.kind, p + o, h.size);
    } else if (h.kind == RecordKind::kCudaApi) {
      add_api(thread, p + o, h.size);
    } else if (h.kind == RecordKind::kPyCall) {
      add_python_call(thread, h.aux, p + o, h.size);
    } else if (h.kind == RecordKind::kPyCoroutine) {
      add_coroutine(thread, p + o, h.size);
    }
    o += h.size;
  }
}

void Tap::add_range(uint32_t thread, uint32_t name, uint32_t depth, uint64_t start, uint64_t end) {
  const Span s{thread, name, depth, start, end};
  if (end > now_) now_ = end;
  remember_name(name);
  if (name == step_name_) return add_step(s);
  if (depth == 0 && steps_total_ == 0) count_candidate(range_seen_, name, end - start);
  spans_[spans_next_] = s;
  spans_next_ = (spans_next_ + 1) % spans_.size();
  ++spans_total_;
}

// A step candidate seen once more; a program that makes more than kMaxNames of them keeps counting the first ones.
void Tap::count_candidate(std::map<uint32_t, Seen>& seen, uint32_t id, uint64_t ticks) {
  auto it = seen.find(id);
  if (it == seen.end()) {
    if (seen.size() >= kMaxNames) return;
    it = seen.emplace(id, Seen{}).first;
  }
  ++it->second.count;
  it->second.ticks += ticks;
}

// Every Python call feeds the serving meter; while no step has been seen, the shallow ones are step candidates too.
void Tap::add_python_call(uint32_t thread, uint8_t depth, const uint8_t* record, size_t size) {
  if (!resolve_code_ || size < sizeof(PyCallRecord)) return;
  PyCallRecord r;
  std::memcpy(&r, record, sizeof(r));
  if (r.end < r.start) return;
  if (r.end > now_) now_ = r.end;
  serving_.call(thread, r.code, serving_.knows(r.code) ? std::string() : resolve_code_(r.code), depth, r.start, r.end);
  if (steps_total_ != 0 || depth > kCandidateDepth) return;
  count_candidate(python_seen_, r.code, r.end - r.start);
  if (!code_names_.count(r.code) && code_names_.size() < kMaxNames) code_names_[r.code] = resolve_code_(r.code);
}

void Tap::add_coroutine(uint32_t thread, const uint8_t* record, size_t size) {
  if (!resolve_code_ || size < sizeof(PyCoroutineRecord)) return;
  PyCoroutineRecord r;
  std::memcpy(&r, record, sizeof(r));
  serving_.coroutine(thread, r.code, r.start, r.object, r.h.aux);
}

// The candidates seen twice or more, most time first. Called under the lock; names were resolved when first seen.
std::vector<StepCandidate> Tap::step_candidates() const {
  std::vector<StepCandidate> out;
  if (steps_total_ > 0) return out;
  for (const auto& [id, s] : range_seen_)
    if (s.count >= 2)
      if (const auto n = names_.find(id); n != names_.end())
        out.push_back({n->second, false, s.count, double(s.ticks) / ticks_per_ns_ * 1e-9});
  for (const auto& [id, s] : python_seen_)
    if (s.count >= 2)
      if (const auto n = code_names_.find(id); n != code_names_.end() && !n->second.empty())
        out.push_back({n->second, true, s.count, double(s.ticks) / ticks_per_ns_ * 1e-9});
  std::stable_sort(out.begin(), out.end(), [](const StepCandidate& x, const StepCandidate& y) { return x.seconds > y.seconds; });
  if (out.size() > kMaxCandidates) out.resize(kMaxCandidates);
  return out;
}

void Tap::set_code_names(std::function<std::string(uint32_t)> resolve_code) {
  std::lock_guard lk(mu_);
  resolve_code_ = std::move(resolve_code);
}

void Tap::add_gpu(RecordKind kind, const uint8_t* record, size_t size) {
  GpuSpan g;
  if (kind == RecordKind::kGpuKernel && size >= sizeof(GpuKernelRecord)) {
    GpuKernelRecord r;
    std::memcpy(&r, record, sizeof(r));
    g = {r.start, r.end, r.device, r.stream, GpuKind::kKernel};
  } else if (kind == RecordKind::kGpuMemcpy && size >= sizeof(GpuMemcpyRecord)) {
    GpuMemcpyRecord r;
    std::memcpy(&r, record, sizeof(r));
    g = {r.start, r.end, r.device, r.stream, GpuKind::kMemcpy};
  } else if (kind == RecordKind::kGpuMemset && size >= sizeof(GpuMemsetRecord)) {
    GpuMemsetRecord r;
    std::memcpy(&r, record, sizeof(r));
    g = {r.start, r.end, r.device, r.stream, GpuKind::kMemset};
  } else {
    return;
  }
  gpu_.add_gpu(g);
}

// A call counts on its caller's thread: the chunk's own thread (callbacks write there), or the thread its OS id
// names (CUPTI's API activity records come through the `gpu` channel).
void Tap::add_api(uint32_t thread, const uint8_t* record, size_t size) {
  if (size < sizeof(CudaApiRecord)) return;
  CudaApiRecord r;
  std::memcpy(&r, record, sizeof(r));
  if (auto it = thread_of_os_tid_.find(r.os_tid); r.os_tid && it != thread_of_os_tid_.end()) thread = it->second;
  gpu_.add_api(thread, api_kind_of(r.name), r.start, r.end);
}

// The analyzer's classification by name (text/api_kind.hpp), resolved once per name id.
uint8_t Tap::api_kind_of(uint32_t name) {
  if (auto it = api_kinds_.find(name); it != api_kinds_.end()) return it->second;
  const uint8_t kind = text::classify_api(resolve_ ? resolve_(name) : std::string());
  if (api_kinds_.size() < kMaxNames) api_kinds_[name] = kind;
  return kind;
}

void Tap::add_step(const Span& s) {
  gpu_.add_step(s);
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

void Tap::set_thread_name(uint32_t thread, const std::string& name, uint32_t os_tid) {
  std::lock_guard lk(mu_);
  threads_[thread] = name;
  if (os_tid) thread_of_os_tid_[os_tid] = thread;
}

// The scans (settling, the timeline's GPU activities) run before the lock: only this thread touches gpu_ and
// writes the step ring, so reading them here needs no lock; the lock covers the copies into gpu_view_.
void Tap::advance(uint64_t now_ticks) {
  std::vector<SettledStep> fresh = gpu_.settle(now_ticks);
  for (const SettledStep& x : fresh)
    if (x.complete) recent_settled_.push_back(x.step);  // a step whose GPU records were lost would show none
  if (recent_settled_.size() > kTimelineSteps)
    recent_settled_.erase(recent_settled_.begin(), recent_settled_.end() - kTimelineSteps);
  const auto [from, to] = timeline_range();
  std::vector<GpuSpan> timeline = gpu_.gpu_between(from, to, kTimelineGpuSpans);
  std::lock_guard lk(mu_);
  GpuView& v = gpu_view_;
  if (v.settled.empty() && !fresh.empty()) v.settled.resize(kSettledCapacity);
  for (const SettledStep& x : fresh) {
    v.settled[v.settled_next] = x;
    v.settled_next = (v.settled_next + 1) % kSettledCapacity;
  }
  v.timeline.swap(timeline);
  v.timeline_from = recent_settled_.empty() ? 0 : from;
  v.timeline_to = recent_settled_.empty() ? 0 : to;
  v.seen = gpu_.gpu_seen();
  v.records = gpu_.gpu_records();
  v.settled_total = gpu_.settled_total();
  v.pending = gpu_.pending();
  v.incomplete = gpu_.incomplete();
  v.seconds = gpu_.seconds_total();
}

std::pair<uint64_t, uint64_t> Tap::timeline_range() const {
  if (!recent_settled_.empty()) {
    // Steps settle in the order their GPU side completes, not always by start (steps on several threads).
    uint64_t from = UINT64_MAX, to = 0;
    for (const Span& x : recent_settled_) from = std::min(from, x.start), to = std::max(to, x.end);
    return {from, to};
  }
  if (steps_total_ == 0) return {0, UINT64_MAX};
  const size_t n = std::min<uint64_t>(steps_total_, std::min(kTimelineSteps, steps_.size()));
  return {steps_[(steps_next_ + steps_.size() - n) % steps_.size()].start, UINT64_MAX};
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
  s.step_name = step_text_;
  s.serving = serving_.view();
  s.step_candidates = step_candidates();
  s.step_seconds_sum = sum_;
  s.buckets = buckets_;
  s.steps_over_last_bound = over_;
  s.records_total = records_;
  s.dropped_records = dropped_;
  s.origin_ticks = origin_;
  s.now_ticks = now_;
  s.ticks_per_ns = ticks_per_ns_;
  s.state = state_;
  const GpuView& v = gpu_view_;
  s.gpu_seen = v.seen;
  s.gpu_records = v.records;
  s.gpu_spans = v.timeline;
  s.timeline_from = v.timeline_from;
  s.timeline_to = v.timeline_to;
  const size_t n = std::min<uint64_t>(v.settled_total, v.settled.size());
  for (size_t i = 0; i < n; ++i) s.settled.push_back(v.settled[(v.settled_next + v.settled.size() - n + i) % v.settled.size()]);
  s.steps_settled = v.settled_total;
  s.steps_pending = v.pending;
  s.steps_incomplete = v.incomplete;
  s.category_seconds = v.seconds;
  return s;
}

}  // namespace inferscope::live
