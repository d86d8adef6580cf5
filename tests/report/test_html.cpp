#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {


}  // namespace

TEST_CASE("html is one self-contained page") {
  const std::string page = html(sample_analysis());
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("</html>") != std::string::npos);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("<link") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
  CHECK(page.find("url(") == std::string::npos);
  static const std::regex external(R"((src|href)\s*=\s*"(?!#))", std::regex::icase);  // links within the page only
  CHECK_FALSE(std::regex_search(page, external));
}

TEST_CASE("html shows the headline, breakdown chart, timeline, findings and tables") {
  const std::string page = html(sample_analysis());
  CHECK(page.find("<h1>End-to-end latency: 12.5 ms</h1>") != std::string::npos);
  CHECK(count(page, " role=\"img\"") == 2);  // breakdown bar and timeline
  // The timeline zooms: each lane's spans sit in a nested viewport that clips them, with the buttons and the
  // script that drive them (the spans' markup: "html timeline gives the zoom script...").
  CHECK(count(page, "<g class=\"tl-z\">") == count(page, "<svg x=\""));
  CHECK(count(page, "<g class=\"tl-z\">") >= 2);
  CHECK(page.find("data-zoom=\"reset\"") != std::string::npos);
  CHECK(page.find("svg.querySelectorAll('rect[data-s]')") != std::string::npos);
  // Breakdown: one bar segment per non-zero part, each with its tooltip.
  CHECK(page.find("<title>GPU compute: 5.000 ms (40.0 %)</title>") != std::string::npos);
  // Timeline: both lanes, every span with a tooltip.
  CHECK(page.find("thread main (1234)") != std::string::npos);
  CHECK(page.find("GPU 0 stream 7") != std::string::npos);
  CHECK(page.find("<title>cudaStreamSynchronize [sync] 11.200–12.300 ms (1100.0 us)</title>") != std::string::npos);
  CHECK(page.find("class=\"finding primary\"") != std::string::npos);
  CHECK(page.find("class=\"finding uncertain\"") != std::string::npos);
  CHECK(page.find("<span class=\"badge uncertain\">uncertain</span>") != std::string::npos);
  for (const char* id : {"kernels", "python", "ranges", "copies", "syncs", "allocations", "layers", "threads",
                         "steps", "findings", "breakdown", "timeline"})
    CHECK(page.find(std::string("<section id=\"") + id + "\">") != std::string::npos);
  CHECK(page.find("<details id=\"warnings\"") != std::string::npos);
  CHECK(page.find("<li id=\"alignment\">Clock alignment: OK, 24800 kernels checked") != std::string::npos);
  CHECK(page.find("<li id=\"drops\">Dropped records: 17 (<code>buffer_full</code> 17)") != std::string::npos);
  // The primary finding comes before the uncertain one.
  CHECK(page.find("Kernel launches limit the GPU") < page.find("A device synchronization per step"));
}

TEST_CASE("html names the GPU idle causes as the markdown does, memory included (they add up to the idle time)") {
  analyze::Analysis a = sample_analysis();
  a.breakdown.gpu_idle_in_memory_ms = 0.25;
  const std::string page = html(a);
  // In the bar by cause (the sentence that repeated its parts is gone: one figure per quantity).
  CHECK(page.find("Kernel launch overhead (launching kernels): 0.750 ms") != std::string::npos);
  CHECK(page.find("gaps between kernels") == std::string::npos);  // launch-path idle since Analyzer v2, not any gap
  CHECK(page.find("Memory allocation and frees (in allocations and frees): 0.250 ms") != std::string::npos);
}

TEST_CASE("html's breakdown bar is by cause, in the findings' categories, with a legend of the causes that occur") {
  analyze::Analysis a = sample_analysis();
  a.breakdown.gpu_idle_in_memory_ms = 0.25;
  a.breakdown.gpu_idle_waiting_on_sync_ms = 0;
  const std::string page = html(a);
  const auto legend_at = page.find("<div class=\"legend\">");
  REQUIRE(legend_at != std::string::npos);
  const std::string legend = page.substr(legend_at, page.find("</div>", legend_at) - legend_at);
  // The causes as the findings name their categories (category_name), the breakdown's own words on hover.
  CHECK(legend.find("</i>GPU compute 40.0 %") != std::string::npos);
  CHECK(legend.find("<span title=\"in allocations and frees\">") != std::string::npos);
  CHECK(legend.find("</i>Memory allocation and frees 2.0 %") != std::string::npos);
  CHECK(legend.find("synchronizations") == std::string::npos);  // 0 ms: no segment, no legend entry
  CHECK(page.find("<title>Memory allocation and frees (in allocations and frees): 0.250 ms") != std::string::npos);
  // The component table stays below the bar.
  CHECK(page.find(">Sync wait</td>", legend_at) != std::string::npos);
}

TEST_CASE("html escapes every name taken from the trace") {
  const std::string page = html(sample_analysis(/*hostile=*/true));
  CHECK(is_valid_utf8(page));
  CHECK(page.find("<script>alert") == std::string::npos);
  CHECK(page.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;") != std::string::npos);
  CHECK(count(page, "<script") == 1);  // only the page's own sorting script
  CHECK(page.find("run&lt;1&gt;&amp;&quot;x&quot;.iscope") != std::string::npos);
  // Names inside SVG titles and labels are escaped too.
  CHECK(page.find("<title>ampere_fp16_s16816gemm&lt;script&gt;") != std::string::npos);
}

TEST_CASE("html of an empty analysis is still a complete page") {
  const std::string page = html(analyze::Analysis{});
  CHECK(page.find("No timeline") != std::string::npos);
  CHECK(page.find("</html>") != std::string::npos);
}

TEST_CASE("html timeline packs a lane's depths into consecutive rows") {
  auto a = sample_analysis();
  a.representative.lanes.resize(1);
  a.representative.lanes[0].spans = {{0, 1, "outer", "range", 0}, {0.2, 0.3, "call", "api", 250}};
  const std::string page = html(a);
  // Row 0 at the lane's top (y = 20), depth 250 on the next row (y = 40), not 250 rows down.
  CHECK(page.find("y=\"20.0\" width") != std::string::npos);
  CHECK(page.find("y=\"40.0\" width") != std::string::npos);
  CHECK(page.find("height=\"68\" viewBox") != std::string::npos);  // axis 20 + 2 rows of 20 + padding 8
}

namespace {

/// The <table>...</table> elements of a page.
std::vector<std::string> tables_of(const std::string& page) {
  std::vector<std::string> out;
  for (size_t p = page.find("<table"); p != std::string::npos; p = page.find("<table", p + 1))
    out.push_back(page.substr(p, page.find("</table>", p) + 8 - p));
  return out;
}

}  // namespace

TEST_CASE("html gives every table what the sort script needs, and the script sorts each by its own column") {
  const std::string page = html(sample_analysis());
  const auto tables = tables_of(page);
  REQUIRE(tables.size() >= 10);
  for (const auto& t : tables) {
    INFO(t.substr(0, 200));
    // A sortable table with one header row in <thead> and the rows in one <tbody>.
    CHECK(t.rfind("<table class=\"sortable\"><thead><tr>", 0) == 0);
    REQUIRE(count(t, "<thead>") == 1);
    REQUIRE(count(t, "<tbody>") == 1);
    const std::string head = t.substr(0, t.find("</thead>")), body = t.substr(t.find("<tbody>"));
    const size_t columns = count(head, "<th>") + count(head, "<th class=");
    CHECK(columns >= 2);
    // Every body row has a cell per header, so a.cells[col] exists whatever header is clicked.
    size_t rows = 0;
    for (size_t p = body.find("<tr>"); p != std::string::npos; p = body.find("<tr>", p + 1), ++rows)
      CHECK(count(body.substr(p, body.find("</tr>", p) - p), "<td") == columns);
    CHECK(rows >= 1);
  }
  // The column comes from the header's own position in its row, and each table is wired separately: the
  // page-wide header index of the old script only matched the first table (TypeError on the others).
  const std::string script = page.substr(page.find("<script>"));
  CHECK(script.find("th.cellIndex") != std::string::npos);
  CHECK(script.find("querySelectorAll('table.sortable')") != std::string::npos);
  CHECK(script.find("table.sortable th") == std::string::npos);
  CHECK(script.find("tHead.rows[0].cells") != std::string::npos);
  CHECK(script.find("tBodies[0]") != std::string::npos);
}

TEST_CASE("html shows kernels by their short names with the full name on hover") {
  auto a = sample_analysis();
  a.findings[0].evidence.push_back("busiest: " + a.kernels[0].name);
  const std::string page = html(a);
  const std::string full = "void at::native::vectorized_elementwise_kernel&lt;4, at::native::AddFunctor&lt;c10::Half&gt;&gt;";
  const std::string short_name = "vectorized_elementwise_kernel&lt;4, AddFunctor&lt;\xE2\x80\xA6&gt;&gt;";
  CHECK(page.find("<td class=\"name\"><span class=\"full\" title=\"" + full + "\">" + short_name + "</span></td>") !=
        std::string::npos);
  CHECK(page.find("<li>busiest: <code class=\"full\" title=\"" + full + "\">" + short_name + "</code></li>") !=
        std::string::npos);
  // A name that is already short is printed as it is.
  CHECK(page.find("<td class=\"name\">ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn</td>") !=
        std::string::npos);
}

TEST_CASE("html puts the data-quality notes right after the headline and the process details collapsed at the end") {
  auto a = sample_analysis();
  for (int t = 0; t < 70; ++t) a.process["os_thread." + std::to_string(1000 + t) + ".name"] = "python3";
  const std::string page = html(a);
  const size_t header_end = page.find("</header>");
  CHECK(page.find("os_thread.") > page.find("<details id=\"process\"><summary>Process details (73 entries)</summary>"));
  CHECK(page.find("<details id=\"warnings\"") > header_end);
  CHECK(page.find("<details id=\"warnings\"") < page.find("<section id=\"breakdown\">"));
  CHECK(page.find("<details id=\"process\">") > page.find("<section id=\"threads\">"));
  CHECK(page.find("Process: cmdline <code>python serve.py --model gpt2</code> · pid <code>4242</code>") < header_end);
  CHECK(page.find("<title>InferScope report: serve.py (gpt2.iscope)</title>") != std::string::npos);
}

namespace {

/// The <rect> tags of the page's timeline.
std::vector<std::string> timeline_rects(const std::string& page) {
  std::vector<std::string> out;
  const std::string svg = page.substr(page.find("aria-label=\"timeline"));
  for (size_t p = svg.find("<rect "); p != std::string::npos; p = svg.find("<rect ", p + 1))
    out.push_back(svg.substr(p, svg.find('>', p) + 1 - p));
  return out;
}

std::string attr(const std::string& tag, const std::string& name) {
  const size_t p = tag.find(" " + name + "=\"");
  if (p == std::string::npos) return {};
  const size_t v = p + name.size() + 3;
  return tag.substr(v, tag.find('"', v) - v);
}

/// Busy pixels the GPU lane paints in `color` at zoom 1: width times fill opacity of each filled rect shown.
double painted(const std::string& page, const std::string& color) {
  double px = 0;
  for (const auto& r : timeline_rects(page)) {
    if (attr(r, "fill") != color || attr(r, "display") == "none") continue;
    const std::string opacity = attr(r, "fill-opacity");
    px += std::stod(attr(r, "width")) * (opacity.empty() ? 1.0 : std::stod(opacity));
  }
  return px;
}

}  // namespace

TEST_CASE("html GPU lane never draws idle time as busy") {
  auto a = sample_analysis();
  a.representative.step.duration_ms = 10.0;
  auto& gpu = a.representative.lanes[1].spans;
  gpu.clear();
  // 200 kernels of 1.5 us, one every 50 us: 3 % busy. Each is 0.14 px wide.
  for (int k = 0; k < 200; ++k) gpu.push_back({k * 0.05, k * 0.05 + 0.0015, "vectorized_elementwise_kernel", "kernel", 0});
  // One long kernel that does fill its pixels, and a block the analyzer merged across idle gaps.
  gpu.push_back({9.0, 9.5, "gemm", "kernel", 0});
  gpu.push_back({9.6, 9.9, "merged 12 kernels", "kernel", 0});
  const std::string page = html(a);
  const double busy_px = (200 * 0.0015 + 0.5) / 10.0 * 1040;  // 83.2 px of the 1040 px plot
  const double drawn = painted(page, "#27ae60");
  CHECK(drawn >= busy_px * 0.8);
  CHECK(drawn <= busy_px * 1.6);  // at least 0.08 opacity where anything ran
  // The merged block is an outline; the tiny kernels are a strip with their share as opacity.
  CHECK(page.find("<rect class=\"merged\"") != std::string::npos);
  CHECK(page.find("fill=\"none\" stroke=\"#27ae60\" stroke-dasharray") != std::string::npos);
  CHECK(page.find("<rect class=\"density\"") != std::string::npos);
  CHECK(page.find("short kernel span(s)") != std::string::npos);
}

TEST_CASE("html timeline gives the zoom script each span's times and label, and the short GPU spans hidden") {
  auto a = sample_analysis();
  a.representative.step.duration_ms = 10.0;
  auto& gpu = a.representative.lanes[1].spans;
  gpu = {{1.0, 1.0015, "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>>",
          "kernel", 0},
         {2.0, 6.0, "gemm", "kernel", 0}};
  const std::string page = html(a);
  size_t spans = 0, hidden = 0;
  for (const auto& r : timeline_rects(page)) {
    INFO(r);
    if (attr(r, "class") == "density") continue;  // the zoom-1 strip; the script draws its own when zoomed
    ++spans;
    CHECK_FALSE(attr(r, "data-s").empty());
    CHECK(std::stod(attr(r, "data-e")) >= std::stod(attr(r, "data-s")));
    if (attr(r, "display") == "none") {
      ++hidden;
      // 1.5 us of a 10 ms step: a strip at zoom 1, its own rect (by its short name) once zoomed in.
      CHECK(attr(r, "class") == "g");
      CHECK(attr(r, "data-s") == "1.000000");
      CHECK(attr(r, "data-e") == "1.001500");
      CHECK(attr(r, "data-c") == "kernel");
      CHECK(attr(r, "data-l") == "vectorized_elementwise_kernel&lt;4, AddFunctor&lt;\xE2\x80\xA6&gt;&gt;");
    }
  }
  CHECK(spans >= 4);
  CHECK(hidden == 1);
  CHECK(page.find("data-l=\"gemm\"><title>gemm [kernel] 2.000–6.000 ms") != std::string::npos);
  // The script's inputs: the plot's geometry and the strip's rule, and buttons it shows once it runs.
  CHECK(page.find("data-x0=\"190\" data-w=\"1040\"") != std::string::npos);
  CHECK(page.find("data-min-gpu-px=\"2\" data-min-opacity=\"0.08\"") != std::string::npos);
  CHECK(page.find("<div class=\"tl-controls\" hidden>") != std::string::npos);
  CHECK(page.find("<svg id=\"tl-svg\" tabindex=\"0\"") != std::string::npos);
}

TEST_CASE("html: a thread's CPU time below one clock tick says so, and the table says what the ticks are") {
  const std::string page = html(sample_analysis());
  const size_t threads = page.find("<section id=\"threads\">");
  REQUIRE(threads != std::string::npos);
  const std::string section = page.substr(threads, page.find("</section>", threads) - threads);
  CHECK(section.find("<td class=\"n\">under 10</td>") != std::string::npos);  // bg-hog: ticks, 0 of them
  CHECK(section.find("<td class=\"n\">n/a</td>") != std::string::npos);       // idle: no counters at all
  CHECK(section.find("<td class=\"n\">1280.000</td>") != std::string::npos);  // schedstat: the figure itself
  CHECK(section.find("<p class=\"muted\">CPU (ms) without schedstat") != std::string::npos);
  analyze::Analysis exact = sample_analysis();
  exact.threads.resize(2);  // schedstat only: no note
  CHECK(html(exact).find("CPU (ms) without schedstat") == std::string::npos);
}

TEST_CASE("html's first screen: the spread, the primary cause in words and what to do first, with its saving") {
  const std::string page = html(sample_analysis());
  const std::string header = page.substr(0, page.find("</header>"));
  CHECK(header.find("<p id=\"spread\"><b>p50 ") != std::string::npos);
  CHECK(header.find(" · p90 ") != std::string::npos);
  // The category in words, its key on hover; never the raw tag alone.
  CHECK(header.find("<b class=\"cat\" title=\"category launch_bound\">Kernel launch overhead</b>") != std::string::npos);
  // The suggestion with the largest estimated saving, and the saving.
  CHECK(header.find("<span class=\"lead\">Do first</span>Capture the decode step in a CUDA graph") != std::string::npos);
  CHECK(header.find("<b class=\"saving\">saves about ") != std::string::npos);
  CHECK(header.find("<a href=\"#finding-1\">") != std::string::npos);
  CHECK(page.find("<div class=\"finding primary\" id=\"finding-1\">") != std::string::npos);
}

TEST_CASE("html's data-quality notes are collapsed unless something in them is wrong") {
  auto a = sample_analysis();  // records dropped, a warning: open, saying why
  CHECK(html(a).find("<details id=\"warnings\" open><summary>Data quality: <span class=\"warn\">check first: ") !=
        std::string::npos);
  a.drops.clear();
  a.warnings.clear();
  CHECK(html(a).find("<details id=\"warnings\"><summary>Data quality: no problem found</summary>") != std::string::npos);
  a.alignment.ok = false;  // clocks that disagree make every GPU time suspect
  CHECK(html(a).find("check first: CPU and GPU clocks look misaligned") != std::string::npos);
}

TEST_CASE("html findings name their category and metrics in words, the keys on hover") {
  const std::string page = html(sample_analysis());
  CHECK(page.find("<span class=\"badge cat\" title=\"category launch_bound\">Kernel launch overhead</span>") !=
        std::string::npos);
  CHECK(page.find("<span title=\"kernels_per_step\">Kernels per step: 412</span>") != std::string::npos);
  CHECK(page.find("<span title=\"median_kernel_us\">Median kernel (us): 9.1</span>") != std::string::npos);
  CHECK(page.find("kernels_per_step = ") == std::string::npos);
}

TEST_CASE("html timeline: step boundaries, the primary finding's example highlighted, a legend of what is drawn") {
  auto a = sample_analysis();
  const std::string page = html(a);
  // The sample's primary example lies outside the step drawn: boundaries only, no highlight, no button.
  CHECK(count(page, "<rect class=\"mk sb\"") == 2);
  CHECK(page.find("<rect class=\"mk hl\"") == std::string::npos);
  CHECK(page.find("id=\"tl-goto-hl\"") == std::string::npos);
  // The second finding's example is inside it: one click zooms there (ms from the step's start).
  CHECK(page.find("class=\"tl-goto\" data-goto-s=\"0.000000\" data-goto-e=\"1.150000\">show in the timeline</button>") !=
        std::string::npos);
  a.findings[0].examples = {{100.25, 101.25, "step 7: the launch gap"}};
  const std::string hl = html(a);
  CHECK(hl.find("<rect class=\"mk hl\" x=\"") != std::string::npos);
  CHECK(hl.find("data-goto-s=\"5.000000\" data-goto-e=\"6.000000\"") != std::string::npos);
  // The legend names only categories the timeline draws.
  const auto at = page.find("<div class=\"legend\">", page.find("<section id=\"timeline\">"));
  const std::string legend = page.substr(at, page.find("</div>", at) - at);
  CHECK(legend.find("memset") == std::string::npos);
  CHECK(legend.find("kernel") != std::string::npos);
}

TEST_CASE("html share columns carry an inline bar of their share, the text (and so sorting) unchanged") {
  const std::string page = html(sample_analysis());
  const auto at = page.find("<section id=\"kernels\">");
  REQUIRE(at != std::string::npos);
  const std::string kernels = page.substr(at, page.find("</section>", at) - at);
  CHECK(kernels.find("<td class=\"n\" style=\"background:linear-gradient(to right,#d4e3f2 ") != std::string::npos);
  // The component table's total row has no bar.
  CHECK(page.find("<tfoot><tr><td class=\"w\"><b>Step total</b></td><td class=\"n\"><b>") != std::string::npos);
}

TEST_CASE("html timeline: a GPU-idle primary cause whose example is in another step highlights this step's longest idle") {
  auto a = sample_analysis();
  a.findings[0].category = "wait";  // its example (520.5 ms) lies outside step 7
  const std::string page = html(a);
  // The sample's GPU lane is idle longest from 2.51 to 12.0 ms of the step.
  CHECK(page.find("<rect class=\"mk hl\" x=\"") != std::string::npos);
  CHECK(page.find("data-s=\"2.510000\" data-e=\"12.000000\"><title>the GPU idle for 9.490 ms, the longest in this step") !=
        std::string::npos);
  CHECK(page.find("Highlighted: the longest GPU-idle stretch of this step") != std::string::npos);
  CHECK(page.find("The primary finding's example (step 41") != std::string::npos);  // and where the example is
  a.findings[0].category = "gpu_bound";  // not about GPU idle time: nothing highlighted
  CHECK(html(a).find("<rect class=\"mk hl\"") == std::string::npos);
}
