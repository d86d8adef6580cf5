// The HTML report: one self-contained page. Everything it needs is inline (CSS, SVG, a few lines of optional
// JS to sort tables), so it opens offline and can be attached to a ticket. Every string from the trace or the
// analyzer goes through html_escape. Kernels are shown by their short names (names.hpp) with the full name on
// hover; warnings and data-quality notes come right after the headline, the process facts last, collapsed.
#include "report/common.hpp"
#include "report/detail_tables.hpp"
#include "report/generation.hpp"
#include "report/requests.hpp"
#include "report/escape.hpp"
#include "report/html_parts.hpp"
#include "report/html_script.hpp"
#include "report/html_table.hpp"
#include "report/labels.hpp"
#include "report/report.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace inferscope::report {
namespace {

using analyze::Analysis;
using html::breakdown_color;
using html::h;
using html::prose;
using html::Table;

constexpr const char* kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1270px;color:#1d232b;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #d6dbe1;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}.muted{color:#5d6875}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}th,td{border:1px solid #d6dbe1;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f1f4f7;cursor:pointer;white-space:nowrap}th.n,td.n{text-align:right;font-variant-numeric:tabular-nums}
th[aria-sort=ascending]::after{content:" \25B2";font-size:10px}th[aria-sort=descending]::after{content:" \25BC";font-size:10px}
tfoot td{background:#f7f9fb}td.name{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere;max-width:560px}
[title].full{text-decoration:underline dotted #9aa5b1;cursor:help}
#warnings li.warn{color:#8a4b00}details{margin:28px 0}summary{cursor:pointer;font-weight:600}
.finding{border:1px solid #d6dbe1;border-left:5px solid #4f7cac;border-radius:4px;padding:6px 14px;margin:12px 0}
.finding.primary{border-left-color:#c0392b}.finding.uncertain{border-style:dashed}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;background:#e8edf2;margin-right:6px}
.badge.primary{background:#c0392b;color:#fff}button.tl-goto{font:12px system-ui,sans-serif;margin-left:6px}td.n[style]{min-width:120px}
rect.mk.sb{fill:#2c3e50}rect.mk.tk{fill:#8e44ad;fill-opacity:.55}rect.mk.hl{fill:#f1c40f;fill-opacity:.3;stroke:#d68910;stroke-width:1}.badge.uncertain{background:#f4d03f}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
svg text{font:11px system-ui,sans-serif}#tl-svg{cursor:grab;user-select:none}#tl-svg.dragging{cursor:grabbing}
#tl-svg:focus{outline:none}#tl-svg:focus-visible{outline:2px solid #4f7cac}rect.sel{stroke:#1d232b;stroke-width:2}
#tl-svg rect[data-k]{cursor:pointer}
.tl-controls button{font:13px system-ui,sans-serif;min-width:28px;margin-right:4px}
#spread{margin:2px 0 8px;font-size:15px}
#verdict{border:1px solid #e8cfcb;border-left:5px solid #c0392b;background:#fdf6f5;border-radius:4px;padding:4px 14px;margin:8px 0}
#verdict p{margin:5px 0}#verdict .lead{display:inline-block;min-width:124px;margin-right:6px;font-weight:600;color:#5d6875}
#verdict .cat{color:#922b21}#verdict .cost{font-weight:600}.saving{color:#1e8449}
details#warnings,details#components{margin:8px 0}summary .warn{color:#8a4b00}
)CSS";

/// A table's cell (detail_tables.hpp), escaped: a cell of names only as it is (the name column's font marks it),
/// names among words as code; a kernel's full name on hover.
std::string detail_cell(const DetailCell& x) {
  std::string out;
  const bool plain = x.all_names();
  for (const CellSpan& span : x.spans) out += span.name && !plain ? "<code>" + h(span.text) + "</code>" : h(span.text);
  if (x.full.empty()) return out;
  return "<span class=\"full\" title=\"" + h(x.full) + "\">" + out + "</span>";
}

/// A table of the model as a sortable table: numeric columns right-aligned, share columns with bars.
Table model_table(const DetailTable& t) {
  Table table{{}, {}, {}};
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const DetailColumn& col = t.columns[i];
    table.head.push_back(h(col.head));
    table.num.push_back(col.kind == CellKind::kNumber);
    table.words.push_back(col.kind == CellKind::kWords);
    if (col.bar) table.bars.push_back(i);
  }
  for (const auto& r : t.rows) {
    std::vector<std::string> cells;
    for (const DetailCell& x : r) cells.push_back(detail_cell(x));
    table.rows.push_back(std::move(cells));
  }
  return table;
}

void write_breakdown(const Analysis& a, std::ostream& out) {
  const auto& b = a.breakdown;
  out << "<section id=\"breakdown\"><h2>Where the step's time goes, by cause</h2>\n";
  // The bar is by cause, named as the findings name their categories (category_name); the time split by
  // component (CPU preprocessing, idle, ...) is another view of the same step, collapsed below it.
  const auto rows = cause_rows(b, a.gpu_work_recorded);
  double total = 0;
  for (const auto& r : rows) total += std::max(0.0, r.ms);
  const double width = html::kFigureW;
  out << "<svg role=\"img\" aria-label=\"step breakdown\" width=\"" << width
      << "\" height=\"34\" viewBox=\"0 0 " << width << " 34\">";
  double x = 0;
  for (const auto& r : rows) {
    if (r.ms <= 0 || total <= 0) continue;
    const double w = r.ms / total * width;
    out << "<rect x=\"" << fmt(x, 2) << "\" y=\"2\" width=\"" << fmt(w, 2) << "\" height=\"30\" fill=\""
        << breakdown_color(r.key) << "\"><title>" << h(category_name(r.key))
        << (category_name(r.key) == r.label ? std::string() : std::string(" (") + r.label + ")") << ": " << fmt(r.ms, 3)
        << " ms (" << fmt(pct_of(r.ms, b.step_ms), 1) << " %)</title></rect>";
    const std::string text = h(category_name(r.key)) + " " + fmt(pct_of(r.ms, b.step_ms), 0) + " %";
    if (w > 6.5 * static_cast<double>(text.size()) + 8)
      out << "<text x=\"" << fmt(x + 4, 2) << "\" y=\"21\" fill=\"#fff\" pointer-events=\"none\">" << text
          << "</text>";
    x += w;
  }
  out << "</svg>\n<div class=\"legend\">";
  for (const auto& r : rows)  // only the causes that occur (not those that round to 0.0 % of the step)
    if (r.ms > 0 && pct_of(r.ms, b.step_ms) >= 0.05)
      out << "<span title=\"" << r.label << "\"><i class=\"sw\" style=\"background:" << breakdown_color(r.key) << "\"></i>"
          << h(category_name(r.key)) << " " << fmt(pct_of(r.ms, b.step_ms), 1) << " %</span>";
  out << "</div>\n<details id=\"components\"><summary>The same step split by component (a time split, not "
         "causes)</summary>\n";
  Table t{{"Component", "Time (ms)", "% of step"}, {false, true, true}, {}, {}, {true}, {2}};
  const ZeroSplit split = split_zero_rows(breakdown_rows(b, a.gpu_work_recorded));  // as the Markdown report
  for (const auto& r : split.shown) t.rows.push_back({r.label, fmt(r.ms, 3), fmt(pct_of(r.ms, b.step_ms), 1)});
  t.foot = {"<b>Step total</b>", "<b>" + fmt(b.step_ms, 3) + "</b>", b.step_ms > 0 ? "<b>100.0</b>" : "0.0"};
  t.write(out);
  if (!split.zero.empty()) out << "<p class=\"muted\">" << h(zero_rows_note(labels_of(split.zero))) << "</p>\n";
  out << "</details>\n";
  if (!a.gpu_work_recorded) {
    out << "<p>No GPU work was recorded: the step is host time only.</p></section>\n";
    return;
  }
  out << "<p>GPU utilization: <b>" << fmt(b.gpu_utilization * 100.0, 1) << " %</b> of the step; each instant the "
      << "GPU was idle has one cause, in the bar above.</p></section>\n";
}

void write_steps(const Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "<section id=\"steps\"><h2>Step latency</h2>\n";
  if (s.count == 0) {
    out << "<p>No steps found: the numbers cover the whole trace (" << fmt(a.trace_ms, 3) << " ms).</p></section>\n";
    return;
  }
  out << "<p>Step <code>" << h(s.name) << "</code>" << (s.detected ? " (detected automatically)" : "") << ". "
      << h(step_counts_sentence(s)) << "</p>\n";
  model_table(step_stats_table(s)).write(out);
  if (!s.slowest.empty()) {
    out << "<h3>Slowest steps</h3>\n";
    model_table(slowest_steps_table(s)).write(out);
  }
  if (const std::string o = outliers_sentence(s); !o.empty()) out << "<p>" << h(o) << "</p>\n";
  out << "</section>\n";
}

// Whom the step thread waited on (Analysis::waits), as the Markdown report's section.
void write_waits(const Analysis& a, std::ostream& out) {
  const auto& w = a.waits;
  if (w.parties.empty()) return;
  out << "<section id=\"waits\"><h2>Whom the step waits on</h2>\n<p>While the GPU had nothing to do, the step thread was "
         "blocked (off a CPU by its own wait, or for the GIL) " << fmt(w.blocked_ms, 3) << " ms per step. Each instant "
         "goes to whoever was working meanwhile"
      << (w.thread_sample_ms > 0 ? " (per-thread CPU read every " + fmt(w.thread_sample_ms, 1) + " ms)" : std::string())
      << ".</p>\n";
  model_table(waits_table(w)).write(out);
  out << "</section>\n";
}

// A sampled run: which windows it holds, how much of the run they cover, the slow steps the runtime caught.
void write_sampling(const Analysis& a, std::ostream& out) {
  const auto& s = a.sampling;
  if (!s.sampled) return;
  out << "<section id=\"sampling\"><h2>Sampled run</h2>\n<p>The run was sampled (mode: " << s.mode << "): " << h(sampling_sentence(s)) << "</p>\n";
  if (!s.windows.empty()) model_table(sampling_windows_table(s)).write(out);
  if (!s.slow_steps.empty()) {
    out << "<h3>Slow steps the runtime caught</h3>\n";
    model_table(sampling_slow_steps_table(s)).write(out);
  }
  out << "</section>\n";
}

/// A finding's numbers, each by its label in words (the key on hover, as the JSON report has it).
void write_metrics(const analyze::Finding& f, std::ostream& out) {
  if (f.metrics.empty()) return;
  out << "<p class=\"muted metrics\">";
  bool first = true;
  for (const auto& [k, v] : f.metrics) {
    out << (first ? "" : " · ") << "<span title=\"" << h(k) << "\">" << h(metric_label(k)) << ": "
        << h(metric_value(k, v)) << "</span>";
    first = false;
  }
  out << "</p>\n";
}

/// An example span, with a button that zooms the timeline to it when it lies in the step the timeline draws
/// (`step`, nullptr for the run's findings: the run's timeline does not zoom).
void write_example(const analyze::TimeSpan& x, const analyze::StepInstance* step, const KernelNames& names,
                   std::ostream& out) {
  out << "<li>" << fmt(x.start_ms, 3) << " to " << fmt(x.end_ms, 3) << " ms: " << prose(names, x.what);
  if (step && x.end_ms >= step->start_ms && x.start_ms <= step->start_ms + step->duration_ms)
    out << " <button type=\"button\" class=\"tl-goto\" data-goto-s=\"" << fmt(x.start_ms - step->start_ms, 6)
        << "\" data-goto-e=\"" << fmt(x.end_ms - step->start_ms, 6) << "\">show in the timeline</button>";
  out << "</li>";
}

/// The findings, each a div#<id_prefix><rank> that the first screen links to.
void write_finding_list(const std::vector<analyze::Finding>& findings, const KernelNames& names, const char* id_prefix,
                        const analyze::StepInstance* step, const std::string& cmdline, std::ostream& out) {
  size_t rank = 1;
  for (const auto& f : findings) {
    out << "<div class=\"finding" << (f.primary ? " primary" : "") << (f.uncertain ? " uncertain" : "") << "\" id=\""
        << id_prefix << rank << "\">\n";
    out << "<h3>" << rank++ << ". " << prose(names, f.title) << "</h3>\n<p>";
    if (f.primary) out << "<span class=\"badge primary\">primary</span>";
    out << "<span class=\"badge cat\" title=\"category " << h(f.category) << "\">" << h(category_name(f.category))
        << "</span>";
    if (f.uncertain) out << "<span class=\"badge uncertain\">uncertain</span>";
    if (f.informational)
      out << "informational: describes the run, not a per-step cost</p>\n";
    else if (!f.impact_estimated)
      out << "confidence " << fmt(f.confidence, 2) << " · impact not estimated</p>\n";
    else
      out << "confidence " << fmt(f.confidence, 2) << " · impact <b>" << h(impact_text(f)) << "</b></p>\n";
    if (!f.evidence.empty()) {
      out << "<p><b>Evidence</b></p><ul>";
      for (const auto& e : f.evidence) out << "<li>" << prose(names, e) << "</li>";
      out << "</ul>\n";
    }
    write_metrics(f, out);
    if (!f.examples.empty()) {
      out << "<p><b>Example spans</b></p><ul>";
      for (const auto& x : f.examples) write_example(x, step, names, out);
      out << "</ul>\n";
    }
    if (!f.suggestions.empty()) {
      out << "<p><b>Suggestions</b></p><ol>";
      for (const auto& s : f.suggestions) {
        out << "<li><span class=\"badge\">" << h(s.priority) << "</span>" << prose(names, s.action);
        out << " <span class=\"muted\">(" << h(saving_text(s, f.per))
            << (s.estimated ? "; " + prose(names, s.model) : std::string()) << ")</span>";
        if (const std::string cmd = try_command(cmdline, s); !cmd.empty())
          out << " Measure it on this program: <code>" << h(cmd) << "</code>";
        out << "</li>";
      }
      out << "</ol>\n";
    }
    out << "</div>\n";
  }
}

void write_findings(const Analysis& a, const KernelNames& names, std::ostream& out) {
  out << "<section id=\"findings\"><h2>"
      << (!a.run.ranks.empty() ? "Findings of this dump's process alone" : "Findings") << " (ranked by impact)</h2>\n";
  if (a.findings.empty()) out << "<p>No bottleneck found with enough evidence.</p>\n";
  write_finding_list(a.findings, names, "finding-", a.representative.lanes.empty() ? nullptr : &a.representative.step,
                     cmdline_of(a), out);
  out << "</section>\n";
}

void section(std::ostream& out, const char* id, const char* title, const Table& t, const std::string& note = {}) {
  if (t.rows.empty()) return;
  out << "<section id=\"" << id << "\"><h2>" << title << "</h2>\n";
  t.write(out);
  if (!note.empty()) out << "<p class=\"muted\">" << h(note) << "</p>";
  out << "</section>\n";
}

// A generation loop: TTFT, TPOT, tokens/s, and prefill against decode per token (report/generation.hpp).
void write_generation(const Analysis& a, std::ostream& out) {
  if (!a.generation.detected) return;
  const GenerationText t = generation_text(a.generation);
  out << "<section id=\"generation\"><h2>Generation loop</h2>\n<p>" << h(t.lead) << "<code>" << h(t.token_function) << "</code>" << h(t.rest) << "</p>\n";
  model_table(t.phases).write(out);
  for (const auto& n : t.notes) out << "<p class=\"muted\">" << h(n) << "</p>";
  out << "</section>\n";
}

// An asyncio service's requests: their latency, where it went, and the event loop's callbacks (report/requests.hpp).
void write_requests(const Analysis& a, std::ostream& out) {
  if (!a.requests.detected) return;
  const RequestsText t = requests_text(a.requests);
  out << "<section id=\"requests\"><h2>Requests and the event loop</h2>\n<p>" << h(t.summary) << "</p>\n";
  if (!t.split.rows.empty()) model_table(t.split).write(out);
  if (!t.engine.empty()) out << "<p>" << h(t.engine) << "</p>\n";
  if (!t.batches.rows.empty()) model_table(t.batches).write(out);
  if (!t.loop.rows.empty()) model_table(t.loop).write(out);
  for (const auto& n : t.notes) out << "<p class=\"muted\">" << h(n) << "</p>";
  out << "</section>\n";
}

// The ranks of a multi-process run analysed together (docs/multi-gpu.md).
void write_run(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const analyze::RunAnalysis& run = a.run;
  if (run.ranks.empty()) return;
  out << "<section id=\"run\"" << (a.launcher ? " data-launcher=\"1\"" : "") << "><h2>The run across ranks</h2>\n";
  if (a.launcher)
    out << "<p>This process launched " << run.ranks.size() << " ranks and did no GPU work itself; its own steps are its "
           "idle loop, so its findings are left out.</p>\n";
  if (run.steps_matched > 0)
    out << "<p>" << run.steps_matched << " steps matched on every rank; the run's step is the slowest rank's: <b>"
        << fmt_ms(run.step_ms) << " ms</b>. GPU compute imbalance across ranks: " << fmt(run.imbalance_pct, 1) << " %."
        << (run.straggler >= 0 ? " The other ranks wait for <b>rank " + std::to_string(run.straggler) + "</b>" +
                                     (run.straggler_did.empty() ? std::string(".") : ": " + h(run.straggler_did) + ".")
                               : std::string())
        << "</p>\n";
  write_finding_list(run.findings, names, "run-finding-", nullptr, "", out);  // what to do first, then the numbers behind it
  const DetailTable ranks = ranks_table(run);
  model_table(ranks).write(out);
  out << "<p class=\"muted\">" << h(ranks.note) << "</p>\n";
  if (const DetailTable clocks = host_clocks_table(run); !clocks.rows.empty()) {
    model_table(clocks).write(out);
    out << "<p class=\"muted\">" << h(clocks.note) << "</p>\n";
  }
  if (!run.collectives.empty()) model_table(collectives_table(run)).write(out);
  html::write_run_timeline(run, names, out);
  for (const auto& w : run.warnings) out << "<p class=\"muted\">Note: " << h(w) << "</p>\n";
  out << "</section>\n";
}

// The child processes recorded beside this dump (iscope-run --follow-children), each analysed on its own.
void write_children(const Analysis& a, std::ostream& out) {
  if (a.children.empty()) return;
  const DetailTable t = children_table(a);
  out << "<section id=\"children\"><h2>" << h(t.title) << "</h2>\n";
  model_table(t).write(out);
  out << "<p class=\"muted\">Analyse one with <code>iscope-analyze DUMP</code> for its full report.</p></section>\n";
}

/// The detail tables, each a sortable table in a section of its own.
void write_tables(const Analysis& a, const KernelNames& names, std::ostream& out) {
  for (const DetailTable& t : detail_tables(a, names))
    section(out, t.anchor.c_str(), h(t.title).c_str(), model_table(t), t.note);
}

/// Every recorded process fact (with the names of all OS threads, tens of lines), collapsed at the end.
void write_process(const Analysis& a, std::ostream& out) {
  if (a.process.empty()) return;
  Table t{{"key", "value"}, {false, false}, {}};
  for (const auto& [k, v] : a.process) t.rows.push_back({h(k), h(v)});
  out << "<details id=\"process\"><summary>Process details (" << a.process.size() << " entries)</summary>\n";
  t.write(out);
  out << "</details>\n";
}

}  // namespace

namespace html {

const char* breakdown_color(const std::string& key) {
  // By cause (the bar), in the findings' categories.
  if (key == "gpu_bound") return "#27ae60";
  if (key == "h2d_bound") return "#e67e22";
  if (key == "d2h_bound") return "#d35400";
  if (key == "cpu_bound") return "#4f7cac";
  if (key == "cpu_contention") return "#16a085";
  if (key == "wait") return "#95a5a6";
  if (key == "launch_bound") return "#8e44ad";
  if (key == "sync_bound") return "#c0392b";
  if (key == "memory_alloc") return "#b7950b";
  if (key == "communication" || key == "gpu_comm") return "#2c3e50";
  if (key == "cpu_preprocessing") return "#4f7cac";
  if (key == "h2d") return "#e67e22";
  if (key == "gpu_compute") return "#27ae60";
  if (key == "d2h") return "#d35400";
  if (key == "sync_wait") return "#c0392b";
  if (key == "framework_overhead") return "#8e44ad";
  if (key == "idle") return "#bdc3c7";
  return kUnknownBreakdownColor;
}

std::string prose(const KernelNames& names, std::string_view text) {
  std::string out;
  for (const auto& p : names.split(text))
    out += p.full.empty() ? h(p.text) : "<code class=\"full\" title=\"" + h(p.full) + "\">" + h(p.text) + "</code>";
  return out;
}

}  // namespace html

void write_html(const Analysis& a, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>InferScope report: " << h(report_subject(a)) << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n";
  const KernelNames names = kernel_names(a);
  html::write_first_screen(a, names, out);
  html::write_quality(a, names, out);
  write_run(a, names, out);
  if (!a.launcher) {  // a launcher's own step, breakdown and findings describe its idle loop
    write_breakdown(a, out);
    write_findings(a, names, out);
    html::write_timeline(a, names, out);
    write_waits(a, out);
    write_steps(a, out);
    write_generation(a, out);
    write_requests(a, out);
  }
  write_tables(a, names, out);
  write_children(a, out);
  if (!a.launcher) write_sampling(a, out);  // reference, with the process facts at the end (as the Markdown's appendix)
  write_process(a, out);
  out << "<script>" << html::kScript << html::kTimelineScript << "</script>\n</body></html>\n";
}

}  // namespace inferscope::report
