// The SQLite export: every example query of docs/sqlite-schema.md (read from the doc, so the doc cannot drift
// from what is tested) runs on databases written from the synthetic scenarios (calls on their thread and
// recorded by CUPTI) and the recorded fixtures, and its result is checked against the analysis of the same
// dump. Then the bad cases of `iscope-analyze --sqlite`.
#include "support/files.hpp"
#include "support/json_keys.hpp"
#include "analyze/analyzer.hpp"
#include "analyze/scenarios.hpp"
#include "export/sqlite.hpp"
#include "report/report.hpp"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace inferscope;
using analyze::Analysis;

namespace {

using testsupport::read;

fs::path work_dir() {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "export" / "work";
  fs::create_directories(d);
  return d;
}


struct Cell {
  bool null = true;
  double num = 0;
  std::string text;
};
using Row = std::vector<Cell>;

/// Runs one statement on the database at `db`, read-only; every row, every column as number and text.
std::vector<Row> query(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  INFO(sql);
  const int prc = sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr);
  INFO(sqlite3_errmsg(h));
  REQUIRE(prc == SQLITE_OK);
  std::vector<Row> rows;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    Row r(size_t(sqlite3_column_count(st)));
    for (int i = 0; i < int(r.size()); ++i) {
      r[size_t(i)].null = sqlite3_column_type(st, i) == SQLITE_NULL;
      r[size_t(i)].num = sqlite3_column_double(st, i);
      const auto* t = sqlite3_column_text(st, i);
      r[size_t(i)].text = t ? reinterpret_cast<const char*>(t) : "";
    }
    rows.push_back(std::move(r));
  }
  CHECK(rc == SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

double scalar(const fs::path& db, const std::string& sql) {
  auto rows = query(db, sql);
  REQUIRE(rows.size() == 1);
  return rows[0][0].num;
}

/// The example queries of docs/sqlite-schema.md: `<!-- query: NAME -->` followed by a ```sql block.
std::map<std::string, std::string> doc_queries() {
  const std::string doc = read(fs::path(INFERSCOPE_SOURCE_DIR) / "docs" / "sqlite-schema.md");
  static const std::regex re("<!-- query: ([a-z_]+) -->\\s*```sql\\n([^`]*)```");
  std::map<std::string, std::string> out;
  for (std::sregex_iterator it(doc.begin(), doc.end(), re), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
  return out;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-6 + 1e-9 * std::fabs(b); }

using Check = std::function<void(const std::vector<Row>&, const Analysis&)>;

void check_kernel_totals(const std::vector<Row>& rows, const Analysis& a) {
  std::map<std::string, const Row*> by_name;
  for (auto& r : rows) by_name[r[0].text] = &r;
  if (a.kernels.size() < 50) CHECK(rows.size() == a.kernels.size());
  for (auto& k : a.kernels) {
    INFO(k.name);
    REQUIRE(by_name.count(k.name));
    CHECK(uint64_t(by_name[k.name]->at(1).num) == k.count);
    CHECK(near(by_name[k.name]->at(2).num, k.total_ms));
  }
}

void check_top_kernels_per_step(const std::vector<Row>& rows, const Analysis& a) {
  std::set<std::string> names;
  for (auto& k : a.kernels) names.insert(k.name);
  std::map<int64_t, std::vector<const Row*>> per_step;
  for (auto& r : rows) per_step[int64_t(r[0].num)].push_back(&r);
  for (auto& [step, v] : per_step) {
    CHECK(step >= 0);
    CHECK(uint64_t(step) < std::max(a.steps.total, a.steps.count));
    CHECK(v.size() <= 3);
    for (size_t i = 1; i < v.size(); ++i) CHECK(v[i - 1]->at(3).num >= v[i]->at(3).num);
    if (a.kernels.size() < 50) CHECK(names.count(v[0]->at(1).text));
  }
  if (a.steps.count == 0) CHECK(rows.empty());
}

// Every step is a row (warm-up included); the breakdown is the mean over the typical steps: steady (after the
// warm-up) and not slow outliers (when the steps are alike).
void check_gpu_idle_per_step(const std::vector<Row>& rows, const Analysis& a) {
  REQUIRE(rows.size() == std::max(a.steps.total, a.steps.count));
  if (rows.empty()) return;
  std::set<uint32_t> outliers;
  for (const auto& o : a.steps.outliers) outliers.insert(o.index);
  double dur = 0, idle = 0, typical = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i][0].num == double(i));
    // Steps that are not alike keep their outliers in the typical step (their headline is the mean).
    if (i < a.steps.warmup || (a.steps.alike && outliers.count(uint32_t(i)))) continue;
    dur += rows[i][1].num;
    idle += rows[i][2].num;
    ++typical;
  }
  // StepStats lists at most 20 outliers: with more (a launcher's idle-loop "steps", mg_*.iscope), the typical steps
  // cannot be told from the rows here, only bounded.
  if (a.steps.alike && a.steps.outliers.size() >= 20) {
    CHECK(typical >= double(a.steps.typical));
    return;
  }
  REQUIRE(typical == double(a.steps.typical));
  const auto& b = a.breakdown;
  CHECK(near(dur / typical, b.step_ms));
  CHECK(near(idle / typical,
             b.gpu_idle_waiting_on_host_ms + b.gpu_idle_gaps_between_kernels_ms + b.gpu_idle_waiting_on_sync_ms +
                    b.gpu_idle_in_memory_ms));
}

// The report's launcher of a kernel names its Python function first: the query lists that function for it.
void check_kernels_by_python_function(const std::vector<Row>& rows, const Analysis& a) {
  std::set<std::pair<std::string, std::string>> seen;
  for (auto& r : rows) seen.insert({r[0].text, r[1].text});
  for (auto& k : a.kernels) {
    if (k.launched_by == "-" || k.launched_by.rfind("range ", 0) == 0 || k.launched_by.rfind("layer ", 0) == 0) continue;
    const std::string fn = k.launched_by.substr(0, k.launched_by.find_first_of(" /"));
    INFO(k.name, " launched by ", k.launched_by);
    CHECK(seen.count({fn, k.name}));
  }
}

// Per kernel name the first row is the label with the most GPU time: the report's launched_by.
void check_kernels_by_launcher(const std::vector<Row>& rows, const Analysis& a) {
  std::map<std::string, std::string> best;
  for (auto& r : rows) best.try_emplace(r[0].text, r[1].text);
  for (auto& k : a.kernels) {
    INFO(k.name);
    CHECK((best.count(k.name) ? best[k.name] : std::string("-")) == k.launched_by);
  }
}

void check_slowest_steps(const std::vector<Row>& rows, const Analysis& a) {
  REQUIRE(rows.size() == a.steps.slowest.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(uint32_t(rows[i][0].num) == a.steps.slowest[i].index);
    CHECK(near(rows[i][1].num, a.steps.slowest[i].start_ms));
    CHECK(near(rows[i][2].num, a.steps.slowest[i].duration_ms));
  }
}

void check_findings(const std::vector<Row>& rows, const Analysis& a) {
  REQUIRE(rows.size() == a.findings.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& f = a.findings[i];
    CHECK(rows[i][1].text == f.category);
    CHECK(rows[i][2].text == f.title);
    CHECK(near(rows[i][3].num, f.impact_ms));
    CHECK(near(rows[i][4].num, f.confidence));
    CHECK((rows[i][5].num != 0) == f.primary);
    CHECK(size_t(rows[i][6].num) == f.suggestions.size());
  }
}

const std::map<std::string, Check>& checks() {
  static const std::map<std::string, Check> c = {
      {"kernel_totals", check_kernel_totals},
      {"top_kernels_per_step", check_top_kernels_per_step},
      {"gpu_idle_per_step", check_gpu_idle_per_step},
      {"kernels_by_python_function", check_kernels_by_python_function},
      {"kernels_by_launcher", check_kernels_by_launcher},
      {"slowest_steps", check_slowest_steps},
      {"findings", check_findings},
  };
  return c;
}

// Links and bounds the example queries rely on.
void check_links(const fs::path& db, const Analysis& a) {
  CHECK(near(scalar(db, "SELECT ((SELECT value FROM meta WHERE key = 'trace_end_ns') - "
                        "(SELECT value FROM meta WHERE key = 'trace_start_ns')) / 1e6"),
             a.trace_ms));
  CHECK(scalar(db, "SELECT count(*) FROM steps") == double(std::max(a.steps.total, a.steps.count)));
  CHECK(scalar(db, "SELECT count(*) FROM steps WHERE phase = 'warmup'") == double(a.steps.warmup));
  // Each step is the analysis's own window (StepStats::spans, not found again here), and the range or Python
  // call it names starts with it.
  if (a.steps.count > 0) {
    const auto rows = query(db, "SELECT CAST(start_ns AS TEXT), CAST(end_ns AS TEXT), thread_id FROM steps ORDER BY step");
    REQUIRE(rows.size() == a.steps.spans.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      CAPTURE(i);
      CHECK(rows[i][0].text == std::to_string(a.steps.spans[i].start_ns));
      CHECK(rows[i][1].text == std::to_string(a.steps.spans[i].end_ns));
      CHECK(rows[i][2].num == double(a.steps.spans[i].thread));
    }
  }
  // A step named by a range or a Python function is opened by one; only windows no record names (a C++ loop's
  // iterations, a sampled run's windows) have neither.
  const bool named = a.steps.name.rfind("loop iterations ending at ", 0) != 0 && a.steps.name != "(sampled windows)";
  if (named) CHECK(scalar(db, "SELECT count(*) FROM steps WHERE range_id IS NULL AND py_call_id IS NULL") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM steps s JOIN ranges r ON r.id = s.range_id "
                   "WHERE r.start_ns != s.start_ns OR r.thread_id != s.thread_id") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM steps s JOIN python_calls p ON p.id = s.py_call_id "
                   "WHERE p.start_ns != s.start_ns OR p.thread_id != s.thread_id") == 0);
  // Every kernel whose correlation id a call carries is linked to that call.
  CHECK(scalar(db, "SELECT count(*) FROM kernels k WHERE k.api_id IS NULL AND EXISTS "
                   "(SELECT 1 FROM cuda_api c WHERE c.correlation = k.correlation)") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM kernels k JOIN cuda_api c ON c.id = k.api_id "
                   "WHERE c.correlation != k.correlation") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM findings") == double(a.findings.size()));
}

/// The JSON report of `a`, parsed.
boost::json::value json_report(const Analysis& a) {
  std::ostringstream out;
  report::write_json(a, out);
  return boost::json::parse(out.str());
}

// The columns that carry the JSON report's keys hold what the report says (the keys' presence is checked below,
// "every key ... is one of its columns").
void check_carried_columns(const fs::path& db, const Analysis& a) {
  const boost::json::value j = json_report(a);
  const auto kernels = query(db, "SELECT name, short_name, whole_graph FROM kernel_summary ORDER BY rank");
  REQUIRE(kernels.size() == a.kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    CHECK(kernels[i][0].text == a.kernels[i].name);
    CHECK(kernels[i][1].text == std::string(j.at("tables").at("kernels").at(i).at("short_name").as_string()));
    CHECK((kernels[i][2].num != 0) == a.kernels[i].whole_graph);
  }
  const auto findings = query(db, "SELECT rule, informational, impact_estimated, impact_per FROM findings ORDER BY id");
  REQUIRE(findings.size() == a.findings.size());
  for (size_t i = 0; i < findings.size(); ++i) {
    CHECK(findings[i][0].text == std::string(j.at("findings").at(i).at("rule").as_string()));
    CHECK((findings[i][1].num != 0) == a.findings[i].informational);
    CHECK((findings[i][2].num != 0) == a.findings[i].impact_estimated);
    CHECK(findings[i][3].text == a.findings[i].per);
  }
  const auto suggestions = query(db, "SELECT finding_id, seq, estimated, model, needs, impact_ms, try_command, "
                                      "measured FROM suggestions ORDER BY finding_id, seq");
  size_t n = 0;
  for (size_t fi = 0; fi < a.findings.size(); ++fi)
    for (size_t si = 0; si < a.findings[fi].suggestions.size(); ++si) {
      const auto& sug = a.findings[fi].suggestions[si];
      const auto& js = j.at("findings").at(fi).at("suggestions").at(si).as_object();
      REQUIRE(n < suggestions.size());
      const Row& r = suggestions[n++];
      CHECK((r[2].num != 0) == sug.estimated);
      CHECK(r[3].text == sug.model);
      CHECK(r[4].null == sug.needs.empty());
      if (!sug.needs.empty()) {
        boost::json::array needs;
        for (const auto& x : sug.needs) needs.emplace_back(x);
        CHECK(r[4].text == boost::json::serialize(needs));
      }
      // The saving: the JSON's number, or null where SQLite has 0 (not estimated).
      if (sug.estimated)
        CHECK(near(r[5].num, js.at("impact_ms").to_number<double>()));
      else
        CHECK((js.at("impact_ms").is_null() && r[5].num == 0));
      CHECK(r[6].text == std::string(js.at("try_command").as_string()));
      // What --try measured: the JSON report's object, as text.
      CHECK(r[7].null == js.at("measured").is_null());
      if (!r[7].null) CHECK(boost::json::parse(r[7].text) == js.at("measured"));
    }
  CHECK(n == suggestions.size());
}

void export_and_check(const fs::path& dump_path, const std::string& step = "") {
  INFO("dump: ", dump_path.string());
  dump::DumpReader reader(dump_path.string());
  analyze::AnalyzeOptions o;
  o.step = step;
  const Analysis a = analyze::analyze_dump(reader, o);
  fs::path db = dump_path;
  db.replace_extension(".db");
  const auto stats = exporter::write_sqlite(reader, a, db.string());
  CHECK(stats.rows > 0);
  for (auto& [name, sql] : doc_queries()) {
    INFO("query: ", name);
    auto it = checks().find(name);
    REQUIRE_MESSAGE(it != checks().end(), "docs/sqlite-schema.md has a query the test does not check");
    it->second(query(db, sql), a);
  }
  check_links(db, a);
  check_carried_columns(db, a);
}

/// A table of the export that carries an object of the JSON report: each key of the object is a column, named as the
/// key with its nested objects' names joined by "_" (`impact.ms` is `impact_ms`) unless `renamed`; the keys in
/// `elsewhere` are the object's lists, carried by tables of their own, and the keys in `as_json` are objects kept
/// whole in one column of their name, as JSON text (docs/sqlite-schema.md, "Tables of the analysis").
struct Carried {
  std::string object;  ///< its key path in the JSON report
  std::string table;
  std::map<std::string, std::string> renamed = {};
  std::set<std::string> elsewhere = {};
  std::set<std::string> as_json = {};
};

const std::vector<Carried>& carried() {
  static const std::vector<Carried> c = {
      {"breakdown", "breakdown", {}, {"by_cause"}},  // by_cause regroups the breakdown's own fields
      {"tables.kernels[]", "kernel_summary"},
      {"findings[]", "findings", {{"bottleneck_type", "category"}, {"primary", "is_primary"}},
       {"evidence", "metrics", "examples", "suggestions"}},
      {"findings[].examples[]", "finding_examples"},
      {"findings[].suggestions[]", "suggestions", {}, {}, {"measured"}},
  };
  return c;
}

std::set<std::string> columns(const fs::path& db, const std::string& table) {
  std::set<std::string> out;
  for (const Row& r : query(db, "SELECT name FROM pragma_table_info('" + table + "')")) out.insert(r[0].text);
  return out;
}

/// "table.column" for each key of a carried object (in `keys.leaves`) that its table lacks.
std::vector<std::string> missing_columns(const testsupport::JsonKeys& keys, const fs::path& db) {
  std::vector<std::string> missing;
  for (const Carried& c : carried()) {
    const std::set<std::string> have = columns(db, c.table);
    REQUIRE_MESSAGE(!have.empty(), c.table);
    for (const std::string& leaf : keys.leaves) {
      if (leaf.rfind(c.object + ".", 0) != 0) continue;
      std::string rel = leaf.substr(c.object.size() + 1);
      if (rel.size() > 2 && rel.ends_with("[]")) rel.resize(rel.size() - 2);  // a list of values: one column
      const std::string first = rel.substr(0, rel.find_first_of(".["));
      if (c.elsewhere.count(first) || rel.find("[]") != std::string::npos) continue;  // a list of objects: its own table
      std::string column = c.as_json.count(first) ? first : c.renamed.count(rel) ? c.renamed.at(rel) : rel;
      std::replace(column.begin(), column.end(), '.', '_');
      if (!have.count(column)) missing.push_back(c.table + "." + column + " (" + leaf + ")");
    }
  }
  return missing;
}

}  // namespace

TEST_CASE("every key of the JSON report's objects that a table carries is one of its columns") {
  // A recorded fixture with every optional key of those objects switched on, as other runs write them: a whole CUDA
  // graph's row, a rule file's finding about requests that gives no impact, a suggestion that needs facts.
  const fs::path copy = work_dir() / "columns_llm_decode_item.iscope";
  fs::copy_file(fs::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "llm_decode_item.iscope", copy,
                fs::copy_options::overwrite_existing);
  dump::DumpReader reader(copy.string());
  Analysis a = analyze::analyze_dump(reader, {});
  REQUIRE(!a.kernels.empty());
  REQUIRE(!a.findings.empty());
  REQUIRE(!a.findings[0].suggestions.empty());
  a.kernels[0].whole_graph = true;
  a.findings[0].impact_estimated = false;
  a.findings[0].per = "request";
  a.findings[0].suggestions[0].needs = {"python", "dataloader"};
  a.findings[0].suggestions[0].measured = analyze::TryMeasurement{"iscope-run --try num_workers=4 -- python3 x.py",
                                                                  "num_workers=4", 3, 41.5, 39.0, 44.25, true};
  analyze::Suggestion unestimated = a.findings[0].suggestions[0];  // a saving not estimated: null in JSON, 0 here
  unestimated.estimated = false, unestimated.impact_ms = 0, unestimated.measured.reset();
  a.findings[0].suggestions.push_back(unestimated);
  const fs::path db = work_dir() / "columns_llm_decode_item.db";
  exporter::write_sqlite(reader, a, db.string());
  testsupport::JsonKeys keys;
  testsupport::collect_json_keys(json_report(a), "", {"findings[].metrics"}, keys);
  for (const char* leaf : {"tables.kernels[].whole_graph", "findings[].impact.estimated", "findings[].impact.per",
                           "findings[].suggestions[].needs[]", "findings[].suggestions[].measured.saving_pct",
                           "findings[].examples[].what", "breakdown.step_ms"})
    CHECK_MESSAGE(keys.leaves.count(leaf), std::string(leaf));  // the analysis reaches what the check must see
  const auto missing = missing_columns(keys, db);
  std::string list;
  for (const auto& m : missing) list += m + "; ";
  CHECK_MESSAGE(missing.empty(), "JSON keys with no column: " << list);
  check_carried_columns(db, a);

  // The check itself: a key the JSON would write and no table carries is reported.
  keys.leaves.insert("findings[].impact.not_a_column");
  keys.leaves.insert("tables.kernels[].not_a_column");
  CHECK(missing_columns(keys, db) == std::vector<std::string>{
                                         "kernel_summary.not_a_column (tables.kernels[].not_a_column)",
                                         "findings.impact_not_a_column (findings[].impact.not_a_column)"});
}

TEST_CASE("the doc's example queries and the test's checks are the same set") {
  const auto q = doc_queries();
  CHECK(q.size() == checks().size());
  for (auto& [name, c] : checks()) CHECK_MESSAGE(q.count(name), name);
}

TEST_CASE("example queries agree with the analysis: synthetic scenarios") {
  for (bool cupti : {false, true})
    for (auto& name : testsupport::scenario_names()) {
      const fs::path p = work_dir() / (name + (cupti ? "_cupti" : "") + ".iscope");
      testsupport::write_scenario(name, p.string(), cupti);
      export_and_check(p);
    }
}

TEST_CASE("example queries agree with the analysis: --step and recorded fixtures") {
  const fs::path p = work_dir() / "layers_step.iscope";
  testsupport::write_scenario("layers", p.string());
  export_and_check(p, "Model.run_step");
  for (auto& e : fs::directory_iterator(fs::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures")) {
    if (e.path().extension() != ".iscope") continue;
    const fs::path copy = work_dir() / e.path().filename();
    fs::copy_file(e.path(), copy, fs::copy_options::overwrite_existing);
    export_and_check(copy);
  }
}

TEST_CASE("steps that are loop iterations: the analysis's windows, each opened by its call") {
  // samples/validation/dataloader_cpu.py on the H100: the loop loads each batch outside Sequential.forward, so
  // the analyzer's steps run from one call's start to the next one's (25 calls, 24 iterations). The export
  // once found its steps again by name and listed the 25 calls instead.
  const fs::path copy = work_dir() / "iterations_real_dataloader_cpu.iscope";
  fs::copy_file(fs::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "real_dataloader_cpu.iscope", copy,
                fs::copy_options::overwrite_existing);
  dump::DumpReader reader(copy.string());
  const Analysis a = analyze::analyze_dump(reader, {});
  REQUIRE(a.steps.name == "Sequential.forward");
  const fs::path db = work_dir() / "iterations_real_dataloader_cpu.db";
  exporter::write_sqlite(reader, a, db.string());
  CHECK(scalar(db, "SELECT count(*) FROM steps") == double(a.steps.total));
  CHECK(scalar(db, "SELECT count(*) FROM steps WHERE py_call_id IS NULL") == 0);
  // An iteration is longer than its call: it also holds the loading of the next batch.
  CHECK(scalar(db, "SELECT count(*) FROM steps s JOIN python_calls p ON p.id = s.py_call_id "
                   "WHERE s.end_ns <= p.end_ns") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM python_calls WHERE qualname = 'Sequential.forward' AND depth <= 3") ==
        double(a.steps.total + 1));
}

TEST_CASE("rows: every record of the dump, with its context at launch") {
  const fs::path p = work_dir() / "rows_layers.iscope";
  testsupport::write_scenario("layers", p.string());
  dump::DumpReader r(p.string());
  const Analysis a = analyze::analyze_dump(r, {});
  const fs::path db = work_dir() / "rows_layers.db";
  exporter::write_sqlite(r, a, db.string());
  uint64_t ranges = 0, py = 0, kernels = 0, api = 0;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t*) {
    ranges += h.kind == RecordKind::kRange || h.kind == RecordKind::kNvtxRange;
    py += h.kind == RecordKind::kPyCall;
    kernels += h.kind == RecordKind::kGpuKernel;
    api += h.kind == RecordKind::kCudaApi;
  });
  CHECK(scalar(db, "SELECT count(*) FROM ranges") == double(ranges));
  CHECK(scalar(db, "SELECT count(*) FROM python_calls") == double(py));
  CHECK(scalar(db, "SELECT count(*) FROM kernels") == double(kernels));
  CHECK(scalar(db, "SELECT count(*) FROM cuda_api") == double(api));
  // A kernel's layer is a range around its launch call on the launching thread.
  CHECK(scalar(db, "SELECT count(*) FROM kernels WHERE layer IS NOT NULL") > 0);
  CHECK(scalar(db, "SELECT count(*) FROM kernels k JOIN cuda_api c ON c.id = k.api_id JOIN ranges g ON g.id = k.range_id "
                   "WHERE g.thread_id != c.thread_id OR g.start_ns > c.start_ns OR g.end_ns < c.end_ns") == 0);
  CHECK(scalar(db, "SELECT count(*) FROM kernels k JOIN cuda_api c ON c.id = k.api_id "
                   "JOIN python_calls p ON p.id = k.py_call_id WHERE p.start_ns > c.start_ns OR p.end_ns < c.end_ns") == 0);
  CHECK(scalar(db, "SELECT value FROM meta WHERE key = 'schema_version'") == exporter::kSqliteSchemaVersion);
}

namespace {

// Runs iscope-analyze with `args`; returns the exit status and fills stderr.
int run_cli(const std::string& args, std::string* err) {
  const fs::path e = work_dir() / "cli.err";
  const std::string cmd = std::string(ISCOPE_ANALYZE_EXE) + " " + args + " >/dev/null 2>" + e.string();
  const int rc = std::system(cmd.c_str());
  *err = read(e);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool leftovers(const fs::path& dir) {
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("iscope-analyze --sqlite: writes atomically, refuses bad output paths and leaves nothing behind") {
  const fs::path dir = work_dir() / "cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path dump_path = dir / "run.iscope";
  testsupport::write_scenario("sync_bound", dump_path.string());
  const std::string dump_bytes = read(dump_path);
  std::string err;

  SUBCASE("a database replaces an existing file") {
    std::ofstream(dir / "out.db") << "old";
    CHECK(run_cli(dump_path.string() + " --sqlite " + (dir / "out.db").string(), &err) == 0);
    CHECK(read(dir / "out.db").rfind("SQLite format 3", 0) == 0);
    CHECK(!leftovers(dir));
  }
  SUBCASE("output directory missing") {
    const fs::path out = dir / "missing" / "out.db";
    CHECK(run_cli(dump_path.string() + " --sqlite " + out.string(), &err) == 1);
    CHECK(err.find("does not exist") != std::string::npos);
    CHECK(!fs::exists(dir / "missing"));
    CHECK(!leftovers(dir));
  }
  SUBCASE("output path equal to the input, also spelt differently: exit 2, as for every other output") {
    for (const std::string& out : {dump_path.string(), (dir / "." / "run.iscope").string()}) {
      CHECK(run_cli(dump_path.string() + " --sqlite " + out, &err) == 2);
      CHECK(err.find("refusing") != std::string::npos);
      CHECK(read(dump_path) == dump_bytes);
    }
    CHECK(!leftovers(dir));
  }
  SUBCASE("output path is a directory: refused before anything is read, as every output is (docs/cli.md)") {
    CHECK(run_cli(dump_path.string() + " --sqlite " + dir.string(), &err) == 2);
    CHECK(fs::is_directory(dir));
  }
  SUBCASE("a JSON trace is refused") {
    std::ofstream(dir / "t.json") << R"({"events":[{"event_type":"gpu_kernel","name":"k","start_us":0,"end_us":5}]})";
    CHECK(run_cli((dir / "t.json").string() + " --sqlite " + (dir / "t.db").string(), &err) == 1);
    CHECK(err.find("needs a dump") != std::string::npos);
    CHECK(!fs::exists(dir / "t.db"));
  }
}
