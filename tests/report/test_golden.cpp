// Diff tests: the sample analysis must give exactly the committed JSON and Markdown reports, so any change to
// a writer's output is a visible change to a golden file. To accept an intended change:
//   INFERSCOPE_UPDATE_GOLDENS=1 build/tests/report/test_report -tc='golden*'   (then review the diff)
#include "report/report.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

using namespace inferscope;

namespace {

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/report/golden/" + name;
  if (const char* u = std::getenv("INFERSCOPE_UPDATE_GOLDENS"); u && *u == '1') {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("updated " << path);
    return;
  }
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing golden file " << path);
  std::stringstream expected;
  expected << f.rdbuf();
  CHECK_MESSAGE(expected.str() == actual, "output differs from " << path
                                                                 << " (set INFERSCOPE_UPDATE_GOLDENS=1 to accept)");
}

}  // namespace

TEST_CASE("golden: JSON report of the sample analysis") {
  std::ostringstream out;
  report::write_json(report::testing::sample_analysis(), out);
  check_golden("sample.json", out.str());
}

TEST_CASE("golden: Markdown report of the sample analysis") {
  std::ostringstream out;
  report::write_markdown(report::testing::sample_analysis(), out);
  check_golden("sample.md", out.str());
}
