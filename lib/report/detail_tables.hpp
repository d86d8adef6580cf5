// The tables of the Markdown and HTML reports, declared once in detail_tables.cpp: the ten detail tables
// (analyze/table_fields.hpp lists them and their rows' fields, which the JSON report and the SQLite export write)
// and the tables inside other sections (whom the step waits on, the step statistics, the slowest steps, the child
// processes, a run's ranks, hosts and collectives, a sampled run's windows and slow steps): each one's heading, columns, cells as plain text and the note under it. The two writers lay these
// out and name no column of their own, so a column added there reaches both.
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

/// A piece of a cell: a name from the trace (a code span in Markdown) or words.
struct CellSpan {
  std::string text;
  bool name = false;
};

/// A cell as plain text (each writer escapes it), in spans: most cells are one span; a cell that names several
/// things says so in words between them ("pageable → device", "worker (holding the GIL) ×3"). `full`: a kernel's
/// full name when the text is its short one (HTML: on hover).
struct DetailCell {
  std::vector<CellSpan> spans;
  std::string full = {};
  /// The whole cell's text.
  std::string text() const;
  /// Whether every span is a name (then a name column's font marks it, and no span needs marking of its own).
  bool all_names() const;
};

/// A cell of one name (empty and "-" stay words: "no caller" is not a name), one span of words.
DetailCell name_cell(std::string text);
DetailCell words_cell(std::string text);

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

// The tables inside other sections, laid out the same way (their sections' headings and prose are the writers'):
/// Whom the step waits on: one row per party with at least 1 % of the wait.
DetailTable waits_table(const analyze::Waits& w);
/// The step time's statistics (one row) and the slowest steps.
DetailTable step_stats_table(const analyze::StepStats& s);
DetailTable slowest_steps_table(const analyze::StepStats& s);
/// The child processes (or the run's dumps) beside this one; title: "Child processes" or "Dumps of the run".
DetailTable children_table(const analyze::Analysis& a);
/// A run of several ranks (docs/multi-gpu.md): its ranks, each host's clock (ranks on several hosts; empty on one),
/// its collectives.
DetailTable ranks_table(const analyze::RunAnalysis& run);
DetailTable host_clocks_table(const analyze::RunAnalysis& run);
DetailTable collectives_table(const analyze::RunAnalysis& run);
/// A sampled run: its windows, and the slow steps the runtime caught.
DetailTable sampling_windows_table(const analyze::Sampling& s);
DetailTable sampling_slow_steps_table(const analyze::Sampling& s);

}  // namespace inferscope::report
