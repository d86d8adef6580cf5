// The Markdown report's top, in the spirit of the HTML report's first screen (docs/reports.md): what the step
// costs and how it spreads, the primary cause in words, what to do first and what it saves, and one line on the
// data. It stays short so that the findings start within the report's first 25 lines: the data-quality notes,
// the sampled run's windows and the process facts are in the appendix (markdown_appendix.cpp); only the warnings
// that make the numbers doubtful (quality_problem) are repeated here, at most kTopWarnings of them.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/generation.hpp"
#include "report/labels.hpp"
#include "report/markdown_parts.hpp"
#include "report/requests.hpp"

#include <algorithm>

namespace inferscope::report::md {
namespace {

using analyze::Analysis;

/// Warnings listed under "Data quality: check first"; the rest are in the appendix.
constexpr size_t kTopWarnings = 3;

void write_latency(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const auto& s = a.steps;
  out << "End-to-end latency: " << fmt_ms(a.launcher ? a.run.step_ms : a.end_to_end_ms) << " ms";
  if (a.launcher)
    out << " (the slowest of " << a.run.ranks.size() << " ranks, per matched step: this process is their launcher)";
  else if (s.count > 0)
    out << " per step: **p50 " << fmt_ms(s.p50_ms) << " ms, p90 " << fmt_ms(s.p90_ms) << " ms**, p99 " << fmt_ms(s.p99_ms)
        << " ms (" << s.basis << " of " << s.count << " steady steps of " << code(s.name) << "; "
        << (s.alike ? "mean " + fmt_ms(s.mean_ms) : "median " + fmt_ms(s.p50_ms)) << " ms"
        << (s.warmup ? "; " + std::to_string(s.warmup) + " warm-up step(s) left out" : std::string()) << ")";
  else
    out << " (whole trace, no steps found)";
  out << "\n\n";
  if (!a.launcher && s.count > 0) {
    const std::string others = step_runner_ups(s);
    if (!s.chosen_because.empty() || !others.empty())
      out << "Step: " << (s.chosen_because.empty() ? "" : prose(names, s.chosen_because) + ". ")
          << (others.empty() ? "" : "Other candidates: " + prose(names, others) + ".") << "\n\n";
  }
  if (!s.spread.empty() && !a.launcher)
    out << "**Steps not alike**: " << md_escape(spread_text(s)) << ". The latency above is their mean, and every "
        << "\"per step\" below is of that mean.\n\n";
}

void write_verdict(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const analyze::Finding* p = headline_finding(a);
  if (!p) {
    out << "**Primary cause**: none found with enough evidence; see the breakdown below.\n\n";
    return;
  }
  out << "**Primary cause" << (a.run.findings.empty() ? "" : " of the run") << "**: " << md_escape(category_name(p->category))
      << " (" << code(p->category) << "): " << prose(names, p->title, 240);
  if (p->impact_estimated && p->title.find(fmt_ms(p->impact_ms) + " ms") != std::string::npos)  // the title says it
    out << " (" << fmt(p->impact_pct, 1) << (p->per == "request" ? " % of a request)" : " % of the step)");
  else if (p->impact_estimated)
    out << ", " << impact_text(*p);
  out << ".\n\n";
  if (const DoFirst d = do_first(a, *p); d.suggestion)
    out << "**Do first**: " << prose(names, d.suggestion->action) << " (" << saving_text(*d.suggestion, p->per)
        << (d.from != p ? "; from " + md_escape(category_name(d.from->category)) + ", whose fix saves the most" : std::string())
        << ").\n\n";
}

/// One line on the data; when something in it is wrong, the warnings that say so (at most kTopWarnings).
void write_data_line(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const std::string problem = quality_problem(a);
  out << (problem.empty() ? "Data quality: no problem found (the notes are in the appendix)."
                          : "**Data quality: check first**: " + md_escape(problem) + " (the notes are in the appendix).");
  out << " Source: " << code(a.source);
  if (!a.source_format.empty()) out << " (" << code(a.source_format) << ")";
  out << ", " << a.events << " events over " << fmt(a.trace_ms, 3) << " ms; times are ms from its first event.\n\n";
  if (problem.empty()) return;
  std::vector<const std::string*> warned;
  for (const auto& w : a.warnings)
    if (note_label(w).empty()) warned.push_back(&w);
  for (size_t i = 0; i < warned.size() && i < kTopWarnings; ++i) out << "- **Warning**: " << prose(names, *warned[i]) << '\n';
  if (warned.size() > kTopWarnings) out << "- and " << warned.size() - kTopWarnings << " more in the appendix\n";
  if (!warned.empty()) out << '\n';
}

}  // namespace

void write_top(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const std::string subject = report_subject(a);
  out << "# InferScope report" << (subject.empty() ? "" : ": " + md_escape(truncate(subject, 200))) << "\n\n";
  write_latency(a, names, out);
  if (a.generation.detected && !a.launcher)
    out << "**Generation loop**: " << md_escape(generation_headline(a.generation)) << " (see Generation loop).\n\n";
  if (a.requests.detected && !a.launcher)
    out << "**Requests**: " << md_escape(requests_headline(a.requests)) << " (see Requests and the event loop).\n\n";
  if (a.sampling.sampled)
    out << (recorded_whole(a.sampling) ? "**Full capture**" : "**Sampled run**") << " (mode: " << a.sampling.mode
        << "): " << md_escape(sampling_headline(a.sampling)) << "\n\n";
  if (a.partial)
    out << "**Partial analysis**: the input is corrupt; only the data before the damage were read.\n\n";
  write_verdict(a, names, out);
  write_data_line(a, names, out);
}

void write_quality(const Analysis& a, const KernelNames& names, std::ostream& out) {
  out << "### Warnings and data quality\n\n";
  for (const auto& w : a.warnings) {
    const std::string note = note_label(w);
    out << (note.empty() ? "- **Warning**: " : "- " + note + ": ") << prose(names, w) << '\n';
  }
  const auto& al = a.alignment;
  out << "- Clock alignment: ";
  if (!a.gpu_work_recorded) {
    out << "not applicable: no GPU work was recorded.";
  } else if (al.kernels_checked == 0) {
    out << "not measured: no kernel could be matched to its launch call.";
  } else {
    out << (al.ok ? "OK" : "**suspect**") << ", " << al.kernels_checked << " kernels checked, worst causality "
        << "violation " << fmt(al.max_violation_us, 3) << " us, " << al.violations_over_1us << " over 1 us ("
        << fmt(al.violation_pct, 2) << " %).";
  }
  if (!al.note.empty()) out << ' ' << md_escape(al.note);
  out << '\n';
  out << "- Dropped records: " << drops_text(a, [](const std::string& reason) { return code(reason); }) << '\n';
  if (!a.rule_file.empty()) out << "- Rule file: " << md_escape(a.rule_file) << " (docs/rules.md).\n";
  const auto& s = a.steps;
  if (s.count == 0)
    out << "- Steps: none found; the numbers cover the whole trace (" << fmt(a.trace_ms, 3) << " ms).\n";
  else if (s.warmup > 0)
    out << "- Warm-up: " << s.warmup << " step(s) left out of the statistics: " << md_escape(s.warmup_reason) << ".\n";
  else
    out << "- Warm-up: no step left out.\n";
  out << '\n';
}

}  // namespace inferscope::report::md
