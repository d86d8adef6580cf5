// The Markdown report's layout (findings within its first 25 lines, zero rows collapsed, the appendix) and the
// sentences that used to contradict each other or the analysis (issue 41): the step counts, the steps that are not
// alike, one precision and one unit per quantity, the step found automatically, a full capture's step count.
#include "analyze/analyzer.hpp"
#include "analyze/children.hpp"
#include "report/common.hpp"
#include "report/labels.hpp"
#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {

/// The 1-based number of the first line that starts with `prefix`; 0 when none does.
size_t line_of(const std::string& md, const std::string& prefix) {
  std::istringstream in(md);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) {
    ++n;
    if (l.rfind(prefix, 0) == 0) return n;
  }
  return 0;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("markdown layout: the findings start within the first 25 lines, the reference is in the appendix") {
  const std::string md = markdown(sample_analysis());
  const size_t first = line_of(md, "### 1. ");
  CHECK(first > 0);
  CHECK(first <= 25);
  CHECK(line_of(md, "## Findings") < line_of(md, "## Timeline Breakdown"));
  const size_t appendix = line_of(md, "## Appendix");
  REQUIRE(appendix > 0);
  CHECK(appendix > line_of(md, "## Threads"));
  CHECK(line_of(md, "### Warnings and data quality") > appendix);
  CHECK(line_of(md, "### Process") > appendix);
  CHECK(line_of(md, "## Process") == 0);
  CHECK(line_of(md, "Process: ") == 0);  // the process facts are not at the top any more
}

TEST_CASE("markdown layout: every real fixture's findings start within its first 25 lines") {
  const std::filesystem::path dir = std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures";
  size_t seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".iscope" || name.rfind("mg_", 0) == 0) continue;  // ranks: the run's case below
    CAPTURE(name);
    const std::string md = markdown(analyze::analyze_file(e.path().string(), {}));
    const size_t first = line_of(md, "### 1. ");
    if (first == 0) continue;  // no finding: nothing to put first
    CHECK(first <= 25);
    ++seen;
  }
  CHECK(seen >= 10);
  // The ranks of a run: the run's findings lead its section, before the ranks' table.
  analyze::AnalyzeOptions o;
  const std::string rank0 = (dir / "mg_straggler_rank.1334.iscope").string(), rank1 = (dir / "mg_straggler_rank.1335.iscope").string();
  analyze::Analysis a = analyze::analyze_file(rank0, o);
  a.children = analyze::analyze_rank_dumps({rank0, rank1}, o, a.run);
  const std::string md = markdown(a);
  if (!a.run.findings.empty()) {
    CHECK(line_of(md, "### 1. ") <= 25);
    CHECK(line_of(md, "### 1. ") < line_of(md, "### The ranks"));
  }
}

TEST_CASE("markdown layout: breakdown rows at 0 ms are named in a line, not shown") {
  auto a = sample_analysis();
  a.breakdown.h2d_ms = 0;
  a.breakdown.d2h_ms = 0;
  a.breakdown.idle_ms += 0.5;  // still adds up
  const std::string md = markdown(a);
  CHECK_FALSE(has(md, "| H2D copies |"));
  CHECK_FALSE(has(md, "| D2H copies |"));
  CHECK(has(md, "2 parts at 0 ms not shown (H2D copies, D2H copies)."));
  // By cause too: the sample has no host work, contention, waits or allocations.
  const std::string breakdown = md.substr(md.find("## Timeline Breakdown"), md.find("## Step latency") - md.find("## Timeline Breakdown"));
  CHECK_FALSE(has(breakdown, "| 0.000 |"));
  CHECK(has(md, "6 causes at 0 ms not shown (`h2d_bound`, `d2h_bound`, `cpu_bound`, `cpu_contention`, `wait`, "
                "`memory_alloc`)."));
  const std::string html = report::testing::html(a);
  CHECK(has(html, "2 parts at 0 ms not shown (H2D copies, D2H copies)."));
}

TEST_CASE("markdown: the step counts add up, and steps that are not alike leave none out of the breakdown") {
  auto a = sample_analysis();  // 103 = 3 warm-up + 100 steady; 100 = 98 typical + 2 slow outliers
  a.steps.outlier_indexes = {7, 41};
  std::string md = markdown(a);
  CHECK(has(md, "103 steps = 3 warm-up + 100 steady (the statistics); the 100 steady = 98 typical (the breakdown and "
                "the impacts) + 2 slow outlier(s) left out."));
  CHECK(has(md, "2 steady step(s) slower than 15.1 ms (median + max(3 scaled MADs, 25 %)) are left out of the breakdown"));

  // Not alike, no two modes (a mean far above the median): every steady step is typical, some above the bound.
  a.steps.total = a.steps.count = a.steps.typical = 160;
  a.steps.warmup = 0;
  a.steps.alike = false;
  a.steps.basis = "mean";
  a.steps.outlier_indexes = {3, 9, 20, 41, 77, 100, 150};
  a.steps.outliers.resize(2);
  md = markdown(a);
  CHECK(has(md, "160 steps = 0 warm-up + 160 steady (the statistics); the 160 steady = 160 typical (the breakdown and "
                "the impacts) + 0 slow outlier(s) left out."));
  CHECK_FALSE(has(md, "left out of the breakdown"));
  CHECK(has(md, "7 steady step(s) are slower than 15.1 ms (median + max(3 scaled MADs, 25 %)); as the steps are not "
                "alike, they stay in the breakdown, whose step is the mean of all 160 steady steps"));
}

TEST_CASE("markdown: 'Steps not alike' says it once, and one precision per quantity in the prose") {
  auto a = sample_analysis();
  a.steps.alike = false;
  a.steps.basis = "mean";
  a.steps.spread = "the steps are not alike: their mean (327 ms) is 56 % above their median (210 ms)";
  a.findings[0].title = "Kernel launches limit the GPU: 19.5 ms per step";
  a.findings[0].impact_ms = 19.546;
  a.findings[0].suggestions[0].impact_ms = 12.345;
  const std::string md = markdown(a);
  CHECK(has(md, "**Steps not alike**: their mean (327 ms) is 56 % above their median (210 ms)."));
  CHECK_FALSE(has(md, "the steps are not alike: the steps are not alike"));
  CHECK_FALSE(has(md, "Steps not alike**: the steps are not alike"));
  // The title states the impact already, to the same precision: not said twice.
  CHECK(has(md, ": Kernel launches limit the GPU: 19.5 ms per step (44.0 % of the step)."));
  CHECK(has(md, "(saves about 12.3 ms per step)"));
  CHECK(has(md, "- Impact: 19.5 ms per step"));
  CHECK_FALSE(has(md, "19.546"));
  CHECK_FALSE(has(md, "12.345"));
  const std::string html = report::testing::html(a);
  CHECK_FALSE(has(html, "19.546"));
  CHECK_FALSE(has(html, "<strong>Steps not alike:</strong> the steps are not alike"));
}

TEST_CASE("markdown: bytes in decimal units, as the analyzer's sentences write them: one unit per quantity") {
  auto a = sample_analysis();
  analyze::Finding f;
  f.category = "h2d_bound";
  f.title = "Host-to-device copies of 126.0 MB per step from pageable memory";
  f.impact_ms = 2;
  f.evidence = {"126.0 MB per step copied from pageable memory at 9.8 GB/s"};
  f.metrics = {{"h2d_bytes_per_step", 126e6}};
  a.findings.push_back(f);
  const std::string md = markdown(a), html = report::testing::html(a);
  for (const std::string* text : {&md, &html}) {
    CHECK_FALSE(has(*text, "MiB"));
    CHECK_FALSE(has(*text, "KiB"));
    CHECK_FALSE(has(*text, "GiB"));
  }
  CHECK(has(md, "Host-to-device bytes per step: 126.0 MB"));
  CHECK(has(md, "| 200 | 13.1 MB |"));  // the copies table: 13107200 bytes
}

TEST_CASE("data quality: a step found automatically is not a problem with the data") {
  analyze::Analysis a;
  a.steps.count = a.steps.total = a.steps.typical = 12;
  a.steps.detected = true;
  a.steps.name = "main.<locals>.infer";
  a.warnings = {"no repeated top-level range: the steps are the calls of the Python function 'main.<locals>.infer' "
                "(repeated, launching GPU work, covering the most time); mark steps with inferscope_py.scope(\"step\") "
                "or pass --step to choose"};
  CHECK(report::quality_problem(a).empty());
  std::string md = markdown(a);
  CHECK(has(md, "Data quality: no problem found"));
  CHECK_FALSE(has(md, "check first"));
  CHECK(has(md, "- How the steps were found: no repeated top-level range"));
  CHECK_FALSE(has(md, "**Warning**"));
  CHECK(has(report::testing::html(a), "<li><b>How the steps were found</b>: no repeated top-level range"));
  // The timeline drawn cut is a note on the drawing, not on the numbers.
  a.warnings.push_back("the representative step's timeline was cut to 5000 of its 6691 spans: its ranges, then GPU "
                       "work with the calls that launched it, then other CUDA calls, then the longest Python frames");
  CHECK(report::quality_problem(a).empty());
  CHECK(report::note_label(a.warnings.back()) == "The timeline");
  CHECK(has(markdown(a), "- The timeline: the representative step's timeline was cut"));
  // Another warning beside them is a problem, and only that one is counted and listed at the top.
  a.warnings.push_back("the host ran ahead of the GPU: a step's GPU work completed 4.1 ms after its range ended");
  CHECK(report::quality_problem(a) == "the analyzer gave a warning");
  md = markdown(a);
  CHECK(line_of(md, "- **Warning**: the host ran ahead") < line_of(md, "## Findings"));
}

TEST_CASE("data quality: the analyzer's own notes on unmarked steps are recognised, on real unannotated programs") {
  // real_io_wait: a Python program without ranges; kineto_real_launch_bound: a torch.profiler trace. Whatever
  // steps.cpp's wording, the note it gives them must be the one quality_problem leaves out.
  const std::filesystem::path dir = std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures";
  for (const char* name : {"real_io_wait.iscope", "real_sleep_wait.iscope"}) {
    CAPTURE(name);
    const analyze::Analysis a = analyze::analyze_file((dir / name).string(), {});
    REQUIRE(a.steps.detected);
    size_t notes = 0;
    for (const auto& w : a.warnings) notes += report::is_step_detection_note(w);
    CHECK(notes == 1);
  }
}

TEST_CASE("sampled run: a full capture never claims a step count the runtime did not make") {
  analyze::Analysis a = sample_analysis();
  a.sampling.sampled = true;
  a.sampling.mode = "adaptive";
  a.sampling.step_name = "step";
  a.sampling.by_steps = false;  // a Python program without a range named step: the runtime counted none
  analyze::SampledWindow w;
  w.index = 1;
  w.reason = "baseline";
  w.open = true;
  w.steps = 0;
  w.end_ms = 1500;
  a.sampling.windows = {w};
  std::string md = markdown(a);
  CHECK(has(md, "**Full capture** (mode: adaptive): full detail for the whole run: it ended within the baseline, so "
                "nothing was sampled out."));
  CHECK_FALSE(has(md, "after 0 steps"));
  // Counted by the runtime: said, with the range it counted.
  a.sampling.by_steps = true;
  a.sampling.windows[0].steps = 103;
  md = markdown(a);
  CHECK(has(md, "it ended within the baseline, after 103 steps of 'step', so nothing was sampled out."));
  // A baseline that closed before the run ended, with no step counted: its length, not "0 steps".
  a.sampling.by_steps = false;
  a.sampling.windows[0].steps = 0;
  a.sampling.windows[0].open = false;
  CHECK(has(report::sampling_sentence(a.sampling), "full detail from the start for its first 1500.0 ms, then in windows"));
  // The sampled run's windows are in the appendix.
  md = markdown(a);
  CHECK(line_of(md, "### Sampled run") > line_of(md, "## Appendix"));
}
