// Stage "pass 2": the application threads' frames again (cheap: the file is mapped), now that the steps are
// known: host work inside the steady steps (the step thread's frames, merged; self time by name), other
// threads' Python time, and the representative step's spans for the timeline.
#include "analyze/stages.hpp"

namespace inferscope::analyze::detail {
namespace {

// What one pass-2 worker gathers over its run of chunks.
struct Part2 {
  size_t begin = 0, end = 0;
  std::vector<Span> cov;
  std::vector<double> hot_range, hot_py;
  SelfTrack range_self, py_self;  // the step thread's
  std::vector<CpuSpan> rep_cpu;
  std::map<uint32_t, double> other_py_busy;
  bool host_frames = false;
  size_t hint = 0;
};

// Pass 2's visitor for one worker: the application threads' ranges and Python frames into its Part2.
class HostFrames {
 public:
  HostFrames(const Context& cx, const StepSet& ss, const StepSelection& sel, size_t n_py, Part2& P)
      : cx(cx), ss(ss), sel(sel), n_py(n_py), P(P) {}

  void on(const RangeRecord& rec, const dump::RecordContext& rc) { frame(rc, rec.name, rec.start, rec.end, true); }
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) { frame(rc, rec.code, rec.start, rec.end, false); }

 private:
  // `id`: a range's name (string id) or a Python call's code id.
  void frame(const dump::RecordContext& rc, uint32_t id, uint64_t start, uint64_t end, bool range) {
    const int64_t s = cx.clock.to_ns(start), e = std::max(s, cx.clock.to_ns(end));
    const uint32_t thread = rc.thread;
    if (thread == ss.step_thread) in_step_thread(rc.aux(), id, s, e, range);
    else if (!range && rc.aux() == 0 && e > ss.steps_s && s < ss.steps_e)
      P.other_py_busy[thread] += double(std::min(e, ss.steps_e) - std::max(s, ss.steps_s));
    if (e > ss.rep_s && s < ss.rep_e && e > s)
      P.rep_cpu.push_back(
          {thread, s, e, rc.aux(), range ? cx.name_of(id) : cx.code_name(id), range ? "range" : "python"});
  }
  // The step thread's frame: self time by name and the merged cover of host work, inside the steady steps.
  void in_step_thread(uint8_t depth, uint32_t id, int64_t s, int64_t e, bool range) {
    long st = ss.step_of(s, e, P.hint);
    if (st >= 0 && !sel.steady[size_t(st)]) st = -1;  // warm-up: reported apart
    const bool is_step_itself = st >= 0 && s == ss.steps[st].start && e == ss.steps[st].end;
    const uint32_t target = range ? (id < cx.nstr ? id : 0) : id;
    const bool counted = st >= 0 && !is_step_itself && (range || id < n_py);
    const int64_t self = range ? P.range_self.self(depth, e - s, counted ? target : SelfTrack::kNone)
                               : P.py_self.self(depth, e - s, counted ? target : SelfTrack::kNone);
    if (st < 0 || is_step_itself) return;
    P.host_frames = true;
    if (range) add_to(P.hot_range, target, self);
    else if (id < n_py) add_to(P.hot_py, id, self);
    while (!P.cov.empty() && P.cov.back().start >= s) P.cov.pop_back();
    if (!P.cov.empty() && P.cov.back().end >= s) P.cov.back().end = std::max(P.cov.back().end, e);
    else P.cov.push_back({s, e, uint32_t(st)});
  }
  static void add_to(std::vector<double>& v, uint32_t i, int64_t x) {
    if (i >= v.size()) v.resize(size_t(i) + 1, 0.0);
    v[i] += double(x);
  }

  const Context& cx;
  const StepSet& ss;
  const StepSelection& sel;
  const size_t n_py;
  Part2& P;
};

// The program's own Python code (HotFrame::user): not a model's forward (torch's modules, or the user's own
// forward, which a CUDA graph or torch.compile speeds up rather than a worker), not a file of an installed package
// or of the standard library (a path holding site-packages, dist-packages or lib/pythonX.Y).
bool is_user_code(const Context& cx, uint32_t code) {
  auto it = cx.r.code_table().find(code);
  if (it == cx.r.code_table().end()) return true;
  const std::string& q = it->second.qualname;
  const std::string& f = it->second.file;
  if (q == "forward" || (q.size() > 8 && q.compare(q.size() - 8, 8, ".forward") == 0)) return false;
  if (f.find("/site-packages/") != std::string::npos || f.find("/dist-packages/") != std::string::npos) return false;
  const size_t lib = f.find("/lib/python3");
  return lib == std::string::npos;
}

// One worker: the application threads' ranges and Python frames in its run of chunks.
void read_host_part(const Context& cx, const StepSet& ss, const StepSelection& sel, size_t n_py, Part2& P) {
  HostFrames frames(cx, ss, sel, n_py, P);
  for (size_t c = P.begin; c < P.end; ++c) {
    if (cx.chunk_channel[c]) continue;
    try {
      dump::visit_records(cx.r, cx.chunks[c], frames);
    } catch (const dump::DumpError&) {  // reported by pass 1
    }
    cx.prog.step(cx.chunks[c].count, "attributing");
  }
}

}  // namespace

HostWork measure_host(const Context& cx, const StepSet& ss, size_t n_py, uint64_t steady_steps) {
  const size_t nstr = cx.nstr;
  HostWork hw;
  auto& cov = hw.cov;
  std::vector<double> hot_range(nstr, 0.0), hot_py(n_py, 0.0);  // self ns in steps by name / code id
  auto runs = split_chunks(cx.r.event_chunks(), cx.W, [&](size_t i) { return !cx.chunk_channel[i]; });
  std::vector<Part2> parts(runs.size());
  cx.prog.done = cx.prog.next = 0;
  run_parallel(runs.size(), [&](size_t w) {
    Part2& P = parts[w];
    P.begin = runs[w].first;
    P.end = runs[w].second;
    read_host_part(cx, ss, ss.selection, n_py, P);
  });
  std::vector<int64_t> carry_range, carry_py;
  for (auto& P : parts) {
    for (size_t i = 0; i < P.hot_range.size(); ++i) hot_range[i] += P.hot_range[i];
    for (size_t i = 0; i < P.hot_py.size(); ++i) hot_py[i] += P.hot_py[i];
    P.range_self.join_after(carry_range, [&](uint32_t nm, int64_t d) { hot_range[nm] += double(d); });
    P.py_self.join_after(carry_py, [&](uint32_t code, int64_t d) { hot_py[code] += double(d); });
    hw.frames.visible |= P.host_frames;
    cov.insert(cov.end(), P.cov.begin(), P.cov.end());
    for (auto& x : P.rep_cpu) hw.rep_cpu.push_back(std::move(x));
    for (auto& [t, v] : P.other_py_busy) hw.other_py_busy[t] += v;
  }
  // Each run's list is the union of its frames (a thread's frames arrive in the order they end, so a parent
  // swallows its children); the union over runs merges where runs meet.
  std::sort(cov.begin(), cov.end(), [](auto& x, auto& y) { return x.start < y.start; });
  {
    size_t k = 0;
    for (size_t i = 0; i < cov.size(); ++i) {
      if (k && cov[k - 1].end >= cov[i].start) cov[k - 1].end = std::max(cov[k - 1].end, cov[i].end);
      else cov[k++] = cov[i];
    }
    cov.resize(k);
  }
  for (uint32_t i = 0; i < nstr; ++i)
    if (hot_range[i] > 0) hw.frames.hot.push_back({"range " + cx.name_of(i), hot_range[i], true});
  for (uint32_t i = 0; i < hot_py.size(); ++i)
    if (hot_py[i] > 0 && !cx.wait_point(i)) hw.frames.hot.push_back({cx.code_name(i), hot_py[i], is_user_code(cx, i)});
  std::sort(hw.frames.hot.begin(), hw.frames.hot.end(),
            [](auto& x, auto& y) { return x.ns != y.ns ? x.ns > y.ns : x.label < y.label; });
  if (hw.frames.hot.size() > 10) hw.frames.hot.resize(10);
  for (auto& h : hw.frames.hot) h.ns /= double(std::max<uint64_t>(1, steady_steps));  // per steady step
  return hw;
}

}  // namespace inferscope::analyze::detail
