#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <regex>
#include <sstream>
#include <string>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {

std::string html(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_html(a, out);
  return out.str();
}

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
  static const std::regex external(R"((src|href)\s*=)", std::regex::icase);
  CHECK_FALSE(std::regex_search(page, external));
}

TEST_CASE("html shows the headline, breakdown chart, timeline, findings and tables") {
  const std::string page = html(sample_analysis());
  CHECK(page.find("<h1>End-to-end latency: 12.500 ms</h1>") != std::string::npos);
  CHECK(count(page, "<svg") == 2);  // breakdown bar and timeline
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
                         "alignment", "drops", "warnings", "steps", "findings", "breakdown", "timeline"})
    CHECK(page.find(std::string("<section id=\"") + id + "\">") != std::string::npos);
  // The primary finding comes before the uncertain one.
  CHECK(page.find("Kernel launches limit the GPU") < page.find("A device synchronization per step"));
}

TEST_CASE("html names the GPU idle causes as the markdown does, memory included (they add up to the idle time)") {
  analyze::Analysis a = sample_analysis();
  a.breakdown.gpu_idle_in_memory_ms = 0.25;
  const std::string page = html(a);
  CHECK(page.find("0.750 ms while the host launched") != std::string::npos);
  CHECK(page.find("gaps between kernels") == std::string::npos);  // launch-path idle since Analyzer v2, not any gap
  CHECK(page.find("0.250 ms in allocations/frees") != std::string::npos);
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
  // Row 0 at the lane's top (y = 20), depth 250 on the next row (y = 35), not 250 rows down.
  CHECK(page.find("y=\"20.0\" width") != std::string::npos);
  CHECK(page.find("y=\"35.0\" width") != std::string::npos);
  CHECK(page.find("height=\"56\" viewBox") != std::string::npos);  // axis 20 + 2 rows of 15 + padding 6
}
