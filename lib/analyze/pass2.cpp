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

// One worker: the application threads' ranges and Python frames in its run of chunks.
void read_host_part(const Context& cx, const StepSet& ss, const StepSelection& sel, size_t n_py, Part2& P) {
  const auto& r = cx.r;
  const auto& clock = cx.clock;
  const auto& chunks = cx.chunks;
  const auto& chunk_channel = cx.chunk_channel;
  const size_t nstr = cx.nstr;
  const auto& steps = ss.steps;
  const uint32_t step_thread = ss.step_thread;
  const int64_t steps_s = ss.steps_s, steps_e = ss.steps_e, rep_s = ss.rep_s, rep_e = ss.rep_e;
  auto add_to = [](std::vector<double>& v, uint32_t i, int64_t x) {
    if (i >= v.size()) v.resize(size_t(i) + 1, 0.0);
    v[i] += double(x);
  };
  auto fn = [&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    bool range = h.kind == RecordKind::kRange || h.kind == RecordKind::kNvtxRange;
    if (!range && h.kind != RecordKind::kPyCall) return;
    auto rec = dump::load<RangeRecord>(p);  // PyCallRecord has the same layout
    int64_t s = clock.to_ns(rec.start), e = std::max(s, clock.to_ns(rec.end));
    if (thread == step_thread) {
      long st = ss.step_of(s, e, P.hint);
      if (st >= 0 && !sel.steady[size_t(st)]) st = -1;  // warm-up: reported apart
      bool is_step_itself = st >= 0 && s == steps[st].start && e == steps[st].end;
      const uint32_t target = range ? (rec.name < nstr ? rec.name : 0) : rec.name;
      const bool counted = st >= 0 && !is_step_itself && (range || rec.name < n_py);
      int64_t self = range ? P.range_self.self(h.aux, e - s, counted ? target : SelfTrack::kNone)
                           : P.py_self.self(h.aux, e - s, counted ? target : SelfTrack::kNone);
      if (st >= 0 && !is_step_itself) {
        P.host_frames = true;
        if (range) add_to(P.hot_range, target, self);
        else if (rec.name < n_py) add_to(P.hot_py, rec.name, self);
        while (!P.cov.empty() && P.cov.back().start >= s) P.cov.pop_back();
        if (!P.cov.empty() && P.cov.back().end >= s) P.cov.back().end = std::max(P.cov.back().end, e);
        else P.cov.push_back({s, e, uint32_t(st)});
      }
    } else if (!range && h.aux == 0 && e > steps_s && s < steps_e) {
      P.other_py_busy[thread] += double(std::min(e, steps_e) - std::max(s, steps_s));
    }
    if (e > rep_s && s < rep_e && e > s)
      P.rep_cpu.push_back({thread, s, e, h.aux, range ? cx.name_of(rec.name) : cx.code_name(rec.name), range ? "range" : "python"});
  };
  for (size_t c = P.begin; c < P.end; ++c) {
    if (chunk_channel[c]) continue;
    try {
      r.for_each_record_in(chunks[c], fn);
    } catch (const dump::DumpError&) {  // reported by pass 1
    }
    cx.prog.step(chunks[c].count, "attributing");
  }
}

}  // namespace

HostWork measure_host(const Context& cx, const StepSet& ss, size_t n_py, uint64_t steady_steps, Model& m) {
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
    read_host_part(cx, ss, m.selection, n_py, P);
  });
  std::vector<int64_t> carry_range, carry_py;
  for (auto& P : parts) {
    for (size_t i = 0; i < P.hot_range.size(); ++i) hot_range[i] += P.hot_range[i];
    for (size_t i = 0; i < P.hot_py.size(); ++i) hot_py[i] += P.hot_py[i];
    P.range_self.join_after(carry_range, [&](uint32_t nm, int64_t d) { hot_range[nm] += double(d); });
    P.py_self.join_after(carry_py, [&](uint32_t code, int64_t d) { hot_py[code] += double(d); });
    m.host_frames |= P.host_frames;
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
    if (hot_range[i] > 0) m.hot_host.emplace_back("range " + cx.name_of(i), hot_range[i]);
  for (uint32_t i = 0; i < hot_py.size(); ++i)
    if (hot_py[i] > 0) m.hot_host.emplace_back(cx.code_name(i), hot_py[i]);
  std::sort(m.hot_host.begin(), m.hot_host.end(),
            [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  if (m.hot_host.size() > 10) m.hot_host.resize(10);
  for (auto& [label, ns] : m.hot_host) ns /= double(std::max<uint64_t>(1, steady_steps));  // per steady step
  return hw;
}

}  // namespace inferscope::analyze::detail
