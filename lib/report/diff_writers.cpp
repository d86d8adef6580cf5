// The comparison in Markdown and HTML (diff.hpp). Both print the same headline and the same tables: the tables
// are built once, as cells, and each writer only escapes and lays them out.
#include "report/diff.hpp"
#include "report/escape.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace inferscope::report {
namespace {

struct Cell {
  std::string text;
  bool code = false;  ///< a name from a trace: a code span in Markdown, <code> in HTML
};
struct Table {
  std::string title;
  std::vector<std::string> head;
  std::vector<std::vector<Cell>> rows;
  std::string empty;  ///< said instead of an empty table
  std::string align;  ///< per column: 'l' text, 'r' numbers
};

// "+1.25" / "-1.25": a change always shows its sign.
std::string signed_fmt(double v, int decimals = 2) {
  if (!std::isfinite(v)) return "n/a";
  const std::string s = fmt(v, decimals);
  return s[0] == '-' || s.find_first_not_of("0.") == std::string::npos ? s : "+" + s;
}
std::string pct_cell(double v) { return std::isfinite(v) ? signed_fmt(v, 1) + " %" : "n/a"; }
Cell text(std::string s) { return {std::move(s), false}; }
Cell code(std::string s) { return {std::move(s), true}; }

// "[-10.972, -10.193]": a statistic's 95 % interval of the change, or why there is none.
std::string interval_cell(const MedianInterval& iv) {
  return iv.available ? "[" + signed_fmt(iv.low_ms, 3) + ", " + signed_fmt(iv.high_ms, 3) + "]" : "not available";
}

// The p50, mean and p90 verdicts side by side, each with its interval: the headline's statistic is one of them.
Table latency_table(const LatencyChange& l) {
  Table t{"Step latency (steady state)", {"", "Before", "After", "Change", "Verdict", "95 % interval of the change (ms)"},
          {}, "", "lrrrll"};
  t.rows.push_back({text("Step"), code(l.before.name), code(l.after.name), text(""), text(""), text("")});
  t.rows.push_back({text("Steady steps"), text(std::to_string(l.before.count)), text(std::to_string(l.after.count)),
                    text(signed_fmt(double(l.after.count) - double(l.before.count), 0)), text(""), text("")});
  for (const auto& c : l.statistics)
    t.rows.push_back({text(c.statistic + " (ms)" + (c.statistic == l.headline ? ", the headline" : "")),
                      text(fmt(c.before_ms, 3)), text(fmt(c.after_ms, 3)),
                      text(signed_fmt(c.delta_ms, 3) + " (" + pct_cell(c.delta_pct) + ")"), text(c.verdict),
                      text(interval_cell(c.interval))});
  return t;
}

Table breakdown_table(const std::vector<BreakdownChange>& rows) {
  Table t{"Breakdown of the mean step", {"Part", "Before (ms)", "After (ms)", "Change (ms)", "Change (%)"}, {}, "", "lrrrr"};
  for (const auto& r : rows) {
    const bool util = r.key == "gpu_utilization_pct";
    t.rows.push_back({text(r.label), text(fmt(r.before_ms, util ? 1 : 3)), text(fmt(r.after_ms, util ? 1 : 3)),
                      text(signed_fmt(r.delta_ms, util ? 1 : 3)), text(util ? "" : pct_cell(r.delta_pct))});
  }
  return t;
}

Table findings_table(const std::vector<FindingChange>& fs) {
  Table t{"Findings", {"Category", "Change", "Impact before (ms/step)", "Impact after (ms/step)", "Change (ms)", "Finding"},
          {}, "Neither run has findings.", "llrrrl"};
  for (const auto& f : fs) {
    std::string change = f.change;
    if (f.primary_before != f.primary_after) change += f.primary_after ? ", now primary" : ", no longer primary";
    t.rows.push_back({code(f.category), text(change), text(f.title_before.empty() ? "-" : fmt(f.impact_before_ms, 3)),
                      text(f.title_after.empty() ? "-" : fmt(f.impact_after_ms, 3)), text(signed_fmt(f.delta_ms, 3)),
                      text(f.title_after.empty() ? f.title_before : f.title_after)});
  }
  return t;
}

Table names_table(std::string title, const char* what, const std::vector<NameChange>& rows) {
  Table t{std::move(title), {what, "Count before", "Count after", "Change", "Total before (ms)", "Total after (ms)", "Change (ms)"},
          {}, "No change.", "lrrrrrr"};
  for (const auto& r : rows)
    t.rows.push_back({code(r.display), text(std::to_string(r.count_before)), text(std::to_string(r.count_after)),
                      text(signed_fmt(double(r.delta_count()), 0)), text(fmt(r.total_before_ms, 3)),
                      text(fmt(r.total_after_ms, 3)), text(signed_fmt(r.delta_ms(), 3))});
  return t;
}

std::vector<Table> tables_of(const Comparison& c) {
  return {latency_table(c.latency), breakdown_table(c.breakdown), findings_table(c.findings),
          names_table("Kernels that changed most, by total time", "Kernel", c.kernels_by_time),
          names_table("Kernels that changed most, by count", "Kernel", c.kernels_by_count),
          names_table("Python functions that changed most, by total time", "Function", c.python_by_time),
          names_table("Python functions that changed most, by count", "Function", c.python_by_count)};
}

// "Step latency (p50): 12.400 ms -> 3.100 ms (-9.300 ms, -75.0 %): faster." on the analysis report's basis (the
// mean where the steps are not alike, saying so), the interval's sentence, and the other statistics' verdicts.
std::vector<std::string> headline(const Comparison& c) {
  const auto& l = c.latency;
  const StatisticChange& m = l.headline_change();
  std::string h = "Step latency (" + m.statistic + (l.headline_reason.empty() ? "" : ": " + l.headline_reason) +
                  "): " + fmt(m.before_ms, 3) + " ms -> " + fmt(m.after_ms, 3) + " ms (" + signed_fmt(m.delta_ms, 3) +
                  " ms, " + pct_cell(m.delta_pct) + "): " + m.verdict + ".";
  std::string i = "95 % interval of the change in the " + std::string(m.statistic == "p50" ? "median" : m.statistic) + ": ";
  if (m.interval.available)
    i += "[" + signed_fmt(m.interval.low_ms, 3) + ", " + signed_fmt(m.interval.high_ms, 3) + "] ms (" + m.interval.note + ").";
  else
    i += m.interval.note + ".";
  std::string others;
  for (const auto& s : l.statistics)
    if (s.statistic != m.statistic)
      others += (others.empty() ? "" : "; ") + s.statistic + " " + signed_fmt(s.delta_ms, 3) + " ms (" +
                pct_cell(s.delta_pct) + "): " + s.verdict;
  if (!others.empty()) i += " Beside it: " + others + ".";
  return {h, i};
}

std::string md_text(const Cell& c) { return c.code ? md_code(c.text) : md_cell(c.text); }

void md_table(const Table& t, std::ostream& out) {
  out << "\n## " << t.title << "\n\n";
  if (t.rows.empty()) return void(out << t.empty << "\n");
  out << "|";
  for (const auto& h : t.head) out << " " << md_cell(h) << " |";
  out << "\n|";
  for (size_t i = 0; i < t.head.size(); ++i) out << (i < t.align.size() && t.align[i] == 'r' ? "---:|" : "---|");
  out << "\n";
  for (const auto& r : t.rows) {
    out << "|";
    for (const auto& c : r) out << " " << md_text(c) << " |";
    out << "\n";
  }
}

std::string html_text(const Cell& c) {
  return c.code ? "<code>" + html_escape(c.text) + "</code>" : html_escape(c.text);
}

void html_table(const Table& t, std::ostream& out) {
  out << "<h2>" << html_escape(t.title) << "</h2>\n";
  if (t.rows.empty()) return void(out << "<p>" << html_escape(t.empty) << "</p>\n");
  out << "<table><thead><tr>";
  for (const auto& h : t.head) out << "<th>" << html_escape(h) << "</th>";
  out << "</tr></thead><tbody>\n";
  for (const auto& r : t.rows) {
    out << "<tr>";
    for (const auto& c : r) out << "<td>" << html_text(c) << "</td>";
    out << "</tr>\n";
  }
  out << "</tbody></table>\n";
}

constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right}th:first-child,td:first-child{text-align:left}"
    "td:last-child{text-align:left}code{font-size:.9em}.notes{color:#8a4b00}";

}  // namespace

void write_diff_markdown(const Comparison& c, std::ostream& out) {
  out << "# InferScope comparison: " << md_escape(c.before_subject) << " -> " << md_escape(c.after_subject) << "\n\n";
  out << "Before: " << md_code(c.before_source) << ", after: " << md_code(c.after_source) << "\n\n";
  const auto h = headline(c);
  out << "**" << h[0] << "** " << h[1] << "\n";  // our words and numbers only: nothing to escape
  if (!c.notes.empty()) {
    out << "\n";
    for (const auto& n : c.notes) out << "- Note: " << md_escape(n) << "\n";
  }
  for (const auto& t : tables_of(c)) md_table(t, out);
}

void write_diff_html(const Comparison& c, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>InferScope comparison: "
      << html_escape(c.before_subject) << " -&gt; " << html_escape(c.after_subject) << "</title><style>" << kStyle
      << "</style></head><body>\n<h1>InferScope comparison</h1>\n<p>Before: <code>" << html_escape(c.before_source)
      << "</code>, after: <code>" << html_escape(c.after_source) << "</code></p>\n";
  const auto h = headline(c);
  out << "<p><strong>" << html_escape(h[0]) << "</strong> " << html_escape(h[1]) << "</p>\n";
  if (!c.notes.empty()) {
    out << "<ul class=\"notes\">";
    for (const auto& n : c.notes) out << "<li>" << html_escape(n) << "</li>";
    out << "</ul>\n";
  }
  for (const auto& t : tables_of(c)) html_table(t, out);
  out << "</body></html>\n";
}

}  // namespace inferscope::report
