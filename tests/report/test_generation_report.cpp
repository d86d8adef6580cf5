// A generation loop in the reports (lib/report/generation.hpp): the Markdown section, the HTML section and the JSON
// object, from the planted torch.profiler generate loop (tests/analyze/make_kineto_fixtures.py: TTFT 179 us, TPOT
// 89 us, 6 tokens per step); and nothing of it for a step that is not one.
#include "analyze/analyzer.hpp"
#include "report/report.hpp"
#include "support/files.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <sstream>
#include <string>

using namespace inferscope;

namespace {

// The Markdown writer wraps long lines: a paragraph's words, on one line.
std::string unwrapped(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

template <class Write>
std::string written(const analyze::Analysis& a, Write write) {
  std::ostringstream o;
  write(a, o);
  return o.str();
}

}  // namespace

TEST_CASE("a generation loop's TTFT, TPOT and per-phase table are in the Markdown, HTML and JSON reports") {
  const auto a = analyze::analyze_file((testsupport::fixtures() / "kineto_generate.json.gz").string(), {});
  REQUIRE(a.generation.detected);
  const std::string md = unwrapped(written(a, report::write_markdown));
  const size_t at = md.find("## Generation loop  ");
  REQUIRE(at != std::string::npos);
  CHECK(at > md.find("## Step latency"));
  // The first screen says it before any section.
  // Sentences give a time in ms to the analyzer's precision (docs/reports.md, "Units and precision").
  const size_t top = md.find("**Generation loop**: 6 tokens per step: time to first token 0.18 ms, per output token 0.089 ms");
  CHECK(top < md.find("\n## "));
  CHECK(md.find("Each step generates 6 tokens, one call of `nn.Module: GPT2LMHeadModel_0` per token", at) != std::string::npos);
  CHECK(md.find("Time to first token 0.18 ms (p90 0.18), time per output token 0.089 ms (p90 0.089), 9615.4 tokens/s", at) !=
        std::string::npos);
  CHECK(md.find("| prefill (first token) | 5 | 0.179 / 0.179 | 0.156 (87 %) | 6.0 (5.0) |", at) != std::string::npos);
  CHECK(md.find("| decode (each later token) | 25 | 0.089 / 0.089 | 0.046 (52 %) | 6.0 (5.0) |", at) != std::string::npos);

  const std::string html = written(a, report::write_html);
  const size_t sec = html.find("<section id=\"generation\"><h2>Generation loop</h2>");
  REQUIRE(sec != std::string::npos);
  const size_t headline = html.find("<p id=\"generation-headline\"><b>Generation loop</b>: 6 tokens per step");
  CHECK(headline < html.find("</header>"));
  CHECK(html.find("time per output token 0.089 ms", sec) != std::string::npos);
  CHECK(html.find("prefill (first token)", sec) != std::string::npos);

  const boost::json::object j = boost::json::parse(written(a, report::write_json)).as_object();
  REQUIRE(j.contains("generation"));
  const auto& g = j.at("generation").as_object();
  CHECK(g.at("token_function").as_string() == "nn.Module: GPT2LMHeadModel_0");
  CHECK(g.at("tokens_per_step").to_number<double>() == 6);
  CHECK(g.at("ttft_ms").to_number<double>() == doctest::Approx(0.179));
  CHECK(g.at("tpot_ms").to_number<double>() == doctest::Approx(0.089));
  CHECK(g.at("decode").as_object().at("syncs").to_number<double>() == doctest::Approx(1));
}

TEST_CASE("a step that is no generation loop has no generation section or object") {
  const auto a = analyze::analyze_file((testsupport::fixtures() / "kineto_sync_bound.json").string(), {});
  CHECK_FALSE(a.generation.detected);
  CHECK(written(a, report::write_markdown).find("## Generation loop") == std::string::npos);
  CHECK(written(a, report::write_html).find("id=\"generation\"") == std::string::npos);
  CHECK_FALSE(boost::json::parse(written(a, report::write_json)).as_object().contains("generation"));
}
