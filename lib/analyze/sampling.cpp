// Stage "sampling": what a sampled dump (mode: sampled) says about the run it sampled, for the analysis and the
// reports (docs/sampled-mode.md, "What the report says"): the step name the runtime counted, the full windows
// the steps are taken from, the coverage of the run, the slow steps the runtime caught (with, for a slow step
// kept as ranges only, the range that grew against its neighbours), and each analysed step's number in the run.
#include "analyze/stages.hpp"

#include <cmath>

namespace inferscope::analyze::detail {
namespace {

const char* reason_name(uint8_t r) {
  switch (static_cast<dump::WindowReason>(r)) {
    case dump::WindowReason::kPeriodic: return "periodic";
    case dump::WindowReason::kTimed: return "timed";
    case dump::WindowReason::kSlowStep: return "slow_step";
    case dump::WindowReason::kNeighbours: return "neighbours";
    case dump::WindowReason::kBaseline: return "baseline";
  }
  return "unknown";
}

bool inside(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t s, int64_t e) {
  for (auto& [b, en] : windows)
    if (s >= b && e <= en) return true;
  return false;
}

// A step's direct child ranges by name (ns), and its time outside them.
struct StepParts {
  int64_t start = 0, end = 0;
  uint32_t depth = 0;
  std::map<std::string, int64_t> children;
};

// A thread's ISCOPE ranges (NVTX ranges aside) inside [b, e], with their names and depths.
struct RangesWithin {
  struct R { std::string name; uint32_t depth; int64_t s, e; };
  const Context& cx;
  int64_t b, e;
  std::vector<R> ranges;
  void on(const RangeRecord& rec, const dump::RecordContext& rc) {
    if (rc.kind() != RecordKind::kRange) return;
    const int64_t s = cx.clock.to_ns(rec.start), en = cx.clock.to_ns(rec.end);
    if (s >= b && en <= e) ranges.push_back({cx.name_of(rec.name), rc.aux(), s, en});
  }
};

// The step ranges of `thread` inside [b, e], each with its direct children (ranges come at their end, children
// before their parent).
std::vector<StepParts> steps_with_children(const Context& cx, uint32_t thread, const std::string& step, int64_t b, int64_t e) {
  RangesWithin within{cx, b, e, {}};
  for (const auto& c : cx.r.event_chunks())
    if (c.thread_id == thread) dump::visit_records(cx.r, c, within);
  const auto& ranges = within.ranges;
  std::vector<StepParts> out;
  for (auto& x : ranges)
    if (x.name == step) out.push_back({x.s, x.e, x.depth, {}});
  for (auto& x : ranges)
    for (auto& st : out)
      if (x.depth == st.depth + 1 && x.s >= st.start && x.e <= st.end) st.children[x.name] += x.e - x.s;
  std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.start < y.start; });
  return out;
}

// The part of a slow step that grew most against its neighbours' mean: a direct child range, or its own time
// outside them. ("", 0) when the light window holds no neighbour.
std::pair<std::string, double> what_grew(const std::vector<StepParts>& steps, int64_t slow_start) {
  const StepParts* slow = nullptr;
  std::vector<const StepParts*> others;
  for (auto& s : steps) {
    if (s.start == slow_start) slow = &s;
    else others.push_back(&s);
  }
  if (!slow || others.empty()) return {"", 0};
  auto self = [](const StepParts& s) {
    int64_t kids = 0;
    for (auto& [n, d] : s.children) kids += d;
    return double(s.end - s.start - kids);
  };
  std::pair<std::string, double> best{"its own time outside its ranges", 0};
  double mean_self = 0;
  for (auto* o : others) mean_self += self(*o) / double(others.size());
  best.second = self(*slow) - mean_self;
  for (auto& [name, d] : slow->children) {
    double mean = 0;
    for (auto* o : others) mean += double(o->children.count(name) ? o->children.at(name) : 0) / double(others.size());
    if (double(d) - mean > best.second) best = {name, double(d) - mean};
  }
  return best;
}

SampledWindow window_of(const Context& cx, const dump::WindowEntry& w, int64_t t0) {
  SampledWindow o;
  o.index = w.index;
  o.reason = reason_name(w.reason);
  o.full = w.flags & dump::kWindowFull;
  o.open = w.flags & dump::kWindowOpen;
  o.pinned = w.flags & dump::kWindowPinned;
  o.start_ms = ms(double(cx.clock.to_ns(w.begin_ticks) - t0));
  o.end_ms = ms(double(cx.clock.to_ns(w.end_ticks) - t0));
  o.first_step = w.first_step;
  o.steps = w.steps;
  o.slow_steps = w.slow_steps;
  o.records = w.records;
  return o;
}

void coverage(const Context& cx, const dump::SamplingSummary& s, Sampling& out) {
  out.mode = cx.r.process_value("mode") == "adaptive" ? "adaptive" : "sampled";
  out.by_steps = s.flags & 1u;
  out.step_name = out.by_steps ? cx.r.string_at(s.step_name) : std::string();
  out.steps_seen = s.steps_seen;
  out.steps_in_windows = s.steps_in_windows;
  out.step_coverage_pct = s.steps_seen ? 100.0 * double(s.steps_in_windows) / double(s.steps_seen) : 0;
  out.run_ms = ms(double(cx.clock.to_ns(s.end_ticks) - cx.clock.to_ns(s.begin_ticks)));
  out.window_ms = ms(double(cx.clock.to_ns(s.begin_ticks + s.window_ticks) - cx.clock.to_ns(s.begin_ticks)));
  out.time_coverage_pct = out.run_ms > 0 ? 100.0 * out.window_ms / out.run_ms : 0;
  out.windows_opened = s.windows_opened;
  out.windows_dropped = s.windows_dropped;
  out.records_outside = s.records_outside;
  out.slow_steps_seen = s.slow_steps_seen;
  for (auto& d : cx.r.drops())
    if (d.reason.rfind("sample_window_", 0) == 0) out.records_dropped += d.records;
}

void slow_steps_seen(const Context& cx, const dump::SamplingData& d, int64_t t0, Sampling& out) {
  for (auto& e : d.slow_steps) {
    SlowStepSeen s;
    s.step = e.step;
    s.start_ms = ms(double(cx.clock.to_ns(e.start_ticks) - t0));
    s.duration_ms = ms(double(cx.clock.to_ns(e.end_ticks) - cx.clock.to_ns(e.start_ticks)));
    s.bound_ms = e.bound_us / 1e3;
    s.window = e.window;
    s.detail = (e.flags & 1u) ? "full" : e.window ? "ranges" : "none";
    if (s.detail == "ranges")
      for (auto& w : d.windows)
        if (w.index == e.window) {
          auto parts = steps_with_children(cx, e.thread_id, out.step_name, cx.clock.to_ns(w.begin_ticks),
                                           cx.clock.to_ns(w.end_ticks));
          std::tie(s.grew, s.grew_ms) = what_grew(parts, cx.clock.to_ns(e.start_ticks));
          s.grew_ms = ms(std::max(0.0, s.grew_ms));
        }
    out.slow_steps.push_back(std::move(s));
  }
}

// Each analysed step's number in the run: its window's first step plus its place among the window's steps.
void number_steps(const Context& cx, const dump::SamplingData& d, const StepSet& ss, Sampling& out) {
  out.run_step.assign(ss.steps.size(), -1);
  if (ss.whole || !out.by_steps) return;
  for (size_t k = 0; k < d.windows.size(); ++k) {
    const auto& w = d.windows[k];
    if (!(w.flags & dump::kWindowFull)) continue;
    const int64_t b = cx.clock.to_ns(w.begin_ticks), e = cx.clock.to_ns(w.end_ticks);
    int64_t n = 0;
    for (size_t i = 0; i < ss.steps.size(); ++i)
      if (ss.steps[i].start >= b && ss.steps[i].end <= e) {
        out.run_step[i] = int64_t(w.first_step) + n++;
        ++out.windows[k].steps_analyzed;
      }
  }
}

}  // namespace

AnalyzeOptions sampled_options(const dump::DumpReader& r, const AnalyzeOptions& opt) {
  AnalyzeOptions o = opt;
  if (o.step.empty() && r.sampling() && (r.sampling()->summary.flags & 1u))
    o.step = r.string_at(r.sampling()->summary.step_name);
  return o;
}

std::vector<std::pair<int64_t, int64_t>> full_windows_ns(const Context& cx) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!cx.r.sampling()) return out;
  for (auto& w : cx.r.sampling()->windows)
    if (w.flags & dump::kWindowFull) out.emplace_back(cx.clock.to_ns(w.begin_ticks), cx.clock.to_ns(w.end_ticks));
  return out;
}

bool inside_full_window(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t start, int64_t end) {
  return inside(windows, start, end);
}

Sampling describe_sampling(const Context& cx, const Ingested& in, const StepSet& ss) {
  Sampling out;
  if (!cx.r.sampling()) return out;
  const dump::SamplingData& d = *cx.r.sampling();
  out.sampled = true;
  coverage(cx, d.summary, out);
  for (auto& w : d.windows) out.windows.push_back(window_of(cx, w, in.t_first));
  out.windows_kept = static_cast<uint32_t>(d.windows.size());
  slow_steps_seen(cx, d, in.t_first, out);
  number_steps(cx, d, ss, out);
  return out;
}

}  // namespace inferscope::analyze::detail
