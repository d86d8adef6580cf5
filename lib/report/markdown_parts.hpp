// What the Markdown report's writers share (internal to lib/report): markdown.cpp writes the report,
// markdown_top.cpp its top (the headline, the primary cause, what to do first) and the data-quality notes,
// markdown_appendix.cpp the appendix.
#pragma once

#include "analyze/analysis.hpp"
#include "report/detail_tables.hpp"
#include "report/names.hpp"

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::report::md {

/// A name in prose: a code span.
std::string code(std::string_view s);

/// Prose from the analyzer (titles, evidence, suggestions, warnings): escaped, with each kernel's full name
/// replaced by its short name as a code span, and other names that hold `<` or `>` as code spans (md_prose).
/// With `max_chars`, the plain text is cut so the whole stays within about that many characters (a heading).
std::string prose(const KernelNames& names, std::string_view text, size_t max_chars = std::string::npos);

/// A share in percent (0 to 100) as a bar of up to `width` characters, in eighths of a block ("█████▏" for
/// 51.2 % of 10): the HTML tables' inline bars, in plain text. Empty below half an eighth (and for no share).
std::string share_bar(double pct, size_t width = 10);

/// A GitHub-flavoured table; cells must already be escaped. `right` marks right-aligned (numeric) columns.
void table(std::ostream& out, const std::vector<std::string>& head, const std::vector<bool>& right,
           const std::vector<std::vector<std::string>>& rows);

/// A table of the model (report/detail_tables.hpp): names as code spans, a column of bars after each share column,
/// its note under it.
void write_model_table(const DetailTable& t, std::ostream& out);

/// The report's top: title, latency with its spread, the primary cause in words and what to do first, one line
/// on the data's quality (with the warnings that make the numbers doubtful, when there are any).
void write_top(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);
/// The data-quality notes, as the appendix's first part.
void write_quality(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);
/// What a reader looks up rather than reads (markdown_appendix.cpp): the data-quality notes, a sampled run's
/// windows and slow steps, and every process fact, under "## Appendix" at the end of the report.
void write_appendix(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);

}  // namespace inferscope::report::md
