// The Markdown report. Layout (docs/report-schema.md, "Markdown report"): the top (markdown_top.cpp: an H1
// title, the end-to-end latency with its spread, the primary cause and what to do first, one line on the data
// with the warnings that make it doubtful), then the findings ranked by impact (within the first 25 lines), the
// breakdown (rows at 0 ms named in a line, not shown), whom the step waits on, step statistics, the tables, and
// the appendix (markdown_appendix.cpp: data-quality notes, a sampled run's windows, the process facts). Sections
// with nothing to show are left out, except the breakdown and findings, which say so. Names are code spans (verbatim, so grep finds them), kernels by their short names; no line is
// longer than about 300 characters: table cells are cut, prose is wrapped outside code spans.
#include "report/common.hpp"
#include "report/detail_tables.hpp"
#include "report/generation.hpp"
#include "report/requests.hpp"
#include "report/escape.hpp"
#include "report/labels.hpp"
#include "report/markdown_parts.hpp"
#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace inferscope::report {

namespace md {

std::string code(std::string_view s) { return md_code(s); }

std::string share_bar(double pct, size_t width) {
  if (!(pct > 0)) return {};
  static const char* const kEighths[] = {"", "\u258F", "\u258E", "\u258D", "\u258C", "\u258B", "\u258A", "\u2589"};
  const auto units = static_cast<size_t>(std::lround(std::min(pct, 100.0) / 100.0 * static_cast<double>(width) * 8));
  std::string bar;
  for (size_t i = 0; i < units / 8; ++i) bar += "\u2588";
  return bar + kEighths[units % 8];
}

std::string prose(const KernelNames& names, std::string_view text, size_t max_chars) {
  std::string out;
  size_t used = 0;
  for (const auto& p : names.split(text)) {
    if (used >= max_chars) break;
    if (!p.full.empty()) {
      out += code(p.text);
      used += p.text.size();
    } else {
      const std::string t = max_chars == std::string::npos ? p.text : truncate(p.text, max_chars - used);
      out += md_prose(t);
      used += t.size();
    }
  }
  return out;
}

void table(std::ostream& out, const std::vector<std::string>& head, const std::vector<bool>& right,
           const std::vector<std::vector<std::string>>& rows) {
  out << '|';
  for (const auto& h : head) out << ' ' << h << " |";
  out << "\n|";
  for (size_t i = 0; i < head.size(); ++i) out << (i < right.size() && right[i] ? " ---: |" : " --- |");
  out << '\n';
  for (const auto& r : rows) {
    out << '|';
    for (const auto& c : r) out << ' ' << c << " |";
    out << '\n';
  }
  out << '\n';
}

}  // namespace md

namespace {

using analyze::Analysis;
using md::code;
using md::prose;
using md::table;
using md::write_model_table;

/// Longest name in a table cell, in characters; kernel names are short already (names.hpp).
constexpr size_t kCellChars = 100;
/// Prose lines are wrapped at spaces to this width (a code span is never broken).
constexpr size_t kWrapChars = 200;

/// A name in a table cell: a code span, cut to kCellChars, pipes escaped.
std::string cell(std::string_view s) {
  if (s.empty() || s == "-") return std::string(s);  // "no caller" placeholders are not names
  return md_cell(md_code(truncate(s, kCellChars)));
}

/// A file path in a table cell: its end is what tells files apart, so a long path loses its beginning.
std::string path_cell(const std::string& s) {
  std::vector<std::string_view> cps;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    cps.push_back(std::string_view(s).substr(i, n));
    i += n;
  }
  if (cps.size() <= kCellChars) return cell(s);
  std::string tail = "\xE2\x80\xA6";
  for (size_t i = cps.size() - (kCellChars - 1); i < cps.size(); ++i) tail.append(cps[i]);
  return cell(tail);
}

/// A table's cell (detail_tables.hpp): names as code spans (cut to kCellChars), a path losing its beginning,
/// words escaped.
std::string detail_cell(const DetailCell& x, CellKind kind) {
  if (kind == CellKind::kPath) return path_cell(x.text());
  std::string out;
  for (const CellSpan& span : x.spans) out += span.name ? cell(span.text) : md_cell(md_escape(span.text));
  return out;
}

}  // namespace

/// A table of the model (detail_tables.hpp), a column of bars after each share column, its note under it.
void md::write_model_table(const DetailTable& t, std::ostream& out) {
  std::vector<std::string> head;
  std::vector<bool> right;
  for (const DetailColumn& col : t.columns) {
    head.push_back(col.head);
    right.push_back(col.kind == CellKind::kNumber);
    if (col.bar) {
      head.emplace_back();
      right.push_back(false);
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : t.rows) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < r.size(); ++i) {
      cells.push_back(detail_cell(r[i], t.columns[i].kind));
      if (t.columns[i].bar) cells.push_back(md::share_bar(std::strtod(r[i].text().c_str(), nullptr)));
    }
    rows.push_back(std::move(cells));
  }
  table(out, head, right, rows);
  if (!t.note.empty()) out << md_escape(t.note) << "\n\n";
}

namespace {


/// `line` broken at spaces outside code spans into lines of about `width` characters; continuation lines are
/// indented like the text after a list marker ("- ", "12. ") so they stay in the item. Tables and headings
/// are left alone (a table row cannot be wrapped; their cells are cut instead).
std::string wrap(const std::string& line, size_t width) {
  if (line.size() <= width || line[0] == '|' || line[0] == '#') return line + '\n';
  size_t indent = 0;
  if (line.rfind("- ", 0) == 0) indent = 2;
  else if (size_t d = line.find_first_not_of("0123456789"); d > 0 && d != std::string::npos && line.compare(d, 2, ". ") == 0)
    indent = d + 2;
  // Break points: spaces outside code spans (a run of n backticks opens a span that the next run of n closes).
  std::vector<size_t> breaks;
  for (size_t i = indent; i < line.size();) {
    if (line[i] == '\\') {
      i += 2;
      continue;
    }
    if (line[i] == '`') {
      const size_t e = std::min(line.find_first_not_of('`', i), line.size());
      size_t close = std::string::npos;
      for (size_t j = line.find('`', e); j != std::string::npos; j = line.find('`', j)) {
        const size_t je = std::min(line.find_first_not_of('`', j), line.size());
        if (je - j == e - i) {
          close = je;
          break;
        }
        j = je;
      }
      i = close == std::string::npos ? e : close;
      continue;
    }
    if (line[i] == ' ') breaks.push_back(i);
    ++i;
  }
  std::string out;
  const std::string pad(indent, ' ');
  size_t from = 0;  // start of the output line being filled
  for (size_t k = 0; k < breaks.size(); ++k) {
    const size_t next = k + 1 < breaks.size() ? breaks[k + 1] : line.size();
    if (next - from > width && breaks[k] > from) {
      out += (from ? pad : std::string()) + line.substr(from, breaks[k] - from) + '\n';
      from = breaks[k] + 1;
    }
  }
  return out + (from ? pad : std::string()) + line.substr(from) + '\n';
}


// The step by cause, named as the findings name them: each row is the impact of that category's finding, were it
// reported.
void write_causes(const Analysis& a, std::ostream& out) {
  const auto& b = a.breakdown;
  out << "By cause, in the findings' categories:\n\n";
  const ZeroSplit split = split_zero_rows(cause_rows(b, a.gpu_work_recorded));
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : split.shown)
    rows.push_back({category_name(r.key) + " (" + code(r.key) + ")", r.label, fmt(r.ms, 3), fmt(pct_of(r.ms, b.step_ms), 1)});
  table(out, {"Cause", "What", "Time (ms)", "% of step"}, {false, false, true, true}, rows);
  std::vector<std::string> keys;  // the causes by their keys, as the findings' categories are grepped
  for (const auto& r : split.zero) keys.push_back(code(r.key));
  if (!keys.empty()) out << zero_rows_note(keys, "cause") << "\n\n";
}

// The step split by component, rows at 0 ms named in a line instead of shown, then the same step by cause (whose
// rows are the GPU's idle time by cause and the host's state: they are not repeated in words).
void write_breakdown(const Analysis& a, std::ostream& out) {
  const auto& b = a.breakdown;
  out << "## Timeline Breakdown\n\n";
  out << "The step split by component (a time split; the causes, named as the findings name them, follow):\n\n";
  const ZeroSplit split = split_zero_rows(breakdown_rows(b, a.gpu_work_recorded));
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : split.shown)
    rows.push_back({r.label, fmt(r.ms, 3), fmt(pct_of(r.ms, b.step_ms), 1), md::share_bar(pct_of(r.ms, b.step_ms))});
  rows.push_back({"**Step total**", "**" + fmt(b.step_ms, 3) + "**", b.step_ms > 0 ? "**100.0**" : "0.0", ""});
  table(out, {"Component", "Time (ms)", "% of step", ""}, {false, true, true, false}, rows);
  if (!split.zero.empty()) out << zero_rows_note(labels_of(split.zero)) << "\n\n";
  if (!a.gpu_work_recorded) out << "No GPU work was recorded: the step is host time only.\n\n";
  else
    out << "GPU utilization: " << fmt(b.gpu_utilization * 100.0, 1) << " % of the step; each instant the GPU was idle "
        << "has one cause below (the host's work, its contention and its waits, launches, synchronizations, "
        << "allocations).\n\n";
  write_causes(a, out);
}

// Whom the step thread waited on (Analysis::waits): a row per party, what it ran, where the step sat.
void write_waits(const Analysis& a, std::ostream& out) {
  const auto& w = a.waits;
  if (w.parties.empty()) return;
  out << "## Whom the step waits on\n\n";
  out << "While the GPU had nothing to do, the step thread was blocked (off a CPU by its own wait, or for the GIL) "
      << fmt(w.blocked_ms, 3) << " ms per step. Each instant goes to whoever was working meanwhile"
      << (w.thread_sample_ms > 0 ? " (per-thread CPU read every " + fmt(w.thread_sample_ms, 1) + " ms)" : std::string())
      << "; docs/analysis.md, \"Whom the step waits on\", gives the rules.\n\n";
  write_model_table(waits_table(w), out);
  if (!w.children.empty()) {
    out << "Child processes:";
    for (size_t i = 0; i < w.children.size(); ++i)
      out << (i ? "," : "") << " " << code(w.children[i].name) << " ×" << w.children[i].processes << " ("
          << fmt(w.children[i].cpu_ms_per_step, 3) << " ms of CPU per step)";
    out << ".\n\n";
  }
}

void write_steps(const Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "## Step latency\n\n";
  if (s.count == 0) {
    out << "No steps found: the numbers above cover the whole trace (" << fmt(a.trace_ms, 3) << " ms).\n\n";
    return;
  }
  out << "Step: " << code(s.name) << (s.detected ? " (detected automatically)" : "") << ". "
      << md_escape(step_counts_sentence(s)) << "\n\n";
  write_model_table(step_stats_table(s), out);
  if (!s.slowest.empty()) {
    out << "Slowest steps:\n\n";
    write_model_table(slowest_steps_table(s), out);
  }
  if (const std::string o = outliers_sentence(s); !o.empty()) out << md_escape(o) << "\n\n";
}

// A generation loop: TTFT, TPOT, tokens/s, and prefill against decode per token (report/generation.hpp).
void write_generation(const Analysis& a, std::ostream& out) {
  if (!a.generation.detected) return;
  const GenerationText t = generation_text(a.generation);
  out << "## Generation loop\n\n" << md_escape(t.lead) << code(t.token_function) << md_escape(t.rest) << "\n\n";
  write_model_table(t.phases, out);
  for (const auto& n : t.notes) out << md_escape(n) << "\n\n";
}

// An asyncio service's requests: their latency, where it went, and the event loop's callbacks (report/requests.hpp).
void write_requests(const Analysis& a, std::ostream& out) {
  if (!a.requests.detected) return;
  const RequestsText t = requests_text(a.requests);
  out << "## Requests and the event loop\n\n" << md_escape(t.summary) << "\n\n";
  if (!t.split.rows.empty()) write_model_table(t.split, out);
  if (!t.engine.empty()) out << md_escape(t.engine) << "\n\n";
  if (!t.batches.rows.empty()) write_model_table(t.batches, out);
  if (!t.loop.rows.empty()) write_model_table(t.loop, out);
  for (const auto& n : t.notes) out << md_escape(n) << "\n\n";
}

void write_finding(const analyze::Finding& f, size_t rank, const KernelNames& names, const std::string& cmdline,
                   std::ostream& out) {
  // A heading is one line: a title too long for it is cut (the JSON report has it whole).
  out << "### " << rank << ". " << (f.primary ? "[primary] " : "") << prose(names, f.title, 240) << "\n\n";
  out << "- Category: " << md_escape(category_name(f.category)) << " (" << md_code(f.category) << ")\n";
  out << "- Confidence: " << fmt(f.confidence, 2) << (f.uncertain ? " (**uncertain**: shown for completeness)" : "")
      << "\n";
  if (f.informational) out << "- Informational: describes the run, not a per-step cost\n\n";
  else if (!f.impact_estimated) out << "- Impact: not estimated\n\n";
  else out << "- Impact: " << impact_text(f) << "\n\n";
  if (!f.evidence.empty()) {
    out << "Evidence:\n\n";
    for (const auto& e : f.evidence) out << "- " << prose(names, e) << '\n';
    out << '\n';
  }
  if (!f.metrics.empty()) {
    out << "Metrics: ";
    bool first = true;
    for (const auto& [k, v] : f.metrics) {
      out << (first ? "" : "; ") << md_escape(metric_label(k)) << ": " << metric_value(k, v);
      first = false;
    }
    out << "\n\n";
  }
  if (!f.examples.empty()) {
    out << "Example spans:\n\n";
    for (const auto& x : f.examples)
      out << "- " << fmt(x.start_ms, 3) << " to " << fmt(x.end_ms, 3) << " ms: " << prose(names, x.what) << '\n';
    out << '\n';
  }
  if (!f.suggestions.empty()) {
    out << "Suggestions:\n\n";
    size_t i = 1;
    for (const auto& s : f.suggestions) {
      out << i++ << ". **" << md_escape(s.priority) << "**: " << prose(names, s.action);
      out << " (" << saving_text(s, f.per) << (s.estimated ? "; " + prose(names, s.model) : std::string()) << ")";
      if (const std::string cmd = try_command(cmdline, s); !cmd.empty())
        out << ". Measure it on this program: `" << cmd << "`";
      out << '\n';
    }
    out << '\n';
  }
}

void write_findings(const Analysis& a, const KernelNames& names, std::ostream& out) {
  if (!a.run.ranks.empty()) out << "## Findings of this dump's process alone (ranked by impact)\n\n";
  else out << "## Findings (ranked by impact)\n\n";
  if (a.findings.empty()) {
    out << "No bottleneck found with enough evidence.\n\n";
    return;
  }
  for (size_t i = 0; i < a.findings.size(); ++i) write_finding(a.findings[i], i + 1, names, cmdline_of(a), out);
}

/// The detail tables, each under its heading.
void write_tables(const Analysis& a, const KernelNames& names, std::ostream& out) {
  for (const DetailTable& t : detail_tables(a, names)) {
    out << "## " << t.title << "\n\n";
    write_model_table(t, out);
  }
}

// The ranks of a multi-process run analysed together (docs/multi-gpu.md): the run's own findings first (so they
// start within the report's first 25 lines), then who waits for whom in the collectives and how much of them
// moves data.
void write_run(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const analyze::RunAnalysis& run = a.run;
  if (run.ranks.empty()) return;
  out << "## The run across ranks\n\n";
  if (a.launcher)
    out << "This process launched " << run.ranks.size() << " ranks and did no GPU work itself; its own steps are its "
        << "idle loop, so its findings are left out. The run is described below.\n\n";
  if (run.steps_matched > 0)
    out << run.steps_matched << " steps matched on every rank (by their index); the run's step is the slowest rank's: "
        << fmt_ms(run.step_ms) << " ms. GPU compute imbalance across ranks: " << fmt(run.imbalance_pct, 1) << " %."
        << (run.straggler >= 0 ? " The other ranks wait for **rank " + std::to_string(run.straggler) + "**" +
                                     (run.straggler_did.empty() ? std::string(".") : ": " + md_escape(run.straggler_did) + ".")
                               : std::string())
        << "\n\n";
  for (size_t i = 0; i < run.findings.size(); ++i) write_finding(run.findings[i], i + 1, names, "", out);
  out << "### The ranks\n\n";
  write_model_table(ranks_table(run), out);
  if (!run.host_clocks.empty()) write_model_table(host_clocks_table(run), out);
  if (!run.collectives.empty()) write_model_table(collectives_table(run), out);
  for (const auto& w : run.warnings) out << "- Note: " << md_escape(w) << "\n";
  if (!run.warnings.empty()) out << "\n";
}

// The child processes recorded beside this dump (iscope-run --follow-children), each analysed on its own.
void write_children(const Analysis& a, std::ostream& out) {
  if (a.children.empty()) return;
  const DetailTable t = children_table(a);
  out << "## " << t.title << "\n\n";
  write_model_table(t, out);
  out << "Analyse one with `iscope-analyze <dump>` for its full report.\n\n";
}

}  // namespace

void write_markdown(const Analysis& a, std::ostream& stream) {
  const KernelNames names = kernel_names(a);
  std::ostringstream out;
  md::write_top(a, names, out);
  write_run(a, names, out);
  if (!a.launcher) {  // a launcher's own step, breakdown and findings describe its idle loop
    write_findings(a, names, out);
    write_breakdown(a, out);
    write_waits(a, out);
    write_steps(a, out);
    write_generation(a, out);
    write_requests(a, out);
  }
  write_tables(a, names, out);
  write_children(a, out);
  md::write_appendix(a, names, out);

  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) stream << wrap(line, kWrapChars);
}

}  // namespace inferscope::report
