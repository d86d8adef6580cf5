// Stage "tried" (lib/analyze/tried.hpp): iscope-run --try's result file beside a dump, read and attached to the
// suggestions whose knob it tried; and the reports printing the measured saving beside the predicted one.
#include "analyze/tried.hpp"
#include "report/labels.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace inferscope::analyze;
using namespace inferscope::analyze::detail;
namespace fs = std::filesystem;

namespace {

const char* kResult = R"({"command":"iscope-run --try num_workers=8 -- python3 serve.py","knobs":[{"name":"num_workers",
"value":"8","changes_results":false}],"refused":null,"step":"infer","pairs":3,"base_ms":400,"tried_ms":60,
"saving_pct":85.2,"saving_low_pct":84.1,"saving_high_pct":86.0,"measurable":true,"noise_pct":4,"predicted_ms":300,
"predicted_by":"x","processes":[]})";

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("iscope-tried-" + std::to_string(::getpid()));
  fs::create_directories(d / "run.try");
  return d;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::vector<Finding> findings_with(const std::string& knob) {
  Finding f;
  Suggestion s{"Move it to 4 DataLoader workers (num_workers=4)", "high", 300, true, "replay", {"dataloader"}};
  s.try_knob = knob;
  f.suggestions = {s, Suggestion{"Profile it", "low"}};
  return {f};
}

}  // namespace

TEST_CASE("tried: the result file beside a dump, or beside the folder of --try's own dumps") {
  const fs::path d = scratch();
  write(d / "run.try.json", kResult);
  std::vector<std::string> warnings;
  for (const fs::path& dump : {d / "run.iscope", d / "run.try" / "base.1.iscope"}) {
    const auto r = read_try_results(dump.string(), warnings);
    REQUIRE(r.size() == 1);
    CHECK(r[0].knobs.front() == std::pair<std::string, std::string>("num_workers", "8"));
    CHECK(r[0].measured.pairs == 3);
    CHECK(r[0].measured.saving_pct == doctest::Approx(85.2));
    CHECK(r[0].measured.knobs == "num_workers=8");
  }
  CHECK(warnings.empty());
  CHECK(read_try_results((d / "other.iscope").string(), warnings).empty());  // no file: nothing, no warning
  CHECK(warnings.empty());
  fs::remove_all(d);
}

TEST_CASE("tried: a refused result attaches nothing; a damaged one says which file and field") {
  const fs::path d = scratch();
  std::string refused = kResult;
  refused.replace(refused.find("\"refused\":null"), 14, "\"refused\":\"no DataLoader fed it\"");
  write(d / "run.try.json", refused);
  std::vector<std::string> warnings;
  CHECK(read_try_results((d / "run.iscope").string(), warnings).empty());
  CHECK(warnings.empty());
  std::string damaged = kResult;
  damaged.replace(damaged.find("\"pairs\":3"), 9, "\"pairs\":\"three\"");
  write(d / "run.try.json", damaged);
  CHECK(read_try_results((d / "run.iscope").string(), warnings).empty());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("run.try.json") != std::string::npos);
  CHECK(warnings[0].find("'pairs'") != std::string::npos);
  write(d / "run.try.json", "{not json");
  CHECK(read_try_results((d / "run.iscope").string(), warnings).empty());
  CHECK(warnings.size() == 2);
  fs::remove_all(d);
}

TEST_CASE("tried: attached to the suggestion whose knob it tried, and printed in place of the prediction") {
  const fs::path d = scratch();
  write(d / "run.try.json", kResult);
  std::vector<std::string> warnings;
  const auto tried = read_try_results((d / "run.iscope").string(), warnings);
  auto findings = findings_with("num_workers=4");  // the report suggested 4; --try measured 8: same knob
  attach_try_results(findings, tried);
  REQUIRE(findings[0].suggestions[0].measured);
  CHECK_FALSE(findings[0].suggestions[1].measured);
  const std::string text = inferscope::report::saving_text(findings[0].suggestions[0], "step");
  CHECK(text == "measured on this program with --try num_workers=8: saves 85.2 % of the step (84.1 to 86.0 % over 3 "
                "pairs); the replay predicted about 300.0 ms per step");
  auto other = findings_with("allow_tf32=true");
  attach_try_results(other, tried);
  CHECK_FALSE(other[0].suggestions[0].measured);
  fs::remove_all(d);
}
