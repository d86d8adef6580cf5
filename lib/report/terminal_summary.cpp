// The short summary `iscope-analyze DUMP` prints to a terminal (docs/cli.md): what the first screen of the report
// says, in plain text a terminal shows without a Markdown viewer, and where the whole report is.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/labels.hpp"
#include "report/text_writers.hpp"

namespace inferscope::report {
namespace {

/// Lines of findings the summary lists.
constexpr size_t kSummaryFindings = 3;
/// A title or an action longer than this is cut (the report has it whole).
constexpr size_t kSummaryChars = 150;

/// Analyzer text with each kernel's full name replaced by its short one, cut to `max` characters.
std::string plain(const KernelNames& names, const std::string& text, size_t max = kSummaryChars) {
  std::string out;
  for (const auto& p : names.split(text)) out += p.text;
  return truncate(out, max);
}

std::string impact_of(const analyze::Finding& f) {
  if (f.informational) return "informational";
  if (!f.impact_estimated) return "impact not estimated";
  return fmt_ms(f.impact_ms) + " ms per step (" + fmt(f.impact_pct, 1) + " %)";
}

void write_latency(const analyze::Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "Latency    " << fmt_ms(a.launcher ? a.run.step_ms : a.end_to_end_ms) << " ms";
  if (a.launcher) out << " (the slowest of " << a.run.ranks.size() << " ranks; this process is their launcher)";
  else if (s.count > 0)
    out << " per step, the " << s.basis << " of " << s.count << " steady steps of " << s.name << " (p50 "
        << fmt_ms(s.p50_ms) << ", p90 " << fmt_ms(s.p90_ms) << " ms)";
  else out << " (the whole trace: no steps found)";
  out << '\n';
  if (!s.spread.empty() && !a.launcher) out << "           steps not alike: " << spread_text(s) << '\n';
}

}  // namespace

void write_terminal_summary(const analyze::Analysis& a, std::ostream& out) {
  const KernelNames names = kernel_names(a);
  const std::string subject = report_subject(a);
  out << "InferScope: " << (subject.empty() ? a.source : subject) << '\n';
  write_latency(a, out);
  if (const analyze::Finding* p = headline_finding(a)) {
    const bool said = p->impact_estimated && p->title.find(fmt_ms(p->impact_ms) + " ms") != std::string::npos;
    out << "Cause      " << category_name(p->category) << ": " << plain(names, p->title)
        << (said ? " (" + fmt(p->impact_pct, 1) + " % of the step)" : ", " + impact_of(*p)) << '\n';
    if (const analyze::Suggestion* s = first_suggestion(*p))
      out << "Do first   " << plain(names, s->action) << " (" << saving_text(*s) << ")\n";
  } else {
    out << "Cause      none found with enough evidence\n";
  }
  const auto& findings = a.run.findings.empty() ? a.findings : a.run.findings;
  for (size_t i = 0; i < findings.size() && i < kSummaryFindings; ++i)
    out << (i ? "           " : "Findings   ") << i + 1 << ". " << plain(names, findings[i].title, 110) << " ["
        << findings[i].category << ", " << impact_of(findings[i]) << "]\n";
  if (findings.size() > kSummaryFindings) out << "           and " << findings.size() - kSummaryFindings << " more\n";
  const std::string problem = quality_problem(a);
  out << "Data       " << (problem.empty() ? "no problem found" : "check first: " + problem) << '\n';
  out << "\nNext: iscope-analyze " << a.source << " -o report.md for the whole report (--html report.html for the "
      << "page; -o - prints the Markdown here)\n";
}

}  // namespace inferscope::report
