// The HTML report's first screen (docs/reports.md, "The first screen"): the latency with its spread, the primary
// cause in words, what to do first and what it saves, links down to the finding and the timeline; then the
// data-quality notes, collapsed unless something in them is wrong (labels.hpp, quality_problem).
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/generation.hpp"
#include "report/requests.hpp"
#include "report/html_parts.hpp"
#include "report/labels.hpp"

#include <string>

namespace inferscope::report::html {
namespace {

using analyze::Analysis;

/// "p50 12.100 · p90 13.000 · p99 14.200 ms over 40 steady steps": the spread beside the headline number.
void write_spread(const Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "<p id=\"spread\">";
  if (a.launcher) {
    out << "The slowest of " << a.run.ranks.size() << " ranks, per matched step: this process is their launcher.";
  } else if (s.count > 0) {
    out << "<b>p50 " << fmt_ms(s.p50_ms) << " · p90 " << fmt_ms(s.p90_ms) << "</b> · p99 " << fmt_ms(s.p99_ms)
        << " ms per step over " << s.count << " steady steps of <code>" << h(s.name) << "</code> (headline: their "
        << (s.alike ? "median" : "mean") << (s.alike ? ", mean " + fmt_ms(s.mean_ms) : ", median " + fmt_ms(s.p50_ms))
        << " ms" << (s.warmup ? "; " + std::to_string(s.warmup) + " warm-up step(s) left out" : std::string()) << ").";
    if (!s.spread.empty()) out << " <strong>Steps not alike:</strong> " << h(spread_text(s)) << '.';
  } else {
    out << "Whole trace: no steps found.";
  }
  out << "</p>\n";
}

/// The primary cause and the suggestion to try first, or what to read when there is none.
void write_verdict(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const analyze::Finding* p = headline_finding(a);
  out << "<div id=\"verdict\">";
  if (!p) {
    out << "<p>No bottleneck found with enough evidence" << (a.launcher ? " for the run" : "")
        << ": see the breakdown below.</p></div>\n";
    return;
  }
  const bool run = !a.run.findings.empty();
  out << "<p class=\"cause\"><span class=\"lead\">Primary cause" << (run ? " of the run" : "")
      << "</span><b class=\"cat\" title=\"category " << h(p->category) << "\">" << h(category_name(p->category))
      << "</b>: " << prose(names, p->title);
  if (p->impact_estimated)
    out << " <span class=\"cost\">" << h(impact_text(*p)) << "</span>";
  out << "</p>\n";
  if (const DoFirst d = do_first(a, *p); d.suggestion)
    out << "<p class=\"todo\"><span class=\"lead\">Do first</span>" << prose(names, d.suggestion->action)
        << " — <b class=\"saving\">" << h(saving_text(*d.suggestion, p->per)) << "</b>"
        << (d.from != p ? " <span class=\"muted\">(" + h(category_name(d.from->category)) + "'s advice: its saving is the largest)</span>"
                        : std::string())
        << "</p>\n";
  out << "<p class=\"jump\"><a href=\"#" << (run ? "run-finding-1" : "finding-1") << "\">the finding, its evidence "
      << "and other suggestions</a>";
  if (!a.launcher && !a.representative.lanes.empty()) out << " · <a href=\"#timeline\">where it shows in the timeline</a>";
  out << "</p></div>\n";
}

void write_alignment(const Analysis& a, std::ostream& out) {
  const auto& al = a.alignment;
  out << "<li id=\"alignment\">Clock alignment: ";
  if (!a.gpu_work_recorded)
    out << "not applicable: no GPU work was recorded.";
  else if (al.kernels_checked == 0)
    out << "not measured: no kernel could be matched to its launch call.";
  else
    out << (al.ok ? "OK" : "<b>suspect</b>") << ", " << al.kernels_checked << " kernels checked, worst causality "
        << "violation " << fmt(al.max_violation_us, 3) << " us, " << al.violations_over_1us << " over 1 us ("
        << fmt(al.violation_pct, 2) << " %).";
  if (!al.note.empty()) out << ' ' << h(al.note);
  out << "</li>\n";
}

}  // namespace

void write_first_screen(const Analysis& a, const KernelNames& names, std::ostream& out) {
  out << "<header><h1>End-to-end latency: " << fmt_ms(a.launcher ? a.run.step_ms : a.end_to_end_ms) << " ms</h1>\n";
  write_spread(a, out);
  if (a.generation.detected && !a.launcher)
    out << "<p id=\"generation-headline\"><b>Generation loop</b>: " << h(generation_headline(a.generation))
        << " (<a href=\"#generation\">prefill and decode</a>).</p>\n";
  if (a.requests.detected && !a.launcher)
    out << "<p id=\"requests-headline\"><b>Requests</b>: " << h(requests_headline(a.requests))
        << " (<a href=\"#requests\">where their time went</a>).</p>\n";
  if (a.sampling.sampled)
    out << "<p><span class=\"badge\">" << (recorded_whole(a.sampling) ? "full capture" : "sampled") << "</span>"
        << h(sampling_headline(a.sampling)) << " (windows and slow steps: Sampled run, at the end)</p>\n";
  if (a.partial)
    out << "<p><span class=\"badge uncertain\">partial</span>The input is corrupt; only the data before the damage "
           "were read (see Data quality).</p>\n";
  write_verdict(a, names, out);
  std::string ran;
  for (const auto& [k, v] : headline_process(a))
    ran += (ran.empty() ? "" : " · ") + k + " <code>" + h(truncate(v, 160)) + "</code>";
  out << "<p class=\"muted\">Source <code>" << h(a.source) << "</code>";
  if (!a.source_format.empty()) out << " (" << h(a.source_format) << ")";
  out << ", " << a.events << " events over " << fmt(a.trace_ms, 3) << " ms; times are ms from its first event.";
  if (!ran.empty()) out << " Process: " << ran << " (all details at the end).";
  out << "</p>\n</header>\n";
}

void write_quality(const Analysis& a, const KernelNames& names, std::ostream& out) {
  // Collapsed unless something is wrong (quality_problem says what counts): a reader who sees it open knows the
  // numbers below need this first.
  const std::string problem = quality_problem(a);
  out << "<details id=\"warnings\"" << (problem.empty() ? "" : " open") << "><summary>Data quality: "
      << (problem.empty() ? "no problem found" : "<span class=\"warn\">check first: " + h(problem) + "</span>")
      << "</summary><ul>\n";
  for (const auto& w : a.warnings) {
    const std::string note = note_label(w);
    out << (note.empty() ? std::string("<li class=\"warn\"><b>Warning</b>: ") : "<li><b>" + note + "</b>: ")
        << prose(names, w) << "</li>\n";
  }
  write_alignment(a, out);
  if (!a.rule_file.empty()) out << "<li id=\"rule-file\">Rule file: " << h(a.rule_file) << ".</li>\n";
  out << "<li id=\"drops\">Dropped records: "
      << drops_text(a, [](const std::string& reason) { return "<code>" + h(reason) + "</code>"; }) << "</li>\n";
  const auto& s = a.steps;
  if (s.count == 0)
    out << "<li>Steps: none found; the numbers cover the whole trace (" << fmt(a.trace_ms, 3) << " ms).</li>\n";
  else if (s.warmup > 0)
    out << "<li>Warm-up: " << s.warmup << " step(s) left out of the statistics: " << h(s.warmup_reason) << ".</li>\n";
  else
    out << "<li>Warm-up: no step left out.</li>\n";
  out << "</ul></details>\n";
}

}  // namespace inferscope::report::html
