// The trace-event checker (trace_event_check.hpp) on documents that break one rule each, then the Perfetto
// writer's output for every real dump in tests/fixtures, which must break none.
#include "dump/reader.hpp"
#include "export/perfetto.hpp"
#include "report/report.hpp"
#include "support/files.hpp"
#include "trace_event_check.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

using namespace inferscope;
using report::testing::check_trace_events;

namespace {

std::string doc(const std::string& events, const std::string& other = "{}") {
  return "{\"otherData\":" + other + ",\"traceEvents\":[" + events + "]}";
}

/// The violations of a document, joined, for a failure message.
std::string listed(const report::testing::TraceCheck& c) {
  std::string s;
  for (const auto& v : c.violations) s += v + "\n";
  return s;
}

}  // namespace

TEST_CASE("the trace-event checker passes a well-formed trace") {
  const auto c = check_trace_events(doc(
      R"({"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"main"}},)"
      R"({"ph":"X","name":"call","cat":"api","pid":1,"tid":2,"ts":0.5,"dur":2,"args":{"correlation":7}},)"
      R"({"ph":"s","name":"launch","cat":"launch","pid":1,"tid":2,"ts":1,"id":7},)"
      R"({"ph":"f","name":"launch","cat":"launch","pid":9,"tid":3,"ts":5,"id":7,"bp":"e"},)"
      R"({"ph":"B","name":"a","pid":1,"tid":2,"ts":3},{"ph":"E","pid":1,"tid":2,"ts":4},)"
      R"({"ph":"b","name":"r","cat":"async","pid":1,"tid":2,"ts":3,"id":"0x1"},)"
      R"({"ph":"e","name":"r","cat":"async","pid":1,"tid":4,"ts":9,"id":"0x1"},)"
      R"({"ph":"C","name":"x","pid":1,"tid":0,"ts":1,"args":{"value":1}},)"
      R"({"ph":"C","name":"x","pid":1,"tid":0,"ts":2,"args":{"value":1}},)"
      R"({"ph":"C","name":"x","pid":2,"tid":0,"ts":1,"args":{"value":1}})",
      R"({"generator":"test","process.a":"1"})"));
  CHECK_MESSAGE(c.violations.empty(), listed(c));
  CHECK(c.events == 11);
  CHECK(c.flows == 1);
  CHECK(c.counter_tracks == 2);
}

TEST_CASE("the trace-event checker finds each kind of violation") {
  const auto violations = [](const std::string& text) { return check_trace_events(text).violation_count; };
  // A key twice in otherData, in an event, in args.
  CHECK(violations(doc("", R"({"process.gpu.0.pcie_gen":"1","process.gpu.0.pcie_gen":"5"})")) == 1);
  CHECK(violations(doc(R"({"ph":"i","name":"m","pid":1,"pid":1,"ts":0})")) == 1);
  CHECK(violations(doc(R"({"ph":"i","name":"m","pid":1,"ts":0,"args":{"a":1,"b":2,"a":3}})")) == 1);
  // Times: negative, missing, a negative duration.
  CHECK(violations(doc(R"({"ph":"i","name":"m","pid":1,"ts":-0.001})")) == 1);
  CHECK(violations(doc(R"({"ph":"X","name":"m","pid":1,"dur":1})")) == 1);
  CHECK(violations(doc(R"({"ph":"X","name":"m","pid":1,"ts":1,"dur":-1})")) == 1);
  // Flows: a finish without its start, a start without its finish, a start twice.
  CHECK(violations(doc(R"({"ph":"f","name":"launch","cat":"launch","pid":1,"tid":1,"ts":1,"id":3,"bp":"e"})")) == 1);
  CHECK(violations(doc(R"({"ph":"s","name":"launch","cat":"launch","pid":1,"tid":1,"ts":1,"id":3})")) == 1);
  CHECK(violations(doc(R"({"ph":"s","name":"l","cat":"l","pid":1,"tid":1,"ts":1,"id":3},)"
                       R"({"ph":"s","name":"l","cat":"l","pid":1,"tid":1,"ts":2,"id":3},)"
                       R"({"ph":"f","name":"l","cat":"l","pid":1,"tid":1,"ts":3,"id":3})")) == 1);
  // A counter track going back, or staying, in time; another track of the same name in another process is
  // its own.
  CHECK(violations(doc(R"({"ph":"C","name":"x","pid":1,"ts":2,"args":{"value":1}},)"
                       R"({"ph":"C","name":"x","pid":2,"ts":1,"args":{"value":1}},)"
                       R"({"ph":"C","name":"x","pid":1,"ts":1,"args":{"value":2}})")) == 1);
  CHECK(violations(doc(R"({"ph":"C","name":"x","pid":1,"ts":2,"args":{"value":1}},)"
                       R"({"ph":"C","name":"x","pid":1,"ts":2,"args":{"value":2}})")) == 1);
  // B/E: an end with nothing open, a begin never ended, an end before its begin; async b/e likewise.
  CHECK(violations(doc(R"({"ph":"E","pid":1,"tid":1,"ts":1})")) == 1);
  CHECK(violations(doc(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1})")) == 1);
  CHECK(violations(doc(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":5},{"ph":"E","pid":1,"tid":1,"ts":4})")) == 1);
  CHECK(violations(doc(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1},{"ph":"E","pid":1,"tid":2,"ts":4})")) == 2);
  CHECK(violations(doc(R"({"ph":"b","name":"r","cat":"c","pid":1,"tid":1,"ts":1,"id":"0x1"})")) == 1);
  CHECK(violations(doc(R"({"ph":"e","name":"r","cat":"c","pid":1,"tid":1,"ts":1,"id":"0x1"})")) == 1);
  // Not a trace at all.
  CHECK(violations("{\"traceEvents\":[") == 1);
  CHECK(violations("{\"events\":[]}") == 1);
}

TEST_CASE("the Perfetto trace of every real dump in tests/fixtures is valid trace-event JSON") {
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testsupport::fixtures())) {
    if (entry.path().extension() != ".iscope") continue;
    const std::string name = entry.path().stem().string();
    CAPTURE(name);
    ++checked;
    dump::DumpReader r(entry.path().string());
    std::ostringstream out;
    exporter::write_perfetto(r, out);
    const auto c = check_trace_events(out.str());
    CHECK_MESSAGE(c.violation_count == 0, c.violation_count << " violations, the first:\n" << listed(c));
    CHECK(c.events > 500);
    // launch-to-kernel flows wherever the dump has GPU work (a launcher of ranks, mg_*.iscope, has none)
    bool gpu_work = false;
    r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t*) { gpu_work |= h.kind == RecordKind::kGpuKernel; });
    if (gpu_work) CHECK(c.flows > 0);
    MESSAGE(name << ": " << out.str().size() << " bytes, " << c.events << " events, " << c.flows << " flows, "
                 << c.counter_tracks << " counter tracks, " << c.counter_samples << " counter samples");
  }
  CHECK(checked >= 10);  // cuda_sample*, planted_h2d_bound, real_* (samples/validation)
}
