// The fields of the report's ten detail tables (top kernels, kernel families, Python functions, ranges, copies,
// syncs, allocations, CUDA graph launches, layers, threads), declared once: which Analysis vector holds each table's
// rows and under which key (for_each_detail_rows), and each row's fields in the order the JSON report writes them
// (for_each_field). The JSON report and the SQLite export iterate these instead of naming fields by hand, as they do
// breakdown_fields.hpp's; what the Markdown and HTML reports show of the same tables is report/detail_tables.hpp's.
// A finding's own fields, its examples', a suggestion's and a --try measurement's are here for the same two writers. A field added here reaches both writers, and the schema test (tests/report/test_report_schema.cpp) fails until
// docs/report-schema.md lists it.
#pragma once

#include "analyze/analysis.hpp"

#include <optional>
#include <string>
#include <vector>

namespace inferscope::analyze {

/// A field written only when true (the JSON report leaves out a kernel row's whole_graph when false); SQLite writes
/// it always, as 0 or 1.
struct OnlyWhenTrue {
  bool value;
};

/// Calls f(key, value) for each field of a row, in the JSON report's order. `value` is a std::string, a number, a
/// bool, an OnlyWhenTrue or a std::vector<CallerRow> (whose rows have fields of their own).
template <class Names, class F>
void for_each_field(const CallerRow& r, const Names&, F&& f) {
  f("api", r.api);
  f("called_from", r.called_from);
  f("count", r.count);
  f("total_ms", r.total_ms);
}
template <class Names, class F>
void for_each_field(const KernelRow& r, const Names& names, F&& f) {
  f("name", r.name);
  f("short_name", names.short_of(r.name));  // what the Markdown and HTML reports print
  f("count", r.count);
  f("total_ms", r.total_ms);
  f("mean_us", r.mean_us);
  f("share", r.share);
  f("launched_by", r.launched_by);
  f("whole_graph", OnlyWhenTrue{r.whole_graph});  // a CUDA graph's launches recorded at graph level
}
template <class Names, class F>
void for_each_field(const KernelFamilyRow& r, const Names&, F&& f) {
  f("family", r.family);
  f("kernels", r.kernels);
  f("total_ms", r.total_ms);
  f("share", r.share);
  f("tensor_core_share", r.tensor_core_share);
}
template <class Names, class F>
void for_each_field(const PythonRow& r, const Names&, F&& f) {
  f("qualname", r.qualname);
  f("file", r.file);
  f("line", r.line);
  f("count", r.count);
  f("total_ms", r.total_ms);
  f("self_ms", r.self_ms);
}
template <class Names, class F>
void for_each_field(const RangeRow& r, const Names&, F&& f) {
  f("name", r.name);
  f("count", r.count);
  f("total_ms", r.total_ms);
  f("self_ms", r.self_ms);
  f("mean_us", r.mean_us);
  f("p50_us", r.p50_us);
  f("p99_us", r.p99_us);
  f("max_us", r.max_us);
}
template <class Names, class F>
void for_each_field(const CopyRow& r, const Names&, F&& f) {
  f("direction", r.direction);
  f("src_memory", r.src_memory);
  f("dst_memory", r.dst_memory);
  f("count", r.count);
  f("bytes", r.bytes);
  f("total_ms", r.total_ms);
  f("bandwidth_gbps", r.bandwidth_gbps);
  f("peak_bandwidth_gbps", r.peak_bandwidth_gbps);
  f("peak_assumed", r.peak_assumed);
}
template <class Names, class F>
void for_each_field(const SyncRow& r, const Names&, F&& f) {
  f("kind", r.kind);
  f("count", r.count);
  f("total_ms", r.total_ms);
  f("max_ms", r.max_ms);
  f("called_from", r.called_from);
  f("callers", r.callers);
}
template <class Names, class F>
void for_each_field(const AllocRow& r, const Names&, F&& f) {
  f("op", r.op);
  f("memory", r.memory);
  f("count", r.count);
  f("bytes", r.bytes);
  f("api_ms", r.api_ms);
  f("called_from", r.called_from);
  f("callers", r.callers);
}
template <class Names, class F>
void for_each_field(const GraphLaunchRow& r, const Names&, F&& f) {
  f("api", r.api);
  f("count", r.count);
  f("api_ms", r.api_ms);
  f("called_from", r.called_from);
  f("callers", r.callers);
}
template <class Names, class F>
void for_each_field(const LayerRow& r, const Names&, F&& f) {
  f("path", r.path);
  f("count", r.count);
  f("cpu_ms", r.cpu_ms);
  f("gpu_ms", r.gpu_ms);
  f("kernels", r.kernels);
}
template <class Names, class F>
void for_each_field(const ThreadRow& r, const Names&, F&& f) {
  f("id", r.id);
  f("os_tid", r.os_tid);
  f("name", r.name);
  f("busy_ms", r.busy_ms);
  f("cpu_ms", r.cpu_ms);
  f("cpu_source", r.cpu_source);
  f("involuntary_switches", r.involuntary_switches);
}

/// A suggestion's estimated saving: the JSON report writes null when it was not estimated, the SQLite export the
/// number (0 then).
struct EstimatedMs {
  double ms;
  bool estimated;
};

/// What iscope-run --try measured, as the JSON report's `measured` object and SQLite's `suggestions.measured`.
template <class F>
void for_each_field(const TryMeasurement& m, F&& f) {
  f("command", m.command);
  f("knobs", m.knobs);
  f("pairs", m.pairs);
  f("saving_pct", m.saving_pct);
  f("saving_low_pct", m.low_pct);
  f("saving_high_pct", m.high_pct);
  f("measurable", m.measurable);
}

/// A finding's suggestion (the JSON report's `suggestions[]`, SQLite's `suggestions` after its finding_id and
/// seq). `cmdline`: the recorded program's command line, from which the --try command is made. `measured` is a
/// std::optional<TryMeasurement>, `needs` a std::vector<std::string>.
template <class F>
void for_each_field(const Suggestion& s, const std::string& cmdline, F&& f) {
  f("action", s.action);
  f("priority", s.priority);
  f("impact_ms", EstimatedMs{s.impact_ms, s.estimated});
  f("estimated", s.estimated);
  f("model", s.model);
  f("try_command", try_command(cmdline, s));  // "": no knob measures it (docs/try.md)
  f("measured", s.measured);                  // what iscope-run --try measured (its result file beside the dump)
  f("needs", s.needs);                        // the program facts it needs (the report's "program" says which hold)
}

/// A field the JSON report writes only when false (a finding's impact.estimated); SQLite writes it always.
struct OnlyWhenFalse {
  bool value;
};

/// A finding's key in the JSON report ("impact.ms": inside its "impact" object) and its column in SQLite's findings
/// table (the JSON key with "_" for ".", unless named).
struct FindingKey {
  const char* json;
  const char* column = nullptr;
  const char* sqlite() const { return column ? column : json; }
};

/// A finding's own fields (the JSON report's `findings[]` before its evidence, metrics, examples and suggestions,
/// which are lists: SQLite keeps each in a table of its own). f(FindingKey, value).
template <class F>
void for_each_field(const Finding& x, F&& f) {
  f(FindingKey{"bottleneck_type", "category"}, x.category);
  f(FindingKey{"rule"}, x.rule.empty() ? x.category : x.rule);  // the run's findings are their category's rule
  f(FindingKey{"title"}, x.title);
  f(FindingKey{"confidence"}, x.confidence);
  f(FindingKey{"uncertain"}, x.uncertain);
  f(FindingKey{"primary", "is_primary"}, x.primary);
  f(FindingKey{"informational"}, x.informational);
  f(FindingKey{"impact.ms", "impact_ms"}, x.impact_ms);
  f(FindingKey{"impact.estimated", "impact_estimated"}, OnlyWhenFalse{x.impact_estimated});  // a rule file's rule
  f(FindingKey{"impact.pct", "impact_pct"}, x.impact_pct);
  f(FindingKey{"impact.per", "impact_per"}, x.per);  // "step", or "request" (an asyncio service's request latency)
}

/// One example span of a finding (`findings[].examples[]`, SQLite's finding_examples after its finding_id).
template <class F>
void for_each_field(const TimeSpan& x, F&& f) {
  f("start_ms", x.start_ms);
  f("end_ms", x.end_ms);
  f("what", x.what);
}

/// Calls f(key, rows) for each detail table in report order: `key` is the JSON report's key under "tables" (and,
/// with '-' for '_', the HTML report's anchor); `rows` the Analysis vector it is made of.
template <class F>
void for_each_detail_rows(const Analysis& a, F&& f) {
  f("kernels", a.kernels);
  f("kernel_families", a.kernel_families);
  f("python", a.python);
  f("ranges", a.ranges);
  f("copies", a.copies);
  f("syncs", a.syncs);
  f("allocations", a.allocations);
  f("graph_launches", a.graph_launches);
  f("layers", a.layers);
  f("threads", a.threads);
}

}  // namespace inferscope::analyze
