// Stage "representative timeline": the representative step's spans by lane (threads, then GPU streams), tiny
// spans merged and the longest kept (docs/analysis.md section 8).
#include "analyze/stages.hpp"
#include "analyze/timeline_cut.hpp"

namespace inferscope::analyze::detail {
namespace {

using Lanes = std::map<std::string, TimelineLane>;

// Every span overlapping the step, clipped to it, in ms from its start; `lane_thread`: each thread lane's dump
// thread id.
Lanes collect_lanes(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw, int64_t max_gpu_dur,
                    std::map<std::string, uint32_t>& lane_thread) {
  const auto& r = cx.r;
  const auto& apis = in.apis;
  const auto& gpu = in.gpu;
  const auto& rep_cpu = hw.rep_cpu;
  const int64_t rep_s = ss.rep_s, rep_e = ss.rep_e;
  Lanes lanes;
  auto lane_name = [&](uint32_t t) {
    auto it = r.threads().find(t);
    std::string n = it != r.threads().end() && !it->second.name.empty() ? it->second.name : "thread " + std::to_string(t);
    std::string lane = "thread " + n + " (" + std::to_string(it != r.threads().end() ? it->second.os_tid : t) + ")";
    lane_thread.emplace(lane, t);
    return lane;
  };
  auto add = [&](const std::string& lane, bool g, int64_t s, int64_t e, std::string label, const char* cat, uint32_t depth,
                 uint32_t corr = 0) {
    auto& L = lanes[lane];
    L.name = lane;
    L.gpu = g;
    s = std::max(s, rep_s);
    e = std::min(e, rep_e);
    L.spans.push_back({ms(double(s - rep_s)), ms(double(e - rep_s)), std::move(label), cat, depth, corr});
  };
  for (auto& c : rep_cpu) add(lane_name(c.thread), false, c.s, c.e, c.label, c.cat, c.depth);
  for (auto& x : apis)
    if (x.end() > rep_s && x.start < rep_e)
      add(lane_name(x.thread), false, x.start, x.end(), cx.name_of(x.name), x.kind == detail::kSync || x.kind == detail::kCopySync ? "sync" : "api", 0, x.corr);
  auto first = std::lower_bound(gpu.begin(), gpu.end(), rep_s - max_gpu_dur, [](const GpuOp& x, int64_t v) { return x.start < v; });
  // Several GPUs in the step: a lane per GPU and stream ("GPU 1 stream 7"); one GPU keeps "GPU stream 7".
  bool several_gpus = false;
  int seen_device = -1;
  for (auto it = first; it != gpu.end() && it->start < rep_e && !several_gpus; ++it) {
    if (it->end() <= rep_s) continue;
    if (seen_device < 0) seen_device = it->device;
    several_gpus = it->device != seen_device;
  }
  for (auto it = first; it != gpu.end() && it->start < rep_e; ++it) {
    if (it->end() <= rep_s) continue;
    static const char* cats[] = {"kernel", "memset", "h2d", "d2h", "copy", "graph", "collective"};
    std::string label = detail::is_kernel(it->kind) ? cx.name_of(it->name_or_bytes)
                        : it->kind == detail::kGraph ? graph_work_name(it->name_or_bytes)
                                                     : std::string(cats[it->kind]) + " " + std::to_string(it->name_or_bytes) + " B";
    add((several_gpus ? "GPU " + std::to_string(it->device) + " stream " : std::string("GPU stream ")) + std::to_string(it->stream), true, it->start, it->end(), std::move(label), cats[it->kind], 0, it->corr);
  }
  return lanes;
}

void assign_rows(Lanes& lanes) {
  // Rows of a thread lane: ranges from depth 0, Python frames below the deepest range, CUDA calls last.
  for (auto& [n, L] : lanes) {
    if (L.gpu) continue;
    int rmax = -1, pmax = -1;
    for (auto& sp : L.spans) {
      if (sp.category == "range") rmax = std::max(rmax, int(sp.depth));
      else if (sp.category == "python") pmax = std::max(pmax, int(sp.depth));
    }
    for (auto& sp : L.spans) {
      if (sp.category == "python") sp.depth += uint32_t(rmax + 1);
      else if (sp.category != "range") sp.depth = uint32_t(rmax + 1 + pmax + 1);
    }
  }
}

// Merges runs of host spans narrower than min_w; returns the spans left. GPU spans are never merged: a block
// of joined kernels would include the idle gaps between them (twelve 1.5 us kernels drawn as one 318 us bar
// at 3 % utilization); the reports draw tiny kernels as a busy-fraction strip instead.
size_t merge_tiny(Lanes& lanes, double min_w) {
  size_t total = 0;
  for (auto& [n, L] : lanes) {
    std::sort(L.spans.begin(), L.spans.end(), [](auto& x, auto& y) { return x.start_ms < y.start_ms; });
    if (L.gpu) {
      total += L.spans.size();
      continue;
    }
    std::vector<TimelineSpan> out;
    for (auto& s : L.spans) {
      bool tiny = s.end_ms - s.start_ms < min_w;
      if (tiny && !out.empty() && out.back().category == s.category && out.back().depth == s.depth &&
          s.start_ms - out.back().end_ms < min_w && out.back().end_ms - out.back().start_ms < 20 * min_w) {
        auto& b = out.back();
        b.end_ms = std::max(b.end_ms, s.end_ms);
        b.correlation = 0;  // a block of several calls launched no one thing
        if (b.label.rfind("merged ", 0) != 0) b.label = "merged 2 " + b.category + "s";
        else {
          int k = std::atoi(b.label.c_str() + 7);
          b.label = "merged " + std::to_string(k + 1) + " " + b.category + "s";
        }
        continue;
      }
      out.push_back(s);
    }
    L.spans = std::move(out);
    total += L.spans.size();
  }
  return total;
}

// Keeps a span's correlation id only where the timeline draws both the CUDA call and GPU work with it: the
// reports join those two, and nothing else.
void keep_drawn_pairs(Lanes& lanes) {
  std::set<uint32_t> host, gpu;
  for (auto& [n, L] : lanes)
    for (auto& s : L.spans)
      if (s.correlation) (L.gpu ? gpu : host).insert(s.correlation);
  for (auto& [n, L] : lanes)
    for (auto& s : L.spans)
      if (s.correlation && !(L.gpu ? host : gpu).count(s.correlation)) s.correlation = 0;
}

}  // namespace

Timeline build_timeline(const Context& cx, const Ingested& in, const StepSet& ss, const HostWork& hw, int64_t max_gpu_dur,
                        const std::string& token_function) {
  Timeline a;
  const auto& opt = cx.opt;
  const int64_t rep_s = ss.rep_s, rep_e = ss.rep_e;
  std::map<std::string, uint32_t> lane_thread;
  Lanes lanes = collect_lanes(cx, in, ss, hw, max_gpu_dur, lane_thread);
  assign_rows(lanes);
  // Cap: merge runs of tiny host spans, then keep GPU work and its launches first (timeline_cut.hpp).
  const double min_w = ms(double(rep_e - rep_s)) / 2000.0;
  merge_tiny(lanes, min_w);
  if (const TimelineCut cut = cut_timeline(lanes, opt.max_timeline_spans, token_function); cut.kept < cut.before)
    a.warnings.push_back("the representative step's timeline was cut to " + std::to_string(cut.kept) + " of its " +
                         std::to_string(cut.before) + " spans: its ranges, then GPU work with the calls that launched "
                         "it, then other CUDA calls, then the longest Python frames");
  keep_drawn_pairs(lanes);
  std::map<uint32_t, TimelineLane*> lane_of_thread;
  for (auto& [n, L] : lanes)
    if (const auto t = lane_thread.find(n); !L.gpu && t != lane_thread.end()) lane_of_thread[t->second] = &L;
  add_thread_states(cx, in, rep_s, rep_e, lane_of_thread);
  for (auto& [n, L] : lanes)
    if (!L.gpu) a.lanes.push_back(std::move(L));
  for (auto& [n, L] : lanes)
    if (L.gpu) a.lanes.push_back(std::move(L));
  return a;
}

}  // namespace inferscope::analyze::detail
