// The Markdown report. Layout (docs/report-schema.md, "Markdown report"): the first line is the end-to-end
// latency, then the breakdown, step statistics, findings ranked by impact, the tables, alignment, drops and
// warnings. Sections with nothing to show are left out, except the breakdown and findings, which say so.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/report.hpp"

#include <string>
#include <vector>

namespace inferscope::report {
namespace {

using analyze::Analysis;

/// A GitHub-flavoured table; cells must already be escaped. `right` marks right-aligned (numeric) columns.
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

std::string code(std::string_view s) {
  // Inline code cannot hold a backtick-escape, so names go out as escaped plain text instead.
  return md_escape(s);
}

void write_breakdown(const Analysis& a, std::ostream& out) {
  const auto& b = a.breakdown;
  out << "## Timeline Breakdown\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : breakdown_rows(b)) rows.push_back({r.label, fmt(r.ms, 3), fmt(pct_of(r.ms, b.step_ms), 1)});
  rows.push_back({"**Step total**", "**" + fmt(b.step_ms, 3) + "**", b.step_ms > 0 ? "**100.0**" : "0.0"});
  table(out, {"Component", "Time (ms)", "% of step"}, {false, true, true}, rows);
  out << "GPU utilization: " << fmt(b.gpu_utilization * 100.0, 1) << " % of the step. GPU idle "
      << fmt(b.gpu_idle_waiting_on_host_ms, 3) << " ms waiting on the host, "
      << fmt(b.gpu_idle_gaps_between_kernels_ms, 3) << " ms while the host launched, "
      << fmt(b.gpu_idle_waiting_on_sync_ms, 3) << " ms at synchronizations, "
      << fmt(b.gpu_idle_in_memory_ms, 3) << " ms in allocations/frees (one cause per idle instant).";
  if (b.host_state_measured)
    out << " While the GPU waited on the host, the step thread ran " << fmt(b.host_running_ms, 3) << " ms, was held up by "
        << "other threads (CPU or GIL) " << fmt(b.host_contention_ms, 3) << " ms and waited by its own choice (sleep, I/O, "
        << "a queue) " << fmt(b.host_waiting_ms, 3) << " ms.";
  out << "\n\n";
}

void write_steps(const Analysis& a, std::ostream& out) {
  const auto& s = a.steps;
  out << "## Step latency\n\n";
  if (s.count == 0) {
    out << "No steps found: the numbers above cover the whole trace (" << fmt(a.trace_ms, 3) << " ms).\n\n";
    return;
  }
  out << "Step: " << code(s.name) << (s.detected ? " (detected automatically)" : "") << ", " << s.total
      << " steps: " << s.warmup << " warm-up, " << s.count << " steady (the statistics below), " << s.typical
      << " typical (steady and not unusually slow: the breakdown and the impacts). Warm-up: "
      << md_escape(s.warmup_reason) << ".\n\n";
  table(out, {"count", "mean (ms)", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)", "min (ms)"},
        {true, true, true, true, true, true, true},
        {{std::to_string(s.count), fmt(s.mean_ms, 3), fmt(s.p50_ms, 3), fmt(s.p90_ms, 3), fmt(s.p99_ms, 3),
          fmt(s.max_ms, 3), fmt(s.min_ms, 3)}});
  if (!s.slowest.empty()) {
    out << "Slowest steps:\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& st : s.slowest)
      rows.push_back({std::to_string(st.index), fmt(st.start_ms, 3), fmt(st.duration_ms, 3)});
    table(out, {"step", "start (ms)", "duration (ms)"}, {true, true, true}, rows);
  }
  if (!s.outliers.empty())
    out << s.outliers.size() << " steady step(s) slower than " << fmt(s.outlier_bound_ms, 3)
        << " ms (median + max(3 scaled MADs, 25 %)) are left out of the breakdown; see the slow_steps finding.\n\n";
}

void write_finding(const analyze::Finding& f, size_t rank, std::ostream& out) {
  out << "### " << rank << ". " << (f.primary ? "[primary] " : "") << md_escape(f.title) << "\n\n";
  out << "- Category: " << md_code(f.category) << "\n";
  out << "- Confidence: " << fmt(f.confidence, 2) << (f.uncertain ? " (**uncertain**: shown for completeness)" : "")
      << "\n";
  if (f.informational) out << "- Informational: describes the run, not a per-step cost\n\n";
  else out << "- Impact: " << fmt(f.impact_ms, 3) << " ms per step (" << fmt(f.impact_pct, 1) << " % of the step)\n\n";
  if (!f.evidence.empty()) {
    out << "Evidence:\n\n";
    for (const auto& e : f.evidence) out << "- " << md_escape(e) << '\n';
    out << '\n';
  }
  if (!f.metrics.empty()) {
    out << "Metrics: ";
    bool first = true;
    for (const auto& [k, v] : f.metrics) {
      out << (first ? "" : ", ") << md_escape(k) << " = " << fmt_value(v);
      first = false;
    }
    out << "\n\n";
  }
  if (!f.examples.empty()) {
    out << "Example spans:\n\n";
    for (const auto& x : f.examples)
      out << "- " << fmt(x.start_ms, 3) << " to " << fmt(x.end_ms, 3) << " ms: " << md_escape(x.what) << '\n';
    out << '\n';
  }
  if (!f.suggestions.empty()) {
    out << "Suggestions:\n\n";
    size_t i = 1;
    for (const auto& s : f.suggestions) {
      out << i++ << ". **" << md_escape(s.priority) << "**: " << md_escape(s.action);
      if (s.estimated) out << " (saves about " << fmt(s.impact_ms, 3) << " ms per step; " << md_escape(s.model) << ")";
      else out << " (saving not estimated)";
      out << '\n';
    }
    out << '\n';
  }
}

void write_findings(const Analysis& a, std::ostream& out) {
  out << "## Findings (ranked by impact)\n\n";
  if (a.findings.empty()) {
    out << "No bottleneck found with enough evidence.\n\n";
    return;
  }
  for (size_t i = 0; i < a.findings.size(); ++i) write_finding(a.findings[i], i + 1, out);
}

void write_tables(const Analysis& a, std::ostream& out) {
  if (!a.kernels.empty()) {
    out << "## Top kernels\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& k : a.kernels)
      rows.push_back({code(k.name), std::to_string(k.count), fmt(k.total_ms, 3), fmt(k.mean_us, 1),
                      fmt(k.share * 100.0, 1), code(k.launched_by)});
    table(out, {"kernel", "count", "total (ms)", "mean (us)", "% GPU time", "launched by"},
          {false, true, true, true, true, false}, rows);
  }
  if (!a.python.empty()) {
    out << "## Python functions\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : a.python)
      rows.push_back({code(p.qualname), code(p.file) + ":" + std::to_string(p.line), std::to_string(p.count),
                      fmt(p.total_ms, 3), fmt(p.self_ms, 3)});
    table(out, {"function", "where", "calls", "total (ms)", "self (ms)"}, {false, false, true, true, true}, rows);
  }
  if (!a.ranges.empty()) {
    out << "## Ranges\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : a.ranges)
      rows.push_back({code(r.name), std::to_string(r.count), fmt(r.total_ms, 3), fmt(r.self_ms, 3),
                      fmt(r.mean_us, 1), fmt(r.p50_us, 1), fmt(r.p99_us, 1), fmt(r.max_us, 1)});
    table(out, {"range", "count", "total (ms)", "self (ms)", "mean (us)", "p50 (us)", "p99 (us)", "max (us)"},
          {false, true, true, true, true, true, true, true}, rows);
  }
  if (!a.copies.empty()) {
    out << "## Memory copies\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : a.copies)
      rows.push_back({code(c.direction), code(c.src_memory) + " → " + code(c.dst_memory), std::to_string(c.count),
                      fmt_bytes(c.bytes), fmt(c.total_ms, 3), fmt(c.bandwidth_gbps, 2),
                      fmt_peak(c)});
    table(out, {"direction", "memory", "count", "bytes", "total (ms)", "achieved (GB/s)", "peak (GB/s)"},
          {false, false, true, true, true, true, true}, rows);
  }
  if (!a.syncs.empty()) {
    out << "## Synchronizations\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : a.syncs)
      rows.push_back({code(s.kind), std::to_string(s.count), fmt(s.total_ms, 3), fmt(s.max_ms, 3),
                      code(s.called_from)});
    table(out, {"kind", "count", "total (ms)", "max (ms)", "called from"}, {false, true, true, true, false}, rows);
  }
  if (!a.allocations.empty()) {
    out << "## Allocations\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : a.allocations)
      rows.push_back({code(m.op), code(m.memory), std::to_string(m.count), fmt_bytes(m.bytes), fmt(m.api_ms, 3),
                      code(m.called_from)});
    table(out, {"op", "memory", "count", "bytes", "API time (ms)", "called from"}, {false, false, true, true, true, false},
          rows);
  }
  if (!a.graph_launches.empty()) {
    out << "## CUDA graph launches\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& g : a.graph_launches)
      rows.push_back({code(g.api), std::to_string(g.count), fmt(g.api_ms, 3), code(g.called_from)});
    table(out, {"API", "count", "API time (ms)", "called from"}, {false, true, true, false}, rows);
  }
  if (!a.layers.empty()) {
    out << "## Model layers\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& l : a.layers)
      rows.push_back({code(l.path), std::to_string(l.count), fmt(l.cpu_ms, 3), fmt(l.gpu_ms, 3),
                      std::to_string(l.kernels)});
    table(out, {"layer", "calls", "CPU (ms)", "GPU (ms)", "kernels"}, {false, true, true, true, true}, rows);
  }
  if (!a.threads.empty()) {
    out << "## Threads\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : a.threads)
      rows.push_back({std::to_string(t.id), std::to_string(t.os_tid), code(t.name), fmt(t.busy_ms, 3),
                      fmt(t.cpu_ms, 3), std::to_string(t.involuntary_switches)});
    table(out, {"id", "OS tid", "name", "busy (ms)", "CPU (ms)", "involuntary switches"},
          {true, true, false, true, true, true}, rows);
  }
}

void write_tail(const Analysis& a, std::ostream& out) {
  const auto& al = a.alignment;
  out << "## Clock alignment\n\n";
  if (al.kernels_checked == 0) {
    out << "Not measured: no kernel could be matched to its launch call.";
  } else {
    out << (al.ok ? "OK" : "**Suspect**") << ": " << al.kernels_checked << " kernels checked, worst causality "
        << "violation " << fmt(al.max_violation_us, 3) << " us, " << al.violations_over_1us << " over 1 us ("
        << fmt(al.violation_pct, 2) << " %).";
  }
  if (!al.note.empty()) out << ' ' << md_escape(al.note);
  out << "\n\n";
  if (!a.drops.empty()) {
    out << "## Dropped records\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& [reason, n] : a.drops) rows.push_back({code(reason), std::to_string(n)});
    table(out, {"reason", "records"}, {false, true}, rows);
  }
  if (!a.warnings.empty()) {
    out << "## Warnings\n\n";
    for (const auto& w : a.warnings) out << "- " << md_escape(w) << '\n';
    out << '\n';
  }
  // Names of threads the session never saw (os_thread.*) are in the threads table's terms already.
  bool any = false;
  for (const auto& [k, v] : a.process) {
    if (k.rfind("os_thread.", 0) == 0) continue;
    if (!any) out << "## Process\n\n";
    any = true;
    out << "- " << md_escape(k) << ": " << md_escape(v) << '\n';
  }
  if (any) out << '\n';
}

}  // namespace

void write_markdown(const Analysis& a, std::ostream& out) {
  out << "End-to-end latency: " << fmt(a.end_to_end_ms, 3) << " ms";
  if (a.steps.count > 0)
    out << " (median of " << a.steps.count << " steady steps of " << code(a.steps.name) << "; mean "
        << fmt(a.steps.mean_ms, 3) << ", p90 " << fmt(a.steps.p90_ms, 3) << ", p99 " << fmt(a.steps.p99_ms, 3) << " ms"
        << (a.steps.warmup ? "; " + std::to_string(a.steps.warmup) + " warm-up step(s) left out" : std::string()) << ")";
  else
    out << " (whole trace, no steps found)";
  out << "\n\n";
  if (a.partial)
    out << "**Partial analysis**: the input is corrupt; only the data before the damage were read (see Warnings).\n\n";
  out << "Source: " << code(a.source);
  if (!a.source_format.empty()) out << " (" << code(a.source_format) << ")";
  out << ", " << a.events << " events over " << fmt(a.trace_ms, 3) << " ms.";
  if (!a.findings.empty()) {
    const auto& p = a.findings.front();
    out << " Primary bottleneck: " << md_code(p.category) << ", " << fmt(p.impact_ms, 3) << " ms per step ("
        << fmt(p.impact_pct, 1) << " %).";
  }
  out << "\n\n";
  // One line on what ran where, up front; every recorded process fact at the end.
  std::string ran;
  for (const char* k : {"cmdline", "pid", "hostname", "gpu.0.name"}) {
    auto it = a.process.find(k);
    if (it == a.process.end() || it->second.empty()) continue;
    ran += std::string(ran.empty() ? "" : ", ") + k + " " + md_escape(it->second);
  }
  if (!ran.empty()) out << "Process: " << ran << "\n\n";
  write_breakdown(a, out);
  write_steps(a, out);
  write_findings(a, out);
  write_tables(a, out);
  write_tail(a, out);
}

}  // namespace inferscope::report
