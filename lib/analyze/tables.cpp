// Stage "tables": kernels, Python functions, ranges, copies, syncs, allocations, graph launches, layers and
// threads (docs/analysis.md section 7); lib/report formats them, and the rules read them (kernel names, copy
// bandwidths, callers) as this stage's result, Tables.
#include "analyze/stages.hpp"

#include <inferscope/counter_names.hpp>

namespace inferscope::analyze::detail {
namespace {

void kernel_table(const Context& cx, const Ingested& in, const Attribution& at, const std::vector<std::string>& labels,
                  Tables& a) {
  const size_t nstr = cx.nstr;
  const auto& kernel_count = in.kernel_count;
  const auto& kernel_ns = in.kernel_ns;
  const auto& kernel_by_launcher = at.kernel_by_launcher;
  double total_kernel = 0;
  for (uint32_t n = 0; n < nstr; ++n) total_kernel += double(kernel_ns[n]);
  for (auto& [id, g] : in.graph_runs) total_kernel += double(g.ns);
  std::map<uint32_t, std::pair<int64_t, std::string>> best_launcher;
  kernel_by_launcher.for_each([&](uint64_t k, int64_t ns) {
    auto& b = best_launcher[uint32_t(k >> 32)];
    const std::string& who = labels[uint32_t(k)];
    if (ns > b.first || (ns == b.first && who < b.second)) b = {ns, who};
  });
  auto add_row = [&](std::string name, uint64_t count, int64_t ns, uint32_t launcher_key) {
    KernelRow row;
    row.name = std::move(name);
    row.whole_graph = launcher_key & 0x80000000u;
    row.count = count;
    row.total_ms = ms(double(ns));
    row.mean_us = double(ns) / double(count) / 1e3;
    row.share = total_kernel > 0 ? double(ns) / total_kernel : 0;
    auto it = best_launcher.find(launcher_key);
    row.launched_by = it == best_launcher.end() ? "-" : it->second.second;
    a.kernels.push_back(std::move(row));
  };
  for (uint32_t n = 0; n < nstr; ++n)
    if (kernel_count[n]) add_row(cx.name_of(n), kernel_count[n], kernel_ns[n], n);
  // Graph launches traced at graph level: one row per graph, its launches as the count.
  for (auto& [id, g] : in.graph_runs)
    if (g.count) add_row(detail::graph_work_name(id), g.count, g.ns, detail::launch_work_key(detail::kGraph, id));
  std::sort(a.kernels.begin(), a.kernels.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
}

void python_table(const Context& cx, const Ingested& in, Tables& a) {
  const auto& r = cx.r;
  const auto& py_agg = in.py_agg;
  for (uint32_t code = 0; code < py_agg.size(); ++code) {
    const NameAgg& agg = py_agg[code];
    if (!agg.d.count()) continue;
    PythonRow row;
    auto it = r.code_table().find(code);
    if (it != r.code_table().end()) {
      row.qualname = it->second.qualname;
      row.file = it->second.file;
      row.line = it->second.line;
    } else {
      row.qualname = "<code " + std::to_string(code) + ">";
    }
    row.count = agg.d.count();
    row.total_ms = ms(double(agg.d.total()));
    row.self_ms = ms(double(agg.self));
    a.python.push_back(std::move(row));
  }
  std::sort(a.python.begin(), a.python.end(), [](auto& x, auto& y) { return x.self_ms > y.self_ms; });
}

void range_table(const Context& cx, const Ingested& in, Tables& a) {
  const size_t nstr = cx.nstr;
  const auto& range_agg = in.range_agg;
  for (uint32_t n = 0; n < nstr; ++n) {
    const auto& agg = range_agg[n];
    if (!agg.d.count()) continue;
    RangeRow row;
    row.name = cx.name_of(n);
    row.count = agg.d.count();
    row.total_ms = ms(double(agg.d.total()));
    row.self_ms = ms(double(agg.self));
    row.mean_us = agg.d.mean() / 1e3;
    row.p50_us = agg.d.percentile(0.5) / 1e3;
    row.p99_us = agg.d.percentile(0.99) / 1e3;
    row.max_us = double(agg.d.max()) / 1e3;
    a.ranges.push_back(std::move(row));
  }
  std::sort(a.ranges.begin(), a.ranges.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
}

void copy_table(const Ingested& in, const LinkPeak& m, Tables& a) {
  const auto& copies = in.copies;
  for (auto& [k, c] : copies) {
    CopyRow row;
    row.direction = k.dir;
    row.src_memory = k.src;
    row.dst_memory = k.dst;
    row.count = c.count;
    row.bytes = c.bytes;
    row.total_ms = ms(double(c.ns));
    row.bandwidth_gbps = c.ns > 0 ? double(c.bytes) / double(c.ns) : 0;  // bytes/ns == GB/s
    row.peak_bandwidth_gbps = (k.dir == "h2d" || k.dir == "d2h") ? m.peak_h2d_gbps : 0;
    row.peak_assumed = row.peak_bandwidth_gbps > 0 && m.peak_assumed;
    a.copies.push_back(std::move(row));
  }
  std::sort(a.copies.begin(), a.copies.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
}

// The allocation rows start from pass 1's (the GPU memory records by op and memory) and get the API time.
void api_tables(const Context& cx, const Ingested& in, Launchers& who, Tables& a) {
  const auto& apis = in.apis;
  const auto& labels = who.labels;
  std::map<std::pair<std::string, std::string>, AllocRow> allocs = in.allocs;  // a few rows
  // Syncs, allocations and graph launches: per (API, caller) counts and host time, the same launcher labels
  // as kernels and copies (the API record carries the Python function, range and layer at the call).
  struct Callers {
    std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, int64_t>> by;  // (api name, launcher) -> (n, ns)
    void add(const ApiOp& x, uint32_t who) {
      auto& v = by[{x.name, who}];
      ++v.first;
      v.second += x.dur;
    }
  };
  // The caller of most calls, and the top three (API, caller) pairs by host time.
  auto finish = [&](const Callers& c, std::string& called_from, std::vector<CallerRow>& top) {
    std::map<uint32_t, uint64_t> per_who;
    for (auto& [k, v] : c.by) per_who[k.second] += v.first;
    called_from = "-";
    uint64_t most = 0;
    for (auto& [who, n] : per_who)
      if (n > most) { most = n; called_from = labels[who]; }
    for (auto& [k, v] : c.by) top.push_back({cx.name_of(k.first), labels[k.second], v.first, ms(double(v.second))});
    std::sort(top.begin(), top.end(), [](auto& x, auto& y) {
      return x.total_ms != y.total_ms ? x.total_ms > y.total_ms : x.count > y.count;
    });
    if (top.size() > 3) top.resize(3);
  };
  std::map<std::string, SyncRow> rows;
  std::map<std::string, Callers> sync_callers;
  std::map<std::pair<std::string, std::string>, Callers> alloc_callers;
  std::map<std::string, GraphLaunchRow> graphs;
  std::map<std::string, Callers> graph_callers;
  for (auto& x : apis) {
    if (x.kind == detail::kSync || x.kind == detail::kCopySync) {
      auto& row = rows[cx.name_of(x.name)];
      row.kind = cx.name_of(x.name);
      ++row.count;
      row.total_ms += ms(x.dur);
      row.max_ms = std::max(row.max_ms, ms(x.dur));
      sync_callers[row.kind].add(x, who.id(&x));
    } else if (x.kind == detail::kAlloc || x.kind == detail::kFree) {
      const bool alloc = x.kind == detail::kAlloc;
      const std::string& n = cx.name_of(x.name);
      // The API says which memory: cudaMallocHost/cudaFreeHost pinned, cudaMallocManaged managed.
      const char* memory = n.find("Host") != std::string::npos      ? memory_kind_name(MemoryKind::kPinned)
                           : n.find("Managed") != std::string::npos ? memory_kind_name(MemoryKind::kManaged)
                                                                    : memory_kind_name(MemoryKind::kDevice);
      auto& row = allocs[{alloc ? "alloc" : "free", memory}];
      row.op = alloc ? "alloc" : "free";
      row.memory = memory;
      row.api_ms += ms(x.dur);
      alloc_callers[{row.op, row.memory}].add(x, who.id(&x));
    } else if (x.kind == detail::kLaunch && cx.name_of(x.name).find("GraphLaunch") != std::string::npos) {
      auto& row = graphs[cx.name_of(x.name)];
      row.api = cx.name_of(x.name);
      ++row.count;
      row.api_ms += ms(x.dur);
      graph_callers[row.api].add(x, who.id(&x));
    }
  }
  for (auto& [n, row] : rows) {
    finish(sync_callers[n], row.called_from, row.callers);
    a.syncs.push_back(row);
  }
  std::sort(a.syncs.begin(), a.syncs.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
  for (auto& [k, row] : allocs) {
    finish(alloc_callers[k], row.called_from, row.callers);
    a.allocations.push_back(row);
  }
  for (auto& [n, row] : graphs) {
    finish(graph_callers[n], row.called_from, row.callers);
    a.graph_launches.push_back(row);
  }
  std::sort(a.graph_launches.begin(), a.graph_launches.end(), [](auto& x, auto& y) { return x.api_ms > y.api_ms; });
}

void layer_table(const Context& cx, const Ingested& in, const Attribution& at, Tables& a) {
  const auto& layer_count = in.layer_count;
  const auto& layer_cpu = in.layer_cpu;
  const auto& layer_gpu = at.layer_gpu;
  const auto& layer_kernels = at.layer_kernels;
  for (auto& [n, cnt] : layer_count) {
    LayerRow row;
    row.path = cx.name_of(n);
    row.count = cnt;
    auto cpu = layer_cpu.find(n);  // pass 1 fills both maps together
    row.cpu_ms = ms(cpu == layer_cpu.end() ? 0.0 : cpu->second);
    row.gpu_ms = ms(layer_gpu[n]);
    row.kernels = layer_kernels[n];
    a.layers.push_back(std::move(row));
  }
  std::sort(a.layers.begin(), a.layers.end(), [](auto& x, auto& y) { return x.gpu_ms + x.cpu_ms > y.gpu_ms + y.cpu_ms; });
}

// A thread's CPU time over the whole trace: the growth of its on-CPU counters, and which counters they were.
void thread_cpu(const ThreadCounters& tc, ThreadRow& row) {
  if (!tc.has_on_cpu()) return;
  double ns = 0;
  for (const auto& s : tc.on_cpu)
    if (!s.points.empty()) ns += s.points.back().second - s.points.front().second;
  row.cpu_ms = ms(std::max(0.0, ns));
  row.cpu_source = tc.on_cpu_exact ? "schedstat" : "ticks";
}

// Involuntary context switches over the whole trace, by dump thread id (thread-scope counters).
std::map<uint32_t, double> involuntary_by_thread(const Context& cx, const Ingested& in) {
  std::map<std::pair<uint32_t, uint32_t>, std::pair<double, double>> first_last;  // (thread, counter)
  for (auto& c : in.counters) {
    if (c.scope != uint8_t(CounterScope::kThread)) continue;
    const std::string& n = cx.name_of(c.name);
    if (n != counter_names::kThreadCtxInvoluntary) continue;
    auto [it, fresh] = first_last.try_emplace({c.target, c.name}, c.v, c.v);
    it->second.second = c.v;
  }
  std::map<uint32_t, double> out;
  for (auto& [k, v] : first_last) out[k.first] += v.second - v.first;
  return out;
}

void thread_table(const Context& cx, const Ingested& in, Tables& a) {
  const auto& ts = in.ts;
  const auto samples = thread_samples(cx, in.counters);
  const auto inv_by_thread = involuntary_by_thread(cx, in);
  for (auto& [id, info] : cx.r.threads()) {
    if (info.is_channel()) continue;
    ThreadRow row;
    row.id = id;
    row.os_tid = info.os_tid;
    row.name = info.name;
    if (id < ts.size()) row.busy_ms = ms(std::max(ts[id].busy_range, ts[id].busy_py));
    if (auto s = samples.find(id); s != samples.end()) thread_cpu(thread_counters(cx, s->second, id), row);
    if (auto inv = inv_by_thread.find(id); inv != inv_by_thread.end())
      row.involuntary_switches = uint64_t(std::max(0.0, inv->second));
    a.threads.push_back(std::move(row));
  }
}

}  // namespace

Tables build_tables(const Context& cx, const Ingested& in, const Attribution& at, Launchers& who, const LinkPeak& link) {
  Tables a;
  kernel_table(cx, in, at, who.labels, a);
  python_table(cx, in, a);
  range_table(cx, in, a);
  copy_table(in, link, a);
  api_tables(cx, in, who, a);
  layer_table(cx, in, at, a);
  thread_table(cx, in, a);
  return a;
}

}  // namespace inferscope::analyze::detail
