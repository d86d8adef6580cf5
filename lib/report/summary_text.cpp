// iscope-analyze --summary as text: what a dump holds (analyze::summarize computes it), with Markdown tables.
#include "report/text_writers.hpp"

#include "dump/clock_model.hpp"
#include "text/escape.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace inferscope::report {

namespace {

// A name from the trace in a table cell, as the Markdown report writes one (text/escape.hpp): a code span on one
// line, verbatim, its pipes escaped. A hostile name (a '|', a newline) stays in its cell instead of adding
// columns or rows.
std::string cell(const std::string& name) { return text::md_cell(text::md_code(name)); }

// A value from the dump on a bullet line (the command line, a collector's status): one line, so it cannot start a
// line of its own, and no control character, so it cannot drive the terminal (text/escape.hpp).
std::string one_line(const std::string& v) { return text::one_line(v); }

std::string ms(double ns) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f", ns / 1e6);
  return b;
}
std::string us(double ns) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", ns / 1e3);
  return b;
}

void print_named(std::ostream& out, const char* title, const std::map<std::string, analyze::NamedStats>& m, bool self) {
  if (m.empty()) return;
  std::vector<const std::pair<const std::string, analyze::NamedStats>*> v;
  for (auto& kv : m) v.push_back(&kv);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->second.duration.total() > b->second.duration.total(); });
  out << "\n## " << title << "\n\n| name | count | total ms |" << (self ? " self ms |" : "")
      << " mean us | p50 us | p90 us | p99 us | max us |\n|---|---:|---:|" << (self ? "---:|" : "")
      << "---:|---:|---:|---:|---:|\n";
  for (auto* kv : v) {
    const auto& d = kv->second.duration;
    out << "| " << cell(kv->first) << " | " << d.count() << " | " << ms(double(d.total())) << " |";
    if (self) out << " " << ms(double(kv->second.self_ns)) << " |";
    out << " " << us(d.mean()) << " | " << us(d.percentile(0.5)) << " | " << us(d.percentile(0.9)) << " | "
        << us(d.percentile(0.99)) << " | " << us(double(d.max())) << " |\n";
  }
}

}  // namespace

void print_summary(const dump::DumpReader& r, const analyze::Summary& s, std::ostream& out) {
  dump::ClockModel clock(r.calibration());
  out << "# InferScope dump summary: " << one_line(r.path()) << "\n\n";
  out << "- format version " << r.version_major() << "." << r.version_minor() << ", " << r.file_size() << " bytes"
      << (r.is_ring_snapshot() ? ", ring-mode snapshot" : "") << "\n";
  out << "- status: "
      << (r.complete() ? "complete"
                       : "INCOMPLETE (no end chunk: the process did not stop cleanly, or the disk was full when it stopped)")
      << "\n";
  if (r.damage()) out << "- damage: " << one_line(r.damage()->message) << "\n";
  for (const std::string& skipped : r.skipped_chunks()) out << "- skipped: " << one_line(skipped) << "\n";
  for (const std::string& d : s.damage) out << "- damage: " << one_line(d) << "\n";
  for (const char* k : {"cmdline", "pid", "hostname", "clock", "buffer_mode"}) {
    std::string v = r.process_value(k);
    if (!v.empty()) out << "- " << k << ": " << one_line(v) << "\n";
  }
  if (s.records) out << "- recorded span: " << ms(clock.duration_ns(s.last_ts - s.first_ts)) << " ms\n";
  out << "- records: " << s.records;
  for (auto& [k, n] : s.kinds) out << (k == s.kinds.begin()->first ? " (" : ", ") << k << " " << n;
  out << (s.kinds.empty() ? "" : ")") << "\n";
  out << "- dropped records: " << r.total_dropped_records() << "\n";
  if (r.sampling()) {  // a sampled run: how much of it the windows hold (docs/sampled-mode.md)
    const auto& sm = r.sampling()->summary;
    out << "- sampled: " << r.sampling()->windows.size() << " windows kept of " << sm.windows_opened << " opened ("
        << sm.windows_dropped << " dropped), " << sm.steps_in_windows << " of " << sm.steps_seen << " steps in full "
        << "detail, " << sm.slow_steps_seen << " slow steps caught, " << sm.records_outside << " records sampled out\n";
  }

  out << "\n## Clock calibration\n\n";
  char line[256];
  std::snprintf(line, sizeof(line),
                "- %zu points over %.3f s; %.6f ticks/ns (%s); max residual %.1f ns; max reading uncertainty %.1f ns\n",
                clock.points(), clock.span_s(), clock.ns_per_tick() > 0 ? 1.0 / clock.ns_per_tick() : 0.0,
                one_line(r.process_value("clock")).c_str(), clock.max_residual_ns(), clock.max_uncertainty_ns());
  out << line;

  if (!r.collector_status().empty()) {
    out << "\n## Collectors\n\n";
    for (auto& [k, v] : r.collector_status()) out << "- " << one_line(k) << ": " << one_line(v) << "\n";
  }

  out << "\n## Threads\n\n| id | os tid | name | records | active ms | state |\n|---:|---:|---|---:|---:|---|\n";
  for (auto& [id, t] : r.threads()) {
    auto it = s.threads.find(id);
    uint64_t n = it == s.threads.end() ? 0 : it->second.records;
    double active = it == s.threads.end() || it->second.last_ts < it->second.first_ts
                        ? 0
                        : clock.duration_ns(it->second.last_ts - it->second.first_ts);
    out << "| " << id << " | " << t.os_tid << " | " << (t.name.empty() ? "-" : cell(t.name)) << " | " << n << " | "
        << ms(active) << " | " << (t.is_channel() ? "channel" : (t.flags & dump::kThreadExited) ? "exited" : "running")
        << " |\n";
  }

  print_named(out, "Ranges", s.ranges, true);
  print_named(out, "Python functions", s.python, true);
  print_named(out, "GPU kernels", s.kernels, false);
  if (!s.async.empty()) {
    out << "\n## Async spans\n\n| name | count | total ms | mean us | p50 us | p99 us | max us |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n";
    for (auto& [n, d] : s.async)
      out << "| " << cell(n) << " | " << d.count() << " | " << ms(double(d.total())) << " | " << us(d.mean()) << " | "
          << us(d.percentile(0.5)) << " | " << us(d.percentile(0.99)) << " | " << us(double(d.max())) << " |\n";
  }
  if (!s.marks.empty()) {
    out << "\n## Marks\n\n| name | count |\n|---|---:|\n";
    for (auto& [n, c] : s.marks) out << "| " << cell(n) << " | " << c << " |\n";
  }
  out << "\n## Drops\n\n";
  auto drops = r.drops();
  if (!r.complete())  // what was lost after the file's last drop table is counted nowhere (a disk full at stop)
    out << "- not known in full: no end chunk, so records lost after the last drop table in the file are counted "
           "nowhere; " << (drops.empty() ? "none were" : "these were") << " counted before the file ends\n";
  else if (drops.empty())
    out << "- none: every record reached the dump\n";
  for (auto& d : drops) {
    std::string who = d.thread_id == dump::kNoThread ? "process" : "thread " + std::to_string(d.thread_id);
    out << "- " << who << ": " << d.records << " records (" << d.bytes << " bytes) " << one_line(d.reason) << "\n";
  }
}

}  // namespace inferscope::report
