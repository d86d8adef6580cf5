#include "analyze/what_if/what_if.hpp"

#include "analyze/step_policy.hpp"

#include <inferscope/records.hpp>

#include <algorithm>

namespace inferscope::analyze::detail {
namespace {

replay::OpKind op_kind(uint8_t kind) {
  switch (kind) {
    case kLaunch: case kCopyAsync: return replay::OpKind::kLaunch;
    case kCopySync: return replay::OpKind::kCopySync;
    case kSync: return replay::OpKind::kSync;
    case kAlloc: return replay::OpKind::kAlloc;
    case kFree: return replay::OpKind::kFree;
    default: return replay::OpKind::kOther;
  }
}

replay::GpuWork work_of(const GpuOp& g) {
  replay::GpuWork w;
  w.dur_ns = g.dur;
  w.stream = g.stream;
  w.copy = g.kind == kH2D || g.kind == kD2H;
  w.pageable = w.copy && g.host_mem == uint8_t(MemoryKind::kPageable);
  w.h2d = g.kind == kH2D;
  w.d2h = g.kind == kD2H;
  w.bytes = is_compute_launch(g.kind) ? 0 : g.name_or_bytes;
  return w;
}

// The step's calls: [first, last) of the sorted list.
std::pair<size_t, size_t> calls_in(const std::vector<const ApiOp*>& calls, int64_t s, int64_t e) {
  auto by_start = [](const ApiOp* x, int64_t v) { return x->start < v; };
  const size_t a = size_t(std::lower_bound(calls.begin(), calls.end(), s, by_start) - calls.begin());
  const size_t b = size_t(std::lower_bound(calls.begin(), calls.end(), e, by_start) - calls.begin());
  return {a, b};
}

// GPU activities by correlation id: (corr, index) sorted, built once for all sampled steps (8 bytes each).
class WorkByCorr {
 public:
  explicit WorkByCorr(const GraphSource& src) {
    v_.reserve(src.gpu_count);
    for (size_t i = 0; i < src.gpu_count; ++i)
      if (src.gpu[i].corr) v_.emplace_back(src.gpu[i].corr, uint32_t(i));
    std::sort(v_.begin(), v_.end());
  }
  template <class F>
  void each(uint32_t corr, F&& f) const {
    for (auto it = std::lower_bound(v_.begin(), v_.end(), std::make_pair(corr, 0u)); it != v_.end() && it->first == corr; ++it)
      f(it->second);
  }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> v_;
};

void add_work(replay::StepGraph& g, size_t op, const GpuOp& w, std::vector<int64_t>& work_end) {
  g.host[op].work.push_back(uint32_t(g.gpu.size()));
  g.gpu.push_back(work_of(w));
  work_end.push_back(w.end());
}

// Links the GPU work each of the step's calls queued: by correlation id, however late it ran (a host that runs
// ahead of the GPU queues work that starts steps later). Work whose call is nested in one of the step's calls
// (a driver launch inside a library call) goes to that outer call; it is found by time, one step length past
// the step's end.
void link_work(const GraphSource& src, const WorkByCorr& by_corr, int64_t s, int64_t e, size_t first, size_t last,
               replay::StepGraph& g, std::vector<int64_t>& work_end) {
  const auto& calls = *src.calls;
  // A correlation id names one call: where the input repeats one (a crafted dump or trace), its work goes to the
  // call the launch index keeps for it (the latest), as everywhere else. Every call took every activity of its id:
  // 8,000 launches and 8,000 kernels sharing one id (a 330 KB trace) made 64 million links, 2.3 GB.
  for (size_t k = first; k < last; ++k)
    if (src.launch_of(calls[k]->corr) == calls[k])
      by_corr.each(calls[k]->corr, [&](uint32_t i) { add_work(g, k - first, src.gpu[i], work_end); });
  const GpuOp* begin = src.gpu;
  const GpuOp* it = std::lower_bound(begin, begin + src.gpu_count, s, [](const GpuOp& x, int64_t v) { return x.start < v; });
  auto by_start = [](const ApiOp* x, int64_t v) { return x->start <= v; };
  for (; it != begin + src.gpu_count && it->start < e + (e - s); ++it) {
    const ApiOp* call = src.launch_of(it->corr);
    if (!call || call->start < s || call->start >= e) continue;
    auto pos = std::partition_point(calls.begin() + long(first), calls.begin() + long(last),
                                    [&](const ApiOp* x) { return by_start(x, call->start); });
    if (pos == calls.begin() + long(first)) continue;
    const ApiOp* outer = *(pos - 1);
    if (outer == call || outer->corr == call->corr || outer->end() < call->end() || outer->thread != call->thread) continue;
    add_work(g, size_t(pos - calls.begin()) - 1 - first, *it, work_end);
  }
}

int64_t busy_after(const GraphSource& src, int64_t s) {
  const GpuOp* begin = src.gpu;
  const GpuOp* it = std::lower_bound(begin, begin + src.gpu_count, s, [](const GpuOp& x, int64_t v) { return x.start < v; });
  // Activities are sorted by start; one that runs past s started at most gpu_max_dur before it. The walk is
  // bounded so a trace with one multi-second kernel among millions of short ones stays linear.
  int64_t busy = 0;
  for (int n = 0; it != begin && (it - 1)->start >= s - src.gpu_max_dur && n < 65536; --it, ++n)
    busy = std::max(busy, (it - 1)->end() - s);
  return busy;
}

// A blocking call's recorded wait: from its start until the GPU work it waited for ended (at most its length).
void fill_waits(replay::StepGraph& g, const std::vector<const ApiOp*>& calls, size_t first, int64_t s,
                const std::vector<int64_t>& work_end) {
  int64_t done = s + g.gpu_busy_at_start_ns;
  for (size_t k = 0; k < g.host.size(); ++k) {
    replay::HostOp& op = g.host[k];
    const ApiOp& c = *calls[first + k];
    int64_t own_done = done;
    for (uint32_t w : op.work) own_done = std::max(own_done, work_end[w]);
    const bool blocking = op.kind == replay::OpKind::kSync || op.kind == replay::OpKind::kFree ||
                          op.kind == replay::OpKind::kCopySync;
    if (blocking) op.wait_ns = std::clamp<int64_t>(std::min(own_done, c.end()) - c.start, 0, op.dur_ns);
    done = own_done;
  }
}

replay::StepGraph graph_of(const GraphSource& src, const WorkByCorr& by_corr, int64_t s, int64_t e) {
  replay::StepGraph g;
  g.recorded_ns = e - s;
  if (!src.calls) return g;
  const auto& calls = *src.calls;
  auto [first, last] = calls_in(calls, s, e);
  int64_t prev_end = s;
  for (size_t i = first; i < last; ++i) {
    replay::HostOp op;
    op.gap_before_ns = std::max<int64_t>(0, calls[i]->start - prev_end);
    op.dur_ns = std::max<int64_t>(0, std::min(e, calls[i]->end()) - calls[i]->start);
    op.kind = op_kind(calls[i]->kind);
    g.host.push_back(std::move(op));
    prev_end = std::max(prev_end, calls[i]->end());
  }
  g.tail_ns = std::max<int64_t>(0, e - prev_end);
  g.gpu_busy_at_start_ns = busy_after(src, s);
  std::vector<int64_t> work_end;
  link_work(src, by_corr, s, e, first, last, g, work_end);
  fill_waits(g, calls, first, s, work_end);
  return g;
}
}  // namespace

replay::StepGraph build_step_graph(const GraphSource& src, int64_t s, int64_t e) {
  return graph_of(src, WorkByCorr(src), s, e);
}

std::vector<replay::StepGraph> build_step_graphs(const GraphSource& src, const std::vector<StepMetrics>& steps,
                                                 const std::vector<size_t>& which, size_t max_steps) {
  std::vector<replay::StepGraph> out;
  const size_t n = which.size(), take = std::min(n, max_steps);
  if (take == 0 || !src.calls || src.calls->empty()) return out;
  const WorkByCorr by_corr(src);
  for (size_t k = 0; k < take; ++k) {
    const StepMetrics& m = steps[which[k * n / take]];
    out.push_back(graph_of(src, by_corr, m.start, m.start + m.dur));
  }
  return out;
}

SavingEstimate estimate_saving(const std::vector<replay::StepGraph>& graphs, const replay::Change& c, bool mean) {
  std::vector<double> v;
  for (const auto& g : graphs)
    if (!g.host.empty()) v.push_back(double(replay::saving_ns(g, c)));
  if (v.empty()) return {};
  if (mean) {
    double sum = 0;
    for (double x : v) sum += x;
    return {sum / double(v.size()) / 1e6, true};
  }
  return {median_of(std::move(v)) / 1e6, true};
}

double share_of_host_work_between_launches(const std::vector<replay::StepGraph>& graphs, int64_t min_gap_ns) {
  const int64_t shortest = std::max<int64_t>(1, min_gap_ns);
  double all = 0, inside = 0;
  for (const auto& g : graphs) {
    for (size_t i = 0; i < g.host.size(); ++i) {
      const int64_t gap = g.host[i].gap_before_ns;
      if (gap < shortest) continue;
      all += double(gap);
      if (replay::gap_inside_graph(g, i)) inside += double(gap);
    }
    if (g.tail_ns >= shortest) all += double(g.tail_ns);  // after the last call: never inside a graph
  }
  return all > 0 ? inside / all : 0;
}


}  // namespace inferscope::analyze::detail
