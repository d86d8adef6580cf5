// Reading one rank's dump for the run analysis (stage "rank trace", docs/multi-gpu.md): its rank and host, its
// steady steps with their NCCL collectives and the GPU compute around them, on the host-wide clock. The run
// analysis of the ranks together is ranks.cpp.
#include "analyze/run/ranks.hpp"
#include "analyze/kernel_traits.hpp"

#include "analyze/run/rank_work.hpp"
#include "dump/clock_model.hpp"
#include "dump/visit.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <utility>

namespace inferscope::analyze {
namespace {

using Interval = std::pair<int64_t, int64_t>;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Sorted, merged intervals.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) out.back().second = std::max(out.back().second, i.second);
    else out.push_back(i);
  }
  return out;
}
double length(const std::vector<Interval>& v) {
  double n = 0;
  for (const auto& i : v) n += double(i.second - i.first);
  return n;
}
// The time both merged lists cover.
double intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += double(hi - lo);
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return n;
}

// The GPU work of a dump on the host-wide clock.
struct GpuWorkVisitor {
  const dump::DumpReader& r;
  const dump::ClockModel& clock;
  std::vector<CollectiveKernel> collectives;
  std::vector<Interval> compute;
  std::set<uint32_t> devices;
  std::vector<std::pair<int64_t, uint32_t>> selections;  // selection kernels' (start, device)
  std::vector<std::pair<int64_t, uint32_t>> matmuls;     // GEMM and attention kernels' (start, device)
  struct KernelName {
    bool collective = false, fp32 = false, selection = false, matmul = false;
    std::string op;
  };
  std::map<uint32_t, KernelName> names;  // by string id, read once

  const KernelName& name_of(uint32_t id) {
    auto it = names.find(id);
    if (it == names.end()) {
      const std::string n = r.string_at(id);
      const bool collective = is_collective_kernel(n);
      const std::string_view family = collective ? "nccl" : kernel_traits(n).family;
      it = names.emplace(id, KernelName{collective, collective && lower(n).find("f32") != std::string::npos,
                                         !collective && is_selection_kernel(n), family == "gemm" || family == "attention",
                                         collective ? collective_op(n) : std::string()})
               .first;
    }
    return it->second;
  }
  void on(const GpuKernelRecord& k, const dump::RecordContext&) {
    const int64_t s = clock.to_ns(k.start), e = std::max(s, clock.to_ns(k.end));  // a damaged end: no length
    devices.insert(k.device);
    const KernelName& name = name_of(k.name);
    if (name.collective) collectives.push_back({name.op, name.fp32, s, e, k.device, k.grid[0] * k.grid[1] * k.grid[2]});
    else compute.emplace_back(s, e);
    if (name.selection) selections.emplace_back(s, k.device);
    if (name.matmul) matmuls.emplace_back(s, k.device);
  }
  void on(const GpuMemcpyRecord& c, const dump::RecordContext&) {
    devices.insert(c.device);
    compute.emplace_back(clock.to_ns(c.start), std::max(clock.to_ns(c.start), clock.to_ns(c.end)));
  }
  void on(const GpuMemsetRecord& m, const dump::RecordContext&) {
    devices.insert(m.device);
    compute.emplace_back(clock.to_ns(m.start), std::max(clock.to_ns(m.start), clock.to_ns(m.end)));
  }
};

// The intervals of `sorted` (by start) that overlap [lo, hi), clipped to it.
std::vector<Interval> clipped(const std::vector<Interval>& sorted, int64_t lo, int64_t hi) {
  std::vector<Interval> out;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), Interval{lo, lo},
                             [](const Interval& a, const Interval& b) { return a.second < b.first; });
  // intervals are merged: once one ends at or before lo, every earlier one does too
  for (; it != sorted.end() && it->first < hi; ++it)
    if (it->second > lo) out.emplace_back(std::max(it->first, lo), std::min(it->second, hi));
  return out;
}

using Starts = std::vector<std::pair<int64_t, uint32_t>>;  // (start, device), sorted

// The first start on `device` in [from, until), or 0.
int64_t first_on(const Starts& starts, uint32_t device, int64_t from, int64_t until) {
  for (auto it = std::lower_bound(starts.begin(), starts.end(), std::make_pair(from, uint32_t(0)));
       it != starts.end() && it->first < until; ++it)
    if (it->second == device) return it->first;
  return 0;
}

// Each collective of the step after which a matrix multiply ran on its device before it (matmul_before).
void mark_matmuls_before(const Starts& matmuls, RankStep& s) {
  for (size_t i = 0; i < s.collectives.size(); ++i) {
    CollectiveKernel& c = s.collectives[i];
    const int64_t from = i ? s.collectives[i - 1].end_ns : s.start_ns;
    c.matmul_before = first_on(matmuls, c.device, from, c.start_ns) != 0;
  }
}

// Each AllGather of the step whose result a selection kernel (argmax, top-k) on its device reads next: before the
// step's next collective and before any matrix multiply (a layer between them would be what reads the gather).
void mark_selected_gathers(const Starts& selections, const Starts& matmuls, RankStep& s) {
  for (size_t i = 0; i < s.collectives.size(); ++i) {
    CollectiveKernel& c = s.collectives[i];
    if (c.op != "AllGather") continue;
    int64_t until = i + 1 < s.collectives.size() ? s.collectives[i + 1].start_ns : s.end_ns;
    if (const int64_t mm = first_on(matmuls, c.device, c.end_ns, until)) until = mm;
    c.selected_at_ns = first_on(selections, c.device, c.end_ns, until);
  }
}

}  // namespace

std::optional<uint64_t> process_number(std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
  return v;
}

int64_t length_inside(const std::vector<std::pair<int64_t, int64_t>>& sorted, int64_t lo, int64_t hi) {
  int64_t n = 0;
  // merged intervals: their ends are sorted too
  auto it = std::upper_bound(sorted.begin(), sorted.end(), lo, [](int64_t t, const auto& x) { return t < x.second; });
  for (; it != sorted.end() && it->first < hi; ++it) n += std::max<int64_t>(0, std::min(it->second, hi) - std::max(it->first, lo));
  return n;
}

bool is_selection_kernel(std::string_view kernel_name) {
  const std::string n = lower(kernel_name);
  for (const char* key : {"argmaxops", "argminops", "topk"})
    if (n.find(key) != std::string::npos) return true;
  return false;
}

bool is_collective_kernel(std::string_view kernel_name) {
  return lower(kernel_name).find("nccl") != std::string::npos;
}

std::string collective_op(std::string_view kernel_name) {
  const std::string n = lower(kernel_name);
  // longest first: "reducescatter" holds "reduce", "allreduce" holds "reduce"
  static constexpr std::pair<const char*, const char*> kOps[] = {
      {"allreduce", "AllReduce"}, {"reducescatter", "ReduceScatter"}, {"allgather", "AllGather"},
      {"alltoall", "AllToAll"},   {"broadcast", "Broadcast"},         {"sendrecv", "SendRecv"},
      {"send", "SendRecv"},       {"recv", "SendRecv"},               {"reduce", "Reduce"}};
  for (const auto& [key, op] : kOps)
    if (n.find(key) != std::string::npos) return op;
  return "collective";
}

uint32_t known_sm_count(std::string_view gpu_name) {
  const std::string n = lower(gpu_name);
  if (n.find("h100") != std::string::npos) return n.find("pcie") != std::string::npos ? 114 : 132;
  if (n.find("h200") != std::string::npos || n.find("gh200") != std::string::npos) return 132;
  if (n.find("a100") != std::string::npos) return 108;
  if (n.find("l40s") != std::string::npos) return 142;
  return 0;
}

RankTrace read_rank_trace(const dump::DumpReader& r, const Analysis& a) {
  RankTrace t;
  t.path = a.source.empty() ? r.path() : a.source;
  if (auto rank = process_number(r.process_value("rank"), INT32_MAX)) t.rank = int(*rank);
  t.pid = process_number(r.process_value("pid"), UINT64_MAX).value_or(0);
  t.hostname = r.process_value("hostname");
  t.world_size = int(process_number(r.process_value("world_size"), INT32_MAX).value_or(0));
  t.step_name = a.steps.name;

  // The steady steps: the last `count` of every step found (warm-up steps come first).
  const auto& spans = a.steps.spans;
  const size_t steady = std::min<size_t>(a.steps.count, spans.size());
  for (size_t i = spans.size() - steady; i < spans.size(); ++i) {
    RankStep s;
    s.index = i;
    s.start_ns = spans[i].start_ns;
    s.end_ns = spans[i].end_ns;
    t.steps.push_back(std::move(s));
  }
  // One pass over the records: the GPU work, and what each step did by name (on the dump's own clock).
  const dump::ClockModel clock(r.calibration());
  GpuWorkVisitor v{r, clock, {}, {}, {}, {}, {}, {}};
  StepWorkVisitor work(r, clock, t.steps);
  dump::visit_records(r, dump::BothVisitors<GpuWorkVisitor, StepWorkVisitor>{v, work});
  t.devices.assign(v.devices.begin(), v.devices.end());
  if (!t.devices.empty()) {
    const std::string key = "gpu." + std::to_string(t.devices.front()) + ".";
    const auto sms = process_number(r.process_value(key + "sm_count"), 100'000);
    t.sm_count = sms ? uint32_t(*sms) : known_sm_count(r.process_value(key + "name"));
  }
  std::sort(v.selections.begin(), v.selections.end());
  std::sort(v.matmuls.begin(), v.matmuls.end());
  std::sort(v.collectives.begin(), v.collectives.end(),
            [](const CollectiveKernel& x, const CollectiveKernel& y) { return x.start_ns < y.start_ns; });
  std::vector<Interval> comm_all;
  for (const auto& c : v.collectives) comm_all.emplace_back(c.start_ns, c.end_ns);
  const std::vector<Interval> compute = merged(std::move(v.compute)), comm = merged(std::move(comm_all));

  for (RankStep& s : t.steps) {
    auto first = std::lower_bound(v.collectives.begin(), v.collectives.end(), s.start_ns,
                                  [](const CollectiveKernel& c, int64_t t0) { return c.start_ns < t0; });
    for (auto it = first; it != v.collectives.end() && it->start_ns < s.end_ns; ++it) s.collectives.push_back(*it);
    mark_matmuls_before(v.matmuls, s);
    mark_selected_gathers(v.selections, v.matmuls, s);
    const auto cw = clipped(compute, s.start_ns, s.end_ns), mw = clipped(comm, s.start_ns, s.end_ns);
    s.compute_ns = length(cw);
    s.comm_ns = length(mw);
    s.overlap_ns = intersection(cw, mw);
    s.compute = cw;
  }
  // A dump converted from a torch.profiler trace starts its times at zero; its process info says where that
  // lies on the trace's own clock, which the ranks of one run share.
  if (const auto shift = process_number(r.process_value("time_shift_ns"), uint64_t(INT64_MAX) / 2))
    shift_times(t, int64_t(*shift));
  return t;
}

void shift_times(RankTrace& t, int64_t by) {
  if (by == 0) return;
  for (RankStep& s : t.steps) {
    s.start_ns += by;
    s.end_ns += by;
    for (CollectiveKernel& c : s.collectives) {
      c.start_ns += by;
      c.end_ns += by;
      if (c.selected_at_ns) c.selected_at_ns += by;
    }
    for (auto& [lo, hi] : s.compute) lo += by, hi += by;
  }
}

}  // namespace inferscope::analyze
