// The Markdown report's top, in the spirit of the HTML report's first screen (docs/reports.md): what the step
// costs and how it spreads, the primary cause in words, what to do first and what it saves. Markdown cannot
// collapse a section, so the data-quality notes come here only when something in them is wrong
// (quality_problem); otherwise one line says so and the notes close the report.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/generation.hpp"
#include "report/labels.hpp"
#include "report/markdown_parts.hpp"
#include "report/requests.hpp"

namespace inferscope::report::md {
namespace {

using analyze::Analysis;

void write_latency(const Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "End-to-end latency: " << fmt(a.launcher ? a.run.step_ms : a.end_to_end_ms, 3) << " ms";
  if (a.launcher)
    out << " (the slowest of " << a.run.ranks.size() << " ranks, per matched step: this process is their launcher)";
  else if (s.count > 0)
    out << " per step: **p50 " << fmt(s.p50_ms, 3) << " ms, p90 " << fmt(s.p90_ms, 3) << " ms**, p99 " << fmt(s.p99_ms, 3)
        << " ms (" << s.basis << " of " << s.count << " steady steps of " << code(s.name) << "; "
        << (s.alike ? "mean " + fmt(s.mean_ms, 3) : "median " + fmt(s.p50_ms, 3)) << " ms"
        << (s.warmup ? "; " + std::to_string(s.warmup) + " warm-up step(s) left out" : std::string()) << ")";
  else
    out << " (whole trace, no steps found)";
  out << "\n\n";
  if (!a.launcher && s.count > 0) {
    const std::string others = step_runner_ups(s);
    if (!s.chosen_because.empty() || !others.empty())
      out << "Step: " << (s.chosen_because.empty() ? "" : md_escape(s.chosen_because) + ". ")
          << (others.empty() ? "" : "Other candidates: " + md_escape(others) + ".") << "\n\n";
  }
  if (!s.spread.empty() && !a.launcher)
    out << "**Steps not alike**: " << md_escape(s.spread) << ". The latency above is their mean, and every "
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
  if (p->impact_estimated)
    out << ", " << impact_text(*p);
  out << ".\n\n";
  if (const DoFirst d = do_first(a, *p); d.suggestion)
    out << "**Do first**: " << prose(names, d.suggestion->action) << " (" << saving_text(*d.suggestion, p->per)
        << (d.from != p ? "; from " + md_escape(category_name(d.from->category)) + ", whose fix saves the most" : std::string())
        << ").\n\n";
}

}  // namespace

void write_top(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const std::string subject = report_subject(a);
  out << "# InferScope report" << (subject.empty() ? "" : ": " + md_escape(truncate(subject, 200))) << "\n\n";
  write_latency(a, out);
  if (a.generation.detected && !a.launcher)
    out << "**Generation loop**: " << md_escape(generation_headline(a.generation)) << " (see Generation loop).\n\n";
  if (a.requests.detected && !a.launcher)
    out << "**Requests**: " << md_escape(requests_headline(a.requests)) << " (see Requests and the event loop).\n\n";
  if (a.sampling.sampled)
    out << (recorded_whole(a.sampling) ? "**Full capture**" : "**Sampled run**") << " (mode: " << a.sampling.mode
        << "): " << md_escape(sampling_sentence(a.sampling)) << " See Sampled run.\n\n";
  if (a.partial)
    out << "**Partial analysis**: the input is corrupt; only the data before the damage were read (see Warnings).\n\n";
  write_verdict(a, names, out);
  const std::string problem = quality_problem(a);
  out << (problem.empty() ? "Data quality: no problem found (the notes are at the end)."
                          : "**Data quality: check first**: " + md_escape(problem) + " (below).");
  out << " Source: " << code(a.source);
  if (!a.source_format.empty()) out << " (" << code(a.source_format) << ")";
  out << ", " << a.events << " events over " << fmt(a.trace_ms, 3) << " ms; times are ms from its first event.\n\n";
  std::string ran;
  for (const auto& [k, v] : headline_process(a))
    ran += std::string(ran.empty() ? "" : ", ") + k + " " + code(truncate(v, 120));
  if (!ran.empty()) out << "Process: " << ran << "\n\n";
  if (!problem.empty()) write_quality(a, names, out);
}

void write_quality(const Analysis& a, const KernelNames& names, std::ostream& out) {
  out << "## Warnings and data quality\n\n";
  for (const auto& w : a.warnings) out << "- **Warning**: " << prose(names, w) << '\n';
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
