// The detail tables' one model (analyze/table_fields.hpp, report/detail_tables.hpp): every table the field list
// names is laid out for Markdown and HTML with as many cells as columns, and the JSON report, the Markdown and the
// HTML report each write every table from it: the JSON row's keys are the field list's, each heading and column
// reaches both text reports.
#include "analyze/table_fields.hpp"
#include "report/common.hpp"
#include "report/detail_tables.hpp"
#include "report/escape.hpp"
#include "report/report.hpp"
#include "report/requests.hpp"
#include "sample_analysis.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

using namespace inferscope;
namespace json = boost::json;

namespace {

/// The sample analysis with a row in every detail table (it has no kernel family of its own).
analyze::Analysis every_table() {
  analyze::Analysis a = report::testing::sample_analysis();
  a.kernel_families.push_back({"GEMM", 12, 3.5, 0.7, 0.9});
  a.tensor_core_share = 0.63;
  return a;
}

template <class F>
std::string written(const analyze::Analysis& a, F&& writer) {
  std::ostringstream out;
  writer(a, out);
  return out.str();
}

/// `s` with each run of spaces and newlines as one space (the Markdown writer wraps long prose lines).
std::string one_line(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const bool space = ch == ' ' || ch == '\n';
    if (space && !out.empty() && out.back() == ' ') continue;
    out += space ? ' ' : ch;
  }
  return out;
}

/// The HTML page's section with this id, "" when there is none.
std::string html_section(const std::string& page, const std::string& id) {
  const size_t a = page.find("<section id=\"" + id + "\"");
  if (a == std::string::npos) return {};
  return page.substr(a, page.find("</section>", a) - a);
}

/// A table's header row as the Markdown report writes it (an empty column after each share column, for its bars).
std::string md_header(const report::DetailTable& t) {
  std::string head = "|";
  for (const auto& col : t.columns) {
    head += " " + col.head + " |";
    if (col.bar) head += "  |";
  }
  return head + "\n";
}

/// The HTML table's header cells, in order, as a string.
std::string html_header(const report::DetailTable& t) {
  std::string head;
  for (const auto& col : t.columns)
    head += std::string(col.kind == report::CellKind::kNumber ? "<th class=\"n\">" : "<th>") +
            report::html_escape(col.head) + "</th>";
  return head;
}

size_t count_tables(const analyze::Analysis& a) {
  size_t n = 0;
  analyze::for_each_detail_rows(a, [&n](const char*, const auto& rows) { n += !rows.empty(); });
  return n;
}

}  // namespace

TEST_CASE("detail tables: one per non-empty table of the field list, each row as wide as its columns") {
  const analyze::Analysis a = every_table();
  const auto names = report::kernel_names(a);
  const auto tables = report::detail_tables(a, names);
  CHECK(count_tables(a) == 10);
  REQUIRE(tables.size() == 10);
  std::set<std::string> keys;
  for (const auto& t : tables) {
    INFO("table " << t.key);
    keys.insert(t.key);
    CHECK(!t.title.empty());
    CHECK(t.anchor.find('_') == std::string::npos);
    CHECK(!t.rows.empty());
    for (const auto& row : t.rows) REQUIRE(row.size() == t.columns.size());
  }
  CHECK(keys.size() == 10);

  // An empty table is left out.
  analyze::Analysis fewer = a;
  fewer.ranges.clear();
  fewer.threads.clear();
  CHECK(report::detail_tables(fewer, names).size() == 8);
}

TEST_CASE("detail tables: a shortened kernel keeps its full name, a copy its two memories") {
  analyze::Analysis a = every_table();
  a.kernels.front().name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)";
  const auto names = report::kernel_names(a);
  const auto tables = report::detail_tables(a, names);
  const auto& kernels = tables.front();
  REQUIRE(kernels.key == "kernels");
  const auto& cell = kernels.rows.front().front();
  CHECK(cell.text() == names.short_of(a.kernels.front().name));
  CHECK(cell.text() != a.kernels.front().name);
  CHECK(cell.full == a.kernels.front().name);
  for (const auto& t : tables)
    if (t.key == "copies") {
      const auto& memory = t.rows.front().at(1);
      REQUIRE(memory.spans.size() == 3);
      CHECK(memory.spans[0].name);
      CHECK(memory.spans[0].text == a.copies.front().src_memory);
      CHECK_FALSE(memory.spans[1].name);
      CHECK(memory.spans[2].text == a.copies.front().dst_memory);
      CHECK(memory.text() == a.copies.front().src_memory + " → " + a.copies.front().dst_memory);
    }
}

TEST_CASE("detail tables: the JSON report's rows carry the field list's keys, in its order") {
  analyze::Analysis a = every_table();
  a.kernels.front().whole_graph = true;
  const auto names = report::kernel_names(a);
  const json::object t = json::parse(written(a, report::write_json)).as_object().at("tables").as_object();
  analyze::for_each_detail_rows(a, [&](const char* key, const auto& rows) {
    INFO("table " << key);
    const json::array& out = t.at(key).as_array();
    REQUIRE(out.size() == rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::string> want, got;
      analyze::for_each_field(rows[i], names, [&](const char* k, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, analyze::OnlyWhenTrue>) {
          if (!value.value) return;  // left out when false
        }
        want.emplace_back(k);
      });
      for (const auto& kv : out[i].as_object()) got.emplace_back(kv.key());
      CHECK(got == want);
    }
  });
  // whole_graph is written only where true.
  CHECK(t.at("kernels").as_array().at(0).as_object().contains("whole_graph"));
  if (a.kernels.size() > 1) CHECK_FALSE(t.at("kernels").as_array().at(1).as_object().contains("whole_graph"));
  CHECK(t.at("tensor_core_share").as_double() == doctest::Approx(0.63));
}

TEST_CASE("detail tables: Markdown and HTML write every heading, column and note of the model") {
  const analyze::Analysis a = every_table();
  const auto tables = report::detail_tables(a, report::kernel_names(a));
  const std::string md = written(a, report::write_markdown);
  const std::string page = written(a, report::write_html);
  for (const auto& t : tables) {
    INFO("table " << t.key);
    // Markdown: the heading, then the header row, then (after the rows) the note.
    const size_t heading = md.find("## " + t.title + "\n");
    REQUIRE(heading != std::string::npos);
    const size_t head = md.find(md_header(t), heading);
    REQUIRE(head != std::string::npos);
    CHECK(md.find("\n## ", heading + 1) > head);  // the header row is this section's
    if (!t.note.empty()) CHECK(one_line(md.substr(head)).find(report::md_escape(t.note)) != std::string::npos);
    // HTML: the section, its header cells in order, its note.
    const std::string section = html_section(page, t.anchor);
    REQUIRE(!section.empty());
    CHECK(section.find("<h2>" + t.title + "</h2>") != std::string::npos);
    CHECK(section.find(html_header(t)) != std::string::npos);
    if (!t.note.empty()) CHECK(section.find(report::html_escape(t.note)) != std::string::npos);
  }
  // The families' note names the share of kernel time on tensor cores.
  CHECK(md.find("63.0 % of kernel time ran on tensor cores") != std::string::npos);
}

TEST_CASE("section tables: whom the step waits on, in names and words, alike in Markdown and HTML") {
  analyze::Analysis a = report::testing::sample_analysis();
  a.waits.measured = true;
  a.waits.blocked_ms = 4;
  analyze::WaitPartyRow gil;
  gil.kind = "gil";
  gil.name = "worker";
  gil.members = {"worker (tid 1)", "worker (tid 2)", "worker (tid 3)"};
  gil.share = 0.7;
  gil.busy_share = 0.9;
  gil.hot = {{"decode", 1.0}, {"resize", 0.5}};
  analyze::WaitPartyRow sleep;
  sleep.kind = "own_sleep";
  sleep.share = 0.295;
  analyze::WaitPartyRow tiny = gil;
  tiny.name = "tiny";
  tiny.share = 0.005;  // under 1 % of the wait: left out
  a.waits.parties = {gil, sleep, tiny};

  const auto t = report::waits_table(a.waits);
  REQUIRE(t.rows.size() == 2);
  const auto& who = t.rows[0][0];
  CHECK(who.text() == "worker (holding the GIL) ×3");
  CHECK(who.spans.front().name);
  CHECK_FALSE(who.all_names());
  CHECK(t.rows[0][4].text() == "90");  // busy % of each member
  CHECK(t.rows[0][7].text() == "decode, resize");
  CHECK(t.rows[1][0].text() == "its own sleep");
  CHECK_FALSE(t.rows[1][0].spans.front().name);
  CHECK(t.rows[1][4].text() == "-");  // a busy share does not apply to a sleep

  const std::string md = written(a, report::write_markdown);
  const std::string page = written(a, report::write_html);
  CHECK(md.find("| `worker` (holding the GIL) ×3 | gil |") != std::string::npos);
  CHECK(md.find("| its own sleep | own\\_sleep |") == std::string::npos);  // snake_case stays greppable
  CHECK(md.find("| its own sleep | own_sleep |") != std::string::npos);
  CHECK(page.find("<code>worker</code> (holding the GIL) ×3") != std::string::npos);
  CHECK(page.find(">tiny<") == std::string::npos);
  CHECK(md.find("`tiny`") == std::string::npos);
}

TEST_CASE("section tables: step statistics and the children's table, with the heading the run decides") {
  analyze::Analysis a = report::testing::sample_analysis();
  const auto stats = report::step_stats_table(a.steps);
  REQUIRE(stats.rows.size() == 1);
  CHECK(stats.rows[0][0].text() == std::to_string(a.steps.count));
  CHECK(report::slowest_steps_table(a.steps).rows.size() == a.steps.slowest.size());

  REQUIRE(!a.children.empty());
  CHECK(report::children_table(a).title == "Child processes");
  CHECK(report::children_table(a).rows.size() == a.children.size());
  const std::string md = written(a, report::write_markdown);
  const std::string page = written(a, report::write_html);
  CHECK(md.find("## Child processes\n") != std::string::npos);
  CHECK(page.find("<section id=\"children\"><h2>Child processes</h2>") != std::string::npos);
}

TEST_CASE("section tables: a run's ranks, host clocks and collectives, a sampled run's windows, in both reports") {
  analyze::Analysis a = report::testing::sample_analysis();
  analyze::RankRow r0, r1;
  r0.rank = 0, r0.pid = 11, r0.devices = "0", r0.path = "run.11.iscope", r0.step_ms = 9.5;
  r1.rank = 1, r1.pid = 12, r1.devices = "1", r1.path = "run.12.iscope", r1.step_ms = 9.75, r1.primary = "comm_bound";
  a.run.ranks = {r0, r1};
  a.run.host_clocks = {{"node-a", "0", true, true, 0, 0, 0}, {"node-b", "1", false, true, 0.0421, 3.5, 40}};
  analyze::CollectiveRow ar;
  ar.op = "AllReduce", ar.per_step = 2, ar.transfer_ms = 1.25, ar.wait_ms = 0.5, ar.last_rank = 1, ar.last_share = 0.8;
  a.run.collectives = {ar};
  a.sampling.sampled = true;
  analyze::SampledWindow w;
  w.index = 1, w.reason = "slow_step", w.pinned = true, w.steps = 10;
  a.sampling.windows = {w};

  const auto ranks = report::ranks_table(a.run);
  REQUIRE(ranks.rows.size() == 2);
  CHECK(ranks.rows[1].back().text() == "run.12.iscope");
  CHECK(ranks.rows[0][10].text() == "-");  // no primary of its own
  const auto clocks = report::host_clocks_table(a.run);
  REQUIRE(clocks.rows.size() == 2);
  CHECK(clocks.rows[0][2].text() == "0 (reference)");
  CHECK(clocks.rows[1][2].text() == "0.042100");
  CHECK(clocks.note.find("The ranks ran on 2 hosts. Times are on the clock of node-a") == 0);
  CHECK(report::host_clocks_table(analyze::RunAnalysis{}).rows.empty());
  CHECK(report::collectives_table(a.run).rows.at(0).at(4).text() == "1 (80 %)");
  CHECK(report::sampling_windows_table(a.sampling).rows.at(0).at(1).text() == "slow_step (pinned)");

  const std::string md = written(a, report::write_markdown);
  const std::string page = written(a, report::write_html);
  for (const auto& t : {ranks, clocks, report::collectives_table(a.run), report::sampling_windows_table(a.sampling)}) {
    INFO("table " << t.key);
    const size_t head = md.find(md_header(t));
    REQUIRE(head != std::string::npos);
    CHECK(page.find(html_header(t)) != std::string::npos);
    if (!t.note.empty()) {
      // Under its own table: before the next header row.
      const std::string after = one_line(md.substr(head, md.find("\n| ", md.find("\n\n", head)) - head));
      CHECK(after.find(report::md_escape(t.note)) != std::string::npos);
      CHECK(page.find(report::html_escape(t.note)) != std::string::npos);
    }
  }
}

TEST_CASE("section tables: an asyncio service's request split, batches and loop callbacks, in both reports") {
  analyze::Analysis a = report::testing::sample_analysis();
  analyze::Requests& r = a.requests;
  r.detected = true, r.name = "Server.handle", r.loop_thread = "MainThread", r.count = 40, r.mean_ms = 12;
  r.batched = true, r.requests_per_step = 4;
  r.split.in_batch_ms = 5, r.split.batch_wait_ms = 4, r.split.delayed_ms = 3;
  r.engine.by_batch = {{"3-4", 10, 3.6, 9.5, 9.25}};
  analyze::LoopCallbackRow cb;
  cb.name = "Batcher.run_batch|step", cb.runs = 10, cb.total_ms = 95, cb.share = 0.4, cb.max_ms = 11;
  r.callbacks = {cb};
  const report::RequestsText t = report::requests_text(r);
  REQUIRE(!t.split.rows.empty());
  REQUIRE(t.batches.rows.size() == 1);
  REQUIRE(t.loop.rows.size() == 1);
  CHECK(t.loop.rows[0][0].all_names());

  const std::string md = written(a, report::write_markdown);
  const std::string page = written(a, report::write_html);
  for (const auto* table : {&t.split, &t.batches, &t.loop}) {
    INFO("table " << table->key);
    for (const auto& row : table->rows) REQUIRE(row.size() == table->columns.size());
    CHECK(md.find(md_header(*table)) != std::string::npos);
    CHECK(html_section(page, "requests").find(html_header(*table)) != std::string::npos);
  }
  // The callback is a name: a code span, its pipe escaped, in Markdown; escaped text in HTML.
  CHECK(md.find("| `Batcher.run_batch\\|step` | 10 |") != std::string::npos);
  CHECK(html_section(page, "requests").find(">Batcher.run_batch|step</td>") != std::string::npos);
}

TEST_CASE("a finding's fields: its impact nested in the JSON report, estimated written only when false") {
  analyze::Analysis a = report::testing::sample_analysis();
  REQUIRE(a.findings.size() >= 2);
  a.findings[1].impact_estimated = false;
  a.findings[1].rule.clear();  // a finding made without a rule name is its category's
  const json::array findings = json::parse(written(a, report::write_json)).as_object().at("findings").as_array();
  auto keys_of = [](const json::object& o) {
    std::vector<std::string> k;
    for (const auto& kv : o) k.emplace_back(kv.key());
    return k;
  };
  CHECK(keys_of(findings[0].as_object()) ==
        std::vector<std::string>{"bottleneck_type", "rule", "title", "confidence", "uncertain", "primary",
                                 "informational", "impact", "evidence", "metrics", "examples", "suggestions"});
  CHECK(keys_of(findings[0].at("impact").as_object()) == std::vector<std::string>{"ms", "pct", "per"});
  CHECK(keys_of(findings[1].at("impact").as_object()) == std::vector<std::string>{"ms", "estimated", "pct", "per"});
  CHECK_FALSE(findings[1].at("impact").at("estimated").as_bool());
  CHECK(findings[1].at("rule").as_string() == a.findings[1].category);
  // SQLite's columns for the same fields: the JSON key with "_" for ".", unless renamed.
  std::vector<std::string> columns;
  analyze::for_each_field(a.findings[0], [&](const analyze::FindingKey& k, const auto&) { columns.emplace_back(k.sqlite()); });
  CHECK(columns == std::vector<std::string>{"category", "rule", "title", "confidence", "uncertain", "is_primary",
                                            "informational", "impact_ms", "impact_estimated", "impact_pct",
                                            "impact_per"});
}
