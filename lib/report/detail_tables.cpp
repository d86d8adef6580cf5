// What the Markdown and HTML reports show of each table: for the ten detail tables one `shown` per row type, for the
// tables inside sections one function each; either way a table's heading, columns and note sit beside the cells of
// its rows, so that a header and its cells cannot drift apart.
#include "report/detail_tables.hpp"

#include "analyze/table_fields.hpp"
#include "report/common.hpp"
#include "report/escape.hpp"

#include <algorithm>
#include <string>

namespace inferscope::report {
namespace {

using analyze::Analysis;
using K = CellKind;

DetailCell c(std::string text) { return words_cell(std::move(text)); }
DetailCell nm(std::string text) { return name_cell(std::move(text)); }
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
            DetailCell kernel = nm(names.short_of(r.name));
            if (kernel.text() != r.name) kernel.full = r.name;
            return std::vector<DetailCell>{kernel, c(n(r.count)), c(fmt(r.total_ms, 3)), c(fmt(r.mean_us, 1)),
                                           c(pct(r.share)), nm(r.launched_by)};
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
            return std::vector<DetailCell>{nm(r.qualname), nm(r.file + ":" + std::to_string(r.line)), c(n(r.count)),
                                           c(fmt(r.total_ms, 3)), c(fmt(r.self_ms, 3))};
          }};
}

Layout<analyze::RangeRow> shown(const analyze::RangeRow*, const Analysis&) {
  return {"Ranges",
          {{"range", K::kName}, {"count"}, {"total (ms)"}, {"self (ms)"}, {"mean (us)"}, {"p50 (us)"}, {"p99 (us)"},
           {"max (us)"}},
          [](const analyze::RangeRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.name),          c(n(r.count)),       c(fmt(r.total_ms, 3)),
                                           c(fmt(r.self_ms, 3)), c(fmt(r.mean_us, 1)), c(fmt(r.p50_us, 1)),
                                           c(fmt(r.p99_us, 1)),  c(fmt(r.max_us, 1))};
          }};
}

Layout<analyze::CopyRow> shown(const analyze::CopyRow*, const Analysis&) {
  return {"Memory copies",
          {{"direction", K::kName}, {"memory", K::kName}, {"count"}, {"bytes"}, {"total (ms)"}, {"achieved (GB/s)"},
           {"peak (GB/s)"}},
          [](const analyze::CopyRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.direction), DetailCell{{{r.src_memory, true}, {" → "}, {r.dst_memory, true}}},
                                           c(n(r.count)),   c(fmt_bytes(r.bytes)),
                                           c(fmt(r.total_ms, 3)), c(fmt(r.bandwidth_gbps, 2)), c(fmt_peak(r))};
          }};
}

Layout<analyze::SyncRow> shown(const analyze::SyncRow*, const Analysis&) {
  return {"Synchronizations",
          {{"kind", K::kName}, {"count"}, {"total (ms)"}, {"max (ms)"}, {"called from", K::kName}},
          [](const analyze::SyncRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.kind), c(n(r.count)), c(fmt(r.total_ms, 3)), c(fmt(r.max_ms, 3)),
                                           nm(r.called_from)};
          }};
}

Layout<analyze::AllocRow> shown(const analyze::AllocRow*, const Analysis&) {
  return {"Allocations",
          {{"op", K::kName}, {"memory", K::kName}, {"count"}, {"bytes"}, {"API time (ms)"}, {"called from", K::kName}},
          [](const analyze::AllocRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.op), nm(r.memory), c(n(r.count)), c(fmt_bytes(r.bytes)),
                                           c(fmt(r.api_ms, 3)), nm(r.called_from)};
          }};
}

Layout<analyze::GraphLaunchRow> shown(const analyze::GraphLaunchRow*, const Analysis&) {
  return {"CUDA graph launches",
          {{"API", K::kName}, {"count"}, {"API time (ms)"}, {"called from", K::kName}},
          [](const analyze::GraphLaunchRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.api), c(n(r.count)), c(fmt(r.api_ms, 3)), nm(r.called_from)};
          }};
}

Layout<analyze::LayerRow> shown(const analyze::LayerRow*, const Analysis&) {
  return {"Model layers",
          {{"layer", K::kName}, {"calls"}, {"CPU (ms)"}, {"GPU (ms)"}, {"kernels"}},
          [](const analyze::LayerRow& r, const KernelNames&) {
            return std::vector<DetailCell>{nm(r.path), c(n(r.count)), c(fmt(r.cpu_ms, 3)), c(fmt(r.gpu_ms, 3)),
                                           c(n(r.kernels))};
          }};
}

Layout<analyze::ThreadRow> shown(const analyze::ThreadRow*, const Analysis& a) {
  return {"Threads",
          {{"id"}, {"OS tid"}, {"name", K::kName}, {"busy (ms)"}, {"CPU (ms)"}, {"involuntary switches"}},
          [](const analyze::ThreadRow& r, const KernelNames&) {
            return std::vector<DetailCell>{c(n(r.id)), c(n(r.os_tid)), nm(r.name), c(fmt(r.busy_ms, 3)),
                                           c(fmt_thread_cpu(r)), c(n(r.involuntary_switches))};
          },
          thread_cpu_note(a.threads)};
}

bool busy_applies(const analyze::WaitPartyRow& p) {
  return p.kind == "threads" || p.kind == "gil" || p.kind == "lock" || p.kind == "processes";
}

/// Who a party is, in the words the reports use: the step thread's own waits in words, others by name.
DetailCell party_cell(const analyze::WaitPartyRow& p) {
  if (p.kind == "own_sleep") return c("its own sleep");
  if (p.kind == "own_io") return c("its own I/O");
  if (p.kind == "unknown") return c("nobody seen working");
  DetailCell who = nm(p.name);
  if (p.kind == "gil") who.spans.push_back({" (holding the GIL)"});
  if (p.kind == "lock") who.spans.push_back({" (holding a lock)"});
  if (p.members.size() > 1) who.spans.push_back({" ×" + std::to_string(p.members.size())});
  return who;
}

/// The functions a party ran the most (up to 3), by name.
DetailCell hot_cell(const analyze::WaitPartyRow& p) {
  if (p.hot.empty()) return c("-");
  DetailCell hot;
  for (size_t i = 0; i < p.hot.size() && i < 3; ++i) {
    if (i) hot.spans.push_back({", "});
    hot.spans.push_back({p.hot[i].first, true});
  }
  return hot;
}

}  // namespace

std::string DetailCell::text() const {
  std::string out;
  for (const auto& s : spans) out += s.text;
  return out;
}

bool DetailCell::all_names() const {
  return std::all_of(spans.begin(), spans.end(), [](const CellSpan& s) { return s.name; });
}

DetailCell name_cell(std::string text) {
  const bool placeholder = text.empty() || text == "-";
  return DetailCell{{CellSpan{std::move(text), !placeholder}}};
}

DetailCell words_cell(std::string text) { return DetailCell{{CellSpan{std::move(text)}}}; }

DetailTable waits_table(const analyze::Waits& w) {
  DetailTable t{"waits", "waits", "Whom the step waits on",
                {{"waited on", K::kName}, {"kind", K::kWords}, {"ms per step"}, {"% of the wait", K::kNumber, true},
                 {"busy % (each)"}, {"woke the step"}, {"step thread sat in", K::kName}, {"it ran", K::kName}},
                {}, {}};
  for (const auto& p : w.parties) {
    if (p.share < 0.01) continue;
    t.rows.push_back({party_cell(p), c(p.kind), c(fmt(p.ms_per_step, 3)), c(pct(p.share)),
                      c(busy_applies(p) ? fmt(p.busy_share * 100, 0) : "-"), c(n(p.wakeups)), nm(p.site.empty() ? "-" : p.site),
                      hot_cell(p)});
  }
  return t;
}

DetailTable step_stats_table(const analyze::StepStats& s) {
  return {"steps", "steps", "Step latency",
          {{"count"}, {"mean (ms)"}, {"p50 (ms)"}, {"p90 (ms)"}, {"p99 (ms)"}, {"max (ms)"}, {"min (ms)"}},
          {{c(n(s.count)), c(fmt(s.mean_ms, 3)), c(fmt(s.p50_ms, 3)), c(fmt(s.p90_ms, 3)), c(fmt(s.p99_ms, 3)),
            c(fmt(s.max_ms, 3)), c(fmt(s.min_ms, 3))}},
          {}};
}

DetailTable slowest_steps_table(const analyze::StepStats& s) {
  DetailTable t{"slowest", "slowest", "Slowest steps", {{"step"}, {"start (ms)"}, {"duration (ms)"}}, {}, {}};
  for (const auto& st : s.slowest) t.rows.push_back({c(n(st.index)), c(fmt(st.start_ms, 3)), c(fmt(st.duration_ms, 3))});
  return t;
}

DetailTable children_table(const Analysis& a) {
  // Several dumps named together are the run's ranks, not this process's children.
  const bool run = !a.children.empty() && !a.run.ranks.empty() && !a.launcher && a.children.front().path == a.source;
  DetailTable t{"children", "children", run ? "Dumps of the run" : "Child processes",
                {{"pid"}, {"command", K::kName}, {"dump", K::kName}, {"complete", K::kWords}, {"steps"}, {"step (ms)"},
                 {"primary", K::kName}},
                {}, {}};
  for (const auto& ch : a.children) {
    const std::string verdict = !ch.error.empty() ? "unreadable: " + truncate(ch.error, 80)
                                                  : ch.primary.empty() ? std::string("-") : ch.primary;
    t.rows.push_back({c(n(ch.pid)), nm(ch.cmdline), nm(ch.path), c(ch.complete ? "yes" : "no"), c(n(ch.steps)),
                      c(fmt(ch.step_ms, 3)), nm(verdict)});
  }
  return t;
}

DetailTable ranks_table(const analyze::RunAnalysis& run) {
  DetailTable t{"ranks", "ranks", "The ranks",
                {{"rank"}, {"pid"}, {"GPUs", K::kName}, {"step (ms)"}, {"compute"}, {"collectives"}, {"waiting"},
                 {"moving data"}, {"overlap"}, {"delayed others"}, {"its own primary", K::kName}, {"dump", K::kName}},
                {},
                "Times are per matched step in ms. Waiting: inside a collective until the last rank arrived; moving "
                "data: the rest of it; delayed others: how long the collectives waited for this rank, arriving last."};
  for (const auto& r : run.ranks)
    t.rows.push_back({c(std::to_string(r.rank)), c(n(r.pid)), nm(r.devices.empty() ? "-" : r.devices),
                      c(fmt(r.step_ms, 3)), c(fmt(r.compute_ms, 3)), c(fmt(r.comm_ms, 3)), c(fmt(r.wait_ms, 3)),
                      c(fmt(r.transfer_ms, 3)), c(fmt(r.overlap_ms, 3)), c(fmt(r.late_ms, 3)),
                      nm(r.primary.empty() ? "-" : r.primary), nm(r.path)});
  return t;
}

DetailTable host_clocks_table(const analyze::RunAnalysis& run) {
  DetailTable t{"host_clocks", "host-clocks", "Host clocks",
                {{"host", K::kName}, {"ranks", K::kName}, {"clock offset (ms)"}, {"precision (us)"},
                 {"collectives used"}},
                {}, {}};
  if (run.host_clocks.empty()) return t;
  for (const auto& clock : run.host_clocks)
    t.rows.push_back({nm(clock.hostname.empty() ? "-" : clock.hostname), nm(clock.ranks),
                      c(clock.reference ? "0 (reference)" : clock.estimated ? fmt(clock.offset_ms, 6) : "not estimated"),
                      c(clock.reference ? "-" : clock.estimated ? fmt(clock.precision_us, 1) : "-"),
                      c(clock.reference ? "-" : n(clock.collectives_used))});
  t.note = "The ranks ran on " + std::to_string(run.host_clocks.size()) + " hosts. Times are on the clock of " +
           run.host_clocks.front().hostname +
           "; another host's offset is the median, over the collectives matched between a rank of each, of (its end "
           "there - its end on the reference), as a collective ends on every rank at once. Its precision is the "
           "larger of those differences' spread (1.4826 x their median absolute deviation) and how far from the "
           "median causality lets the offset lie (neither rank's kernel ends before the other's started).";
  return t;
}

DetailTable collectives_table(const analyze::RunAnalysis& run) {
  DetailTable t{"collectives", "collectives", "Collectives",
                {{"collective", K::kName}, {"per step"}, {"moving data (ms)"}, {"waiting (ms)"},
                 {"last to arrive, of those late", K::kWords}, {"% with one late"}},
                {}, {}};
  for (const auto& x : run.collectives)
    t.rows.push_back({nm(x.op), c(fmt(x.per_step, 1)), c(fmt(x.transfer_ms, 3)), c(fmt(x.wait_ms, 3)),
                      c(x.last_rank < 0 ? "-" : std::to_string(x.last_rank) + " (" + fmt(x.last_share * 100, 0) + " %)"),
                      c(fmt(x.waited_share * 100, 0))});
  return t;
}

DetailTable sampling_windows_table(const analyze::Sampling& s) {
  DetailTable t{"sampling_windows", "sampling-windows", "Sampled windows",
                {{"window"}, {"reason", K::kWords}, {"detail", K::kWords}, {"start (ms)"}, {"end (ms)"},
                 {"first step"}, {"steps"}, {"analysed"}, {"slow"}, {"records"}},
                {}, {}};
  for (const auto& w : s.windows)
    t.rows.push_back({c(n(w.index)), c(w.reason + (w.pinned ? " (pinned)" : "") + (w.open ? " (open)" : "")),
                      c(w.full ? "full" : "ranges"), c(fmt(w.start_ms, 3)), c(fmt(w.end_ms, 3)), c(n(w.first_step)),
                      c(n(w.steps)), c(n(w.steps_analyzed)), c(n(w.slow_steps)), c(n(w.records))});
  return t;
}

DetailTable sampling_slow_steps_table(const analyze::Sampling& s) {
  DetailTable t{"sampling_slow_steps", "sampling-slow-steps", "Slow steps the runtime caught",
                {{"step of the run"}, {"start (ms)"}, {"duration (ms)"}, {"threshold (ms)"}, {"kept", K::kWords},
                 {"grew most (ranges only)", K::kWords}},
                {}, {}};
  for (const auto& x : s.slow_steps) {
    const std::string kept = x.detail == "full"     ? "full detail, window " + std::to_string(x.window)
                             : x.detail == "ranges" ? "ranges only, window " + std::to_string(x.window)
                                                    : "not kept";
    t.rows.push_back({c(n(x.step)), c(fmt(x.start_ms, 3)), c(fmt(x.duration_ms, 3)), c(fmt(x.bound_ms, 3)), c(kept),
                      c(x.grew.empty() ? "-" : x.grew + " (+" + fmt(x.grew_ms, 3) + " ms)")});
  }
  return t;
}

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
