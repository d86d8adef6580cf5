#include "analyze/analyzer.hpp"
#include "dump/builder.hpp"
#include "dump/clock_model.hpp"
#include "export/perfetto_counters.hpp"
#include "export/perfetto.hpp"
#include "report/report.hpp"
#include "report_test_util.hpp"
#include "support/dump_builder.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;
namespace json = boost::json;

namespace {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / ("iscope-report-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

/// A small trace: one step on `main` with two launches, a kernel and a copy on the GPU, an async span that
/// ends on another thread, a Python call, a mark and two counters. Clock: 2.5 ticks per ns, like a TSC.
std::string build_trace() {
  const std::string path = temp_path("trace.iscope");
  dump::DumpBuilder b(path, 2.5);
  const uint32_t main = b.thread("main", 1234);
  const uint32_t worker = b.thread("worker <&\"x\">", 1240);
  const uint32_t gpu = b.channel("cupti");
  const uint32_t sys = b.channel("system");
  // A thread's records in the order they end, as the runtime writes them.
  b.api(main, "cudaLaunchKernel", 7, 1000, 1005);
  b.api(main, "cudaMemcpyAsync", 8, 1100, 1150);
  b.api(main, "cudaGetDevice", 0, 1160, 1161);
  b.range(main, "forward", 1, 500, 1200, {{"batch", 8}, {"model", "gpt2"}});
  b.mark(main, "batch_full", 1300);
  b.range(main, "bad \xff name", 1, 1400, 1500);
  b.range(main, "step", 0, 0, 2000);
  b.kernel(gpu, "gemm \"quoted\" \\ back", 7, 1010, 1900);
  b.memcpy(gpu, CopyKind::kHtoD, 1 << 20, 8, 1200, 1400);
  b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 500, 12345);
  b.counter_double(sys, "gpu.util_pct", CounterScope::kDevice, 0, 1500, 87.5);
  b.pycall(worker, b.code("Model.forward", "model.py", 42), 0, 300, 900);
  b.async_range(worker, "request 17", 17, 100, 1800, main, worker);
  b.finish();
  return path;
}

json::value perfetto(const std::string& path, std::string* text = nullptr) {
  dump::DumpReader r(path);
  std::ostringstream out;
  exporter::write_perfetto(r, out);
  if (text) *text = out.str();
  return json::parse(out.str());
}

std::string str(const json::value& v) { return std::string(v.as_string()); }
double num(const json::value& v) { return v.to_number<double>(); }

const json::object* find_event(const json::array& events, const char* ph, const std::string& name) {
  for (const auto& e : events)
    if (str(e.at("ph")) == ph && str(e.at("name")) == name) return &e.as_object();
  return nullptr;
}

}  // namespace

TEST_CASE("perfetto trace: CPU threads, GPU stream tracks, flows, counters and relative timestamps") {
  const std::string path = build_trace();
  std::string text;
  json::value root = perfetto(path, &text);
  std::filesystem::remove(path);
  CHECK(is_valid_utf8(text));
  CHECK(str(root.at("displayTimeUnit")) == "ns");
  const auto& ev = root.at("traceEvents").as_array();
  for (const auto& e : ev) {
    REQUIRE(e.as_object().contains("ph"));
    REQUIRE(e.as_object().contains("pid"));
  }

  // Thread and process names.
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<int64_t, std::string> process_names;
  for (const auto& e : ev) {
    if (str(e.at("ph")) != "M") continue;
    if (str(e.at("name")) == "thread_name")
      thread_names[{e.at("pid").to_number<int64_t>(), e.at("tid").to_number<int64_t>()}] = str(e.at("args").at("name"));
    if (str(e.at("name")) == "process_name") process_names[e.at("pid").to_number<int64_t>()] = str(e.at("args").at("name"));
  }
  CHECK(thread_names[{4242, 1234}] == "main");
  CHECK(thread_names[{4242, 1240}] == "worker <&\"x\">");
  CHECK(process_names[4242] == "synthetic");
  int64_t gpu_pid = -1;
  for (const auto& [pid, name] : process_names)
    if (name == "GPU 0") gpu_pid = pid;
  REQUIRE(gpu_pid >= 0);
  CHECK(gpu_pid != 4242);
  CHECK(thread_names[{gpu_pid, 7}] == "stream 7");

  // CPU ranges with attributes, at microseconds from the first event (the step at 0 ns).
  const auto* step = find_event(ev, "X", "step");
  REQUIRE(step);
  CHECK(step->at("pid").to_number<int64_t>() == 4242);
  CHECK(step->at("tid").to_number<int64_t>() == 1234);
  CHECK(std::abs(num(step->at("ts"))) < 1e-9);
  CHECK(num(step->at("dur")) == doctest::Approx(2.0).epsilon(0.001));
  const auto* fwd = find_event(ev, "X", "forward");
  REQUIRE(fwd);
  CHECK(num(fwd->at("ts")) == doctest::Approx(0.5).epsilon(0.002));
  CHECK(fwd->at("args").at("batch").to_number<int64_t>() == 8);
  CHECK(str(fwd->at("args").at("model")) == "gpt2");
  CHECK(fwd->at("args").at("depth").to_number<int64_t>() == 1);
  CHECK(find_event(ev, "X", "bad \xEF\xBF\xBD name"));

  // GPU kernel and copy on the stream track of the GPU pseudo-process.
  const auto* k = find_event(ev, "X", "gemm \"quoted\" \\ back");
  REQUIRE(k);
  CHECK(k->at("pid").to_number<int64_t>() == gpu_pid);
  CHECK(k->at("tid").to_number<int64_t>() == 7);
  CHECK(num(k->at("ts")) == doctest::Approx(1.010).epsilon(0.002));
  CHECK(num(k->at("dur")) == doctest::Approx(0.890).epsilon(0.002));
  CHECK(k->at("args").at("grid").as_array().size() == 3);
  CHECK(k->at("args").at("grid").at(0).to_number<int64_t>() == 128);
  CHECK(k->at("args").at("block").at(0).to_number<int64_t>() == 256);
  CHECK(k->at("args").at("correlation").to_number<int64_t>() == 7);
  const json::object* copy = nullptr;
  for (const auto& e : ev)
    if (str(e.at("ph")) == "X" && str(e.at("name")).find("Memcpy HtoD") == 0) copy = &e.as_object();
  REQUIRE(copy);
  CHECK(copy->at("args").at("bytes").to_number<int64_t>() == 1 << 20);
  CHECK(str(copy->at("args").at("src_kind")) == "pageable");
  CHECK(str(copy->at("args").at("dst_kind")) == "device");
  CHECK(str(copy->at("cat")) == "memcpy");

  // The launch API call on the CPU thread.
  const auto* launch = find_event(ev, "X", "cudaLaunchKernel");
  REQUIRE(launch);
  CHECK(launch->at("tid").to_number<int64_t>() == 1234);
  CHECK(num(launch->at("ts")) == doctest::Approx(1.0).epsilon(0.002));

  // Flows: one "s" per launch that reached the GPU, paired with an "f" (bp "e") of the same id.
  std::map<int64_t, const json::object*> starts, finishes;
  for (const auto& e : ev) {
    const std::string ph = str(e.at("ph"));
    if (ph == "s") starts[e.at("id").to_number<int64_t>()] = &e.as_object();
    if (ph == "f") finishes[e.at("id").to_number<int64_t>()] = &e.as_object();
  }
  CHECK(starts.size() == 2);
  CHECK(finishes.size() == 2);
  for (int64_t id : {7, 8}) {
    REQUIRE(starts.count(id));
    REQUIRE(finishes.count(id));
    CHECK(starts[id]->at("tid").to_number<int64_t>() == 1234);
    CHECK(finishes[id]->at("pid").to_number<int64_t>() == gpu_pid);
    CHECK(str(finishes[id]->at("bp")) == "e");
    CHECK(str(starts[id]->at("cat")) == str(finishes[id]->at("cat")));
    CHECK(num(starts[id]->at("ts")) <= num(finishes[id]->at("ts")));
  }
  // The flow start lies inside the launch call, its end inside the kernel.
  CHECK(num(starts[7]->at("ts")) >= num(launch->at("ts")));
  CHECK(num(starts[7]->at("ts")) <= num(launch->at("ts")) + num(launch->at("dur")));
  CHECK(num(finishes[7]->at("ts")) >= num(k->at("ts")));
  CHECK(num(finishes[7]->at("ts")) <= num(k->at("ts")) + num(k->at("dur")));

  // Counters.
  const auto* cpu = find_event(ev, "C", "mem.rss_bytes");
  REQUIRE(cpu);
  CHECK(cpu->at("pid").to_number<int64_t>() == 4242);
  CHECK(cpu->at("args").at("value").to_number<int64_t>() == 12345);
  CHECK(num(cpu->at("ts")) == doctest::Approx(0.5).epsilon(0.002));
  const auto* util = find_event(ev, "C", "gpu.util_pct");
  REQUIRE(util);
  CHECK(util->at("pid").to_number<int64_t>() == gpu_pid);
  CHECK(num(util->at("args").at("value")) == 87.5);

  // Mark, Python call, async span across threads.
  const auto* mark = find_event(ev, "i", "batch_full");
  REQUIRE(mark);
  CHECK(num(mark->at("ts")) == doctest::Approx(1.3).epsilon(0.002));
  const auto* py = find_event(ev, "X", "Model.forward");
  REQUIRE(py);
  CHECK(py->at("tid").to_number<int64_t>() == 1240);
  CHECK(str(py->at("args").at("file")) == "model.py");
  CHECK(py->at("args").at("line").to_number<int64_t>() == 42);
  const auto* ab = find_event(ev, "b", "request 17");
  const auto* ae = find_event(ev, "e", "request 17");
  REQUIRE(ab);
  REQUIRE(ae);
  CHECK(str(ab->at("id")) == str(ae->at("id")));
  CHECK(ab->at("tid").to_number<int64_t>() == 1234);
  CHECK(ae->at("tid").to_number<int64_t>() == 1240);
  CHECK(num(ae->at("ts")) - num(ab->at("ts")) == doctest::Approx(1.7).epsilon(0.002));

  // A channel with only GPU records or counters gets no CPU track of its own.
  for (const auto& [key, name] : thread_names) CHECK(name != "cupti");
}

// A malformed record ends its chunk in every reader of records (dump::visit_records_past_damage): the trace holds
// what came before it, as the report does. It used to refuse the whole trace, so --perfetto wrote nothing while the
// report of the same dump was written (issue 43, "one damaged dump, one answer").
TEST_CASE("perfetto writer skips the rest of a chunk after a malformed record and writes the rest") {
  const std::string path = temp_path("bad.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t main = b.thread("main", 1);
    b.range(main, "ok", 0, 0, 10);
    RangeRecord r{{RecordKind::kRange, 0, 200}, b.str("liar"), b.ticks(0), b.ticks(5)};  // claims 200 bytes
    b.raw(main, &r, sizeof(r));
    b.finish();
  }
  dump::DumpReader reader(path);
  std::ostringstream out;
  CHECK_NOTHROW(exporter::write_perfetto(reader, out));
  CHECK(out.str().find("\"ok\"") != std::string::npos);
  CHECK(out.str().find("\"liar\"") == std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("perfetto trace of a dump without events is valid and empty") {
  const std::string path = temp_path("empty.iscope");
  {
    dump::DumpBuilder b(path);
    b.thread("main", 1);
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  for (const auto& e : root.at("traceEvents").as_array()) CHECK(str(e.at("ph")) == "M");
}

TEST_CASE("the dump reader skips a string id beyond the entries the file declares, sizing nothing by it") {
  const std::string path = temp_path("bigid.iscope");
  {
    std::ofstream f(path, std::ios::binary);
    auto fh = dump::make_file_header();
    f.write(reinterpret_cast<const char*>(&fh), sizeof fh);
    dump::ChunkBuilder s(dump::ChunkType::kStrings);
    s.add_string(100'000'000, "far");  // would make the table allocate gigabytes
    auto bytes = s.finish();
    f.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  // One entry declared: id 100,000,000 is skipped and counted, never used to size the table.
  dump::DumpReader r(path);
  CHECK(r.string_count() <= 1);
  CHECK_FALSE(r.has_string(100'000'000));
  REQUIRE(r.id_warnings().size() == 1);
  CHECK(r.id_warnings()[0].find("1 string entries with ids beyond the 1 strings the file declares") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("the clock model stays defined on corrupt calibration") {
  std::vector<dump::CalibrationPoint> pts = {{0, ~0ull, 0, 0, 0}, {1, 0, ~0ull, 0, 0}, {~0ull, 5, 5, 0, 0}};
  dump::ClockModel m(pts);
  for (uint64_t t : {0ull, 1ull, ~0ull, 1ull << 63}) {
    const int64_t ns = m.to_ns(t);
    CHECK(ns > INT64_MIN / 2);
    CHECK(ns < INT64_MAX / 2 + INT64_MAX / 4);
    (void)m.to_realtime_ns(t);  // must not overflow (checked by UBSan builds)
  }
}

TEST_CASE("perfetto otherData holds one value per key, the latest, in the order keys first appear") {
  const std::string path = temp_path("info.iscope");
  {
    dump::DumpBuilder b(path);
    b.thread("main", 1);
    // As on real H100 dumps: the system collector rewrites the PCIe link and the thread names as they change.
    b.process("gpu.0.pcie_gen", "1");
    b.process("os_thread.77.name", "python3");
    b.process("gpu.0.pcie_gen", "5");
    b.process("os_thread.77.name", "bg-hog");
    b.finish();
  }
  std::string text;
  json::value root = perfetto(path, &text);
  std::filesystem::remove(path);
  // boost::json keeps one of a repeated key silently: count the key in the text itself.
  size_t count = 0;
  for (size_t at = text.find("\"process.gpu.0.pcie_gen\""); at != std::string::npos;
       at = text.find("\"process.gpu.0.pcie_gen\"", at + 1))
    ++count;
  CHECK(count == 1);
  const auto& od = root.at("otherData").as_object();
  CHECK(str(od.at("process.gpu.0.pcie_gen")) == "5");
  CHECK(str(od.at("process.os_thread.77.name")) == "bg-hog");
  std::vector<std::string> keys;
  for (const auto& kv : od)
    if (kv.key().starts_with("process.gpu") || kv.key().starts_with("process.os_thread")) keys.emplace_back(kv.key());
  CHECK(keys == std::vector<std::string>{"process.gpu.0.pcie_gen", "process.os_thread.77.name"});
}

TEST_CASE("perfetto launch flows: one start and one finish per correlation id, only where both ends are traced") {
  const std::string path = temp_path("flows.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t main = b.thread("main", 10);
    const uint32_t gpu = b.channel("cupti");
    b.api(main, "cudaLaunchKernel", 21, 100, 110);  // its kernel and a second activity under the same id
    b.api(main, "cudaLaunchKernel", 22, 200, 210);  // its work is not in the dump
    b.kernel(gpu, "k", 21, 150, 300);
    b.memset(gpu, 64, 21, 310, 320);
    b.sync(gpu, SyncKind::kStreamSynchronize, 23, 400, 500);  // a call CUPTI saw but the dump does not hold
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  std::map<std::pair<std::string, int64_t>, int> count;  // (ph, id) -> events
  for (const auto& e : root.at("traceEvents").as_array()) {
    const std::string ph = str(e.at("ph"));
    if (ph == "s" || ph == "f") ++count[{ph, e.at("id").to_number<int64_t>()}];
  }
  CHECK(count == std::map<std::pair<std::string, int64_t>, int>{{{"s", 21}, 1}, {{"f", 21}, 1}});
  // The activities without an arrow still say which call they belong to.
  const auto& ev = root.at("traceEvents").as_array();
  const auto* sync = find_event(ev, "X", "Stream synchronize");
  REQUIRE(sync);
  CHECK(sync->at("args").at("correlation").to_number<int64_t>() == 23);
  const auto* ms = find_event(ev, "X", "Memset (device)");
  REQUIRE(ms);
  CHECK(ms->at("args").at("correlation").to_number<int64_t>() == 21);
}

namespace {

/// Counter samples by track name: (ts µs, value), in file order.
std::map<std::string, std::vector<std::pair<double, double>>> counter_tracks(const json::value& root) {
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (const auto& e : root.at("traceEvents").as_array())
    if (str(e.at("ph")) == "C") out[str(e.at("name"))].emplace_back(num(e.at("ts")), num(e.at("args").at("value")));
  return out;
}

using Samples = std::vector<std::pair<double, double>>;

}  // namespace

TEST_CASE("perfetto per-thread counters: one track per OS thread, named by the thread") {
  const std::string path = temp_path("threads.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t main = b.thread("main", 1234);
    const uint32_t sys = b.channel("system");
    b.process("os_thread.1240.name", "worker");
    b.range(main, "step", 0, 0, 100'000'000);
    // main before the session knew it (by OS tid), then by its dump id: one series. The worker never records.
    b.counter(sys, "thread.sched.run_ns", CounterScope::kOsThread, 1234, 0, 1'000'000);
    b.counter(sys, "thread.sched.run_ns", CounterScope::kOsThread, 1240, 0, 900'000'000);
    b.counter(sys, "thread.sched.run_ns", CounterScope::kThread, main, 10'000'000, 6'000'000);
    b.counter(sys, "thread.sched.run_ns", CounterScope::kOsThread, 1240, 10'000'000, 900'000'000);
    b.counter(sys, "thread.sched.run_ns", CounterScope::kThread, main, 20'000'000, 6'000'000);
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  const auto tracks = counter_tracks(root);
  // main: 5 ms over 10 ms, then idle; the worker idle throughout. Neither track holds the other's values.
  CHECK(tracks.at("thread.sched.run_ns [ms/s] (main 1234)") == Samples{{0, 500}, {10'000, 0}});
  CHECK(tracks.at("thread.sched.run_ns [ms/s] (worker 1240)") == Samples{{0, 0}});
  CHECK(tracks.size() == 2);
}

TEST_CASE("perfetto thread states: named slices on a state track beside the thread, not ASCII codes") {
  const std::string path = temp_path("states.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t main = b.thread("main", 1234);
    const uint32_t sys = b.channel("system");
    b.range(main, "step", 0, 0, 100'000);
    b.counter(sys, "thread.state", CounterScope::kThread, main, 0, 'R');
    b.counter(sys, "thread.state", CounterScope::kThread, main, 10'000, 'R');  // keep-alive
    b.counter(sys, "thread.state", CounterScope::kThread, main, 20'000, 'S');
    b.counter(sys, "thread.state", CounterScope::kOsThread, 1234, 30'000, 'D');
    b.counter(sys, "thread.state", CounterScope::kThread, main, 40'000, 'D');
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  const auto& ev = root.at("traceEvents").as_array();
  int64_t state_tid = -1;
  for (const auto& e : ev)
    if (str(e.at("ph")) == "M" && str(e.at("name")) == "thread_name" &&
        str(e.at("args").at("name")) == "main 1234 · state")
      state_tid = e.at("tid").to_number<int64_t>();
  REQUIRE(state_tid > 0);
  CHECK(state_tid != 1234);
  std::vector<std::tuple<std::string, double, double>> slices;
  for (const auto& e : ev) {
    CHECK(str(e.at("ph")) != "C");  // no counter of raw codes (82, 83)
    if (str(e.at("ph")) == "X" && e.at("tid").to_number<int64_t>() == state_tid)
      slices.emplace_back(str(e.at("name")), num(e.at("ts")), num(e.at("dur")));
  }
  CHECK(slices == std::vector<std::tuple<std::string, double, double>>{
                      {"R (running)", 0, 20}, {"S (sleeping)", 20, 10}, {"D (disk sleep)", 30, 10}});
  CHECK(exporter::perfetto::thread_state_name('I') == "I (idle)");
  CHECK(exporter::perfetto::thread_state_name(1) == "state 1");
}

TEST_CASE("perfetto cumulative counters: rates per second with the unit in the track name") {
  const std::string path = temp_path("rates.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t sys = b.channel("system");
    b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, 0, 0);
    b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, 10'000'000, 5'000'000);   // 5 ms in 10 ms
    b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, 20'000'000, 15'000'000);  // 10 ms in 10 ms
    b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, 40'000'000, 35'000'000);  // the same rate, longer
    b.counter(sys, "ctx.voluntary", CounterScope::kProcess, 0, 0, 100);
    b.counter(sys, "ctx.voluntary", CounterScope::kProcess, 0, 500'000'000, 150);      // 50 in 0.5 s
    b.counter(sys, "ctx.voluntary", CounterScope::kProcess, 0, 600'000'000, 3);        // reset: not negative
    b.counter(sys, "numa.numa_hit", CounterScope::kNumaNode, 1, 0, 0);
    b.counter(sys, "numa.numa_hit", CounterScope::kNumaNode, 1, 1'000'000'000, 4096);
    b.counter(sys, "psi.cpu.some_us", CounterScope::kMachine, 0, 0, 0);
    b.counter(sys, "psi.cpu.some_us", CounterScope::kMachine, 0, 100'000'000, 25'000);  // 25 ms in 100 ms
    b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 0, 4096);               // a level stays a level
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  const auto tracks = counter_tracks(root);
  // Each rate holds from the interval's first sample; the track returns to 0 at its last sample.
  CHECK(tracks.at("cpu.user_ns [ms/s]") == Samples{{0, 500}, {10'000, 1000}, {40'000, 0}});
  CHECK(tracks.at("ctx.voluntary [switches/s]") == Samples{{0, 100}, {500'000, 0}});
  CHECK(tracks.at("numa.numa_hit [pages/s] (NUMA node 1)") == Samples{{0, 4096}, {1'000'000, 0}});
  CHECK(tracks.at("psi.cpu.some_us [ms/s] (machine)") == Samples{{0, 250}, {100'000, 0}});
  CHECK(tracks.at("mem.rss_bytes") == Samples{{0, 4096}});
  CHECK_FALSE(tracks.count("cpu.user_ns"));
}

TEST_CASE("perfetto counters: a sample equal to what its track shows is not written again") {
  const std::string path = temp_path("unchanged.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t sys = b.channel("system");
    // Keep-alives of a level once a second, and two values at one instant (the later one holds).
    for (int s = 0; s < 5; ++s) b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, s * 1'000'000'000LL, 4096);
    b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 5'000'000'000LL, 1);
    b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 5'000'000'000LL, 8192);
    b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 6'000'000'000LL, 8192);
    b.counter(sys, "mem.rss_bytes", CounterScope::kProcess, 0, 5'500'000'000LL, 2);  // out of order: left out
    b.finish();
  }
  json::value root = perfetto(path);
  std::filesystem::remove(path);
  // The first value, the change, and the last sample (where the series ends).
  CHECK(counter_tracks(root).at("mem.rss_bytes") == Samples{{0, 4096}, {5'000'000, 8192}, {6'000'000, 8192}});
}

TEST_CASE("perfetto kernels: the short name on every event, the full name once, in the first event's args") {
  const std::string full =
      "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>, "
      "at::detail::Array<char*, 3>>(int, at::native::AddFunctor<c10::Half>, at::detail::Array<char*, 3>)";
  const std::string other =
      "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
      "at::detail::Array<char*, 3>>(int, at::native::MulFunctor<float>, at::detail::Array<char*, 3>)";
  const std::string path = temp_path("kernels.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t main = b.thread("main", 1);
    const uint32_t gpu = b.channel("cupti");
    b.range(main, "step", 0, 0, 10'000);
    b.kernel(gpu, full, 0, 100, 200);
    b.kernel(gpu, other, 0, 300, 400);
    b.kernel(gpu, full, 0, 500, 600);
    b.kernel(gpu, "ampere_fp16_gemm", 0, 700, 800);
    b.finish();
  }
  std::string text;
  json::value root = perfetto(path, &text);
  std::filesystem::remove(path);
  std::vector<std::pair<std::string, std::string>> kernels;  // (name, args.full_name)
  for (const auto& e : root.at("traceEvents").as_array())
    if (str(e.at("ph")) == "X" && str(e.at("cat")) == "kernel") {
      const auto* f = e.at("args").as_object().if_contains("full_name");
      kernels.emplace_back(str(e.at("name")), f ? str(*f) : "");
    }
  CHECK(kernels == std::vector<std::pair<std::string, std::string>>{
                       {"vectorized_elementwise_kernel<4, AddFunctor<…>, Array<…>>", full},
                       {"vectorized_elementwise_kernel<4, MulFunctor<…>, Array<…>>", other},
                       {"vectorized_elementwise_kernel<4, AddFunctor<…>, Array<…>>", ""},
                       {"ampere_fp16_gemm", ""}});
  CHECK(count(text, full) == 1);
}

TEST_CASE("perfetto rates carry the decimals that tell one count from the next, no more") {
  const std::string path = temp_path("precision.iscope");
  {
    dump::DumpBuilder b(path);
    const uint32_t sys = b.channel("system");
    b.counter(sys, "cpu.system_ns", CounterScope::kProcess, 0, 0, 0);
    b.counter(sys, "cpu.system_ns", CounterScope::kProcess, 0, 10'000'000, 5'000'001);  // 1 ns = 0.0001 ms/s here
    b.counter(sys, "cpu.system_ns", CounterScope::kProcess, 0, 40'000'000, 5'000'004);  // 3 ns in 30 ms
    b.finish();
  }
  std::string text;
  json::value root = perfetto(path, &text);
  std::filesystem::remove(path);
  CHECK(text.find("\"value\":500.0001}") != std::string::npos);
  CHECK(text.find("\"value\":0.0001}") != std::string::npos);  // 3 ns in 30 ms: 5 decimals, one count 0.0000333
  CHECK(counter_tracks(root).at("cpu.system_ns [ms/s]") == Samples{{0, 500.0001}, {10'000, 0.0001}, {40'000, 0}});
}

TEST_CASE("perfetto run trace: the ranks of one run on one time line, a lane per rank, flows kept apart") {
  // Two ranks, each numbering its GPUs and its correlation ids from 0 and 1; rank 1 launches 5 us after rank 0.
  auto rank_dump = [](const char* name, const char* rank, uint32_t pid, int64_t at) {
    const std::string path = temp_path(name);
    dump::DumpBuilder b(path);
    b.process("rank", rank);
    const uint32_t main = b.thread("MainThread", pid);
    const uint32_t gpu = b.channel("cupti");
    b.api(main, "cudaLaunchKernel", 21, at, at + 50);
    b.range(main, "step", 0, at - 100, at + 1200);
    b.kernel(gpu, std::string("allreduce r") + rank, 21, at + 100, at + 1100);
    b.finish();
    return path;
  };
  const std::string a = rank_dump("rank0.iscope", "0", 100, 1000), b = rank_dump("rank1.iscope", "1", 200, 6000);
  dump::DumpReader ra(a), rb(b);
  std::ostringstream out;
  exporter::write_perfetto_run({{&ra, "rank 0"}, {&rb, "rank 1"}}, out);
  const json::value root = json::parse(out.str());
  CHECK(root.at("otherData").at("sources").as_array().size() == 2);
  const auto& ev = root.at("traceEvents").as_array();
  std::map<int64_t, std::string> process;
  for (const auto& e : ev)
    if (str(e.at("ph")) == "M" && str(e.at("name")) == "process_name")
      process[e.at("pid").to_number<int64_t>()] = str(e.at("args").at("name"));
  // The builder gives both processes' threads pid 4242, as two containers may: the second gets another pid.
  std::set<std::string> cpu_lanes;
  for (auto& [pid, name] : process)
    if (!name.ends_with("GPU 0")) cpu_lanes.insert(name.substr(0, 6));
  CHECK(cpu_lanes == std::set<std::string>{"rank 0", "rank 1"});
  const auto* k0 = find_event(ev, "X", "allreduce r0");
  const auto* k1 = find_event(ev, "X", "allreduce r1");
  REQUIRE(k0);
  REQUIRE(k1);
  // Both ranks' device 0, each its own lane, named with its rank.
  const int64_t g0 = k0->at("pid").to_number<int64_t>(), g1 = k1->at("pid").to_number<int64_t>();
  CHECK(g0 != g1);
  CHECK(process.at(g0) == "rank 0 · GPU 0");
  CHECK(process.at(g1) == "rank 1 · GPU 0");
  // One origin: rank 1's kernel 5 us after rank 0's, as recorded (each trace alone would start both at 0).
  CHECK(num(k1->at("ts")) - num(k0->at("ts")) == doctest::Approx(5.0));
  // Correlation id 21 in both processes: two arrows, each from its own launch to its own kernel.
  std::map<int64_t, std::set<int64_t>> pids_of_flow;
  for (const auto& e : ev) {
    const std::string ph = str(e.at("ph"));
    if (ph == "s" || ph == "f") pids_of_flow[e.at("id").to_number<int64_t>()].insert(e.at("pid").to_number<int64_t>());
  }
  REQUIRE(pids_of_flow.size() == 2);
  for (auto& [id, pids] : pids_of_flow) {  // each arrow joins a rank's CPU lane to the same rank's GPU lane
    REQUIRE(pids.size() == 2);
    const int64_t cpu = *pids.begin(), gpu = *pids.rbegin();
    REQUIRE(process.count(cpu));
    REQUIRE(process.count(gpu));
    CHECK(process.at(cpu).substr(0, 6) == process.at(gpu).substr(0, 6));
  }
  // One dump: the run trace is that dump's own trace.
  std::ostringstream one, alone;
  exporter::write_perfetto_run({{&ra, "rank 0"}}, one);
  exporter::write_perfetto(ra, alone);
  CHECK(one.str() == alone.str());
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST_CASE("perfetto run trace: a rank of another host is moved onto the reference host's clock by its offset") {
  // Rank 1's host's clock reads 3.7 s more than rank 0's: its kernel, 5 us after rank 0's in truth, is recorded at
  // 3.7 s + 5 us. Given the offset (RunAnalysis::host_clocks), the trace puts it 5 us after, on one origin.
  auto rank_dump = [](const char* name, const char* rank, int64_t at) {
    const std::string path = temp_path(name);
    dump::DumpBuilder b(path);
    b.process("rank", rank);
    const uint32_t main = b.thread("MainThread", 100);
    const uint32_t gpu = b.channel("cupti");
    b.range(main, "step", 0, at - 100, at + 1200);
    b.kernel(gpu, std::string("allreduce r") + rank, 21, at + 100, at + 1100);
    b.finish();
    return path;
  };
  constexpr int64_t kOffset = 3'700'000'000;
  const std::string a = rank_dump("host0_rank0.iscope", "0", 1000), b = rank_dump("host1_rank1.iscope", "1", 6000 + kOffset);
  dump::DumpReader ra(a), rb(b);
  std::ostringstream out;
  exporter::write_perfetto_run({{&ra, "rank 0", nullptr, 0, 0}, {&rb, "rank 1", nullptr, 0, kOffset}}, out);
  const json::value root = json::parse(out.str());
  const auto& ev = root.at("traceEvents").as_array();
  const auto* k0 = find_event(ev, "X", "allreduce r0");
  const auto* k1 = find_event(ev, "X", "allreduce r1");
  REQUIRE(k0);
  REQUIRE(k1);
  CHECK(num(k1->at("ts")) - num(k0->at("ts")) == doctest::Approx(5.0));
  CHECK(num(k0->at("ts")) == doctest::Approx(0.2));  // the origin is rank 0's first record, not 3.7 s before it
  // without the offset the ranks sit 3.7 s apart, as recorded
  std::ostringstream apart;
  exporter::write_perfetto_run({{&ra, "rank 0"}, {&rb, "rank 1"}}, apart);
  const json::value r2 = json::parse(apart.str());
  const auto* a1 = find_event(r2.at("traceEvents").as_array(), "X", "allreduce r1");
  REQUIRE(a1);
  CHECK(num(a1->at("ts")) > 3.6e6);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST_CASE("perfetto run trace: each rank's steps on a Steps track of its own process, on the one time origin") {
  auto rank_dump = [](const char* name, const char* rank, int64_t at) {
    const std::string path = temp_path(name);
    dump::DumpBuilder b(path);
    b.process("rank", rank);
    const uint32_t main = b.thread("MainThread", 100);
    b.range(main, "step", 0, at, at + 1000);
    b.range(main, "step", 0, at + 1000, at + 3000);
    b.finish();
    return path;
  };
  // Rank 1 starts its steps 5 us after rank 0; its second step is the one its reports draw.
  const std::string a = rank_dump("steps_rank0.iscope", "0", 1000), b = rank_dump("steps_rank1.iscope", "1", 6000);
  dump::DumpReader ra(a), rb(b);
  // As the analyzer gives them: the steps' windows on the dump's clock in ns (CLOCK_MONOTONIC).
  auto stats = [](const dump::DumpReader& r, int64_t at) {
    const dump::ClockModel clock(r.calibration());
    analyze::StepStats st;
    st.name = "step";
    st.count = st.total = 2;
    const auto ns = [&](int64_t t) { return clock.to_ns(1'000'000'000ull + uint64_t(t)); };  // the builder's ticks
    st.spans = {{ns(at), ns(at + 1000), 1}, {ns(at + 1000), ns(at + 3000), 1}};
    return st;
  };
  const analyze::StepStats s0 = stats(ra, 1000), s1 = stats(rb, 6000);
  std::ostringstream out;
  exporter::write_perfetto_run({{&ra, "rank 0", &s0, 0}, {&rb, "rank 1", &s1, 1}}, out);
  const json::value root = json::parse(out.str());
  const auto& ev = root.at("traceEvents").as_array();
  std::map<int64_t, std::string> process;
  std::set<int64_t> step_track_pids;
  for (const auto& e : ev) {
    if (str(e.at("ph")) != "M") continue;
    if (str(e.at("name")) == "process_name") process[e.at("pid").to_number<int64_t>()] = str(e.at("args").at("name"));
    if (str(e.at("name")) == "thread_name" && str(e.at("args").at("name")) == "Steps (step)")
      step_track_pids.insert(e.at("pid").to_number<int64_t>());
  }
  REQUIRE(step_track_pids.size() == 2);  // one track per rank, each in its own process
  std::map<std::string, std::vector<std::pair<double, std::string>>> steps;  // rank -> (ts us, name)
  for (const auto& e : ev)
    if (str(e.at("ph")) == "X" && str(e.at("cat")) == "step") {
      const int64_t pid = e.at("pid").to_number<int64_t>();
      REQUIRE(step_track_pids.count(pid));
      steps[process.at(pid).substr(0, 6)].emplace_back(num(e.at("ts")), str(e.at("name")));
      CHECK((e.at("args").as_object().contains("representative") ==
             (process.at(pid).starts_with("rank 1") ? str(e.at("name")) == "step 1" : str(e.at("name")) == "step 0")));
    }
  REQUIRE(steps.size() == 2);
  REQUIRE(steps.at("rank 0").size() == 2);
  REQUIRE(steps.at("rank 1").size() == 2);
  // The shared origin is rank 0's first record: its steps at 0 and 1 us, rank 1's 5 us later.
  CHECK(steps.at("rank 0")[0].first == doctest::Approx(0.0));
  CHECK(steps.at("rank 0")[1].first == doctest::Approx(1.0));
  CHECK(steps.at("rank 1")[0].first == doctest::Approx(5.0));
  CHECK(steps.at("rank 1")[1].first == doctest::Approx(6.0));
  // Without the ranks' steps, no Steps track (as before).
  std::ostringstream bare;
  exporter::write_perfetto_run({{&ra, "rank 0"}, {&rb, "rank 1"}}, bare);
  CHECK(bare.str().find("\"cat\":\"step\"") == std::string::npos);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

namespace {

// A loop of 40 steps on `main`: 3 ms each, and the steps `slow` picks 60 ms (a host wait).
std::string loop_dump(const char* name, const std::function<bool(int)>& slow) {
  const std::string path = temp_path(name);
  dump::DumpBuilder b(path);
  testsupport::Sim sim(b);
  for (int i = 0; i < 40; ++i) {
    sim.range("step", [&] {
      sim.host((slow(i) ? 60'000 : 2'500 + (i * 37 % 11) * 10) * int64_t(1'000));
      sim.launch("gemm_kernel", 400'000);
      sim.sync("cudaStreamSynchronize");
    });
    sim.host(100'000);
  }
  b.finish();
  return path;
}

// The Steps track's slow steps: the indexes of the slices named "step N (slow)".
std::vector<uint32_t> slow_slices(const std::string& path, const analyze::Analysis& a) {
  dump::DumpReader r(path);
  std::ostringstream out;
  exporter::write_perfetto(r, out, &a);
  std::vector<uint32_t> slow;
  const json::value root = json::parse(out.str());  // alive for the loop (a temporary in its range would not be)
  for (const auto& e : root.at("traceEvents").as_array())
    if (str(e.at("ph")) == "X" && str(e.at("cat")) == "step" && str(e.at("args").at("kind")) == "slow")
      slow.push_back(uint32_t(e.at("args").at("index").to_number<int64_t>()));
  return slow;
}

}  // namespace

TEST_CASE("perfetto Steps track: the slow steps are the report's outliers, none where the steps have two modes") {
  // Two modes: 3 of every 10 steps wait. The report counts no outlier (the slow mode is a state of the run, and
  // the headline is the mean); the trace used to mark all 12 slow, as each is above the outlier bound.
  const std::string two = loop_dump("two_modes.iscope", [](int i) { return i % 10 >= 7; });
  const analyze::Analysis a = analyze::analyze_file(two, {});
  REQUIRE_FALSE(a.steps.alike);
  REQUIRE(a.steps.outlier_bound_ms > 0);
  CHECK(a.steps.outlier_indexes.empty());
  CHECK(slow_slices(two, a).empty());
  // One slow step among alike ones: the trace marks it, and only it.
  const std::string one = loop_dump("one_slow.iscope", [](int i) { return i == 25; });
  const analyze::Analysis b = analyze::analyze_file(one, {});
  REQUIRE(b.steps.outlier_indexes == std::vector<uint32_t>{25});
  CHECK(slow_slices(one, b) == std::vector<uint32_t>{25});
  std::filesystem::remove(two);
  std::filesystem::remove(one);
}
