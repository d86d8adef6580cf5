// What the Markdown and HTML reports show of each detail table: one `shown` per row type, its heading, columns and
// note beside the cells of one row, so that a table's header and its cells cannot drift apart.
#include "report/detail_tables.hpp"

#include "analyze/table_fields.hpp"
#include "report/common.hpp"

#include <algorithm>
#include <string>

namespace inferscope::report {
namespace {

using analyze::Analysis;
using K = CellKind;

DetailCell c(std::string text) { return DetailCell{{std::move(text)}}; }
std::string n(uint64_t v) { return std::to_string(v); }
std::string pct(double share) { return fmt(share * 100.0, 1); }

/// One table's layout: heading, columns, note, and its rows' cells.
template <class Row>
struct Layout {
  std::string title;
  std::vector<DetailColumn> columns;
  std::vector<DetailCell> (*cells)(const Row&, const KernelNames&);
  std::string note = {};
};

Layout<analyze::KernelRow> shown(const analyze::KernelRow*, const Analysis&) {
  return {"Top kernels",
          {{"kernel", K::kName}, {"count"}, {"total (ms)"}, {"mean (us)"}, {"% GPU time", K::kNumber, true},
           {"launched by", K::kName}},
          [](const analyze::KernelRow& r, const KernelNames& names) {
            DetailCell kernel = c(names.short_of(r.name));
            if (kernel.text() != r.name) kernel.full = r.name;
            return std::vector<DetailCell>{kernel, c(n(r.count)), c(fmt(r.total_ms, 3)), c(fmt(r.mean_us, 1)),
                                           c(pct(r.share)), c(r.launched_by)};
          },
          "Kernel names are shortened (template arguments and namespaces elided); the JSON report has each full name."};
}

Layout<analyze::KernelFamilyRow> shown(const analyze::KernelFamilyRow*, const Analysis& a) {
  return {"Kernel time by family",
          {{"family", K::kWords}, {"kernels"}, {"total (ms)"}, {"% GPU time", K::kNumber, true}, {"% on tensor cores"}},
          [](const analyze::KernelFamilyRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.family), c(n(r.kernels)), c(fmt(r.total_ms, 3)), c(pct(r.share)),
                                           c(pct(r.tensor_core_share))};
          },
          pct(a.tensor_core_share) + " % of kernel time ran on tensor cores. Families and tensor-core use are read "
                                     "from the kernels' names (docs/analysis.md, \"Kernel families\")."};
}

Layout<analyze::PythonRow> shown(const analyze::PythonRow*, const Analysis&) {
  return {"Python functions",
          {{"function", K::kName}, {"where", K::kPath}, {"calls"}, {"total (ms)"}, {"self (ms)"}},
          [](const analyze::PythonRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.qualname), c(r.file + ":" + std::to_string(r.line)), c(n(r.count)),
                                           c(fmt(r.total_ms, 3)), c(fmt(r.self_ms, 3))};
          }};
}

Layout<analyze::RangeRow> shown(const analyze::RangeRow*, const Analysis&) {
  return {"Ranges",
          {{"range", K::kName}, {"count"}, {"total (ms)"}, {"self (ms)"}, {"mean (us)"}, {"p50 (us)"}, {"p99 (us)"},
           {"max (us)"}},
          [](const analyze::RangeRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.name),           c(n(r.count)),       c(fmt(r.total_ms, 3)),
                                           c(fmt(r.self_ms, 3)), c(fmt(r.mean_us, 1)), c(fmt(r.p50_us, 1)),
                                           c(fmt(r.p99_us, 1)),  c(fmt(r.max_us, 1))};
          }};
}

Layout<analyze::CopyRow> shown(const analyze::CopyRow*, const Analysis&) {
  return {"Memory copies",
          {{"direction", K::kName}, {"memory", K::kName}, {"count"}, {"bytes"}, {"total (ms)"}, {"achieved (GB/s)"},
           {"peak (GB/s)"}},
          [](const analyze::CopyRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.direction), DetailCell{{r.src_memory, r.dst_memory}},
                                           c(n(r.count)),   c(fmt_bytes(r.bytes)),
                                           c(fmt(r.total_ms, 3)), c(fmt(r.bandwidth_gbps, 2)), c(fmt_peak(r))};
          }};
}

Layout<analyze::SyncRow> shown(const analyze::SyncRow*, const Analysis&) {
  return {"Synchronizations",
          {{"kind", K::kName}, {"count"}, {"total (ms)"}, {"max (ms)"}, {"called from", K::kName}},
          [](const analyze::SyncRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.kind), c(n(r.count)), c(fmt(r.total_ms, 3)), c(fmt(r.max_ms, 3)),
                                           c(r.called_from)};
          }};
}

Layout<analyze::AllocRow> shown(const analyze::AllocRow*, const Analysis&) {
  return {"Allocations",
          {{"op", K::kName}, {"memory", K::kName}, {"count"}, {"bytes"}, {"API time (ms)"}, {"called from", K::kName}},
          [](const analyze::AllocRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.op), c(r.memory), c(n(r.count)), c(fmt_bytes(r.bytes)),
                                           c(fmt(r.api_ms, 3)), c(r.called_from)};
          }};
}

Layout<analyze::GraphLaunchRow> shown(const analyze::GraphLaunchRow*, const Analysis&) {
  return {"CUDA graph launches",
          {{"API", K::kName}, {"count"}, {"API time (ms)"}, {"called from", K::kName}},
          [](const analyze::GraphLaunchRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.api), c(n(r.count)), c(fmt(r.api_ms, 3)), c(r.called_from)};
          }};
}

Layout<analyze::LayerRow> shown(const analyze::LayerRow*, const Analysis&) {
  return {"Model layers",
          {{"layer", K::kName}, {"calls"}, {"CPU (ms)"}, {"GPU (ms)"}, {"kernels"}},
          [](const analyze::LayerRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(r.path), c(n(r.count)), c(fmt(r.cpu_ms, 3)), c(fmt(r.gpu_ms, 3)),
                                           c(n(r.kernels))};
          }};
}

Layout<analyze::ThreadRow> shown(const analyze::ThreadRow*, const Analysis& a) {
  return {"Threads",
          {{"id"}, {"OS tid"}, {"name", K::kName}, {"busy (ms)"}, {"CPU (ms)"}, {"involuntary switches"}},
          [](const analyze::ThreadRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(n(r.id)), c(n(r.os_tid)), c(r.name), c(fmt(r.busy_ms, 3)),
                                           c(fmt_thread_cpu(r)), c(n(r.involuntary_switches))};
          },
          thread_cpu_note(a.threads)};
}

}  // namespace

std::vector<DetailTable> detail_tables(const Analysis& a, const KernelNames& names) {
  std::vector<DetailTable> out;
  analyze::for_each_detail_rows(a, [&](const char* key, const auto& rows) {
    if (rows.empty()) return;
    using Row = typename std::decay_t<decltype(rows)>::value_type;
    const Layout<Row> layout = shown(static_cast<const Row*>(nullptr), a);
    DetailTable t{key, key, layout.title, layout.columns, {}, layout.note};
    std::replace(t.anchor.begin(), t.anchor.end(), '_', '-');
    t.rows.reserve(rows.size());
    for (const Row& r : rows) t.rows.push_back(layout.cells(r, names));
    out.push_back(std::move(t));
  });
  return out;
}

}  // namespace inferscope::report
