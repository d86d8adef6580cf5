#include "analyze/analyzer.hpp"
#include "report/common.hpp"
#include "report/markdown_parts.hpp"
#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {

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

std::string repeat(const std::string& s, int n) {
  std::string out;
  while (n-- > 0) out += s;
  return out;
}

/// The Markdown without its code spans (a run of n backticks opens a span that the next run of n closes).
std::string outside_code_spans(const std::string& md) {
  std::string out;
  for (size_t i = 0; i < md.size();) {
    if (md[i] != '`') {
      out += md[i++];
      continue;
    }
    const size_t e = std::min(md.find_first_not_of('`', i), md.size());
    size_t close = std::string::npos;
    for (size_t j = md.find('`', e); j != std::string::npos;) {
      const size_t je = std::min(md.find_first_not_of('`', j), md.size());
      if (je - j == e - i) {
        close = je;
        break;
      }
      j = md.find('`', je);
    }
    i = close == std::string::npos ? e : close;
  }
  return out;
}

/// The rows of the "Timeline Breakdown" table, without the header and the total.
std::vector<std::vector<std::string>> breakdown_rows(const std::string& md) {
  auto ls = lines_of(md);
  std::vector<std::vector<std::string>> rows;
  size_t i = 0;
  while (i < ls.size() && ls[i] != "## Timeline Breakdown") ++i;
  for (i += 6; i < ls.size() && !ls[i].empty() && ls[i][0] == '|'; ++i) rows.push_back(cells(ls[i]));
  return rows;
}

}  // namespace

TEST_CASE("markdown leads with the end-to-end latency and a breakdown that adds up") {
  auto a = sample_analysis();
  const std::string md = markdown(a);
  CHECK(md.rfind("# InferScope report: serve.py (gpt2.iscope)\n\nEnd-to-end latency: 12.5 ms", 0) == 0);
  auto rows = breakdown_rows(md);
  REQUIRE(rows.size() == 8);  // seven parts and the total
  const char* labels[] = {"CPU preprocessing", "H2D copies", "GPU compute", "D2H copies", "Sync wait",
                          "Framework overhead", "Idle"};
  double sum_ms = 0, sum_pct = 0;
  for (int k = 0; k < 7; ++k) {
    REQUIRE(rows[k].size() == 4);  // and the share as a bar
    CHECK(rows[k][0] == labels[k]);
    CHECK(rows[k][3] == report::md::share_bar(std::stod(rows[k][2])));
    sum_ms += std::stod(rows[k][1]);
    sum_pct += std::stod(rows[k][2]);
  }
  CHECK(rows[7][1] == "**12.500**");
  CHECK(rows[7][3].empty());  // the total has no bar
  CHECK(sum_ms == doctest::Approx(12.5).epsilon(1e-6));
  CHECK(sum_pct == doctest::Approx(100.0).epsilon(1e-3));
  CHECK(md.find("GPU utilization: 44.0 %") != std::string::npos);
  CHECK(md.find("| Host-to-device copies (`h2d_bound`) | host-to-device copies | 0.250 | 2.0 |") != std::string::npos);
}

TEST_CASE("markdown shows an unattributed row when the parts do not add up") {
  auto a = sample_analysis();
  a.breakdown.idle_ms = 0;  // the parts now sum to 11.5 of 12.5 ms
  const std::string md = markdown(a);
  auto rows = breakdown_rows(md);
  REQUIRE(rows.size() == 8);  // idle, at 0 ms, is named under the table instead
  CHECK(rows[6][0] == "Unattributed");
  CHECK(rows[6][1] == "1.000");
  CHECK(md.find("1 part at 0 ms not shown (Idle).") != std::string::npos);
}

TEST_CASE("markdown orders sections and ranks findings with their details") {
  const std::string md = markdown(sample_analysis());
  const char* order[] = {"End-to-end latency", "**Primary cause**: Kernel launch overhead (`launch_bound`)",
                         "**Do first**: Capture the decode step in a CUDA graph", "**Data quality: check first**",
                         "- **Warning**: 17 records dropped", "## Findings (ranked by impact)", "### 1. [primary]",
                         "### 2.", "## Timeline Breakdown", "## Step latency", "## Top kernels", "## Python functions",
                         "## Ranges", "## Memory copies", "## Synchronizations", "## Allocations", "## Model layers",
                         "## Threads", "## Appendix", "### Warnings and data quality", "- **Warning**: 17 records dropped",
                         "- Clock alignment: OK, 24800 kernels checked", "- Dropped records: 17 (`buffer_full` 17)",
                         "- Warm-up: 3 step(s) left out", "### Process"};
  size_t pos = 0;
  for (const char* h : order) {
    size_t p = md.find(h, pos);
    INFO(h);
    REQUIRE(p != std::string::npos);
    pos = p;
  }
  CHECK(md.find("| 100 | 12.500 | 12.100 | 13.400 | 18.900 | 21.000 | 11.800 |") != std::string::npos);
  CHECK(md.find("- Category: Kernel launch overhead (`launch_bound`)") != std::string::npos);
  CHECK(md.find("- Impact: 5.50 ms per step (44.0 % of the step)") != std::string::npos);
  CHECK(md.find("(**uncertain**") != std::string::npos);
  CHECK(md.find("1. **high**: Capture the decode step in a CUDA graph") != std::string::npos);
  CHECK(md.find("saves about 4.50 ms per step") != std::string::npos);
  CHECK(md.find("- 520.500 to 524.700 ms: step 41") != std::string::npos);
  CHECK(md.find("## Clock alignment") == std::string::npos);  // in the notes at the top now
}

TEST_CASE("markdown puts names taken from the trace in code spans, verbatim") {
  const std::string md = markdown(sample_analysis(/*hostile=*/true));
  CHECK(is_valid_utf8(md));
  // Markup only inside code spans, where it is text; the name itself is there as the trace has it.
  const std::string prose = outside_code_spans(md);
  for (size_t p = prose.find('<'); p != std::string::npos; p = prose.find('<', p + 1)) {
    INFO(prose.substr(p > 40 ? p - 40 : 0, 80));
    CHECK((p > 0 && prose[p - 1] == '\\'));  // escaped in prose: "\<"
  }
  CHECK(md.find("Step: ``inference_step<script>alert('x')</script> & \"q\" | `t` \xEF\xBF\xBD\xEF\xBF\xBD``") !=
        std::string::npos);
  // Every row of the kernel table has exactly its seven cells (six and the share's bar) despite the pipes in the
  // names.
  auto ls = lines_of(md);
  size_t i = 0;
  while (i < ls.size() && ls[i] != "## Top kernels") ++i;
  REQUIRE(i + 4 < ls.size());
  CHECK(cells(ls[i + 2]).size() == 7);  // header
  CHECK(cells(ls[i + 4]).size() == 7);
  CHECK(cells(ls[i + 5]).size() == 7);
  CHECK(ls[i + 4].find("``transformer.h.3.mlp \\| GELU<script>") != std::string::npos);  // only | escaped
}

TEST_CASE("markdown names are findable with grep: no backslashes in them") {
  const std::string md = markdown(sample_analysis());
  CHECK(md.find("\\_") == std::string::npos);
  CHECK(md.find("| `vectorized_elementwise_kernel<4, AddFunctor<\xE2\x80\xA6>>` | 24800 |") != std::string::npos);
  CHECK(md.find("`GPT2Attention.forward`") != std::string::npos);
  CHECK(md.find("Metrics: Kernels per step: 412") != std::string::npos);  // in words (labels.hpp)
}

TEST_CASE("markdown of a real unannotated program: Python names with <locals> are code spans, from the first note on") {
  // Recorded on an H100 from samples/validation/empty_cache.py: its steps are found as the calls of a nested
  // function, which the note on how the steps were found and the allocation evidence name.
  const auto a = analyze::analyze_file((testsupport::fixtures() / "real_empty_cache.iscope").string(), {});
  const std::string md = markdown(a);
  CHECK(md.find("\\<locals\\>") == std::string::npos);
  const size_t warning = md.find("- How the steps were found: no repeated top-level range");
  REQUIRE(warning != std::string::npos);
  CHECK(md.find("`main.<locals>.handle_request`", warning) < md.find('\n', warning));
  CHECK(md.find("cudaFree from `main.<locals>.handle_request` (empty_cache.py:27)") != std::string::npos);
  for (const auto& line : lines_of(md)) CHECK(line.size() <= 300);
}

TEST_CASE("markdown keeps lines short with real-size kernel names and says each kernel by one short name") {
  auto a = sample_analysis();
  // Two kernels with 3,000-character names that shorten alike, as PyTorch's elementwise kernels do.
  std::string args;
  for (int k = 0; k < 60; ++k) args += ", at::native::detail::Functor" + std::to_string(k) + "<float, c10::Half, int>";
  const std::string k1 = "void at::native::elementwise_kernel<128, 4" + args + ">(int, at::native::Functor<float>)";
  const std::string k2 = "void at::native::elementwise_kernel<128, 4" + args + ", long>(int)";
  REQUIRE(k1.size() > 2500);
  a.kernels = {{k1, 10, 1.0, 100.0, 0.5, std::string(400, 'x')}, {k2, 5, 0.5, 100.0, 0.25, "generate"}};
  a.findings[0].evidence.push_back("the busiest kernel " + k1 + " ran 10 times, then " + k2 + " 5 times, " +
                                   repeat("yyyyyyyyy ", 30) + "and more words to wrap at a space");
  a.findings[0].title += " in " + k2;
  const std::string md = markdown(a);
  for (const auto& l : lines_of(md)) {
    INFO(l);
    CHECK(l.size() <= 300);
  }
  CHECK(md.find(k1) == std::string::npos);
  CHECK(md.find(k2) == std::string::npos);
  const std::string s1 = "elementwise_kernel<128, 4, Functor0<\xE2\x80\xA6>";
  CHECK(md.find("| `" + s1) != std::string::npos);
  // Unique within the report, and the same short name in the table and in the findings.
  CHECK(md.find("\xE2\x80\xA6> #1` | 10 |") != std::string::npos);
  CHECK(md.find("\xE2\x80\xA6> #2` | 5 |") != std::string::npos);
  CHECK(md.find("the busiest kernel `" + s1) != std::string::npos);
  CHECK(md.find("> #2`\n") != std::string::npos);  // in the title
}

TEST_CASE("markdown of an empty analysis still has the headline and says what is missing") {
  analyze::Analysis a;
  const std::string md = markdown(a);
  CHECK(md.rfind("# InferScope report\n\nEnd-to-end latency: 0.000 ms (whole trace, no steps found)", 0) == 0);
  // Nothing wrong with the data: one line up front, the notes at the end.
  CHECK(md.find("Data quality: no problem found") < md.find("## Timeline Breakdown"));
  CHECK(md.find("- Steps: none found") > md.find("## Timeline Breakdown"));
  CHECK(md.find("No bottleneck found") != std::string::npos);
  CHECK(md.find("## Top kernels") == std::string::npos);
}


TEST_CASE("markdown title names the program and the input file") {
  auto a = sample_analysis();
  const auto title = [&](const char* cmdline) {
    a.process["cmdline"] = cmdline;
    const std::string md = markdown(a);
    return md.substr(0, md.find('\n'));
  };
  CHECK(title("/usr/bin/python3 -u generate.py --model gpt2") == "# InferScope report: generate.py (gpt2.iscope)");
  CHECK(title("python3 -m vllm.entrypoints.api_server") == "# InferScope report: vllm.entrypoints.api_server (gpt2.iscope)");
  CHECK(title("./build/bin/infer --batch 8") == "# InferScope report: infer (gpt2.iscope)");
  CHECK(title("(not recorded by torch.profiler)") == "# InferScope report: gpt2.iscope");
  a.source.clear();
  CHECK(title("") == "# InferScope report");
}

TEST_CASE("markdown share bars: ten characters for the whole, in eighths, nothing for no share") {
  using report::md::share_bar;
  CHECK(share_bar(100) == "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588");
  CHECK(share_bar(150) == share_bar(100));  // never longer than the column
  CHECK(share_bar(51.25) == "\u2588\u2588\u2588\u2588\u2588\u258F");  // 41 eighths
  CHECK(share_bar(50) == "\u2588\u2588\u2588\u2588\u2588");
  CHECK(share_bar(1.25) == "\u258F");  // one eighth of a character
  CHECK(share_bar(0.5).empty());       // under half an eighth: no bar
  CHECK(share_bar(0).empty());
  CHECK(share_bar(-3).empty());
  CHECK(share_bar(std::nan("")).empty());
  CHECK(share_bar(25, 4) == "\u2588");
}

TEST_CASE("markdown tables with a share column put a bar beside it, as the HTML tables do") {
  auto a = sample_analysis();
  a.kernel_families = {{"gemm", 3, 1.5, 0.6, 1.0}, {"elementwise", 9, 1.0, 0.4, 0.0}};
  const std::string md = markdown(a);
  const auto ls = lines_of(md);
  for (const char* section : {"## Top kernels", "## Kernel time by family"}) {
    CAPTURE(section);
    size_t i = 0;
    while (i < ls.size() && ls[i] != section) ++i;
    REQUIRE(i + 4 < ls.size());
    const auto head = cells(ls[i + 2]);
    const auto at = std::find(head.begin(), head.end(), "% GPU time") - head.begin();
    REQUIRE(size_t(at + 1) < head.size());
    CHECK(head[at + 1].empty());
    for (size_t r = i + 4; r < ls.size() && !ls[r].empty() && ls[r][0] == '|'; ++r) {
      const auto row = cells(ls[r]);
      CHECK(row[at + 1] == report::md::share_bar(std::stod(row[at])));
    }
  }
}

TEST_CASE("a suggestion that a knob applies carries the iscope-run --try command that measures it") {
  analyze::Analysis a = sample_analysis();
  REQUIRE_FALSE(a.findings.empty());
  REQUIRE_FALSE(a.findings.front().suggestions.empty());
  a.findings.front().suggestions.front().try_knob = "num_workers=4";
  a.process["cmdline"] = "python3 serve.py --batches 96";
  const std::string cmd = "iscope-run --try num_workers=4 -- python3 serve.py --batches 96";
  CHECK(markdown(a).find("Measure it on this program: `" + cmd + "`") != std::string::npos);
  std::ostringstream html;
  report::write_html(a, html);
  CHECK(html.str().find("Measure it on this program: <code>" + cmd + "</code>") != std::string::npos);
  // Without the recorded command line there is nothing to run: no command.
  a.process.erase("cmdline");
  CHECK(markdown(a).find("iscope-run --try") == std::string::npos);
  CHECK(analyze::try_command("", a.findings.front().suggestions.front()).empty());
}
