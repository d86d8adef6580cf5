// The HTML report's tables (internal to lib/report): cells given already escaped, sortable by kScript, share
// columns with an inline bar.
#pragma once

#include "report/escape.hpp"

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

namespace inferscope::report::html {

/// A table whose cells are given already escaped. `num` marks numeric columns (right-aligned, sorted as numbers:
/// kScript reads the header's class); other columns hold names from the trace, in a monospace font, except those
/// `words` marks. `foot` (a total) stays below the rows when they are sorted.
struct Table {
  std::vector<std::string> head;
  std::vector<bool> num;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> foot = {};
  std::vector<bool> words = {};
  /// Columns holding a share of time in percent (0 to 100): each cell gets an inline bar of that length behind
  /// its number (a CSS gradient; the cell's text, and so sorting, are unchanged).
  std::vector<size_t> bars = {};

  const char* cell_class(size_t i) const {
    if (i < num.size() && num[i]) return "n";
    return i < words.size() && words[i] ? "w" : "name";
  }
  /// The style of a bar cell: its number (the text up to the first non-number) as the bar's length in %.
  std::string bar_style(size_t i, const std::string& cell) const {
    if (std::find(bars.begin(), bars.end(), i) == bars.end()) return {};
    const double v = std::strtod(cell.c_str(), nullptr);
    if (!(v > 0)) return {};
    const std::string w = fmt(std::min(100.0, v), 1);
    return " style=\"background:linear-gradient(to right,#d4e3f2 " + w + "%,transparent " + w + "%)\"";
  }
  void write_row(std::ostream& out, const std::vector<std::string>& r, bool body = true) const {
    out << "<tr>";
    for (size_t i = 0; i < r.size(); ++i)
      out << "<td class=\"" << cell_class(i) << "\"" << (body ? bar_style(i, r[i]) : std::string()) << ">" << r[i]
          << "</td>";
    out << "</tr>\n";
  }
  void write(std::ostream& out) const {
    out << "<table class=\"sortable\"><thead><tr>";
    for (size_t i = 0; i < head.size(); ++i)
      out << (i < num.size() && num[i] ? "<th class=\"n\">" : "<th>") << head[i] << "</th>";
    out << "</tr></thead><tbody>\n";
    for (const auto& r : rows) write_row(out, r);
    out << "</tbody>";
    if (!foot.empty()) {
      out << "<tfoot>";
      write_row(out, foot, false);
      out << "</tfoot>";
    }
    out << "</table>\n";
  }
};

}  // namespace inferscope::report::html
