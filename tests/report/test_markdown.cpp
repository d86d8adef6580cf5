#include "report/common.hpp"
#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {

std::string markdown(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_markdown(a, out);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

/// Cells of a Markdown table row, split at unescaped pipes.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '\\' && i + 1 < row.size()) {
      cur += row[i];
      cur += row[++i];
    } else if (row[i] == '|') {
      size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += row[i];
    }
  }
  return out;
}

/// The rows of the "Timeline Breakdown" table, without the header and the total.
std::vector<std::vector<std::string>> breakdown_rows(const std::string& md) {
  auto ls = lines_of(md);
  std::vector<std::vector<std::string>> rows;
  size_t i = 0;
  while (i < ls.size() && ls[i] != "## Timeline Breakdown") ++i;
  for (i += 4; i < ls.size() && !ls[i].empty() && ls[i][0] == '|'; ++i) rows.push_back(cells(ls[i]));
  return rows;
}

}  // namespace

TEST_CASE("markdown leads with the end-to-end latency and a breakdown that adds up") {
  auto a = sample_analysis();
  const std::string md = markdown(a);
  CHECK(md.rfind("End-to-end latency: 12.500 ms", 0) == 0);
  auto rows = breakdown_rows(md);
  REQUIRE(rows.size() == 8);  // seven parts and the total
  const char* labels[] = {"CPU preprocessing", "H2D copies", "GPU compute", "D2H copies", "Sync wait",
                          "Framework overhead", "Idle"};
  double sum_ms = 0, sum_pct = 0;
  for (int k = 0; k < 7; ++k) {
    REQUIRE(rows[k].size() == 3);
    CHECK(rows[k][0] == labels[k]);
    sum_ms += std::stod(rows[k][1]);
    sum_pct += std::stod(rows[k][2]);
  }
  CHECK(rows[7][1] == "**12.500**");
  CHECK(sum_ms == doctest::Approx(12.5).epsilon(1e-6));
  CHECK(sum_pct == doctest::Approx(100.0).epsilon(1e-3));
  CHECK(md.find("GPU utilization: 44.0 %") != std::string::npos);
  CHECK(md.find("5.500 ms waiting on the host") != std::string::npos);
}

TEST_CASE("markdown shows an unattributed row when the parts do not add up") {
  auto a = sample_analysis();
  a.breakdown.idle_ms = 0;  // the parts now sum to 11.5 of 12.5 ms
  auto rows = breakdown_rows(markdown(a));
  REQUIRE(rows.size() == 9);
  CHECK(rows[7][0] == "Unattributed");
  CHECK(rows[7][1] == "1.000");
}

TEST_CASE("markdown orders sections and ranks findings with their details") {
  const std::string md = markdown(sample_analysis());
  const char* order[] = {"## Timeline Breakdown", "## Step latency", "## Findings (ranked by impact)",
                         "### 1. [primary]", "### 2.", "## Top kernels", "## Python functions", "## Ranges",
                         "## Memory copies", "## Synchronizations", "## Allocations", "## Model layers",
                         "## Threads", "## Clock alignment", "## Dropped records", "## Warnings"};
  size_t pos = 0;
  for (const char* h : order) {
    size_t p = md.find(h, pos);
    INFO(h);
    REQUIRE(p != std::string::npos);
    pos = p;
  }
  CHECK(md.find("| 100 | 12.500 | 12.100 | 13.400 | 18.900 | 21.000 | 11.800 |") != std::string::npos);
  CHECK(md.find("- Category: `launch_bound`") != std::string::npos);
  CHECK(md.find("- Impact: 5.500 ms per step (44.0 % of the step)") != std::string::npos);
  CHECK(md.find("(**uncertain**") != std::string::npos);
  CHECK(md.find("1. **high**: Capture the decode step in a CUDA graph") != std::string::npos);
  CHECK(md.find("saves about 4.500 ms per step") != std::string::npos);
  CHECK(md.find("- 520.500 to 524.700 ms: step 41") != std::string::npos);
  CHECK(md.find("| buffer\\_full | 17 |") != std::string::npos);
}

TEST_CASE("markdown escapes names taken from the trace") {
  const std::string md = markdown(sample_analysis(/*hostile=*/true));
  CHECK(is_valid_utf8(md));
  CHECK(md.find("<script>") == std::string::npos);
  CHECK(md.find("\\<script\\>") != std::string::npos);
  // Every row of the kernel table has exactly its six cells despite the pipes in the names.
  auto ls = lines_of(md);
  size_t i = 0;
  while (i < ls.size() && ls[i] != "## Top kernels") ++i;
  REQUIRE(i + 4 < ls.size());
  CHECK(cells(ls[i + 2]).size() == 6);  // header
  CHECK(cells(ls[i + 4]).size() == 6);
  CHECK(cells(ls[i + 5]).size() == 6);
}

TEST_CASE("markdown of an empty analysis still has the headline and says what is missing") {
  analyze::Analysis a;
  const std::string md = markdown(a);
  CHECK(md.rfind("End-to-end latency: 0.000 ms (whole trace, no steps found)", 0) == 0);
  CHECK(md.find("No bottleneck found") != std::string::npos);
  CHECK(md.find("## Top kernels") == std::string::npos);
}

