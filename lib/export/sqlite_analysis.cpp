// The analysis as rows: what the reports print, so that queries over the records can be checked against it.
#include "export/sqlite_internal.hpp"

#include "analyze/breakdown_fields.hpp"
#include "text/names.hpp"

#include <boost/json.hpp>

#include <optional>
#include <string>

namespace inferscope::exporter::detail {
namespace {

/// A suggestion's program facts as a JSON array (`json_each(needs)` lists them); NULL when it needs none.
std::optional<std::string> needs_json(const std::vector<std::string>& needs) {
  if (needs.empty()) return std::nullopt;
  boost::json::array a;
  for (const auto& n : needs) a.emplace_back(n);
  return boost::json::serialize(a);
}

/// What iscope-run --try measured for a suggestion, as the JSON report's `measured` object; NULL when nothing.
std::optional<std::string> measured_json(const analyze::Suggestion& s) {
  if (!s.measured) return std::nullopt;
  const analyze::TryMeasurement& m = *s.measured;
  boost::json::object o;
  o["command"] = m.command;
  o["knobs"] = m.knobs;
  o["pairs"] = m.pairs;
  o["saving_pct"] = m.saving_pct;
  o["saving_low_pct"] = m.low_pct;
  o["saving_high_pct"] = m.high_pct;
  o["measurable"] = m.measurable;
  return boost::json::serialize(o);
}

uint64_t write_meta(Db& db, const analyze::Analysis& a, const TraceInfo& info) {
  Stmt st(db, "INSERT INTO meta VALUES (?,?)");
  uint64_t rows = 0;
  auto put = [&](const char* key, auto value) {
    st << key << value;
    st.row();
    ++rows;
  };
  put("schema_version", int64_t(kSqliteSchemaVersion));
  put("source", a.source);
  put("source_format", a.source_format);
  put("trace_start_ns", info.first_ns);
  put("trace_end_ns", info.last_ns);
  put("trace_ms", a.trace_ms);
  put("end_to_end_ms", a.end_to_end_ms);
  put("ns_per_tick", info.ns_per_tick);
  put("events", a.events);
  put("partial", a.partial);
  put("step_name", a.steps.name);
  put("steps_found", info.steps_found);
  Stmt process(db, "INSERT INTO process VALUES (?,?)");
  for (auto& [k, v] : a.process) {
    process << k << v;
    process.row();
    ++rows;
  }
  return rows;
}

uint64_t write_steps_and_breakdown(Db& db, const analyze::Analysis& a) {
  const auto& s = a.steps;
  Stmt st(db, "INSERT INTO step_summary VALUES (?,?,?,?,?,?,?,?,?)");
  st << s.name << s.detected << s.count << s.mean_ms << s.p50_ms << s.p90_ms << s.p99_ms << s.max_ms << s.min_ms;
  st.row();
  const auto& b = a.breakdown;
  std::string marks;
  analyze::for_each_breakdown_field(b, [&marks](const char*, const auto&) { marks += marks.empty() ? "?" : ",?"; });
  Stmt bd(db, "INSERT INTO breakdown VALUES (" + marks + ")");
  analyze::for_each_breakdown_field(b, [&bd](const char*, const auto& value) { bd << value; });
  bd.row();
  Stmt k(db, "INSERT INTO kernel_summary VALUES (?,?,?,?,?,?,?,?,?)");
  const text::KernelNames names = text::report_kernel_names(a);  // the reports' short names, the JSON's short_name
  int64_t rank = 0;
  for (auto& r : a.kernels) {
    k << ++rank << r.name << r.count << r.total_ms << r.mean_us << r.share << r.launched_by << names.short_of(r.name)
      << r.whole_graph;
    k.row();
  }
  return 2 + a.kernels.size();
}

uint64_t write_findings(Db& db, const analyze::Analysis& a) {
  Stmt f(db, "INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
  Stmt ev(db, "INSERT INTO finding_evidence VALUES (?,?,?)");
  Stmt me(db, "INSERT INTO finding_metrics VALUES (?,?,?)");
  Stmt ex(db, "INSERT INTO finding_examples VALUES (?,?,?,?)");
  Stmt su(db, "INSERT INTO suggestions VALUES (?,?,?,?,?,?,?,?,?,?)");
  uint64_t rows = 0;
  int64_t id = 0;
  const auto cmd = a.process.find("cmdline");
  const std::string cmdline = cmd == a.process.end() ? std::string() : cmd->second;
  for (auto& x : a.findings) {
    ++id;
    f << id << x.category << x.title << x.impact_ms << x.impact_pct << x.confidence << x.uncertain << x.primary
      << (x.rule.empty() ? x.category : x.rule)  // as the JSON report: a finding made without a rule name is its category's
      << x.informational << x.impact_estimated << x.per;
    f.row();
    int64_t seq = 0;
    for (auto& e : x.evidence) ev << id << ++seq << e, ev.row();
    for (auto& [k, v] : x.metrics) me << id << k << v, me.row();
    for (auto& e : x.examples) ex << id << e.start_ms << e.end_ms << e.what, ex.row();
    seq = 0;
    for (auto& s : x.suggestions) {
      su << id << ++seq << s.action << s.priority << s.impact_ms << s.estimated << s.model << needs_json(s.needs)
         << analyze::try_command(cmdline, s) << measured_json(s);
      su.row();
    }
    rows += 1 + x.evidence.size() + x.metrics.size() + x.examples.size() + x.suggestions.size();
  }
  return rows;
}

}  // namespace

uint64_t write_analysis(Db& db, const analyze::Analysis& a, const TraceInfo& info) {
  uint64_t rows = write_meta(db, a, info) + write_steps_and_breakdown(db, a) + write_findings(db, a);
  Stmt w(db, "INSERT INTO warnings VALUES (?,?)");
  int64_t seq = 0;
  for (auto* list : {&a.warnings, &info.notes})
    for (auto& m : *list) {
      w << ++seq << m;
      w.row();
      ++rows;
    }
  return rows;
}

}  // namespace inferscope::exporter::detail
