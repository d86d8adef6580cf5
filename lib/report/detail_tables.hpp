// What the Markdown and HTML reports show of the ten detail tables (analyze/table_fields.hpp lists them and their
// rows' fields, which the JSON report and the SQLite export write): each table's heading, columns, cells as plain
// text and the note under it, declared once in detail_tables.cpp. The two writers lay these out and name no column
// of their own, so a column added there reaches both.
#pragma once

#include "analyze/analysis.hpp"
#include "report/names.hpp"

#include <string>
#include <vector>

namespace inferscope::report {

// --- what the Markdown and HTML reports show ----------------------------------------------------------------------

/// How a column reads: numbers (right-aligned, sorted as numbers), names from the trace (a code span in Markdown, a
/// monospace font in HTML), file paths (names whose end tells them apart: a long one loses its beginning in
/// Markdown), or words.
enum class CellKind { kNumber, kName, kPath, kWords };

struct DetailColumn {
  std::string head;
  CellKind kind = CellKind::kNumber;
  bool bar = false;  ///< its cells are shares in % (0 to 100), drawn as bars (Markdown: in a column after it)
};

/// A cell as plain text (each writer escapes it). A name cell may hold several names read as one ("pageable →
/// device"): `parts`, joined by " → ". `full`: a kernel's full name when the text is its short one (HTML: on hover).
struct DetailCell {
  std::vector<std::string> parts;
  std::string full = {};
  const std::string& text() const { return parts.front(); }
};

struct DetailTable {
  std::string key;     ///< the JSON key of its rows (for_each_detail_rows)
  std::string anchor;  ///< the HTML section's id
  std::string title;   ///< the heading
  std::vector<DetailColumn> columns;
  std::vector<std::vector<DetailCell>> rows;
  std::string note;    ///< a sentence under the table, plain text; may be empty
};

/// The detail tables of `a` that have rows, in report order.
std::vector<DetailTable> detail_tables(const analyze::Analysis& a, const KernelNames& names);

}  // namespace inferscope::report
