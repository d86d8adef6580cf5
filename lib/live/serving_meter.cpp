// The serving meter (serving_meter.hpp): generation calls and request lives, measured as their records drain.
#include "live/serving_meter.hpp"

#include "text/token_names.hpp"

#include <inferscope/records.hpp>

#include <algorithm>
#include <cmath>

namespace inferscope::live {

namespace {
using text::kMinTokenCalls;
constexpr uint32_t kMaxCodeId = 1u << 22;  // code ids above it (a corrupt record) are not classified
}  // namespace

void LatencyHistogram::add(double seconds) {
  if (!(seconds >= 0)) return;
  ++count;
  sum += seconds;
  const auto it = std::lower_bound(kServingBounds.begin(), kServingBounds.end(), seconds);
  if (it == kServingBounds.end()) ++over;
  else ++buckets[size_t(it - kServingBounds.begin())];
  if (recent.size() < kRecentValues) {
    recent.push_back(seconds);
  } else {
    recent[recent_next] = seconds;
    recent_next = (recent_next + 1) % kRecentValues;
  }
}

double LatencyHistogram::recent_quantile(double q) const {
  if (recent.empty()) return 0;
  std::vector<double> v = recent;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, rank ? rank - 1 : 0)];
}

ServingMeter::ServingMeter(double ticks_per_ns) : ticks_per_ns_(ticks_per_ns > 0 ? ticks_per_ns : 1.0) {}

ServingMeter::Kind ServingMeter::classify(uint32_t code, const std::string& name) {
  if (code >= kMaxCodeId) return kOther;
  if (code >= kind_.size()) kind_.resize(size_t(code) + 1, kUnknown);
  if (kind_[code] != kUnknown) return kind_[code];
  if (!name.empty() && names_.size() < kMaxCodeNames) names_.emplace(code, name);
  Kind k = kOther;
  if (!text::model_class_marker(name).empty()) k = kModel;
  else if (text::generating_name(name)) k = kGenerating;
  kind_[code] = k;
  return k;
}

void ServingMeter::call(uint32_t thread, uint32_t code, const std::string& name, uint32_t depth, uint64_t start,
                        uint64_t end) {
  if (end < start) return;
  ThreadState& t = threads_[thread];
  t.last = {code, depth, start, end};
  const Kind k = classify(code, name);
  if (k == kModel) {
    // Records arrive in end order: model calls inside this one (a wrapper's own forward) came before it.
    while (!t.model_calls.empty() && t.model_calls.back().start >= start) t.model_calls.pop_back();
    t.model_calls.push_back({start, end, code});
    if (t.model_calls.size() > kMaxHeldTokenCalls) t.model_calls.pop_front();
  } else if (k == kGenerating) {
    generation_ended(t, code, start, end);
  }
}

// A generating call ended: the model calls it holds are its tokens when there are kMinTokenCalls or more, and only
// then are they claimed (a generating call around it must not count them again). A per-token generating call (a
// decode_step holding one model call) leaves its model call for the generate call around it.
void ServingMeter::generation_ended(ThreadState& t, uint32_t code, uint64_t start, uint64_t end) {
  auto first = std::find_if(t.model_calls.begin(), t.model_calls.end(), [&](const Held& h) { return h.start >= start; });
  const auto last = std::find_if(first, t.model_calls.end(), [&](const Held& h) { return h.end > end; });
  const size_t n = size_t(last - first);
  if (n >= kMinTokenCalls) {
    ++gen_.generation_calls;
    gen_.tokens += n;
    gen_.ttft.add(secs(first->end - start));
    for (auto it = first + 1; it != last; ++it) gen_.tpot.add(secs(it->end - (it - 1)->end));
    gen_.generation_latency.add(secs(end - start));
    if (auto nm = names_.find(code); nm != names_.end()) gen_.generation_name = nm->second;
    if (auto nm = names_.find(first->code); nm != names_.end()) gen_.token_name = nm->second;
  }
  if (n >= kMinTokenCalls) t.model_calls.erase(first, last);
}

void ServingMeter::coroutine(uint32_t thread, uint32_t code, uint64_t start, uint64_t object, uint8_t flags) {
  ThreadState& t = threads_[thread];
  if (t.last.code != code || t.last.start != start) return;  // its call record was lost: nothing to time
  const bool first = flags & kCoroutineFirstRun, last = flags & kCoroutineLastRun;
  if (first) t.min_first_depth = std::min(t.min_first_depth, t.last.depth);
  Life life;
  if (first) {
    life = {code, start, t.last.depth <= t.min_first_depth};
    if (!last) {
      if (t.lives.size() < kMaxOpenLives) t.lives[object] = life;
      return;
    }
  } else {
    auto it = t.lives.find(object);
    if (it == t.lives.end()) return;
    life = it->second;
    if (!last) return;
    t.lives.erase(it);
    if (life.code != code) return;
  }
  if (!life.top_level) return;
  auto c = lives_by_code_.find(code);
  if (c == lives_by_code_.end()) {
    if (lives_by_code_.size() >= kMaxCoroutineCodes) return;
    auto nm = names_.find(code);
    c = lives_by_code_.emplace(code, CodeLives{nm == names_.end() ? "<code " + std::to_string(code) + ">" : nm->second, {}}).first;
  }
  c->second.latency.add(secs(t.last.end - life.start));
}

ServingView ServingMeter::view() const {
  ServingView v = gen_;
  const CodeLives* best = nullptr;
  for (const auto& [code, c] : lives_by_code_)
    if (c.latency.count >= kMinRequestLives && (!best || c.latency.count > best->latency.count)) best = &c;
  if (best) {
    v.request_name = best->name;
    v.request_latency = best->latency;
  }
  return v;
}

}  // namespace inferscope::live
