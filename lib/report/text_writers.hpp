// Plain-text writers: iscope-analyze --summary (what a dump holds, from analyze::summarize), the findings as
// plain text (for debugging; the reports proper are report.hpp's) and the short summary for a terminal.
//
//   report::print_summary(reader, analyze::summarize(reader), std::cout);
//   report::print_findings_text(analysis, std::cerr);
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/summary.hpp"
#include "dump/reader.hpp"

#include <ostream>

namespace inferscope::report {

/// What the dump holds, as plain text with Markdown tables: format, status, process, clock calibration,
/// collectors, threads, ranges, Python functions, kernels, async spans, marks and drops.
void print_summary(const dump::DumpReader& reader, const analyze::Summary& summary, std::ostream& out);

/// The headline numbers and findings in plain text, one block per finding.
void print_findings_text(const analyze::Analysis& a, std::ostream& out);

/// What `iscope-analyze DUMP` prints to a terminal instead of the whole Markdown report (terminal_summary.cpp): the
/// headline latency, the primary cause, what to do first with its saving, the first three findings one line each,
/// the data's quality, and the command that writes the whole report ("-o report.md for the whole report").
void write_terminal_summary(const analyze::Analysis& a, std::ostream& out);

}  // namespace inferscope::report
