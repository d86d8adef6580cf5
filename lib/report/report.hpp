// The report writers of iscope-analyze: they only format what the analyzer computed (analyze::Analysis), or,
// for the Perfetto trace, what the dump holds. docs/report-schema.md documents the JSON schema and the
// Markdown layout.
//
//   analyze::Analysis a = ...;
//   std::ofstream md("report.md");   report::write_markdown(a, md);
//   std::ofstream html("report.html"); report::write_html(a, html);
//   std::ofstream js("report.json");  report::write_json(a, js);
//   dump::DumpReader r("run.iscope"); std::ofstream tr("trace.json"); report::write_perfetto(r, tr);
#pragma once

#include "analyze/analysis.hpp"
#include "dump/reader.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace inferscope::report {

/// Version of the JSON report schema; fields are only ever appended (docs/report-schema.md).
inline constexpr int kJsonSchemaVersion = 1;

/// Markdown: "# InferScope report: <program> (<dump>)", "End-to-end latency: X ms", the warnings and data-quality
/// notes, then the step breakdown, step statistics, findings ranked by impact, the tables and the process facts.
/// Names are verbatim code spans (grep finds them), kernels by their short names (names.hpp); no line is longer
/// than about 300 characters.
void write_markdown(const analyze::Analysis& a, std::ostream& out);

/// One self-contained HTML page (no network access needed): warnings first, inline SVG timeline of the
/// representative step, a breakdown chart, the findings and the tables (each sortable), the process facts
/// collapsed at the end. Kernels by their short names, the full name on hover. Every name taken from the trace
/// is HTML-escaped.
void write_html(const analyze::Analysis& a, std::ostream& out);

/// The JSON report (schema_version 1, keys in a fixed order).
void write_json(const analyze::Analysis& a, std::ostream& out);

/// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing), streamed record by record so
/// memory stays bounded whatever the dump's size. Timestamps are microseconds from the trace's time origin,
/// the one every report of the dump states its times from (dump/trace_bounds.hpp); the few records from before
/// it (counter samples as the session started) are drawn from it. Given the dump's analysis, its steps are a
/// "Steps" track ("step 0 (warm-up)", "step 7 (slow)"). Throws dump::DumpError on a malformed record before
/// writing anything (every record is checked in a first pass that also finds the time origin).
void write_perfetto(const dump::DumpReader& reader, std::ostream& out, const analyze::Analysis* analysis = nullptr);

/// One dump of a run's trace, the label its tracks carry ("rank 1") and, given its analysis's steps, its Steps
/// track.
struct RunTracePart {
  const dump::DumpReader* reader = nullptr;
  std::string label;
  const analyze::StepStats* steps = nullptr;  ///< its steps (none: no Steps track for it)
  uint32_t representative_step = 0;           ///< the step its reports draw
};
/// The dumps of one multi-process run (the ranks of a torchrun job) as one trace: one time line (the processes of
/// one host share CLOCK_MONOTONIC), each process and each of its GPUs a lane named with its label, flow arrows
/// kept within their process; each process with steps has its own Steps track on that time line. One part writes
/// what write_perfetto writes.
void write_perfetto_run(const std::vector<RunTracePart>& parts, std::ostream& out);

}  // namespace inferscope::report
