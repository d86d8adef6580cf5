// The HTML timeline's thread-state rows (html_states.cpp) and the hooks of its launch-to-kernel arrows (data-k,
// the arrow layer): drawn only where the analysis has them, and in the legend only then.
#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;

namespace {


/// The step timeline's SVG, from its opening tag to its end.
std::string step_svg(const std::string& page) {
  const size_t at = page.find("<svg id=\"tl-svg\"");
  REQUIRE(at != std::string::npos);
  const size_t end = page.find("</svg>\n<div class=\"legend\">", at);
  REQUIRE(end != std::string::npos);
  return page.substr(at, end - at);
}

std::vector<std::string> tags(const std::string& s, const std::string& open) {
  std::vector<std::string> out;
  for (size_t p = s.find(open); p != std::string::npos; p = s.find(open, p + 1)) out.push_back(s.substr(p, s.find('>', p) + 1 - p));
  return out;
}

std::string attr(const std::string& tag, const std::string& name) {
  const size_t p = tag.find(" " + name + "=\"");
  if (p == std::string::npos) return {};
  const size_t v = p + name.size() + 3;
  return tag.substr(v, tag.find('"', v) - v);
}

double svg_height(const std::string& page) { return std::stod(attr(tags(step_svg(page), "<svg id=")[0], "height")); }

}  // namespace

TEST_CASE("html timeline: no thread states in the analysis, no state row and no state legend") {
  const std::string page = html(sample_analysis());
  CHECK(tags(step_svg(page), "<rect class=\"st\"").empty());
  CHECK(page.find(">thread state<title>") == std::string::npos);
  CHECK(page.find("id=\"tl-state-legend\"") == std::string::npos);
}

TEST_CASE("html timeline: a thread lane's states are a row of their own under its spans, placed like spans") {
  auto a = sample_analysis();
  const double without = svg_height(html(a));
  auto& cpu = a.representative.lanes[0];
  cpu.states = {{0.0, 6.2, 'R'}, {6.2, 12.4, 'S'}};
  const std::string page = html(a);
  // One more row of 20 px for the one lane with states; the GPU lane gets none.
  CHECK(svg_height(page) == doctest::Approx(without + 20));
  const auto rows = tags(step_svg(page), "<rect class=\"st\"");
  REQUIRE(rows.size() == 2);
  CHECK(attr(rows[0], "data-s") == "0.000000");
  CHECK(attr(rows[0], "data-e") == "6.200000");
  CHECK(attr(rows[0], "data-l") == "running or runnable");
  CHECK(attr(rows[1], "data-l") == "sleeping");
  CHECK(attr(rows[0], "fill") != attr(rows[1], "fill"));
  CHECK(attr(rows[0], "data-lc") == "#1d232b");  // a dark label on a light fill
  // Below every span of its lane (a thread's spans are the rects with times and no class).
  double spans_bottom = 0;
  for (const auto& r : tags(step_svg(page), "<rect x="))
    if (!attr(r, "data-s").empty()) spans_bottom = std::max(spans_bottom, std::stod(attr(r, "y")) + 18);
  CHECK(spans_bottom > 0);
  CHECK(std::stod(attr(rows[0], "y")) >= spans_bottom);
  CHECK(page.find(">thread state<title>") != std::string::npos);
  // The legend names the states drawn, and only those.
  const size_t at = page.find("id=\"tl-state-legend\"");
  REQUIRE(at != std::string::npos);
  const std::string legend = page.substr(at, page.find("</div>", at) - at);
  CHECK(legend.find("running or runnable (R)") != std::string::npos);
  CHECK(legend.find("sleeping (S)") != std::string::npos);
  CHECK(legend.find("uninterruptible") == std::string::npos);
}

TEST_CASE("html timeline: spans with a correlation id carry it for the arrows, with the arrow layer and a hint") {
  auto a = sample_analysis();
  const std::string plain = html(a);
  CHECK(plain.find("data-k=") == std::string::npos);
  CHECK(plain.find("id=\"tl-arrows\"") == std::string::npos);
  CHECK(plain.find("id=\"tl-arrow-hint\"") == std::string::npos);
  a.representative.lanes[0].spans[3].correlation = 41;  // cudaLaunchKernel
  a.representative.lanes[1].spans[1].correlation = 41;  // the gemm it launched
  const std::string page = html(a);
  size_t keyed = 0;
  for (const auto& r : tags(step_svg(page), "<rect")) {
    if (attr(r, "data-k").empty()) continue;
    ++keyed;
    CHECK(attr(r, "data-k") == "41");
  }
  CHECK(keyed == 2);
  CHECK(page.find("<g id=\"tl-arrows\"></g>") != std::string::npos);
  CHECK(page.find("id=\"tl-arrow-hint\"") != std::string::npos);
  // The run's timeline (no correlation ids there) never gets the layer: one per page.
  CHECK(count(page, "id=\"tl-arrows\"") == 1);
}

TEST_CASE("html timeline: a generation loop's token boundaries are marked where its per-token calls start") {
  auto a = sample_analysis();
  CHECK(tags(step_svg(html(a)), "<rect class=\"mk tk\"").empty());  // no generation loop: no token marks
  a.generation.detected = true;
  a.generation.token_function = "GPT2LMHeadModel.forward";
  auto& host = a.representative.lanes[0];
  for (double t : {2.0, 5.5, 9.0}) host.spans.push_back({t, t + 2.5, "GPT2LMHeadModel.forward", "python", 2});
  const std::string page = html(a);
  const auto marks = tags(step_svg(page), "<rect class=\"mk tk\"");
  REQUIRE(marks.size() == 3);
  CHECK(attr(marks[0], "data-s") == "2.000000");
  CHECK(attr(marks[2], "data-s") == "9.000000");
  CHECK(page.find("thin violet lines the start of each of its 3 tokens (the calls of <code>GPT2LMHeadModel.forward"
                  "</code>)") != std::string::npos);
  CHECK(tags(step_svg(page), "<rect class=\"mk sb\"").size() == 2);  // the step's own start and end, still there
}
