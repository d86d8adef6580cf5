// Stage "coroutines": the runs of coroutines on the event loop's thread, and the lives they make up. CPython runs a
// coroutine in pieces: from its first run (or a resumption) to the next `await` that suspends it. The tracer writes
// each piece as a Python call followed by a coroutine record naming the object that ran (docs/dump-format.md,
// python_coroutine), so the pieces of one task join into its life, from its first run to its last.
//
//   CoroutineActivity act = collect_coroutines(cx, in);         // one more pass, over the loop thread's chunks only
//   for (const CoroutineLife& l : act.lives) ... l.start, l.end, act.runs[l.first_run] ...
//
// A life is "top level" when its first run is not inside another coroutine's run on that thread: a task the loop
// started (asyncio.create_task, gather, a server's connection task running a handler), not a coroutine awaited
// from inside another one. Requests are made of those (requests.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_set>
#include <vector>

namespace inferscope::analyze::detail {

struct Context;
struct Ingested;

/// One run of a coroutine: its code, nesting depth among traced frames, span (ns) and object.
struct CoroutineRun {
  uint32_t code = 0;
  uint32_t depth = 0;
  int64_t start = 0, end = 0;
  uint64_t object = 0;
  bool first = false;  ///< began the coroutine (false: a resumption, or unknown before CPython 3.11's flags)
};

/// A callback the loop ran (a coroutine's run, or a plain function it called): a call on the loop thread at the depth
/// where the tasks' first runs are.
struct LoopCallback {
  uint32_t code = 0;
  int64_t start = 0, end = 0;
};

/// A coroutine object's life: its runs, in time order, as indexes into CoroutineActivity::runs.
struct CoroutineLife {
  uint32_t code = 0;
  int64_t start = 0, end = 0;      ///< the first run's start, the last run's end
  bool began_in_trace = false;     ///< its first run is flagged as such (not a resumption of one begun earlier)
  bool top_level = false;          ///< its first run is not inside another coroutine's run
  std::vector<uint32_t> runs;      ///< indexes into CoroutineActivity::runs, by start
};

struct CoroutineActivity {
  bool found = false;             ///< the dump has coroutine records
  uint32_t loop_thread = 0;       ///< the thread with the most coroutine runs (the event loop's)
  std::vector<CoroutineRun> runs;        ///< on the loop thread, by start
  std::vector<LoopCallback> callbacks;   ///< the loop's callbacks, by start
  std::vector<CoroutineLife> lives;      ///< by start
  std::unordered_set<uint32_t> coroutine_codes;  ///< codes seen running as coroutines, on any thread
};

/// The lives of `runs` (sorted by start, properly nested as a thread's calls are): runs of one object joined, a new
/// life wherever a run is flagged first; top_level where no run of another object encloses the life's first run.
std::vector<CoroutineLife> coroutine_lives(std::span<const CoroutineRun> runs);

/// Reads the coroutine records of the thread that holds the most (in.ts[t].coroutine_runs), pairs each with the call
/// before it, and builds the lives. found = false when the dump has none (a program without asyncio, a CPython
/// older than 3.11, a dump written before the record existed).
CoroutineActivity collect_coroutines(const Context& cx, const Ingested& in);

}  // namespace inferscope::analyze::detail
