// Stage "requests" (requests.hpp): the requests' lives, their latency and where it went.
#include "analyze/serving/requests.hpp"

#include "analyze/support/order_stats.hpp"
#include "analyze/serving/engine_batches.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace inferscope::analyze::detail {
namespace {

int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return std::max<int64_t>(0, std::min(a1, b1) - std::max(a0, b0)); }

// The coroutine whose top-level lives begun in the trace are most numerous (ties: more time, then the lower code);
// 0 when none has kMinRequests. The step's own coroutine may be it: a server without a batcher runs the model inside
// each request's handler (a batcher is one life, never a request).
uint32_t request_code(const CoroutineActivity& act) {
  std::map<uint32_t, std::pair<size_t, int64_t>> by_code;  // code -> (lives, time)
  for (const CoroutineLife& l : act.lives)
    if (l.top_level && l.began_in_trace) {
      auto& x = by_code[l.code];
      ++x.first;
      x.second += l.end - l.start;
    }
  uint32_t best = 0;
  std::pair<size_t, int64_t> most{0, 0};
  for (auto& [code, x] : by_code)
    if (x.first >= kMinRequests && x > most) {
      most = x;
      best = code;
    }
  return best;
}

// Adds to `delay` (by code) the time each loop callback overlapped [a, b).
void blame_callbacks(std::span<const LoopCallback> cbs, int64_t a, int64_t b, std::unordered_map<uint32_t, int64_t>& delay) {
  if (b <= a) return;
  auto it = std::upper_bound(cbs.begin(), cbs.end(), a, [](int64_t v, const LoopCallback& c) { return v < c.start; });
  if (it != cbs.begin()) --it;
  for (; it != cbs.end() && it->start < b; ++it)
    if (int64_t o = overlap(it->start, it->end, a, b)) delay[it->code] += o;
}

// Time in [a, b) during callbacks that ran longer than `slow_ns`.
int64_t slow_overlap(std::span<const LoopCallback> cbs, int64_t a, int64_t b, int64_t slow_ns) {
  int64_t sum = 0;
  auto it = std::upper_bound(cbs.begin(), cbs.end(), a, [](int64_t v, const LoopCallback& c) { return v < c.start; });
  if (it != cbs.begin()) --it;
  for (; it != cbs.end() && it->start < b; ++it)
    if (it->end - it->start > slow_ns) sum += overlap(it->start, it->end, a, b);
  return sum;
}

struct SplitNs {
  int64_t running = 0, queued = 0, batch_wait = 0, in_batch = 0, delayed = 0, other = 0;
};

// One request's split with a batch step: each suspension by the step that served it.
SplitNs batch_split(const CoroutineActivity& act, const CoroutineLife& l, std::span<const Span> steps, bool& served,
                    std::vector<uint32_t>& served_by_step, std::vector<int64_t>& first_queued,
                    std::unordered_map<uint32_t, int64_t>& delay) {
  SplitNs s;
  for (size_t k = 0; k < l.runs.size(); ++k) {
    const CoroutineRun& r = act.runs[l.runs[k]];
    s.running += r.end - r.start;
    if (k + 1 == l.runs.size()) break;
    const int64_t g0 = r.end, g1 = act.runs[l.runs[k + 1]].start;
    const long sv = serving_step(steps, g0, g1);
    if (sv < 0) {
      s.other += std::max<int64_t>(0, g1 - g0);
      continue;
    }
    served = true;
    ++served_by_step[size_t(sv)];
    int64_t& q = first_queued[size_t(sv)];
    q = q < 0 ? g0 : std::min(q, g0);
    const Span& st = steps[size_t(sv)];
    const int64_t from = std::max(st.start, g0);
    int64_t queued = 0;
    for (long j = sv - 1; j >= 0 && steps[size_t(j)].end > g0; --j) queued += overlap(steps[size_t(j)].start, steps[size_t(j)].end, g0, from);
    s.queued += queued;
    s.batch_wait += std::max<int64_t>(0, from - g0 - queued);
    s.in_batch += st.end - from;
    s.delayed += std::max<int64_t>(0, g1 - st.end);
    blame_callbacks(act.callbacks, st.end, g1, delay);
  }
  return s;
}

// One request's split without a batch step: a suspension is "other", but for the time another callback held the
// loop longer than the bound.
SplitNs loop_split(const CoroutineActivity& act, const CoroutineLife& l, int64_t slow_ns,
                   std::unordered_map<uint32_t, int64_t>& delay) {
  SplitNs s;
  for (size_t k = 0; k < l.runs.size(); ++k) {
    const CoroutineRun& r = act.runs[l.runs[k]];
    s.running += r.end - r.start;
    if (k + 1 == l.runs.size()) break;
    const int64_t g0 = r.end, g1 = act.runs[l.runs[k + 1]].start;
    const int64_t held = slow_overlap(act.callbacks, g0, g1, slow_ns);
    s.delayed += held;
    s.other += std::max<int64_t>(0, g1 - g0 - held);
    // Only the slow callbacks are blamed: the others are the loop's ordinary turn-taking.
    auto it = std::upper_bound(act.callbacks.begin(), act.callbacks.end(), g0,
                               [](int64_t v, const LoopCallback& c) { return v < c.start; });
    if (it != act.callbacks.begin()) --it;
    for (; it != act.callbacks.end() && it->start < g1; ++it)
      if (it->end - it->start > slow_ns)
        if (int64_t o = overlap(it->start, it->end, g0, g1)) delay[it->code] += o;
  }
  return s;
}

}  // namespace

Requests measure_requests(const CoroutineActivity& act, std::span<const Span> steps,
                          const std::function<std::string(uint32_t)>& name_of, std::vector<int64_t>* first_queued) {
  Requests out;
  const uint32_t code = act.found ? request_code(act) : 0;
  if (code == 0) return out;
  std::vector<const CoroutineLife*> reqs;
  for (const CoroutineLife& l : act.lives)
    if (l.code == code && l.top_level && l.began_in_trace) reqs.push_back(&l);
  out.detected = true;
  out.name = name_of(code);
  out.count = reqs.size();
  std::vector<double> lat;
  int64_t first = reqs.front()->start, last = 0;
  for (const CoroutineLife* l : reqs) {
    lat.push_back(double(l->end - l->start) / 1e6);
    first = std::min(first, l->start);
    last = std::max(last, l->end);
  }
  std::vector<double> sorted = lat;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : lat) sum += v;
  out.mean_ms = sum / double(lat.size());
  out.p50_ms = percentile_sorted(sorted, 0.5);
  out.p90_ms = percentile_sorted(sorted, 0.9);
  out.p99_ms = percentile_sorted(sorted, 0.99);
  out.max_ms = sorted.back();
  const int64_t span = std::max<int64_t>(1, last - first);
  out.per_s = double(reqs.size()) / (double(span) / 1e9);
  out.slow_callback_ms = std::max(kSlowCallbackFloorMs, kSlowCallbackShare * out.p50_ms);
  const int64_t slow_ns = int64_t(out.slow_callback_ms * 1e6);

  // With a batch step: is it what served them?
  std::vector<SplitNs> splits;
  std::unordered_map<uint32_t, int64_t> delay;
  std::vector<uint32_t> served_by_step(steps.size(), 0);
  std::vector<int64_t> queued_from(steps.size(), -1);
  size_t served = 0;
  if (!steps.empty()) {
    for (const CoroutineLife* l : reqs) {
      bool s = false;
      splits.push_back(batch_split(act, *l, steps, s, served_by_step, queued_from, delay));
      served += s;
    }
  }
  out.batched = !steps.empty() && double(served) >= kBatchedShare * double(reqs.size());
  if (out.batched) {
    size_t steps_serving = 0, suspensions = 0;
    for (uint32_t n : served_by_step)
      if (n) {
        ++steps_serving;
        suspensions += n;
      }
    out.requests_per_step = steps_serving ? double(suspensions) / double(steps_serving) : 0;
    out.max_per_step = *std::max_element(served_by_step.begin(), served_by_step.end());
    size_t full = 0;
    std::vector<double> gaps, batches;
    for (size_t k = 0; k < served_by_step.size(); ++k) {
      if (!served_by_step[k]) continue;
      full += served_by_step[k] == out.max_per_step;
      batches.push_back(double(steps[k].end - steps[k].start) / 1e6);
      if (queued_from[k] >= 0 && queued_from[k] < steps[k].start) gaps.push_back(double(steps[k].start - queued_from[k]) / 1e6);
    }
    out.full_share = steps_serving ? double(full) / double(steps_serving) : 0;
    out.batch_gap_ms = median_in_place(gaps);
    out.batch_ms = median_in_place(batches);
    out.engine = engine_batches(act, reqs, steps);
    if (first_queued) *first_queued = std::move(queued_from);
  } else {
    splits.clear();
    delay.clear();
    for (const CoroutineLife* l : reqs) splits.push_back(loop_split(act, *l, slow_ns, delay));
  }
  SplitNs total;
  for (const SplitNs& s : splits) {
    total.running += s.running;
    total.queued += s.queued;
    total.batch_wait += s.batch_wait;
    total.in_batch += s.in_batch;
    total.delayed += s.delayed;
    total.other += s.other;
  }
  const double n = double(reqs.size()) * 1e6;
  out.split = {double(total.running) / n, double(total.queued) / n, double(total.batch_wait) / n,
               double(total.in_batch) / n, double(total.delayed) / n, double(total.other) / n};

  // The loop's callbacks over the requests' span.
  std::map<uint32_t, LoopCallbackRow> rows;
  int64_t busy = 0;
  for (const LoopCallback& c : act.callbacks) {
    const int64_t o = overlap(c.start, c.end, first, last);
    if (o <= 0) continue;
    busy += o;
    LoopCallbackRow& r = rows[c.code];
    ++r.runs;
    r.total_ms += double(c.end - c.start) / 1e6;
    r.max_ms = std::max(r.max_ms, double(c.end - c.start) / 1e6);
    r.slow += c.end - c.start > slow_ns;
  }
  out.loop_busy_share = std::min(1.0, double(busy) / double(span));
  std::unordered_map<uint32_t, double> modeled;  // by code: sum of d^2 / (2 span) over its runs holding the loop, ms
  for (const LoopCallback& c : act.callbacks)
    if (c.end - c.start > slow_ns && overlap(c.start, c.end, first, last) > 0) {
      const double d = double(c.end - c.start);
      modeled[c.code] += d * d / (2.0 * double(span)) / 1e6;
      out.modeled_delay_ms += d * d / (2.0 * double(span)) / 1e6;
    }
  // Nothing measured: the handlers never awaited, so their requests waited before their lives began (in the socket,
  // while the loop was held). Blame by the arrival model instead.
  out.delay_modeled = !out.batched && total.delayed == 0 && out.modeled_delay_ms > 0;
  for (auto& [c, r] : rows) {
    r.name = name_of(c);
    r.share = r.total_ms * 1e6 / double(span);
    auto it = delay.find(c);
    r.delay_ms = it == delay.end() ? 0 : double(it->second) / n;
    if (out.delay_modeled) r.delay_ms = modeled.count(c) ? modeled[c] : 0;
    out.callbacks.push_back(std::move(r));
  }
  std::stable_sort(out.callbacks.begin(), out.callbacks.end(),
                   [](const LoopCallbackRow& a, const LoopCallbackRow& b) { return a.total_ms > b.total_ms; });
  if (out.callbacks.size() > 8) out.callbacks.resize(8);
  const size_t cut = act.lives.size() - std::count_if(act.lives.begin(), act.lives.end(), [&](const CoroutineLife& l) {
                       return l.code != code || l.began_in_trace;
                     });
  if (cut)
    out.notes.push_back(std::to_string(cut) + " request(s) had begun before the recording and are left out");
  return out;
}

}  // namespace inferscope::analyze::detail
