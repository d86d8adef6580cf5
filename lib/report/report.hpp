// The report writers of iscope-analyze: they only format what the analyzer computed (analyze::Analysis); the
// Perfetto trace, a conversion of the dump itself, is lib/export's (export/perfetto.hpp). docs/report-schema.md
// documents the JSON schema and the Markdown layout.
//
//   analyze::Analysis a = ...;
//   std::ofstream md("report.md");   report::write_markdown(a, md);
//   std::ofstream html("report.html"); report::write_html(a, html);
//   std::ofstream js("report.json");  report::write_json(a, js);
#pragma once

#include "analyze/analysis.hpp"

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

}  // namespace inferscope::report
