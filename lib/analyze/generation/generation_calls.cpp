// Stage "generation", its part that reads the dump: the Python calls on the step thread inside typical steps spread
// over the run (one more pass over that thread's chunks), handed to token_function and measure_generation
// (generation.cpp).
#include "analyze/aggregate.hpp"
#include "analyze/generation/generation.hpp"
#include "analyze/stages.hpp"

namespace inferscope::analyze::detail {
namespace {

// The Python calls inside `windows` (by start, disjoint), at most kMaxCollectedCalls.
struct CallsInside {
  const dump::ClockModel& clock;
  const std::vector<Span>& windows;
  std::vector<CallSpan>& out;
  bool cut = false;
  int64_t cut_at = 0;  // the start of the first call not collected
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    if (cut) return;
    const int64_t s = clock.to_ns(rec.start), e = std::max(s, clock.to_ns(rec.end));
    auto it = std::upper_bound(windows.begin(), windows.end(), s, [](int64_t v, const Span& w) { return v < w.start; });
    if (it == windows.begin() || e > std::prev(it)->end) return;
    // The step's own call spans its window exactly: it is the step, not a call inside it.
    if (s == std::prev(it)->start && e == std::prev(it)->end) return;
    if (out.size() >= kMaxCollectedCalls) {
      cut = true;
      cut_at = s;
      return;
    }
    out.push_back({rec.code, rc.aux(), s, e});
  }
};

// kMaxGenerationSteps typical steps spread evenly over the run (all of them when there are no more), by start: the
// run's steps, not its first ones. A serving engine's first steps admit a prompt after another (a model call each)
// and would look like a token loop; its later steps make one batched call each.
std::vector<Span> measured_windows(const StepSet& ss, const std::vector<StepMetrics>& steps) {
  std::vector<Span> all;
  for (size_t i : typical_indexes(ss.selection))
    if (i < steps.size() && steps[i].dur > 0) all.push_back({steps[i].start, steps[i].start + steps[i].dur, uint32_t(i)});
  std::sort(all.begin(), all.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  if (all.size() <= kMaxGenerationSteps) return all;
  std::vector<Span> w;
  for (size_t k = 0; k < kMaxGenerationSteps; ++k) w.push_back(all[k * all.size() / kMaxGenerationSteps]);
  return w;
}

}  // namespace

GenerationLoop find_generation(const Context& cx, const Ingested& in, const StepSet& ss,
                               const std::vector<StepMetrics>& steps, const std::vector<const ApiOp*>& sapi,
                               const LaunchIndex& li) {
  const uint32_t thread = ss.step_thread;
  if (ss.whole || thread >= in.ts.size() || !in.ts[thread].py_calls || sapi.empty()) return {};
  std::vector<Span> windows = measured_windows(ss, steps);
  if (windows.empty()) return {};
  std::vector<CallSpan> calls;
  CallsInside visitor{cx.clock, windows, calls};
  for (const auto& c : cx.r.event_chunks()) {
    if (c.thread_id != thread) continue;
    try {
      dump::visit_records(cx.r, c, visitor);
    } catch (const dump::DumpError&) {  // reported by pass 1
    }
    if (visitor.cut) break;
  }
  // Past the cap, a step holds only its first calls, and its last token would take the GPU work of all the rest:
  // only the steps that ended before the first call left out are measured.
  if (visitor.cut) std::erase_if(windows, [&](const Span& w) { return w.end > visitor.cut_at; });
  if (windows.empty()) return {};
  std::vector<int64_t> launch_starts;
  for (const ApiOp* a : sapi)
    if (a->kind == kLaunch) launch_starts.push_back(a->start);
  std::optional<TokenFunction> tf = token_function(calls, windows, launch_starts,
                                                   [&](uint32_t code) { return cx.code_name(code); }, ss.found.stats.name);
  if (!tf) return {};
  GenerationLoop g = measure_generation(*tf, windows, sapi, {in.gpu.begin(), in.gpu.size()},
                                        [&li](uint32_t corr) { return li.launch_of(corr); }, thread);
  if (visitor.cut)
    g.notes.push_back("the Python calls inside the steps measured passed " + std::to_string(kMaxCollectedCalls) +
                      ": the steps after that point are left out");
  return g;
}

}  // namespace inferscope::analyze::detail
