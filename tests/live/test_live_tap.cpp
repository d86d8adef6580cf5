// The live tap and what the server renders from it (lib/live): bounded rings, the histogram, the breakdown,
// the metrics text, the address rules.
#include "live/render.hpp"
#include "live/server.hpp"
#include "live/tap.hpp"

#include <inferscope/records.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using namespace inferscope;
using namespace inferscope::live;

namespace {

void add(std::vector<uint8_t>& buf, uint32_t name, uint8_t depth, uint64_t start, uint64_t end) {
  RangeRecord r{{RecordKind::kRange, depth, sizeof(RangeRecord)}, name, start, end};
  const auto* p = reinterpret_cast<const uint8_t*>(&r);
  buf.insert(buf.end(), p, p + sizeof(r));
}

std::string names(uint32_t id) { return id == 1 ? "step" : id == 2 ? "compute" : "other"; }

void add_call(std::vector<uint8_t>& buf, uint32_t code, uint8_t depth, uint64_t start, uint64_t end) {
  PyCallRecord r{{RecordKind::kPyCall, depth, sizeof(PyCallRecord)}, code, start, end};
  const auto* p = reinterpret_cast<const uint8_t*>(&r);
  buf.insert(buf.end(), p, p + sizeof(r));
}

}  // namespace

TEST_CASE("steps go to the histogram and the step ring; the rings keep the newest only") {
  Tap tap(1, 0, 1.0, names, /*steps=*/4, /*spans=*/3);
  std::vector<uint8_t> buf;
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t t = i * 100'000'000;           // ticks are ns here
    add(buf, 1, 0, t, t + (i == 7 ? 90'000'000 : 2'000'000));  // 2 ms steps, one of 90 ms
    add(buf, 2, 1, t, t + 1'000'000);
  }
  tap.observe(3, buf.data(), buf.size());
  const Snapshot s = tap.snapshot();
  CHECK(s.steps_total == 10);
  REQUIRE(s.steps.size() == 4);
  CHECK(s.steps.front().start == 600'000'000);
  CHECK(s.spans.size() == 3);
  CHECK(s.records_total == 20);
  const std::string m = render_metrics(s);
  CHECK(m.find("inferscope_step_duration_seconds_bucket{le=\"0.0025\"} 9\n") != std::string::npos);
  CHECK(m.find("inferscope_step_duration_seconds_bucket{le=\"0.1\"} 10\n") != std::string::npos);
  CHECK(m.find("inferscope_step_duration_seconds_bucket{le=\"+Inf\"} 10\n") != std::string::npos);
  CHECK(m.find("inferscope_step_duration_seconds_count 10\n") != std::string::npos);
  CHECK(m.find("inferscope_session_state{state=\"recording\"} 1\n") != std::string::npos);
  const std::string d = render_data_json(s);
  CHECK(d.find("\"steps_total\":10") != std::string::npos);
  CHECK(d.find("\"name\":\"compute\",\"ms\":1") != std::string::npos);  // the breakdown: 1 ms per step
  CHECK(d.find("\"dur_ms\":90") != std::string::npos);                  // the slowest step
}

TEST_CASE("no range named step: the page names the step candidates it saw, until a step comes") {
  Tap tap(1, 0, 1.0, names);
  tap.set_code_names([](uint32_t code) { return code == 7 ? std::string("Server.infer") : "deep_helper"; });
  std::vector<uint8_t> buf;
  for (uint64_t i = 0; i < 6; ++i) {
    const uint64_t t = i * 10'000'000;  // ticks are ns here
    add(buf, 2, 0, t, t + 4'000'000);                   // a top-level range "compute" each iteration
    add_call(buf, 7, 1, t, t + 9'000'000);              // a shallow Python function around it
    add_call(buf, 8, 6, t, t + 1'000'000);              // too deep to be a step
  }
  add(buf, 3, 0, 0, 50'000'000);                        // a range seen once: not a candidate
  tap.observe(3, buf.data(), buf.size());
  Snapshot s = tap.snapshot();
  CHECK(s.steps_total == 0);
  CHECK(s.step_name == "step");
  REQUIRE(s.step_candidates.size() == 2);
  CHECK(s.step_candidates[0].name == "Server.infer");  // most time first
  CHECK(s.step_candidates[0].python);
  CHECK(s.step_candidates[0].count == 6);
  CHECK(s.step_candidates[1].name == "compute");
  CHECK_FALSE(s.step_candidates[1].python);
  const std::string hint = step_hint(s);
  CHECK(hint.find("no step named 'step' yet: candidates seen: Python function Server.infer (6 calls") == 0);
  CHECK(hint.find("range compute (6 times") != std::string::npos);
  CHECK(hint.find("name one with --set step=NAME (or ISCOPE_RANGE(\"step\")") != std::string::npos);
  CHECK(hint.find("deep_helper") == std::string::npos);
  CHECK(hint.find("other") == std::string::npos);
  CHECK(render_data_json(s).find("\"step_hint\":\"no step named 'step' yet: candidates seen: ") != std::string::npos);

  // Once a step is seen, the page has steps to show: no hint, no candidates.
  std::vector<uint8_t> step;
  add(step, 1, 0, 100'000'000, 102'000'000);
  tap.observe(3, step.data(), step.size());
  s = tap.snapshot();
  CHECK(s.steps_total == 1);
  CHECK(s.step_candidates.empty());
  CHECK(step_hint(s).empty());
  CHECK(render_data_json(s).find("\"step_hint\":\"\"") != std::string::npos);
}

TEST_CASE("no step and nothing repeated: the hint says how to mark one") {
  Tap tap(1, 0, 1.0, names);
  const Snapshot s = tap.snapshot();
  CHECK(step_hint(s) == "no step named 'step' yet, and no repeated top-level range or Python function either; mark a "
                        "step with ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\")");
}

TEST_CASE("a corrupt chunk never loops nor reads past its end") {
  Tap tap(1, 0, 1.0, names);
  std::vector<uint8_t> buf(16, 0);  // a record of size 0
  tap.observe(1, buf.data(), buf.size());
  std::vector<uint8_t> cut;
  add(cut, 1, 0, 0, 10);
  tap.observe(1, cut.data(), cut.size() - 1);
  CHECK(tap.snapshot().steps_total == 0);
}

TEST_CASE("quantiles, JSON strings") {
  CHECK(quantile({}, 0.5) == 0);
  CHECK(quantile({3, 1, 2, 4}, 0.5) == 2);
  CHECK(quantile({3, 1, 2, 4, 10, 5, 6, 7, 8, 9}, 0.9) == 9);
  CHECK(json_string("a\"b\\\n") == "\"a\\\"b\\\\\\u000a\"");
}

TEST_CASE("live addresses: loopback by default; another address only when allowed") {
  Listen l;
  CHECK(parse_listen("8080", false, l).empty());
  CHECK(l.host == "127.0.0.1");
  CHECK(l.port == 8080);
  CHECK(parse_listen("[::1]:0", false, l).empty());
  CHECK(l.host == "::1");
  CHECK(parse_listen("0.0.0.0:9000", false, l).find("not loopback") != std::string::npos);
  CHECK(parse_listen("0.0.0.0:9000", true, l).empty());
  CHECK(!parse_listen("x", false, l).empty());
  // A host name that starts like a loopback address is a name, resolved to whatever it names: not loopback.
  CHECK(parse_listen("127.example.org:9000", false, l).find("not loopback") != std::string::npos);
  CHECK(parse_listen("127.0.0.1.example.org:9000", false, l).find("not loopback") != std::string::npos);
  CHECK(parse_listen("127.1.2.3:0", false, l).empty());
  CHECK(parse_listen("[0:0:0:0:0:0:0:1]:0", false, l).empty());
  CHECK(parse_listen("::1", false, l).find("in brackets") != std::string::npos);  // was host ':', port 1
  CHECK(!parse_listen("127.0.0.1:70000", false, l).empty());
  CHECK(random_token().size() == 32);
  CHECK(random_token() != random_token());
}
