// The Markdown report's appendix (docs/report-schema.md, "Markdown report"): what a reader looks up rather than
// reads, after the findings, the breakdown and the tables. The data-quality notes (their problems, if any, are
// also at the top), a sampled run's windows and slow steps, and the process facts, each a "###" section under
// one "## Appendix".
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/markdown_parts.hpp"

namespace inferscope::report::md {
namespace {

using analyze::Analysis;

// A sampled run: which windows it holds, how much of the run they cover, the slow steps the runtime caught.
void write_sampling(const Analysis& a, std::ostream& out) {
  const auto& s = a.sampling;
  if (!s.sampled) return;
  out << "### Sampled run\n\nThe run was sampled (mode: " << s.mode << "): " << md_escape(sampling_sentence(s)) << "\n\n";
  if (!s.windows.empty()) write_model_table(sampling_windows_table(s), out);
  if (s.slow_steps.empty()) return;
  out << "Slow steps the runtime caught (the slow_steps finding explains those kept in full detail):\n\n";
  write_model_table(sampling_slow_steps_table(s), out);
}

// Every recorded process fact. Names of threads the session never saw (os_thread.*) are in the threads table's
// terms already, so only their number is given.
void write_process(const Analysis& a, std::ostream& out) {
  size_t os_threads = 0;
  bool any = false;
  for (const auto& [k, v] : a.process) {
    if (k.rfind("os_thread.", 0) == 0) {
      ++os_threads;
      continue;
    }
    if (!any) out << "### Process\n\n";
    any = true;
    out << "- " << md_escape(k) << ": " << code(truncate(v, 240)) << '\n';
  }
  if (os_threads > 0) {
    if (!any) out << "### Process\n\n";
    any = true;
    out << "- " << os_threads << " OS thread names (`os_thread.*`, in the JSON report)\n";
  }
  if (any) out << '\n';
}

}  // namespace

void write_appendix(const Analysis& a, const KernelNames& names, std::ostream& out) {
  out << "## Appendix\n\n";
  write_quality(a, names, out);
  if (!a.launcher) write_sampling(a, out);
  write_process(a, out);
}

}  // namespace inferscope::report::md
