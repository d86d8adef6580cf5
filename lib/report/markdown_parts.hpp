// What the Markdown report's writers share (internal to lib/report): markdown.cpp writes the report,
// markdown_top.cpp its top (the headline, the primary cause, what to do first) and the data-quality notes.
#pragma once

#include "analyze/analysis.hpp"
#include "report/names.hpp"

#include <ostream>
#include <string>
#include <string_view>

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

/// The report's top: title, latency with its spread, the primary cause in words and what to do first, one line
/// on the data's quality (the notes themselves come here when something is wrong, else at the end).
void write_top(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);
/// The data-quality notes as a section.
void write_quality(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);

}  // namespace inferscope::report::md
