// Stage "steps": the step instances (asked for with --step, else detected), the step thread, the step policy
// (step_policy.cpp) and the representative step (docs/analysis.md section 3).
#include "analyze/aggregate.hpp"
#include "analyze/generation/generation.hpp"
#include "analyze/stages.hpp"
#include "analyze/gpu_pacing.hpp"
#include "analyze/support/order_stats.hpp"
#include "analyze/serving/loop_steps.hpp"
#include "analyze/step_candidates.hpp"
#include "analyze/sync_iterations.hpp"

#include <cmath>
#include <cstdio>

namespace inferscope::analyze::detail {
namespace {

// Steps that pay a one-time cost: the one holding the step thread's first CUDA call (it creates the context).
template <class Calls>
std::vector<bool> one_time_cost_steps(const std::vector<Cand>& steps, const Calls& apis, uint32_t thread) {
  std::vector<bool> out(steps.size(), false);
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const ApiOp& x : apis)
    if (x.thread == std::min<uint32_t>(thread, 0xffff)) first = std::min(first, x.start);
  for (size_t i = 0; i < steps.size(); ++i)
    if (first >= steps[i].start && first < steps[i].end) out[i] = true;
  return out;
}

// The whole trace as one step: its statistics are that one duration.
void fill_whole_trace_stats(StepStats& st, double dur_ns) {
  st.count = 0;
  st.total = 0;
  st.typical = 1;
  st.mean_ms = st.p50_ms = st.p90_ms = st.p99_ms = st.max_ms = st.min_ms = dur_ns / 1e6;
  st.warmup_reason = "no steps: the whole trace is analysed as one";
}

// No step asked for: the candidates of the detected step (empty when nothing repeats).
// The repeated shallow Python function that is the step of an unmodified program, on the launching thread.
struct PythonStep {
  uint32_t code = 0;
  int64_t total = -1;  ///< time its calls cover; -1: none repeats
  std::vector<Cand> instances;
  bool iterations = false;  ///< the instances are loop iterations: from one call's start to the next one's
  uint32_t token_code = 0;  ///< the per-token call each step holds, when the step is a generation call
  uint32_t loop_code = 0;   ///< the coroutine whose runs are the steps (the event loop's callback), when they are
  uint32_t inner_code = 0;  ///< the call those runs hold (the repeated function found first)
};

// Over a tenth of the time between the first call and the last one's end spent outside the calls: the loop
// does per-iteration work outside the function (loading the next batch, logging, waiting), which is part of
// what each step costs, so the steps become the iterations, each from one call's start to the next one's.
// (Loop overhead between back-to-back calls is far below a tenth.) Only when the typical iteration pays it: the
// median gap between calls over a tenth of the median call. A server's engine that idles between bursts of work
// (sleeping until the next request arrives) spends a tenth of the run outside its step calls in a few long gaps,
// while most of its steps follow each other at once: those gaps are the server waiting for work, not what a step
// costs (a continuous-batching engine's steps read 114 ms against its own 64.7 ms timer before this condition).
bool typical_gap_counts(const std::vector<Cand>& outer) {
  std::vector<double> gaps, calls;
  for (size_t i = 0; i + 1 < outer.size(); ++i) {
    gaps.push_back(double(outer[i + 1].start - outer[i].end));
    calls.push_back(double(outer[i].end - outer[i].start));
  }
  return median_in_place(gaps) > 0.1 * median_in_place(calls);
}

void to_iterations(PythonStep& py) {
  auto& v = py.instances;
  std::sort(v.begin(), v.end(), [](const Cand& x, const Cand& y) { return x.start < y.start; });
  std::vector<Cand> outer;  // recursive calls: the outermost only
  for (const Cand& c : v)
    if (outer.empty() || c.start >= outer.back().end) outer.push_back(c);
  if (outer.size() < 3) return;
  int64_t inside = 0;
  for (const Cand& c : outer) inside += c.end - c.start;
  const int64_t span = outer.back().end - outer.front().start;
  if (span <= 0 || double(span - inside) <= 0.1 * double(span) || !typical_gap_counts(outer)) return;
  for (size_t i = 0; i + 1 < outer.size(); ++i) outer[i].end = outer[i + 1].start;
  outer.pop_back();  // the last call has no next start to end its iteration
  v = std::move(outer);
  py.iterations = true;
}

// The calls of the candidate functions (Python depth <= 3), as step candidates.
struct CallsOf {
  const dump::ClockModel& clock;
  std::map<uint32_t, std::vector<Cand>>& calls;
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    if (rc.aux() > 3) return;
    auto it = calls.find(rec.code);
    if (it == calls.end()) return;
    const int64_t s0 = clock.to_ns(rec.start);
    it->second.push_back({rc.thread, 0x80000000u | rec.code, s0, std::max(s0, clock.to_ns(rec.end))});
  }
};

// Candidates: the functions at depth <= 3 called at least twice, by the time they cover. The first whose calls
// hold a CUDA call in at least half of them wins: a function that launches no GPU work (a Dataset's
// __getitem__, a tokenizer) describes a sample or a part, not the step, however much time it covers. A
// program that makes no CUDA call on that thread takes the first candidate.
// `only`: the one code to consider (a function named step, step_named_function), 0: every candidate.
using Spans = std::vector<std::pair<int64_t, int64_t>>;
Spans spans_of(const std::vector<Cand>& v) {
  Spans out;
  for (const Cand& c : v) out.push_back({c.start, c.end});
  std::sort(out.begin(), out.end());
  return out;
}

// A generating model's per-token call, by its name: a model class, or a function named generate/decode.
bool model_call_name(const std::string& name) { return !model_class_marker(name).empty() || generating_name(name); }

// The per-token call a generation call (`outer`, ranked's index) holds: the model call (a generating model's
// forward: a model class or a name that says so) it makes kMinTokenCalls times or more. 0: none.
uint32_t token_call_inside(const Context& cx, const std::vector<std::pair<std::pair<int64_t, uint64_t>, uint32_t>>& ranked,
                           std::map<uint32_t, std::vector<Cand>>& calls_of, size_t outer) {
  if (!generating_name(cx.code_name(ranked[outer].second))) return 0;
  const Spans outer_spans = spans_of(calls_of[ranked[outer].second]);
  for (size_t k = 0; k < ranked.size(); ++k) {
    if (k == outer) continue;
    if (!model_call_name(cx.code_name(ranked[k].second))) continue;
    if (holds_token_calls(outer_spans, spans_of(calls_of[ranked[k].second]))) return ranked[k].second;
  }
  return 0;
}

// The generation call holding `inner`, a call made once per token: the candidate covering the most time, repeated,
// launching, named as a generation call (GenerationMixin.generate, a hand-written generate_reply) whose calls hold
// kMinTokenCalls or more of `inner`. `inner` is either the model's per-token forward itself or another per-token
// call (a stopping criterion, a logits processor: whatever covers the most time), and then the generation call must
// also hold a model's per-token forward: a function named generate that merely repeats some helper is no
// generation. `ranked`'s index, or `inner` itself when there is none.
template <class Launching>
size_t generation_call(const Context& cx, const std::vector<std::pair<std::pair<int64_t, uint64_t>, uint32_t>>& ranked,
                       std::map<uint32_t, std::vector<Cand>>& calls_of, size_t inner, Launching&& launching) {
  const bool inner_is_model_call = model_call_name(cx.code_name(ranked[inner].second));
  const Spans inner_spans = spans_of(calls_of[ranked[inner].second]);
  for (size_t k = 0; k < ranked.size(); ++k) {
    if (k == inner || ranked[k].first.second < 2 || !generating_name(cx.code_name(ranked[k].second))) continue;
    const auto& outer = calls_of[ranked[k].second];
    if (!launching(outer) || !holds_token_calls(spans_of(outer), inner_spans)) continue;
    if (inner_is_model_call || token_call_inside(cx, ranked, calls_of, k)) return k;
  }
  return inner;
}

// The step's calls made on an event loop: each replaced by the coroutine run holding it (loop_steps.hpp).
void to_loop_callbacks(PythonStep& py, const CoroutineActivity& co) {
  auto& v = py.instances;
  std::sort(v.begin(), v.end(), [](const Cand& x, const Cand& y) { return x.start < y.start; });
  std::vector<Cand> outer;  // recursive calls: the outermost only
  for (const Cand& c : v)
    if (outer.empty() || c.start >= outer.back().end) outer.push_back(c);
  const Spans spans = spans_of(outer);
  const std::vector<LoopStep> runs = enclosing_coroutine_runs(spans, co.runs);
  if (runs.empty()) return;
  py.inner_code = py.code;
  for (const LoopStep& r : runs)
    if (r.code) py.loop_code = r.code;
  for (size_t i = 0; i < outer.size(); ++i) {
    outer[i].start = runs[i].start;
    outer[i].end = runs[i].end;
    if (runs[i].code) outer[i].name = 0x80000000u | runs[i].code;
  }
  v = std::move(outer);
}

PythonStep python_step(const Context& cx, const Ingested& in, uint32_t thread, const CoroutineActivity& co,
                       uint32_t only = 0) {
  constexpr size_t kCandidates = 8;
  // Calls from which a function gives statistics of its own: a median, a p90 and a warm-up to leave out.
  constexpr uint64_t kMinRepeats = 8;
  PythonStep out;
  if (thread >= in.ts.size()) return out;
  const auto& shallow = in.ts[thread].shallow_py;
  std::vector<std::pair<std::pair<int64_t, uint64_t>, uint32_t>> ranked;  // ((total, count), code)
  // A wait point (Queue.get, Event.wait, a selector's select) repeats once per step too, but it is where the step
  // waits, never the step.
  // A coroutine's records are its runs between awaits, not calls: never a step candidate (its runs may become the
  // steps below, as the callbacks holding the candidate found).
  const auto& coroutines = in.ts[thread].coroutine_codes;
  shallow.for_each([&](uint64_t code, const std::pair<uint64_t, int64_t>& c) {
    if (c.first >= 2 && !cx.wait_point(uint32_t(code)) && (!only || code == only) && !coroutines.find(code))
      ranked.push_back({{c.second, c.first}, uint32_t(code)});
  });
  if (ranked.empty()) return out;
  std::sort(ranked.begin(), ranked.end(), [](auto& x, auto& y) {  // ties: lower code (the map has no order)
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  if (ranked.size() > kCandidates) ranked.resize(kCandidates);
  std::map<uint32_t, std::vector<Cand>> calls_of;
  for (auto& [score, code] : ranked) calls_of[code];
  CallsOf visitor{cx.clock, calls_of};
  for (const auto& c : cx.r.event_chunks()) {  // one more pass over that thread's chunks (only in this fallback)
    if (c.thread_id != thread) continue;
    try {
      dump::visit_records(cx.r, c, visitor);
    } catch (const dump::DumpError&) {  // reported by pass 1
    }
  }
  std::vector<int64_t> launches;  // the thread's CUDA calls, by start
  for (const ApiOp& x : in.apis)
    if (x.thread == std::min<uint32_t>(thread, 0xffff)) launches.push_back(x.start);
  std::sort(launches.begin(), launches.end());
  auto launching = [&](const std::vector<Cand>& v) {
    size_t with = 0;
    for (const Cand& c : v) {
      auto it = std::lower_bound(launches.begin(), launches.end(), c.start);
      with += it != launches.end() && *it < c.end;
    }
    return with * 2 >= v.size();
  };
  size_t pick = 0;
  if (!launches.empty())
    for (size_t k = 0; k < ranked.size(); ++k)
      if (launching(calls_of[ranked[k].second])) { pick = k; break; }
  // A function called a few times that covers the run is an outer loop (a warm-up loop, then a timed one), and a
  // few steps give no statistics: a launching candidate repeated kMinRepeats times or more that covers at least
  // half as much is the step instead (the model's call inside that loop).
  if (!launches.empty() && ranked[pick].first.second < kMinRepeats)
    for (size_t k = 0; k < ranked.size(); ++k)
      if (ranked[k].first.second >= kMinRepeats && ranked[k].first.first * 2 >= ranked[pick].first.first &&
          launching(calls_of[ranked[k].second])) {
        pick = k;
        break;
      }
  if (only && (launches.empty() || !launching(calls_of[ranked[pick].second]))) return out;  // a step launches GPU work
  // A per-token forward inside a generate() called a few times: the step the user means is the generate call.
  if (!only && !launches.empty()) {
    if (const size_t g = generation_call(cx, ranked, calls_of, pick, launching); g != pick) {
      out.token_code = model_call_name(cx.code_name(ranked[pick].second)) ? ranked[pick].second
                                                                           : token_call_inside(cx, ranked, calls_of, g);
      pick = g;
    } else {
      out.token_code = token_call_inside(cx, ranked, calls_of, pick);
    }
  }
  out.code = ranked[pick].second;
  out.total = ranked[pick].first.first;
  out.instances = std::move(calls_of[out.code]);
  if (!only && co.found && co.loop_thread == thread && !out.token_code) to_loop_callbacks(out, co);
  if (!launches.empty() && !out.token_code && !out.loop_code) to_iterations(out);
  return out;
}

// No range and no Python: a plain C++ loop; its iterations, each ending at the blocking call (a sync or a
// read-back) the loop makes once per iteration (sync_iterations.hpp).
void take_sync_iterations(const Context& cx, const Ingested& in, uint32_t thread, StepsFound& a, std::vector<Cand>& steps) {
  std::vector<CallView> calls;
  for (const ApiOp& x : in.apis)
    if (x.thread == std::min<uint32_t>(thread, 0xffff)) calls.push_back({x.start, x.end(), x.name, x.kind});
  std::sort(calls.begin(), calls.end(), [](const CallView& x, const CallView& y) { return x.start < y.start; });
  const SyncIterations it = sync_iterations(calls);
  if (it.spans.empty()) return;
  for (const auto& s : it.spans) steps.push_back({thread, it.boundary_name, s.start, s.end});
  const std::string sync = cx.name_of(it.boundary_name);
  a.stats.name = "loop iterations ending at " + sync;
  a.stats.detected = true;
  a.warnings.push_back("no range and no Python functions: the steps are the loop iterations of the launching thread, "
                       "each ending at a " + sync + (it.period > 1 ? " (the last of the " + std::to_string(it.period) +
                       " blocking calls each iteration makes)" : std::string()) + "; wrap each step in ISCOPE_RANGE(\"step\") "
                       "or pass --step to choose");
}

// The thread that makes the most CUDA calls: it runs the step. Python calls and ranges only decide between threads
// that make as many (none at all: a CPU-only program, whose busiest Python thread is taken). A producer or pool
// thread running a traced tokenizer records far more Python calls than the step thread, and once outweighed it.
// A repeated Python function named `step` (its qualified name's last part: `worker_a.<locals>.step`,
// `Server.step`) that launches GPU work on its thread is the step, whichever thread makes the most CUDA calls: the
// name the `step` setting and these pages use, as for a range named step. Two inference threads sharing a model
// each make CUDA calls, and the busier one is not always the one the program times. (thread, code), or (0, 0).
std::pair<uint32_t, uint32_t> step_named_function(const Context& cx, const Ingested& in) {
  std::pair<uint32_t, uint32_t> best{0, 0};
  int64_t most = -1;
  for (uint32_t t = 0; t < in.ts.size(); ++t) {
    if (!in.ts[t].apis) continue;
    in.ts[t].shallow_py.for_each([&](uint64_t code, const std::pair<uint64_t, int64_t>& c) {
      if (c.first < 2 || c.second <= most) return;
      const std::string q = cx.code_name(uint32_t(code));
      if (q == "step" || (q.size() > 5 && q.compare(q.size() - 5, 5, ".step") == 0)) {
        most = c.second;
        best = {t, uint32_t(code)};
      }
    });
  }
  return best;
}

uint32_t launching_thread(const Ingested& in) {
  uint32_t best = 0;
  std::pair<uint64_t, uint64_t> most{0, 0};
  for (uint32_t t = 0; t < in.ts.size(); ++t) {
    const std::pair<uint64_t, uint64_t> score{in.ts[t].apis, in.ts[t].py_calls + in.ts[t].ranges};
    if (score > most) {
      most = score;
      best = t;
    }
  }
  return best;
}

struct RangeStep {
  uint32_t name = 0, thread = 0;  ///< name: string id, with kNvtxCand for an NVTX range
  int64_t total = -1;             ///< time its instances cover on that thread; -1: nothing repeats
  uint64_t count = 0;
};

// The step among the top-level ranges (NVTX ones when `nvtx`), per (name, thread): a step runs on one thread, so a
// name that worker threads repeat ("preprocess" on a pool of four) is not made the step by adding up its threads.
// A range named "step" that repeats on a thread is the step (the name the `step` setting and the docs use).
// Otherwise the candidates by time covered, the first whose instances hold a CUDA call of their thread in at least
// half of them (as python_step): a range that launches no GPU work describes a part or a worker's job.
RangeStep detected_range(const Context& cx, const Ingested& in, bool nvtx) {
  std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, int64_t>> by;  // (name, thread) -> (count, total)
  for (const Cand& c : in.top)
    if (bool(c.name & kNvtxCand) == nvtx) {
      auto& x = by[{c.name, c.thread}];
      ++x.first;
      x.second += c.end - c.start;
    }
  std::vector<RangeStep> ranked;
  for (auto& [k, x] : by)
    if (x.first >= 2) ranked.push_back({k.first, k.second, x.second, x.first});
  if (ranked.empty()) return {};
  std::stable_sort(ranked.begin(), ranked.end(), [](const RangeStep& a, const RangeStep& b) {
    return std::make_pair(a.total, a.count) > std::make_pair(b.total, b.count);
  });
  if (!nvtx)
    for (const RangeStep& r : ranked)
      if (cx.name_of(r.name) == "step") return r;
  std::map<uint32_t, std::vector<int64_t>> launches;  // thread -> its CUDA calls' starts
  for (const ApiOp& x : in.apis) launches[x.thread].push_back(x.start);
  if (launches.empty()) return ranked.front();
  for (auto& [t, v] : launches) std::sort(v.begin(), v.end());
  for (const RangeStep& r : ranked) {
    auto it = launches.find(std::min<uint32_t>(r.thread, 0xffff));
    if (it == launches.end()) continue;
    size_t with = 0;
    for (const Cand& c : in.top) {
      if (c.name != r.name || c.thread != r.thread) continue;
      auto at = std::lower_bound(it->second.begin(), it->second.end(), c.start);
      with += at != it->second.end() && *at < c.end;
    }
    if (with * 2 >= r.count) return r;
  }
  return ranked.front();
}

// Why the Python function's calls (or what holds them) are the steps, in the words of the step line and the warning.
std::string python_step_because(const Context& cx, const PythonStep& py, const std::string& name) {
  if (py.token_code)
    return "the calls of '" + name + "': each holds the model's per-token call '" + cx.code_name(py.token_code) +
           "' once per token, so a step is one generation call, not one token";
  if (py.loop_code)
    return "the event loop's callbacks that run '" + cx.code_name(py.inner_code) + "': each run of the coroutine '" + name +
           "' from its resumption to its next await (building the batch, the model, the results), not the awaits between";
  return std::string("the ") + (py.iterations ? "loop iterations around the calls" : "calls") + " of the Python function '" +
         name + "' (repeated, launching GPU work, covering the most time" +
         (py.iterations ? "; over a tenth of the loop's time is spent outside it, so each step runs from one call to the next"
                        : "") + ")";
}

void detect_steps(const Context& cx, const Ingested& in, const CoroutineActivity& co, StepsFound& a,
                  std::vector<Cand>& steps) {
  const auto& top = in.top;
  // The repeated top-level range covering the most time on one thread (detected_range). The program's own ISCOPE
  // ranges come first; NVTX ranges may be a library's (CUB wraps each scan in one), so one only counts as the step
  // when it covers more time than the repeated Python function below would.
  const RangeStep own = detected_range(cx, in, false), nvtx = detected_range(cx, in, true);
  const uint32_t best = own.name, best_nvtx = nvtx.name;
  const std::pair<int64_t, uint64_t> best_score{own.total, own.count}, nvtx_score{nvtx.total, nvtx.count};
  auto take_range = [&](uint32_t n) {
    const uint32_t on = n == best ? own.thread : nvtx.thread;
    for (auto& c : top)
      if (c.name == n && c.thread == on) steps.push_back(c);
    a.stats.name = cx.name_of(n & ~kNvtxCand);
    a.stats.detected = true;
  };
  if (best_score.first >= 0) {
    take_range(best);
  } else {
    // An unmodified program (no ranges): the repeated shallow Python function covering the most time on
    // the thread that makes the most CUDA calls, e.g. the body of the serving loop.
    uint32_t launcher_thread = launching_thread(in);
    PythonStep py;
    if (const auto [t, code] = step_named_function(cx, in); code) {
      py = python_step(cx, in, t, co, code);
      if (py.total >= 0) launcher_thread = t;
    }
    if (py.total < 0) py = python_step(cx, in, launcher_thread, co);
    if (nvtx_score.first >= 0 && nvtx_score.first >= py.total) {
      take_range(best_nvtx);
    } else if (py.total < 0) {
      take_sync_iterations(cx, in, launcher_thread, a, steps);
    } else {
      steps.insert(steps.end(), py.instances.begin(), py.instances.end());
      a.stats.name = cx.code_name(py.loop_code ? py.loop_code : py.code);
      a.stats.detected = true;
      a.stats.chosen_because = python_step_because(cx, py, a.stats.name);
      a.warnings.push_back("no repeated top-level range: the steps are " + a.stats.chosen_because +
                           "; mark steps with inferscope_py.scope(\"step\") or pass --step to choose");
    }
  }
}

// The step's instances: asked for or detected, on one thread (the one with the most instances), no overlaps.
std::vector<Cand> step_instances(const Context& cx, const Ingested& in, const CoroutineActivity& co, StepsFound& a) {
  const auto& opt = cx.opt;
  std::vector<Cand> steps;
  auto cand_name = [&](const Cand& c) {
    return (c.name & 0x80000000u) ? cx.code_name(c.name & 0x7fffffffu) : cx.name_of(c.name & ~kNvtxCand);
  };
  if (!opt.step.empty()) {
    steps = in.asked;
    a.stats.name = opt.step;
    if (steps.empty()) throw UnknownStep(unknown_step_message(cx.r.path(), opt.step, step_candidates(cx, in)));
  } else {
    detect_steps(cx, in, co, a, steps);
  }
  if (!steps.empty()) {  // one thread (the one with the most instances), no overlaps
    std::map<uint32_t, size_t> per_thread;
    for (auto& c : steps) ++per_thread[c.thread];
    uint32_t th = std::max_element(per_thread.begin(), per_thread.end(),
                                   [](auto& x, auto& y) { return x.second < y.second; })->first;
    std::vector<Cand> v;
    for (auto& c : steps)
      if (c.thread == th) v.push_back(c);
    std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; });
    steps.clear();
    for (auto& c : v)
      if (steps.empty() || c.start >= steps.back().end) steps.push_back(c);
    if (a.stats.name.empty()) a.stats.name = cand_name(steps.front());
  }
  return steps;
}

// The application thread with the most CUDA calls (or records): it carries the "step" when there are none.
uint32_t busiest_thread(const Context& cx, const Ingested& in) {
  const auto& ts = in.ts;
  uint32_t step_thread = 0;
  std::pair<uint64_t, uint64_t> best{0, 0};
  for (uint32_t t = 0; t < ts.size(); ++t) {
    if (!ts[t].seen) continue;
    auto it = cx.r.threads().find(t);
    if (it != cx.r.threads().end() && it->second.is_channel()) continue;
    const std::pair<uint64_t, uint64_t> score{ts[t].apis, ts[t].py_calls + ts[t].ranges + 1};  // as launching_thread
    if (score > best) { best = score; step_thread = t; }
  }
  return step_thread;
}

// No steps: the whole trace is one, on the application thread with the most CUDA calls (or records).
Cand whole_trace_step(const Context& cx, const Ingested& in, StepsFound& a) {
  const int64_t t_first = in.t_first, t_last = in.t_last;
  const uint32_t step_thread = busiest_thread(cx, in);
  a.stats.name = "(whole trace)";
  a.stats.detected = false;
  if (cx.opt.step.empty())
    a.warnings.push_back("no repeated top-level range or scope was found: the whole trace (" +
                         std::to_string(in.facts.trace_ms) + " ms) is analysed as one step; wrap each inference step in "
                         "ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\") for per-step statistics");
  return {step_thread, 0, t_first, std::max(t_last, t_first + 1)};
}

// Whether the host ran ahead of the GPU over the steady steps (gpu_pacing.hpp): a.stats' pace and a warning.
void note_gpu_pacing(const Ingested& in, const StepSet& ss, const StepSelection& sel, StepsFound& a) {
  std::vector<StepWindow> steady;
  for (size_t i = sel.warmup; i < ss.steps.size(); ++i) steady.push_back({ss.steps[i].start, ss.steps[i].end});
  std::vector<LaunchAt> launches;
  for (const ApiOp& x : in.apis)
    if (x.thread == std::min<uint32_t>(ss.step_thread, 0xffff) && x.corr) launches.push_back({x.start, x.corr});
  std::vector<GpuEnd> gpu;
  gpu.reserve(in.gpu.size());
  for (const GpuOp& g : in.gpu)
    if (g.corr) gpu.push_back({g.corr, g.end()});
  const GpuPacing p = gpu_pacing(steady, std::move(launches), gpu);
  a.stats.gpu_paced_ms = p.paced_ns / 1e6;
  for (double v : p.periods_ns) a.stats.completion_periods_ms.push_back(v / 1e6);
  if (!p.host_ahead) return;
  a.stats.host_ahead = true;
  auto ms3 = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f ms", v);
    return std::string(b);
  };
  a.warnings.push_back("the host ran ahead of the GPU: a step's GPU work completed " + ms3(p.median_lag_ns / 1e6) +
                       " after its range ended (median), more than a step later, so the step durations (" +
                       ms3(a.stats.p50_ms) + " median) measure the host, not the step's cost; the GPU completed one "
                       "step every " + ms3(a.stats.gpu_paced_ms) + " (iscope-diff compares that pace)");
}

// The step policy over ss.steps (the selection, the statistics) and the representative step.
void select_steps_of(const Context& cx, const Ingested& in, StepSet& ss) {
  StepsFound& a = ss.found;
  StepSelection& sel = ss.selection;
  const auto& steps = ss.steps;
  const bool whole = ss.whole;
  const int64_t t_first = in.t_first;
  auto rel = [&](int64_t ns) { return ms(double(ns - t_first)); };
  std::vector<double> durs, starts_ms;
  for (auto& c : steps) {
    durs.push_back(double(c.end - c.start));
    starts_ms.push_back(rel(c.start));
  }
  // Step policy: warm-up (asked for, or detected) apart from the steady steps; the statistics, the breakdown
  // and the rules describe the steady state.
  {
    StepPolicyInput pin{durs, one_time_cost_steps(steps, in.apis, ss.step_thread)};
    sel = whole ? StepSelection{0, {true}, {}, durs.front(), 0, false, "the whole trace is one step"}
                        : select_steps(pin, {cx.opt.skip_steps});
    // Never a silent clamp: the note says how many were asked for and how many the run has.
    if (!whole && sel.skipped_fewer_than_asked) a.warnings.push_back(sel.reason);
    if (whole) fill_whole_trace_stats(a.stats, durs.front());
    else detail::fill_step_stats(a.stats, durs, sel, starts_ms);
    a.end_to_end_ms = a.stats.alike ? a.stats.p50_ms : a.stats.mean_ms;
    if (!whole) note_gpu_pacing(in, ss, sel, a);
  }
  // Representative step: the steady step closest to the median; with two modes, to the slow one's (where the
  // step waits: what a reader of the timeline has come to see).
  size_t rep = sel.warmup;
  {
    const double med = sel.modes.two ? sel.modes.slow_median_ns : sel.steady_median_ns;
    double bestd = 1e300;
    for (size_t i = sel.warmup; i < durs.size(); ++i)
      if (std::fabs(durs[i] - med) < bestd) { bestd = std::fabs(durs[i] - med); rep = i; }
  }
  ss.rep = rep;
  ss.rep_s = steps[rep].start;
  ss.rep_e = steps[rep].end;
  a.representative = {uint32_t(rep), rel(ss.rep_s), ms(double(ss.rep_e - ss.rep_s))};
  ss.steps_s = steps[sel.warmup].start;  // the steady steps
  ss.steps_e = steps.back().end;
}

// A sampled dump (docs/sampled-mode.md): the steps wholly inside a full window; a step cut by a window's edge,
// and one kept only as ranges (a slow step's neighbours), has no GPU detail to describe. With none (timed windows
// and no step range), each full window is one step: the time between windows holds no data at all.
void keep_window_steps(const Context& cx, const Ingested& in, StepsFound& a, std::vector<Cand>& steps) {
  const auto windows = full_windows_ns(cx);
  if (windows.empty()) return;
  std::erase_if(steps, [&](const Cand& c) { return !inside_full_window(windows, c.start, c.end); });
  if (!steps.empty()) return;
  const uint32_t thread = busiest_thread(cx, in);
  for (auto& [b, e] : windows) steps.push_back({thread, 0, b, std::max(e, b + 1)});
  a.stats.name = "(sampled windows)";
  a.stats.detected = false;
  a.warnings.push_back("sampled run without steps in its windows: each window of full detail is analysed as one step; "
                       "wrap each inference step in ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\") for "
                       "windows counted in steps");
}

}  // namespace

StepSet find_steps(const Context& cx, const Ingested& in, const CoroutineActivity& co) {
  StepSet ss;
  StepsFound& a = ss.found;
  ss.steps = step_instances(cx, in, co, a);
  ss.detection_warnings = a.warnings.size();
  a.stats.candidates = step_candidates(cx, in, a.stats.name);
  if (!ss.steps.empty() && (ss.steps.front().name & 0x80000000u)) ss.step_code = ss.steps.front().name & 0x7fffffffu;
  if (cx.r.is_sampled()) keep_window_steps(cx, in, a, ss.steps);
  ss.whole = ss.steps.empty();
  for (const Cand& c : ss.steps) a.stats.spans.push_back({c.start, c.end, c.thread});
  if (ss.whole) ss.steps.push_back(whole_trace_step(cx, in, a));
  ss.step_thread = ss.steps.front().thread;
  {
    auto it = cx.r.threads().find(ss.step_thread);
    ss.step_thread_name = it != cx.r.threads().end() && !it->second.name.empty() ? it->second.name
                                                                                 : "thread " + std::to_string(ss.step_thread);
  }
  select_steps_of(cx, in, ss);
  return ss;
}

StepSet batch_cycles(const Context& cx, const Ingested& in, const StepSet& batch, const std::vector<int64_t>& first_queued) {
  StepSet ss;
  ss.step_thread = batch.step_thread;
  ss.step_thread_name = batch.step_thread_name;
  ss.step_code = batch.step_code;
  StepStats& st = ss.found.stats;
  st.name = batch.found.stats.name;
  st.detected = batch.found.stats.detected;
  st.candidates = batch.found.stats.candidates;
  int64_t prev_end = std::numeric_limits<int64_t>::min();
  for (size_t k = 0; k < batch.steps.size(); ++k) {
    Cand c = batch.steps[k];
    if (k < first_queued.size() && first_queued[k] >= 0) c.start = std::min(c.start, std::max(prev_end, first_queued[k]));
    prev_end = batch.steps[k].end;
    ss.steps.push_back(c);
    st.spans.push_back({c.start, c.end, c.thread});
  }
  char callback[64];
  std::snprintf(callback, sizeof callback, "%.3f ms", batch.found.stats.p50_ms);
  const std::string before = batch.found.stats.chosen_because;
  st.chosen_because = "the batch cycles of the coroutine '" + st.name + "': each from the moment its first request began "
                      "waiting for it (or the previous batch ended, if later) to the end of its batch callback, so the "
                      "batching window and the batch, as a batcher's own timer counts them (the callback alone: p50 " +
                      callback + ")";
  for (size_t i = 0; i < batch.detection_warnings && i < batch.found.warnings.size(); ++i) {
    std::string w = batch.found.warnings[i];
    if (const size_t at = before.empty() ? std::string::npos : w.find(before); at != std::string::npos)
      w.replace(at, before.size(), st.chosen_because);
    ss.found.warnings.push_back(std::move(w));
  }
  ss.detection_warnings = ss.found.warnings.size();
  select_steps_of(cx, in, ss);
  return ss;
}

}  // namespace inferscope::analyze::detail
