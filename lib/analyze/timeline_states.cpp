// Stage "representative timeline", its thread states: each thread lane's scheduler state during the step, from
// the system collector's `thread.state` samples, read into slices as the Perfetto trace reads them
// (dump/thread_states.hpp), clipped to the step.
#include "analyze/stages.hpp"
#include "dump/thread_states.hpp"

#include <inferscope/counter_names.hpp>

namespace inferscope::analyze::detail {

void add_thread_states(const Context& cx, const Ingested& in, int64_t rep_s, int64_t rep_e,
                       const std::map<uint32_t, TimelineLane*>& lane_of_thread) {
  // A thread's samples come with its dump id (kThread) or, before the session knew it, its OS id (kOsThread).
  std::map<uint32_t, uint32_t> thread_of_os_tid;
  for (const auto& [thread, lane] : lane_of_thread) {
    const auto t = cx.r.threads().find(thread);
    if (t != cx.r.threads().end() && t->second.os_tid) thread_of_os_tid[uint32_t(t->second.os_tid)] = thread;
  }
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> samples;  // thread -> (ts, code)
  for (const auto& c : in.counters) {
    if (c.scope != uint8_t(CounterScope::kThread) && c.scope != uint8_t(CounterScope::kOsThread)) continue;
    if (cx.name_of(c.name) != counter_names::kThreadState) continue;
    uint32_t thread = c.target;
    if (c.scope == uint8_t(CounterScope::kOsThread)) {
      const auto t = thread_of_os_tid.find(c.target);
      if (t == thread_of_os_tid.end()) continue;
      thread = t->second;
    }
    if (lane_of_thread.count(thread)) samples[thread].emplace_back(c.ts, dump::thread_state_code(true, 0, c.v));
  }
  for (auto& [thread, series] : samples) {
    std::stable_sort(series.begin(), series.end(), [](auto& a, auto& b) { return a.first < b.first; });
    auto& states = lane_of_thread.at(thread)->states;
    const auto keep = [&](const dump::ThreadStateSlice& s) {
      const int64_t a = std::max(s.start, rep_s), b = std::min(s.end, rep_e);
      if (b > a) states.push_back({ms(double(a - rep_s)), ms(double(b - rep_s)), s.code});
    };
    dump::ThreadStateSlicer slicer;
    std::optional<dump::ThreadStateSlice> closed;
    for (const auto& [ts, code] : series)
      if (slicer.add(ts, code, closed) && closed) keep(*closed);
    if (const auto open = slicer.finish()) keep(*open);
  }
}

}  // namespace inferscope::analyze::detail
