// One time origin for every output (docs/reports.md, "One time origin"): on real dumps, a step starts at the same
// time in the JSON report (hence the Markdown and HTML reports, written from the same analysis) as on the
// Perfetto trace's "Steps" track, and the analysis's origin is the trace's otherData.time_origin_monotonic_ns.
#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "export/perfetto.hpp"
#include "report/report.hpp"
#include "support/files.hpp"
#include "trace_event_check.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

using namespace inferscope;
namespace json = boost::json;

namespace {

struct StepSlice {
  double ts_ms = 0, dur_ms = 0;
  std::string name, kind;
};

/// The trace's "step" slices by index, and its origin.
std::map<uint64_t, StepSlice> step_slices(const json::value& trace) {
  std::map<uint64_t, StepSlice> out;
  for (const auto& e : trace.at("traceEvents").as_array()) {
    const auto& o = e.as_object();
    if (!o.contains("cat") || o.at("cat") != "step") continue;
    const auto& args = o.at("args").as_object();
    out[args.at("index").to_number<uint64_t>()] = {o.at("ts").to_number<double>() / 1000.0,
                                                   o.at("dur").to_number<double>() / 1000.0,
                                                   std::string(o.at("name").as_string()),
                                                   std::string(args.at("kind").as_string())};
  }
  return out;
}

/// The JSON report's start of the warm-up step `index` (the warm-up finding's example), or NaN.
double warmup_start_ms(const json::value& report, uint64_t index) {
  for (const auto& f : report.at("findings").as_array()) {
    if (f.at("bottleneck_type") != "warmup") continue;
    for (const auto& x : f.at("examples").as_array())
      if (x.at("what").as_string() == ("warm-up step " + std::to_string(index)).c_str()) return x.at("start_ms").to_number<double>();
  }
  return std::nan("");
}

}  // namespace

TEST_CASE("time origin: a step starts at the same time in the JSON report and in the Perfetto trace") {
  for (const std::string name : {"mt_batcher_poll", "llm_lm_head_misaligned", "real_io_wait", "real_sleep_wait"}) {
    CAPTURE(name);
    const std::string path = (testsupport::fixtures() / (name + ".iscope")).string();
    dump::DumpReader reader(path);
    const analyze::Analysis a = analyze::analyze_dump(reader, {});
    REQUIRE(a.steps.count > 0);
    std::ostringstream js, tr;
    report::write_json(a, js);
    exporter::write_perfetto(reader, tr, &a);
    const json::value report = json::parse(js.str()), trace = json::parse(tr.str());
    const auto c = report::testing::check_trace_events(tr.str());
    CHECK_MESSAGE(c.violation_count == 0, c.violation_count << " trace-event violations");

    // The origin: the analysis's (its representative step's start on the dump's clock, less its start_ms).
    const auto& rep = a.representative.step;
    const double origin = double(a.steps.spans.at(rep.index).start_ns) - rep.start_ms * 1e6;
    CHECK(std::fabs(origin - trace.at("otherData").at("time_origin_monotonic_ns").to_number<double>()) < 2.0);

    const auto steps = step_slices(trace);
    REQUIRE(steps.size() == a.steps.total);
    // The representative step (the one the report's timeline draws) ...
    const auto& jrep = report.at("representative").at("step");
    const uint64_t ri = jrep.at("index").to_number<uint64_t>();
    CHECK(std::fabs(steps.at(ri).ts_ms - jrep.at("start_ms").to_number<double>()) < 0.001);
    CHECK(std::fabs(steps.at(ri).dur_ms - jrep.at("duration_ms").to_number<double>()) < 0.001);
    // ... the slowest steps the report lists ...
    for (const auto& s : report.at("steps").at("slowest").as_array())
      CHECK(std::fabs(steps.at(s.at("index").to_number<uint64_t>()).ts_ms - s.at("start_ms").to_number<double>()) < 0.001);
    // ... and step 0, a warm-up step where the analysis left one out.
    if (a.steps.warmup > 0) {
      CHECK(steps.at(0).kind == "warm-up");
      CHECK(steps.at(0).name == "step 0 (warm-up)");
      const double w0 = warmup_start_ms(report, 0);
      if (!std::isnan(w0)) CHECK(std::fabs(steps.at(0).ts_ms - w0) < 0.001);
      MESSAGE(name << ": step 0 at " << steps.at(0).ts_ms << " ms in the trace, " << w0 << " ms in the JSON report");
    }
  }
}

TEST_CASE("time origin: without the analysis the trace finds the same origin") {
  const std::string path = (testsupport::fixtures() / "mt_batcher_poll.iscope").string();
  dump::DumpReader reader(path);
  const analyze::Analysis a = analyze::analyze_dump(reader, {});
  std::ostringstream alone, with;
  exporter::write_perfetto(reader, alone);
  exporter::write_perfetto(reader, with, &a);
  const auto o1 = json::parse(alone.str()).at("otherData").at("time_origin_monotonic_ns");
  const auto o2 = json::parse(with.str()).at("otherData").at("time_origin_monotonic_ns");
  CHECK(o1 == o2);
  CHECK(alone.str().find("\"cat\":\"step\"") == std::string::npos);  // no analysis, no steps
}
