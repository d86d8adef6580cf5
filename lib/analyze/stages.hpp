// The analyzer's stages (docs/analysis.md, "Analyzer stages") and what they pass along: internal to
// lib/analyze, not a public interface. analyze_dump (analyzer.cpp) runs them in order; each stage takes the
// typed results of the stages before it (const, or by value where it refines them) and returns its own
// (stage_results.hpp); none writes into the Analysis, which analyze_dump assembles from the results.
#pragma once

#include "analyze/analyzer.hpp"
#include "analyze/host_state.hpp"
#include "analyze/model.hpp"
#include "analyze/serving/coroutines.hpp"
#include "analyze/stage_results.hpp"
#include "analyze/duration_stats.hpp"
#include "analyze/waits/waits.hpp"
#include "analyze/support/flat_map.hpp"
#include "analyze/support/run_parallel.hpp"
#include "analyze/support/slab.hpp"
#include "dump/clock_model.hpp"
#include "dump/visit.hpp"

#include <inferscope/wait_points.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferscope::analyze::detail {

// ---------------------------------------------------------------- shared helpers
inline uint32_t sat32(int64_t v) { return v <= 0 ? 0 : v >= int64_t(UINT32_MAX) ? UINT32_MAX : uint32_t(v); }
/// A GPU ordinal as GpuOp keeps it (saturating at 255).
inline uint8_t device_of(uint32_t device) { return device > 255 ? uint8_t(255) : uint8_t(device); }
inline double ms(double ns) { return ns / 1e6; }

inline const char* memory_name(uint8_t k) { return memory_kind_name(static_cast<MemoryKind>(k)); }

// Self time like SelfTimer, plus what joining two workers' halves of one thread needs: per nesting level, the
// first frame that read that level's children sum (whose self time misses the children that arrived in the
// previous worker's part), and whether the level was reset.
struct SelfTrack {
  struct First {
    uint32_t target = 0;  // where its self time went (a name or code id; kNone: nowhere)
    int64_t dur = 0, kids = 0;
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  SelfTimer<int64_t> timer;
  std::vector<uint8_t> consumed;  // by level
  std::vector<First> first;       // by level, valid where consumed
  int64_t self(uint32_t depth, int64_t dur, uint32_t target) {
    const size_t level = size_t(depth) + 1;
    if (consumed.size() <= level) {
      consumed.resize(level + 1, 0);
      first.resize(level + 1);
    }
    if (!consumed[level]) {
      consumed[level] = 1;
      first[level] = {target, dur, level < timer.children.size() ? timer.children[level] : 0};
    }
    return timer.self(depth, dur);
  }
  // Joins this part after `carried` (the children sums at its start): corrects the self time of the first
  // consumer of each level through apply(target, delta) and leaves in `carried` the sums at its end.
  template <class Apply>
  void join_after(std::vector<int64_t>& carried, Apply&& apply) const {
    for (size_t level = 0; level < carried.size(); ++level) {
      if (!carried[level] || level >= consumed.size() || !consumed[level]) continue;
      const First& f = first[level];
      const int64_t was = f.dur > f.kids ? f.dur - f.kids : 0;
      const int64_t kids = f.kids + carried[level];
      const int64_t is = f.dur > kids ? f.dur - kids : 0;
      if (is != was && f.target != kNone) apply(f.target, is - was);
    }
    const auto& end = timer.children;
    if (carried.size() < end.size()) carried.resize(end.size(), 0);
    for (size_t level = 0; level < carried.size(); ++level) {
      const int64_t local = level < end.size() ? end[level] : 0;
      carried[level] = (level < consumed.size() && consumed[level]) ? local : carried[level] + local;
    }
  }
};

// Splits the event chunks that `take` accepts into at most `parts` runs of consecutive chunks of about equal
// bytes: [begin, end) indexes into event_chunks(). Consecutive runs keep file order when results are joined.
template <class Take>
std::vector<std::pair<size_t, size_t>> split_chunks(const std::vector<dump::EventsChunkRef>& chunks, unsigned parts,
                                                    Take&& take) {
  uint64_t total = 0;
  size_t taken = 0;
  for (size_t i = 0; i < chunks.size(); ++i)
    if (take(i)) { total += chunks[i].length; ++taken; }
  parts = std::max(1u, std::min<unsigned>(parts, unsigned(std::max<size_t>(taken, 1))));
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  uint64_t acc = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!take(i)) continue;
    acc += chunks[i].length;
    if (out.size() + 1 < parts && acc >= total / parts * (out.size() + 1)) {
      out.emplace_back(begin, i + 1);
      begin = i + 1;
    }
  }
  out.emplace_back(begin, chunks.size());
  return out;
}

/// The attributor's per-kernel counters.
using FlatSums = FlatMap<int64_t>;

// Cand::name of a top-level NVTX range (string ids stay far below; Python code ids use bit 31).
constexpr uint32_t kNvtxCand = 0x40000000u;

// ApiOp::pad bits.
constexpr uint8_t kApiRehomed = 1;  ///< from a channel (CUPTI's API activity records), moved to its calling thread
constexpr uint8_t kApiDriver = 2;   ///< driver API domain
constexpr uint8_t kApiDropped = 4;  ///< a driver call inside a runtime call with the same correlation id

struct ThreadState {
  std::vector<uint32_t> pend_py, pend_range, pend_layer;  // indexes of calls waiting for their innermost frame
  SelfTrack range_self, py_self;
  double busy_range = 0, busy_py = 0;  // depth-0 frame time
  // Python calls at depth <= 3 by code: (count, total ns). A map, not a table indexed by code: a table grew to
  // the largest code id each thread called, threads x code ids (a 610 KB dump asked for 3.3 GB); the map holds
  // only the codes the thread called, so it is bounded by its records.
  FlatMap<std::pair<uint64_t, int64_t>> shallow_py;
  /// Codes that ran as coroutines on this thread (python_coroutine records), with their runs: a coroutine's
  /// records are its runs between awaits, not calls, so they are never step candidates.
  FlatMap<uint64_t> coroutine_codes;
  uint64_t coroutine_runs = 0;
  uint64_t apis = 0, py_calls = 0, ranges = 0;
  bool seen = false;
};

struct NameAgg {
  DurationStats d;
  int64_t self = 0;
};

struct Cand {
  uint32_t thread, name;
  int64_t start, end;
};

struct CopyKey {
  std::string dir, src, dst;
  bool operator<(const CopyKey& o) const { return std::tie(dir, src, dst) < std::tie(o.dir, o.src, o.dst); }
};
struct CopyAgg {
  uint64_t count = 0, bytes = 0;
  int64_t ns = 0;
};
/// One CUDA graph's launches traced at graph level: how many, and their GPU time.
struct GraphRuns {
  uint64_t count = 0;
  int64_t ns = 0;
};

struct CounterSample {
  uint32_t name;
  uint8_t scope;
  uint32_t target;
  int64_t ts;
  double v;
};

struct Progress {  // workers report finished chunks from several threads
  bool on = false;
  uint64_t total = 0, done = 0, next = 0;
  std::mutex mu;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  void step(uint64_t n, const char* what) {
    if (!on) return;
    std::lock_guard<std::mutex> lock(mu);
    done += n;
    if (!on || done < next) return;
    next = done + std::max<uint64_t>(total / 20, 1);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "iscope-analyze: %s %3.0f%% (%llu of %llu records, %.1f s)\n", what,
                 total ? 100.0 * double(done) / double(total) : 100.0, (unsigned long long)done,
                 (unsigned long long)total, s);
  }
};



// ---------------------------------------------------------------- what every stage reads
// INFERSCOPE_ANALYZE_TIMING=1 prints how long each phase took (for bench/analyze).
struct PhaseClock {
  bool on = std::getenv("INFERSCOPE_ANALYZE_TIMING") != nullptr;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  void operator()(const char* name) {
    if (!on) return;
    auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "iscope-analyze: phase %-22s %.3f s\n", name, std::chrono::duration<double>(now - t0).count());
    t0 = now;
  }
};

// What every stage reads: the dump, the options, the clock, all names, the worker count and the chunks. Built
// once before pass 1; the stages only read it (but for the progress lines and the phase clock).
struct Context {
  Context(const dump::DumpReader& reader, const AnalyzeOptions& options);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const dump::DumpReader& r;
  const AnalyzeOptions& opt;
  const dump::ClockModel clock;
  const size_t nstr;               ///< string ids are below this
  std::vector<std::string> sname;  ///< all names up front: the passes run on several threads and only read them
  std::vector<uint8_t> step_name;  ///< by string id: a step name asked for (--step)
  std::set<uint32_t> step_codes;   ///< Python code ids of a step function asked for (--step)
  unsigned W = 1;                  ///< worker threads
  const std::vector<dump::EventsChunkRef>& chunks;
  std::vector<uint8_t> chunk_channel;  ///< by chunk: a channel's (GPU activities, CUPTI records)
  uint32_t code_limit = 1u << 16;      ///< Python code ids at or above are counted as code 0
  std::unordered_map<uint32_t, const WaitPoint*> wait_points;  ///< code ids of wait points (wait_points.hpp)
  mutable Progress prog;
  mutable PhaseClock phase;

  const std::string& name_of(uint32_t id) const {
    static const std::string none;
    return id < nstr ? sname[id] : none;
  }
  std::string code_name(uint32_t code) const;
  /// The wait point (Queue.get, Event.set, ...) a Python code id is; nullptr for any other code.
  const WaitPoint* wait_point(uint32_t code) const {
    auto it = wait_points.find(code);
    return it == wait_points.end() ? nullptr : it->second;
  }
  /// "Model.generate (model.py:42)": the function and where it is, as a launcher label names it.
  std::string code_where(uint32_t code) const;
  bool is_channel(uint32_t t) const {
    auto it = r.threads().find(t);
    return it != r.threads().end() && it->second.is_channel();
  }
  static uint32_t thread_slot(uint32_t t) { return t >= (1u << 20) ? 0u : t; }  // never size a table by a nonsense id
  /// A range is a layer: attribute layer=1, or no attributes and a dotted module path. May throw DumpError.
  bool range_is_layer(const dump::RecordContext& rc, uint32_t nm, std::vector<int8_t>& dotted) const {
    if (rc.header.size > sizeof(RangeRecord) && rc.kind() == RecordKind::kRange) {
      for (auto& at : r.attributes(rc.bytes))
        if (at.key == "layer" && (at.i != 0 || at.type == AttrType::kString)) return true;
      return false;
    }
    if (nm >= dotted.size()) dotted.resize(size_t(nm) + 1, -1);
    if (dotted[nm] < 0) dotted[nm] = looks_like_module_path(name_of(nm)) ? 1 : 0;
    return dotted[nm] == 1;
  }
};

// ---------------------------------------------------------------- ingest (ingest.cpp)
// What pass 1 and its fix-ups leave: the calls and GPU activities in compact arrays (attributed to their
// innermost Python frame, range and layer), per-thread and per-name aggregates, counters and the trace span.
struct Ingested {
  std::vector<ThreadState> ts;     ///< by dump thread id
  std::vector<NameAgg> range_agg;  ///< by string id
  std::vector<NameAgg> py_agg;     ///< by code id (small, dense)
  std::vector<uint64_t> kernel_count;  ///< by kernel name id
  std::vector<int64_t> kernel_ns;
  std::map<uint32_t, GraphRuns> graph_runs;  ///< by graph id: launches traced at graph level
  Slab<ApiOp> apis;
  Slab<GpuOp> gpu;
  std::vector<Cand> top, asked;  ///< top-level ranges; instances of the step asked for
  std::map<CopyKey, CopyAgg> copies;
  std::map<std::pair<std::string, std::string>, AllocRow> allocs;  ///< (op, memory); the tables add the API time
  std::vector<std::pair<int64_t, bool>> mem_events;  // (ts, alloc)
  std::vector<CounterSample> counters;
  std::map<uint32_t, uint64_t> layer_count;
  std::map<uint32_t, double> layer_cpu;
  uint64_t marks = 0;
  int64_t t_first = std::numeric_limits<int64_t>::max(), t_last = std::numeric_limits<int64_t>::min();
  uint64_t clock_checks = 0, clock_bad = 0;
  double clock_worst_ns = 0;
  int64_t gpu_max_dur = 0;  // longest GPU activity (saturated like GpuOp::dur)
  uint32_t cmin = UINT32_MAX, cmax = 0;  // correlation ids of the calls
  IngestFacts facts;  ///< events, trace span, damage and warnings, for the Analysis
};

/// Pass 1 on cx.W workers joined in file order, then the fix-ups.
Ingested ingest(const Context& cx);

// ---------------------------------------------------------------- steps (steps.cpp)
// The step instances in time order on one thread (no overlaps), the representative one and the steady span.
struct StepSet {
  std::vector<Cand> steps;
  uint32_t step_thread = 0;
  uint32_t step_code = 0;  ///< the Python code whose calls (or coroutine runs) are the steps; 0: ranges or none
  size_t detection_warnings = 0;  ///< found.warnings[0, this): how the steps were found (the rest: the step policy's)
  bool whole = false;  ///< no steps: the whole trace is one
  size_t rep = 0;      ///< the representative step: the steady step closest to the median
  int64_t rep_s = 0, rep_e = 0;
  int64_t steps_s = 0, steps_e = 0;  ///< the steady steps' span: the first steady step's start to the last end
  StepSelection selection;       ///< which steps are warm-up, steady, slow outliers (step_policy.hpp)
  std::string step_thread_name;  ///< the step thread's name, or "thread N"
  StepsFound found;              ///< the statistics, headline and warnings for the Analysis
  // Index of the step containing [s,e], -1 if none; `step_hint` is the last step found (records mostly come
  // in time order: try it first).
  long step_of(int64_t s, int64_t e, size_t& step_hint) const {
    if (step_hint < steps.size() && s >= steps[step_hint].start && e <= steps[step_hint].end) return long(step_hint);
    auto it = std::upper_bound(steps.begin(), steps.end(), s, [](int64_t v, const Cand& c) { return v < c.start; });
    if (it == steps.begin()) return -1;
    --it;
    if (s >= it->start && e <= it->end) {
      step_hint = size_t(it - steps.begin());
      return long(step_hint);
    }
    return -1;
  }
};

/// Finds the steps and applies the step policy: the selection, the statistics and the representative step.
StepSet find_steps(const Context& cx, const Ingested& in, const CoroutineActivity& co);
/// An asyncio batcher's steps as its cycles (serving/loop_steps.hpp): each batch callback of `batch` extended back to
/// when its first request began waiting for it (`first_queued`, by step; -1: none), or to the previous batch's end
/// if later; the step policy and statistics again over them.
StepSet batch_cycles(const Context& cx, const Ingested& in, const StepSet& batch, const std::vector<int64_t>& first_queued);

// ---------------------------------------------------------------- sampled runs (sampling.cpp)
/// The options for a sampled dump: with no step asked for, the step range the runtime counted.
AnalyzeOptions sampled_options(const dump::DumpReader& r, const AnalyzeOptions& opt);
/// A sampled dump's full-detail windows, in ns (empty for any other dump).
std::vector<std::pair<int64_t, int64_t>> full_windows_ns(const Context& cx);
bool inside_full_window(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t start, int64_t end);
/// The windows, the run's coverage, the slow steps the runtime caught, each step's number in the run (empty,
/// `sampled` false, for a dump that was not sampled).
Sampling describe_sampling(const Context& cx, const Ingested& in, const StepSet& ss);

// ---------------------------------------------------------------- GPU order and launch index (launch.cpp)
/// Sorts the GPU activities by start (by every field, a total order) unless they already are, on W threads.
void order_gpu(Slab<GpuOp>& gpu, unsigned W);

/// The launch call of each correlation id (the latest call for a repeated id): a dense table over
/// [cmin, cmax] when the ids are dense enough, else a hash map.
struct LaunchIndex {
  const Slab<ApiOp>* apis = nullptr;
  std::vector<uint32_t> dense;
  std::unordered_map<uint32_t, uint32_t> sparse;
  bool use_dense = false;
  uint32_t cmin = UINT32_MAX, cmax = 0;
  const ApiOp* launch_of(uint32_t corr) const {
    if (!corr) return nullptr;
    if (use_dense) {
      if (corr < cmin || corr > cmax) return nullptr;
      uint32_t i = dense[corr - cmin];
      return i == UINT32_MAX ? nullptr : &(*apis)[i];
    }
    auto it = sparse.find(corr);
    return it == sparse.end() ? nullptr : &(*apis)[it->second];
  }
};
LaunchIndex index_launches(const Slab<ApiOp>& apis, uint32_t cmin, uint32_t cmax, unsigned W);

// Launcher labels: "python fn / range R / layer L", interned to small ids so hot loops compare integers.
// Not thread-safe: the attribution uses it beside pass 2 and the sweep, the tables after it.
class Launchers {
 public:
  Launchers(const Context& cx, const std::string& step_name) : cx(cx), step_name(step_name) {}
  uint32_t id(const ApiOp* api) {
    if (!api) return 0;
    auto key = std::make_tuple(api->py, api->range, api->layer);
    CacheSlot& slot = label_cache[(api->py * 0x9E3779B1u ^ api->range * 0x85EBCA77u ^ api->layer * 0xC2B2AE3Du) >> 20];
    if (slot.key == key) return slot.id;
    return intern(api, slot, key);
  }
  const std::string& label(const ApiOp* api) { return labels[id(api)]; }
  std::vector<std::string> labels{"-"};  ///< by id; 0: none

 private:
  // A direct-mapped cache in front of the map: launches keep coming from the same few contexts.
  struct CacheSlot {
    std::tuple<uint32_t, uint32_t, uint32_t> key{~0u, ~0u, ~0u};
    uint32_t id = 0;
  };
  uint32_t intern(const ApiOp* api, CacheSlot& slot, const std::tuple<uint32_t, uint32_t, uint32_t>& key);
  const Context& cx;
  const std::string& step_name;  ///< a.steps.name
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> label_ids;
  std::vector<CacheSlot> label_cache = std::vector<CacheSlot>(4096);
};

// ---------------------------------------------------------------- attribution and alignment (launch.cpp)
struct Attribution {
  FlatSums kernel_by_launcher;  // (kernel name << 32 | launcher id) -> ns
  std::vector<uint64_t> kernels_by_launcher;  // launcher id -> kernels launched
  std::vector<double> layer_gpu;              // by layer name id
  std::vector<uint64_t> layer_kernels;
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> copy_launchers;  // (desc, who) -> (bytes, n)
  int64_t max_gpu_dur = 0;
  Alignment alignment;
  std::string warning;  ///< the alignment is over budget; empty otherwise
};
/// Reads only the arrays (not the dump): runs beside pass 2.
Attribution attribute(const Context& cx, const Ingested& in, const LaunchIndex& li, Launchers& who);

// ---------------------------------------------------------------- pass 2 (pass2.cpp)
struct CpuSpan { uint32_t thread; int64_t s, e; uint32_t depth; std::string label; const char* cat; };
struct HostWork {
  std::vector<Span> cov;  // step thread: frames inside steps, merged
  std::vector<CpuSpan> rep_cpu;  ///< ranges and Python frames overlapping the representative step
  std::map<uint32_t, double> other_py_busy;  // other threads' outermost Python time during the steps span
  HostFrames frames;  ///< the step thread's host work by innermost frame, per steady step
};
/// Pass 2 on cx.W workers over the application threads' chunks, joined in file order like pass 1.
/// `n_py`: Python code ids counted (Ingested::py_agg's size).
HostWork measure_host(const Context& cx, const StepSet& ss, size_t n_py, uint64_t steady_steps);

// ---------------------------------------------------------------- per-step sweep (sweep.cpp)
/// The step thread's calls by start, the outermost where calls nest; picked out by blocks on W threads.
std::vector<const ApiOp*> step_calls(const Slab<ApiOp>& apis, uint32_t step_thread, unsigned W);
/// The step thread's first CUDA call (it creates the context), and whether a step holds it.
FirstCall first_call(const Context& cx, const StepSet& ss, const std::vector<const ApiOp*>& sapi);

struct Named {  // a sync or allocation call in a step: for the by-API tables, filled after the join in order
  const ApiOp* api;
  double d;
  bool alloc;
};
struct Sweep {
  size_t api_cursor = 0, cov_cursor = 0, gap_cursor = 0, gpu_cursor = 0;
  std::vector<uint32_t> carry;  // GPU activities still running at the next step's start
  std::vector<StepMetrics> steps;
  DurationStats kernel_stats;
  std::vector<Named> named;
};
/// Every step's StepMetrics, on up to W workers over runs of consecutive steps (in step order).
std::vector<Sweep> sweep_steps(const StepSet& ss, const std::vector<const ApiOp*>& sapi, const std::vector<Span>& cov,
                               const Slab<GpuOp>& gpu, int64_t gpu_max_dur, bool host_frames, unsigned W);

/// After the attribution: the steps in step order, the median kernel, and the top launchers of kernels, syncs,
/// allocations and copies (the breakdown's and the rules' inputs).
SweptSteps join_sweeps(const Context& cx, std::vector<Sweep>& sweeps, Launchers& who, const Attribution& at);

// ---------------------------------------------------------------- generation (generation*.cpp)
/// The step's token loop (generation.hpp), from the step thread's Python calls inside the first typical steps;
/// detected = false when the step is not one.
// ---------------------------------------------------------------- program facts (program_facts_stage.cpp)
/// What the trace shows of the program that suggestions may need (program_facts.hpp).
ProgramFacts find_program_facts(const Context& cx, const Ingested& in, const StepSet& ss, const std::vector<StepMetrics>& steps,
                                const std::vector<const ApiOp*>& sapi, const Tables& tables, const GenerationLoop& generation,
                                const std::map<std::string, std::string>& process);

GenerationLoop find_generation(const Context& cx, const Ingested& in, const StepSet& ss,
                               const std::vector<StepMetrics>& steps, const std::vector<const ApiOp*>& sapi,
                               const LaunchIndex& li);

// ---------------------------------------------------------------- counters (counters.cpp)
/// The practical PCIe peak (and its note) from the link in the process info, else assumed.
LinkPeak pcie_peak(const ProcessInfo& process);
/// A thread's cumulative per-thread counters as series: schedstat's run time when the dump has it (ns
/// resolution, on_cpu_exact), else user + system time (clock ticks); schedstat's run-queue wait beside. Samples
/// under its dump id and under its OS thread id both count (the sampler uses the latter until the thread binds).
ThreadCounters thread_counters(const Context& cx, const std::vector<CounterSample>& counters, uint32_t thread);
/// The per-thread samples by dump thread id, OS-thread-scope ones included, in one pass: thread_counters over
/// each thread's own list instead of the whole trace's.
std::unordered_map<uint32_t, std::vector<CounterSample>> thread_samples(const Context& cx,
                                                                        const std::vector<CounterSample>& counters);
/// The system counters over the steady steps: the evidence of contention and memory growth.
CounterEvidence read_counters(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw,
                              uint64_t steady_count);
/// The host-state split of each step's GPU idle waiting on the host (host_state.hpp), from the step thread's
/// and the other Python threads' counters.
HostSplitSteps split_host_state(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw,
                                std::vector<StepMetrics> swept);

// ---------------------------------------------------------------- waits (waits_stage.cpp; waits.hpp)
/// Whom the step thread waited on in the typical steps (docs/analysis.md, "Whom the step waits on"); `pid`: the
/// recording process's, to find its children's dumps.
WaitAttribution find_waits(const Context& cx, const Ingested& in, const StepSet& ss, const std::vector<const ApiOp*>& sapi,
                           const StepSelection& sel, const std::string& pid);
/// Corrects each step's GPU-idle causes from the attribution: the GIL's part of the blocked host time (the
/// host-state split alone spreads the other threads' CPU evenly over the step), and the blocked time in dispatch
/// gaps, which moves from the launch path to the host time as wait or GIL.
MeasuredSteps split_waits(HostSplitSteps steps, const WaitAttribution& waits);
/// The report's section (Analysis::waits) of the attribution, per typical step.
Waits describe_waits(const WaitAttribution& waits, const TypicalStep& typical);

// ---------------------------------------------------------------- tables (tables.cpp)
/// The kernels, python, ranges, copies, syncs, allocations, graph_launches, layers and threads tables.
Tables build_tables(const Context& cx, const Ingested& in, const Attribution& at, Launchers& who, const LinkPeak& link);

// ---------------------------------------------------------------- representative timeline (timeline.cpp)
/// The representative step's spans (a warning when they were cut: timeline_cut.hpp says which stay; a generation
/// loop's per-token calls, `token_function`, among the first).
Timeline build_timeline(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw, int64_t max_gpu_dur,
                        const std::string& token_function);
/// Each thread lane's scheduler states in the step [rep_s, rep_e) (TimelineLane::states; timeline_states.cpp),
/// from the dump's thread.state samples of its thread (dump thread id -> its lane).
void add_thread_states(const Context& cx, const Ingested& in, int64_t rep_s, int64_t rep_e,
                       const std::map<uint32_t, TimelineLane*>& lane_of_thread);

}  // namespace inferscope::analyze::detail
