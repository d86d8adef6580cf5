// The detail tables' one model (analyze/table_fields.hpp, report/detail_tables.hpp): every table the field list
// names is laid out for Markdown and HTML with as many cells as columns, and the JSON report, the Markdown and the
// HTML report each write every table from it: the JSON row's keys are the field list's, each heading and column
// reaches both text reports.
#include "analyze/table_fields.hpp"
#include "report/common.hpp"
#include "report/detail_tables.hpp"
#include "report/escape.hpp"
#include "report/report.hpp"
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
    for (const auto& row : t.rows) {
      REQUIRE(row.size() == t.columns.size());
      for (const auto& cell : row) CHECK(!cell.parts.empty());
    }
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
      CHECK(memory.parts == std::vector<std::string>{a.copies.front().src_memory, a.copies.front().dst_memory});
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
    CHECK(md.find("## " + t.title + "\n") != std::string::npos);
    CHECK(page.find("<section id=\"" + t.anchor + "\"><h2>" + t.title + "</h2>") != std::string::npos);
    std::string md_head = "|";
    for (const auto& col : t.columns) {
      md_head += " " + col.head + " |";
      if (col.bar) md_head += "  |";
    }
    CHECK(md.find(md_head + "\n") != std::string::npos);
    for (const auto& col : t.columns)
      CHECK(page.find(">" + report::html_escape(col.head) + "</th>") != std::string::npos);
    if (!t.note.empty()) CHECK(page.find(report::html_escape(t.note)) != std::string::npos);
  }
  // The families' note names the share of kernel time on tensor cores.
  CHECK(md.find("63.0 % of kernel time ran on tensor cores") != std::string::npos);
}
