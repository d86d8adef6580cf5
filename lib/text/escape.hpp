// Escaping for the report writers and iscope-analyze --summary. Names in a trace come from the traced program
// (kernel names, Python qualnames, user range names, attribute values) and may hold anything: markup, quotes,
// control characters, invalid UTF-8. Every writer passes them through one of these functions before they reach
// the output. Below lib/report (which uses them as report::md_code..., and prints --summary with them) and
// lib/export: one copy of each rule.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace inferscope::text {

/// `s` as valid UTF-8: each byte that does not belong to a well-formed sequence becomes U+FFFD.
std::string valid_utf8(std::string_view s);

/// Appends `s` as the inside of a JSON string (no quotes): valid UTF-8, control characters as \uXXXX.
void append_json_escaped(std::string& out, std::string_view s);
/// `s` as a quoted JSON string.
std::string json_quote(std::string_view s);

/// `s` for HTML text and attribute values: & < > " ' escaped, invalid UTF-8 replaced, control characters
/// other than tab and newline dropped.
std::string html_escape(std::string_view s);

/// `s` for Markdown prose and table cells: one line (newlines become spaces) with the characters that Markdown
/// or a table would interpret backslash-escaped: \ ` * [ ] < > | ~ always, _ only where it is not inside a word
/// (snake_case stays greppable), # only at the start. Names go in code spans instead (md_code).
std::string md_escape(std::string_view s);

/// `s` as Markdown prose: md_escape, except that a word shaped like a program name that holds `<` or `>`
/// (Python's `main.<locals>.step`, `<module>`, a C++ `vector<int>::push_back`) becomes a code span, so that it
/// reads and greps as typed instead of as `main.\<locals\>.step`. Quotes around such a word are dropped (the
/// span quotes it); punctuation before or after it stays outside. Words without a letter (`<=`, `->`) and
/// words with other characters stay escaped text.
std::string md_prose(std::string_view s);

/// `s` as a Markdown code span on one line, verbatim (control characters dropped, C1 included): the fence is longer than any run of backticks inside, as
/// CommonMark allows, so a name with backticks is kept as it is and can be found with grep. In a table cell,
/// pass the result through md_cell.
std::string md_code(std::string_view s);

/// `s` as text on one line of a terminal or a plain-text file: valid UTF-8, newlines and tabs as spaces, every other
/// control character (C0, DEL, C1) dropped, so a value from a trace cannot move the cursor, recolour the terminal or
/// start a line of its own. What --summary writes values with (a command line, a host name, a collector's status).
std::string one_line(std::string_view s);

/// A table cell: only `|` escaped (GitHub splits cells at a pipe even inside a code span, and unescapes `\|`).
std::string md_cell(std::string_view s);

/// A measured value for prose: integers without decimals, others with up to 3 decimals, trailing zeros cut.
std::string fmt_value(double v);

/// At most `max_chars` code points of `s` (valid UTF-8), the last one "…" when it was cut.
std::string truncate(std::string_view s, size_t max_chars);

/// Fixed-point formatting without locale surprises: fmt(3.14159, 2) == "3.14"; non-finite values as "n/a".
std::string fmt(double v, int decimals);

/// A time in ms for prose, with the precision the analyzer's own sentences give it (its findings' titles and
/// evidence): 1 decimal from 10 ms, 2 from 0.1 ms, 3 below ("19.5", "1.23", "0.045"), without the unit. Tables
/// keep fmt(v, 3); a sentence of a report that quotes a figure a title also quotes then reads it the same way.
std::string fmt_ms(double ms);

}  // namespace inferscope::text
