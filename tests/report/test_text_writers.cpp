// text_writers.hpp: the findings in plain text and iscope-analyze --summary, from a hand-made analysis and a
// synthetic dump.
#include "analyze/summary.hpp"
#include "dump/builder.hpp"
#include "dump/reader.hpp"
#include "report/text_writers.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

using namespace inferscope;

TEST_CASE("text writers: the findings in plain text, headline first, each finding with its evidence") {
  analyze::Analysis a;
  a.steps.name = "step";
  a.steps.count = 12;
  a.end_to_end_ms = 4.5;
  a.breakdown.step_ms = 4.5;
  a.breakdown.cpu_preprocessing_ms = 3.0;
  a.warnings = {"the dump was cut short"};
  analyze::Finding f;
  f.category = "cpu_bound";
  f.primary = true;
  f.title = "The CPU holds the step";
  f.impact_ms = 3.0;
  f.impact_pct = 67;
  f.confidence = 0.9;
  f.evidence = {"preprocess takes 3.0 ms"};
  f.suggestions = {{"Move preprocess into a prefetch thread", "high"}};
  a.findings.push_back(f);
  std::ostringstream out;
  report::print_findings_text(a, out);
  const std::string s = out.str();
  CHECK(s.rfind("End-to-end latency: 4.500 ms per step 'step' (12 steps;", 0) == 0);
  CHECK(s.find("cpu 3.000 |") != std::string::npos);
  CHECK(s.find("warning: the dump was cut short\n") != std::string::npos);
  CHECK(s.find("\n[cpu_bound] PRIMARY The CPU holds the step\n  impact 3.000 ms (67 % of the step), confidence 0.90\n") !=
        std::string::npos);
  CHECK(s.find("  - preprocess takes 3.0 ms\n") != std::string::npos);
  CHECK(s.find("  * [high] Move preprocess into a prefetch thread\n") != std::string::npos);
  CHECK(s.find("\nAlignment: ok (max 0.000 us, 0.00 % over 1 us)") != std::string::npos);
}

TEST_CASE("text writers: the summary names the dump, its threads and ranges, names as code in their cells") {
  const auto path = std::filesystem::temp_directory_path() / ("iscope-text-writers-" + std::to_string(::getpid()) + ".iscope");
  {
    dump::DumpBuilder b(path.string());
    const uint32_t t = b.thread("main", 7);
    b.range(t, "a|b", 1, 100, 200);
    b.range(t, "step", 0, 0, 1000);
    b.finish();
  }
  std::ostringstream out;
  {
    dump::DumpReader r(path.string());
    report::print_summary(r, analyze::summarize(r), out);
  }
  std::filesystem::remove(path);
  const std::string s = out.str();
  CHECK(s.rfind("# InferScope dump summary: " + path.string() + "\n", 0) == 0);
  CHECK(s.find("- status: complete\n") != std::string::npos);
  CHECK(s.find("- records: 2 (range 2)\n") != std::string::npos);
  CHECK(s.find("| 1 | 7 | `main` | 2 |") != std::string::npos);
  CHECK(s.find("\n## Ranges\n") != std::string::npos);
  CHECK(s.find("| `a\\|b` | 1 |") != std::string::npos);  // the pipe stays in its cell
  CHECK(s.find("- none: every record reached the dump\n") != std::string::npos);
}
