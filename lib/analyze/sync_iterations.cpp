#include "analyze/sync_iterations.hpp"

#include "analyze/model.hpp"

#include <algorithm>

namespace inferscope::analyze::detail {
namespace {

constexpr size_t kMaxPeriod = 8;
constexpr double kRepeatShare = 0.9;
constexpr size_t kMinIterations = 4;
constexpr double kLaunchingShare = 0.9;

bool blocking(uint8_t kind) { return kind == kSync || kind == kCopySync; }
bool launches(uint8_t kind) { return kind == kLaunch || kind == kCopyAsync; }

// The smallest period over which the blocking calls' APIs repeat; 0: none.
size_t period_of(const std::vector<const CallView*>& b) {
  for (size_t p = 1; p <= kMaxPeriod && b.size() / p >= kMinIterations; ++p) {
    size_t same = 0;
    for (size_t i = 0; i + p < b.size(); ++i) same += b[i]->name == b[i + p]->name;
    if (double(same) >= kRepeatShare * double(b.size() - p)) return p;
  }
  return 0;
}

// Of the p blocking calls of an iteration, the one followed by the longest host time on average.
size_t phase_of(const std::vector<CallView>& calls, const std::vector<size_t>& blocking_at, size_t p) {
  std::vector<double> gap(p, 0.0);
  for (size_t k = 0; k < blocking_at.size(); ++k) {
    const size_t i = blocking_at[k];
    if (i + 1 < calls.size()) gap[k % p] += double(std::max<int64_t>(0, calls[i + 1].start - calls[i].end));
  }
  return size_t(std::max_element(gap.begin(), gap.end()) - gap.begin());
}

}  // namespace

SyncIterations sync_iterations(const std::vector<CallView>& calls) {
  SyncIterations out;
  std::vector<size_t> blocking_at;
  std::vector<const CallView*> b;
  for (size_t i = 0; i < calls.size(); ++i)
    if (blocking(calls[i].kind)) {
      blocking_at.push_back(i);
      b.push_back(&calls[i]);
    }
  const size_t p = period_of(b);
  if (p == 0) return out;
  const size_t phase = phase_of(calls, blocking_at, p);
  std::vector<size_t> ends;  // indexes into calls of the iterations' last calls
  for (size_t k = phase; k < blocking_at.size(); k += p) ends.push_back(blocking_at[k]);
  if (ends.size() < kMinIterations) return out;
  size_t launching = 0, first = 0;
  for (size_t e : ends) {
    bool any = false;
    for (size_t i = first; i <= e && !any; ++i) any = launches(calls[i].kind);
    launching += any;
    out.spans.push_back({calls[first].start, calls[e].end});
    first = e + 1;
  }
  for (size_t k = 1; k < out.spans.size(); ++k) out.spans[k].start = out.spans[k - 1].end;
  if (double(launching) < kLaunchingShare * double(ends.size())) {
    out.spans.clear();
    return out;
  }
  out.boundary_name = calls[ends.front()].name;
  out.period = p;
  return out;
}

}  // namespace inferscope::analyze::detail
