// The findings as plain text: the headline numbers, each finding with its evidence and suggestions, the top
// kernels and the clock alignment, for debugging and for a terminal without a Markdown viewer.
#include "report/text_writers.hpp"

#include <cstdio>

namespace inferscope::report {

void print_findings_text(const analyze::Analysis& a, std::ostream& o) {
  char b[512];
  const analyze::Breakdown& d = a.breakdown;
  std::snprintf(b, sizeof(b), "End-to-end latency: %.3f ms per step '%s' (%llu steps; p50 %.3f, p90 %.3f, p99 %.3f, max %.3f ms)\n",
                a.end_to_end_ms, a.steps.name.c_str(), (unsigned long long)a.steps.count, a.steps.p50_ms, a.steps.p90_ms,
                a.steps.p99_ms, a.steps.max_ms);
  o << b;
  std::snprintf(b, sizeof(b), "Breakdown (ms): cpu %.3f | h2d %.3f | gpu %.3f | d2h %.3f | sync %.3f | framework %.3f | idle %.3f "
                "= %.3f; GPU utilization %.0f %%; GPU idle: host %.3f, gaps %.3f, sync %.3f\n",
                d.cpu_preprocessing_ms, d.h2d_ms, d.gpu_compute_ms, d.d2h_ms, d.sync_wait_ms, d.framework_overhead_ms,
                d.idle_ms, d.step_ms, d.gpu_utilization * 100, d.gpu_idle_waiting_on_host_ms,
                d.gpu_idle_gaps_between_kernels_ms, d.gpu_idle_waiting_on_sync_ms);
  o << b;
  for (auto& w : a.warnings) o << "warning: " << w << "\n";
  for (auto& f : a.findings) {
    std::snprintf(b, sizeof(b), "\n[%s]%s%s %s\n  impact %.3f ms (%.0f %% of the step), confidence %.2f\n", f.category.c_str(),
                  f.primary ? " PRIMARY" : "", f.uncertain ? " (uncertain)" : "", f.title.c_str(), f.impact_ms, f.impact_pct,
                  f.confidence);
    o << b;
    for (auto& e : f.evidence) o << "  - " << e << "\n";
    for (auto& x : f.examples) {
      std::snprintf(b, sizeof(b), "  - example %.3f-%.3f ms: %s\n", x.start_ms, x.end_ms, x.what.c_str());
      o << b;
    }
    for (auto& s : f.suggestions) o << "  * [" << s.priority << "] " << s.action << "\n";
  }
  if (!a.kernels.empty()) o << "\nTop kernels:\n";
  for (size_t i = 0; i < a.kernels.size() && i < 10; ++i) {
    std::snprintf(b, sizeof(b), "  %-40s x%llu %.3f ms (%.0f %%) from %s\n", a.kernels[i].name.c_str(),
                  (unsigned long long)a.kernels[i].count, a.kernels[i].total_ms, a.kernels[i].share * 100,
                  a.kernels[i].launched_by.c_str());
    o << b;
  }
  std::snprintf(b, sizeof(b), "\nAlignment: %s (max %.3f us, %.2f %% over 1 us) %s\n", a.alignment.ok ? "ok" : "NOT OK",
                a.alignment.max_violation_us, a.alignment.violation_pct, a.alignment.note.c_str());
  o << b;
}

}  // namespace inferscope::report
