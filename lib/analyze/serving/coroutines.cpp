// Stage "coroutines" (coroutines.hpp): the loop thread's coroutine runs and top-level calls, and their lives.
#include "analyze/serving/coroutines.hpp"

#include "analyze/stages.hpp"

#include <algorithm>
#include <unordered_map>

namespace inferscope::analyze::detail {
namespace {

// The loop's callbacks sit at the depth of the tasks' first runs: 0 when asyncio.run is called from untraced code,
// 1 under a traced <module> or main(); deeper, a program that nests its loop inside more of its own frames.
constexpr uint32_t kCallbackDepths = 4;

// One pass over the loop thread's records: each coroutine record is paired with the call written just before it
// (the same code and start ticks; a record lost in between leaves the call unpaired, never wrongly paired).
struct LoopRecords {
  const dump::ClockModel& clock;
  const uint32_t code_limit;
  std::vector<CoroutineRun>& runs;
  std::vector<std::pair<uint32_t, LoopCallback>>& shallow;  // (depth, call) for depth <= kCallbackDepths
  PyCallRecord last{};
  uint32_t last_depth = 0;
  bool have_last = false;

  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    last = rec;
    last_depth = rc.aux();
    have_last = true;
    if (rc.aux() <= kCallbackDepths) {
      const int64_t s = clock.to_ns(rec.start);
      shallow.push_back({rc.aux(), {rec.code < code_limit ? rec.code : 0, s, std::max(s, clock.to_ns(rec.end))}});
    }
  }
  void on(const PyCoroutineRecord& rec, const dump::RecordContext& rc) {
    if (!have_last || last.code != rec.code || last.start != rec.start) return;
    have_last = false;
    const int64_t s = clock.to_ns(last.start);
    runs.push_back({rec.code < code_limit ? rec.code : 0, last_depth, s, std::max(s, clock.to_ns(last.end)), rec.object,
                    (rc.aux() & kCoroutineFirstRun) != 0});
  }
};

}  // namespace

std::vector<CoroutineLife> coroutine_lives(std::span<const CoroutineRun> runs) {
  // Which run encloses each run's start: a stack of the runs still open, as calls nest on one thread.
  std::vector<uint8_t> enclosed(runs.size(), 0);
  {
    std::vector<size_t> open;
    for (size_t i = 0; i < runs.size(); ++i) {
      while (!open.empty() && runs[open.back()].end <= runs[i].start) open.pop_back();
      for (auto it = open.rbegin(); it != open.rend(); ++it)
        if (runs[*it].object != runs[i].object) {
          enclosed[i] = 1;
          break;
        }
      open.push_back(i);
    }
  }
  std::vector<CoroutineLife> lives;
  std::unordered_map<uint64_t, size_t> current;  // object -> its life in `lives`
  for (size_t i = 0; i < runs.size(); ++i) {
    const CoroutineRun& r = runs[i];
    auto it = current.find(r.object);
    if (it == current.end() || r.first) {
      CoroutineLife l;
      l.code = r.code;
      l.start = r.start;
      l.began_in_trace = r.first;
      l.top_level = !enclosed[i];
      current[r.object] = lives.size();
      lives.push_back(std::move(l));
      it = current.find(r.object);
    }
    CoroutineLife& l = lives[it->second];
    l.end = std::max(l.end, r.end);
    l.runs.push_back(uint32_t(i));
  }
  return lives;
}

CoroutineActivity collect_coroutines(const Context& cx, const Ingested& in) {
  CoroutineActivity act;
  uint64_t most = 0;
  for (uint32_t t = 0; t < in.ts.size(); ++t) {
    if (in.ts[t].coroutine_runs > most) {
      most = in.ts[t].coroutine_runs;
      act.loop_thread = t;
    }
    in.ts[t].coroutine_codes.for_each([&](uint64_t code, uint64_t) { act.coroutine_codes.insert(uint32_t(code)); });
  }
  if (most == 0) return act;
  act.found = true;
  std::vector<std::pair<uint32_t, LoopCallback>> shallow;
  LoopRecords visitor{cx.clock, cx.code_limit, act.runs, shallow};
  for (const auto& c : cx.r.event_chunks()) {
    if (c.thread_id != act.loop_thread) continue;
    try {
      dump::visit_records(cx.r, c, visitor);
    } catch (const dump::DumpError&) {  // reported by pass 1
    }
  }
  // A thread's records arrive in the order calls end; the lives want them by start.
  auto by_start = [](const auto& a, const auto& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; };
  std::sort(act.runs.begin(), act.runs.end(), by_start);
  act.lives = coroutine_lives(act.runs);
  // The callbacks: the calls at the depth of the top-level lives' first runs (the loop runs a task's step there).
  uint32_t depth = UINT32_MAX;
  for (const CoroutineLife& l : act.lives)
    if (l.top_level && !l.runs.empty()) depth = std::min(depth, act.runs[l.runs.front()].depth);
  // A wait point there (the selector's select) is the loop idling between callbacks, not one of them.
  for (const auto& [d, c] : shallow)
    if (d == depth && !cx.wait_point(c.code)) act.callbacks.push_back(c);
  std::sort(act.callbacks.begin(), act.callbacks.end(), by_start);
  return act;
}

}  // namespace inferscope::analyze::detail
