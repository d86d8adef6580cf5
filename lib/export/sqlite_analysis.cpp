// The analysis as rows: what the reports print, so that queries over the records can be checked against it.
#include "export/sqlite_internal.hpp"

#include "analyze/breakdown_fields.hpp"
#include "analyze/table_fields.hpp"
#include "text/names.hpp"

#include <boost/json.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace inferscope::exporter::detail {
namespace {

/// A field of analyze/table_fields.hpp's lists into its column: a flag the JSON report leaves out as 0 or 1, a
/// suggestion's saving as a number (0 when not estimated, the JSON's null), the program facts it needs as a JSON
/// array (`json_each(needs)` lists them; NULL for none), what iscope-run --try measured as the JSON report's
/// `measured` object (NULL when nothing).
template <class V>
void bind_field(Stmt& st, const V& v) {
  if constexpr (std::is_same_v<V, analyze::OnlyWhenFalse> || std::is_same_v<V, analyze::OnlyWhenTrue>) {
    st << v.value;
  } else if constexpr (std::is_same_v<V, analyze::EstimatedMs>) {
    st << v.ms;
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    if (v.empty()) {
      st << std::nullopt;
      return;
    }
    boost::json::array a;
    for (const auto& n : v) a.emplace_back(n);
    st << boost::json::serialize(a);
  } else if constexpr (std::is_same_v<V, std::optional<analyze::TryMeasurement>>) {
    if (!v) {
      st << std::nullopt;
      return;
    }
    boost::json::object o;
    analyze::for_each_field(*v, [&o](const char* key, const auto& x) { o[key] = x; });
    st << boost::json::serialize(o);
  } else if constexpr (std::is_same_v<V, std::string>) {
    st << std::string(v);  // a copy SQLite keeps: some are temporaries (short_name, try_command)
  } else {
    st << v;
  }
}

/// An INSERT that names its columns: those given first (ids), then one per field of a table_fields.hpp list; a
/// field without a column fails the statement (test_sqlite checks that every JSON key has one).
struct NamedInsert {
  std::string table, columns, values;
  NamedInsert(std::string t, std::initializer_list<const char*> first) : table(std::move(t)) {
    for (const char* c : first) add(c);
  }
  void add(std::string_view column) {
    columns += (columns.empty() ? "" : ",") + std::string(column);
    values += values.empty() ? "?" : ",?";
  }
  std::string sql() const { return "INSERT INTO " + table + " (" + columns + ") VALUES (" + values + ")"; }
};

std::string findings_insert() {
  NamedInsert in("findings", {"id"});
  analyze::for_each_field(analyze::Finding{}, [&](const analyze::FindingKey& key, const auto&) { in.add(key.sqlite()); });
  return in.sql();
}

std::string examples_insert() {
  NamedInsert in("finding_examples", {"finding_id"});
  analyze::for_each_field(analyze::TimeSpan{}, [&](const char* key, const auto&) { in.add(key); });
  return in.sql();
}

std::string suggestions_insert() {
  NamedInsert in("suggestions", {"finding_id", "seq"});
  analyze::for_each_field(analyze::Suggestion{}, std::string(), [&](const char* key, const auto&) { in.add(key); });
  return in.sql();
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
  // The kernel table's fields as the JSON report's (analyze/table_fields.hpp), after the row's rank.
  const text::KernelNames names = text::report_kernel_names(a);  // the reports' short names, the JSON's short_name
  NamedInsert kernels("kernel_summary", {"rank"});
  analyze::for_each_field(analyze::KernelRow{}, names, [&](const char* key, const auto&) { kernels.add(key); });
  Stmt k(db, kernels.sql());
  int64_t rank = 0;
  for (auto& r : a.kernels) {
    k << ++rank;
    analyze::for_each_field(r, names, [&k](const char*, const auto& value) { bind_field(k, value); });
    k.row();
  }
  return 2 + a.kernels.size();
}

uint64_t write_findings(Db& db, const analyze::Analysis& a) {
  Stmt f(db, findings_insert());
  Stmt ev(db, "INSERT INTO finding_evidence VALUES (?,?,?)");
  Stmt me(db, "INSERT INTO finding_metrics VALUES (?,?,?)");
  Stmt ex(db, examples_insert());
  Stmt su(db, suggestions_insert());
  uint64_t rows = 0;
  int64_t id = 0;
  const auto cmd = a.process.find("cmdline");
  const std::string cmdline = cmd == a.process.end() ? std::string() : cmd->second;
  for (auto& x : a.findings) {
    ++id;
    f << id;
    analyze::for_each_field(x, [&f](const analyze::FindingKey&, const auto& value) { bind_field(f, value); });
    f.row();
    int64_t seq = 0;
    for (auto& e : x.evidence) ev << id << ++seq << e, ev.row();
    for (auto& [k, v] : x.metrics) me << id << k << v, me.row();
    for (auto& e : x.examples) {
      ex << id;
      analyze::for_each_field(e, [&ex](const char*, const auto& value) { bind_field(ex, value); });
      ex.row();
    }
    seq = 0;
    for (auto& s : x.suggestions) {
      su << id << ++seq;
      analyze::for_each_field(s, cmdline, [&su](const char*, const auto& value) { bind_field(su, value); });
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
