// Chrome-trace inputs (lib/import/chrome_trace.cpp): torch.profiler (Kineto) exports planted with one
// bottleneck each (tests/fixtures/kineto_*, written by make_kineto_fixtures.py), gzip detected by content,
// InferScope's own --perfetto output, and bad inputs with the file and the offset or field named.
#include "support/files.hpp"
#include "analyze/analyzer.hpp"
#include "scenarios.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace inferscope;
using analyze::Analysis;

namespace {

using testsupport::read;
using testsupport::write;
using testsupport::fixtures;

fs::path work_dir() {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work-kineto";
  fs::create_directories(d);
  return d;
}


int run_cli(const std::string& args, std::string* err = nullptr, std::string* out = nullptr) {
  fs::path e = work_dir() / "cli.err", o = work_dir() / "cli.out";
  std::string cmd = std::string(ISCOPE_ANALYZE_EXE) + " " + args + " >" + o.string() + " 2>" + e.string();
  int rc = std::system(cmd.c_str());
  if (err) *err = read(e);
  if (out) *out = read(o);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool has_warning(const Analysis& a, const std::string& text) {
  for (auto& w : a.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

std::string primary(const Analysis& a) { return a.findings.empty() ? "(none)" : a.findings.front().category; }

// The message of the InputError that analysing `p` throws ("" when none is thrown).
std::string input_error(const fs::path& p) {
  try {
    analyze::analyze_file(p.string(), {});
  } catch (const analyze::InputError& e) {
    return e.what();
  }
  return "";
}

// A minimal Kineto trace around `events` (comma-separated trace events).
std::string kineto(const std::string& events) {
  return R"({"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms", "traceEvents": [)" + events +
         R"(], "traceName": "t.json"})";
}

}  // namespace

TEST_CASE("torch.profiler trace, sync-bound decode loop: ProfilerStep#N are the steps, launches link to kernels") {
  const fs::path p = fixtures() / "kineto_sync_bound.json";
  Analysis a = analyze::analyze_file(p.string(), {});
  CHECK(a.source_format == "kineto");
  CHECK(a.steps.name == "ProfilerStep");
  CHECK(a.steps.count == 5);
  CHECK(primary(a) == "sync_bound");
  REQUIRE(!a.kernels.empty());
  CHECK(a.kernels.front().count == 20);
  // Linked: the launcher label names the Python function and the op around the cudaLaunchKernel.
  CHECK(a.kernels.front().launched_by.find("decode_token (decode.py:31)") != std::string::npos);
  CHECK(a.kernels.front().launched_by.find("aten::mm") != std::string::npos);
  CHECK(a.alignment.kernels_checked >= 20);
  CHECK(a.alignment.ok);
  REQUIRE(!a.syncs.empty());
  CHECK(a.syncs.front().kind == "cudaStreamSynchronize");
  CHECK(a.syncs.front().called_from.find("item (_tensor.py:1118)") != std::string::npos);
  CHECK(a.syncs.front().count == 20);
  CHECK(a.process["gpu.0.name"] == "NVIDIA H100 80GB HBM3");
  CHECK(a.process["gpu.0.compute_capability"] == "9.0");
  CHECK(a.process["source_format"] == "kineto");
  // What Kineto does not record is said; the GPU-side copies of the step annotation are counted.
  CHECK(has_warning(a, "records no per-thread CPU time"));
  CHECK(has_warning(a, "5 GPU-side annotation(s) (gpu_user_annotation) were skipped"));
  CHECK(!has_warning(a, "pageable or pinned"));  // every copy's name says "(Device -> Pageable)"
}

TEST_CASE("torch.profiler trace, gzipped by content: launch-bound small MLP") {
  // The name says .json.gz, but a copy named .json must analyse the same: gzip is found by its magic.
  const fs::path gz = fixtures() / "kineto_launch_bound.json.gz";
  const fs::path renamed = work_dir() / "launch_bound_really_gzip.json";
  fs::copy_file(gz, renamed, fs::copy_options::overwrite_existing);
  for (const fs::path& p : {gz, renamed}) {
    CAPTURE(p);
    Analysis a = analyze::analyze_file(p.string(), {});
    CHECK(a.source_format == "kineto");
    CHECK(a.steps.name == "ProfilerStep");
    CHECK(a.steps.count == 5);
    CHECK(primary(a) == "launch_bound");
    REQUIRE(!a.kernels.empty());
    CHECK(a.kernels.front().count == 500);
    CHECK(a.kernels.front().launched_by.find("forward (mlp.py:22)") != std::string::npos);
    REQUIRE(!a.copies.empty());
    CHECK(a.copies.front().count == 5);
    CHECK(a.copies.front().bytes == 5 * 65536);
  }
  std::string err, out;
  CHECK(run_cli(renamed.string() + " --findings", &err, &out) == 0);
  CHECK(out.find("launch_bound primary=1") != std::string::npos);
  CHECK(err.find("records no per-thread CPU time") != std::string::npos);
}

TEST_CASE("torch.profiler trace: correlation from ac2g flows, copy kinds from names, unknown host memory said") {
  const fs::path p = work_dir() / "flows.json";
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double s = 1000.0 + i * 1000;
    const std::string id = std::to_string(50 + i), ts = std::to_string(s);
    ev += (i ? "," : "") + std::string(R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)") +
          std::to_string(i) + R"(", "pid": 9, "tid": 9, "ts": )" + ts + R"(, "dur": 900},)" +
          R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": )" + ts +
          R"(, "dur": 5, "args": {"cbid": 211}},)" +
          R"({"ph": "s", "id": )" + id + R"(, "pid": 9, "tid": 9, "ts": )" + ts + R"(, "cat": "ac2g", "name": "ac2g"},)" +
          R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" + std::to_string(s + 10) +
          R"(, "dur": 100, "args": {"device": 0, "stream": 7}},)" +
          R"({"ph": "f", "id": )" + id + R"(, "pid": 0, "tid": 7, "ts": )" + std::to_string(s + 10) +
          R"(, "cat": "ac2g", "name": "ac2g", "bp": "e"},)" +
          R"({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": )" +
          std::to_string(s + 200) + R"(, "dur": 50, "args": {"device": 0, "stream": 7, "correlation": 0, "bytes": 1000}})";
  }
  write(p, kineto(ev));
  Analysis a = analyze::analyze_file(p.string(), {});
  CHECK(a.steps.count == 6);
  REQUIRE(!a.kernels.empty());
  CHECK(a.alignment.kernels_checked >= 6);
  CHECK(a.kernels.front().launched_by.find("ProfilerStep") == std::string::npos);  // the step is left out
  CHECK(has_warning(a, "6 of 6 host copies do not say whether host memory was pageable or pinned"));
  CHECK(has_warning(a, "6 GPU activities carry no correlation id"));  // the copies: no id, no flow
  REQUIRE(!a.copies.empty());
  CHECK(a.copies.front().bytes == 6000);
}

TEST_CASE("InferScope's own --perfetto output analyses like the dump it came from") {
  for (const char* scenario : {"sync_bound", "launch_bound", "h2d_bound"}) {
    CAPTURE(scenario);
    const fs::path dump = work_dir() / (std::string(scenario) + ".iscope");
    const fs::path trace = work_dir() / (std::string(scenario) + ".perfetto.json");
    testsupport::write_scenario(scenario, dump.string());
    std::string err;
    REQUIRE(run_cli(dump.string() + " --findings --perfetto " + trace.string(), &err) == 0);
    Analysis from_dump = analyze::analyze_file(dump.string(), {});
    Analysis from_trace = analyze::analyze_file(trace.string(), {});
    CHECK(from_trace.source_format == "perfetto");
    CHECK(from_trace.steps.name == from_dump.steps.name);
    CHECK(from_trace.steps.count == from_dump.steps.count);
    CHECK(primary(from_trace) == primary(from_dump));
    CHECK(from_trace.kernels.size() == from_dump.kernels.size());
  }
}

TEST_CASE("InferScope's --perfetto output of a real H100 dump keeps the full kernel names") {
  // The trace names kernels by their short names and holds each full name once (args.full_name of its first
  // event); the converter gives the analysis the full names, as from the dump.
  const fs::path trace = work_dir() / "real_sleep_wait.perfetto.json";
  const std::string dump = (fixtures() / "real_sleep_wait.iscope").string();
  REQUIRE(run_cli(dump + " --findings --perfetto " + trace.string()) == 0);
  Analysis from_dump = analyze::analyze_file(dump, {});
  Analysis from_trace = analyze::analyze_file(trace.string(), {});
  std::multiset<std::pair<std::string, uint64_t>> a, b;
  for (const auto& k : from_dump.kernels) a.insert({k.name, k.count});
  for (const auto& k : from_trace.kernels) b.insert({k.name, k.count});
  CHECK(a == b);
  size_t longest = 0;
  for (const auto& k : from_trace.kernels) longest = std::max(longest, k.name.size());
  CHECK(longest > 200);  // the full demangled names, not the short ones
}

TEST_CASE("bad Chrome traces: the file and the offset or field are named, exit status 1") {
  const std::string good = read(fixtures() / "kineto_sync_bound.json");
  const fs::path half = work_dir() / "half.json";
  write(half, good.substr(0, good.size() / 2));
  std::string m = input_error(half);
  CHECK(m.find(half.string()) != std::string::npos);
  CHECK(m.find("JSON syntax error at line") != std::string::npos);
  CHECK(m.find("offset") != std::string::npos);
  CHECK(m.find("cut short") != std::string::npos);

  const std::string gz = read(fixtures() / "kineto_launch_bound.json.gz");
  const fs::path half_gz = work_dir() / "half.json.gz";
  write(half_gz, gz.substr(0, gz.size() / 2));
  m = input_error(half_gz);
  CHECK(m.find(half_gz.string()) != std::string::npos);
  CHECK(m.find("gzip stream is cut short at offset") != std::string::npos);

  const fs::path not_gz = work_dir() / "not.json.gz";
  write(not_gz, std::string("\x1f\x8b\x08\x00", 4) + "this is no deflate stream at all, just text");
  m = input_error(not_gz);
  CHECK(m.find(not_gz.string()) != std::string::npos);
  CHECK(m.find("not a valid gzip stream") != std::string::npos);

  const fs::path no_events = work_dir() / "no_events.json";
  write(no_events, R"({"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms"})");
  CHECK(input_error(no_events).find("without a \"traceEvents\" array") != std::string::npos);
  write(no_events, R"({"traceEvents": {"ph": "X"}})");
  CHECK(input_error(no_events).find("field 'traceEvents' is not an array") != std::string::npos);

  const fs::path bad_event = work_dir() / "bad_event.json";
  write(bad_event, kineto(R"({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1},
                             {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1})"));
  CHECK(input_error(bad_event).find("traceEvents[1] (cat 'kernel'): missing field 'ts'") != std::string::npos);
  write(bad_event, kineto(R"({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": "x", "dur": 1})"));
  CHECK(input_error(bad_event).find("traceEvents[0] (cat 'cpu_op'): field 'ts' is not a number") != std::string::npos);
  write(bad_event, kineto("7"));
  CHECK(input_error(bad_event).find("traceEvents[0]: not an object") != std::string::npos);
  // baseTimeNanoseconds that is not a whole number of ns in range (an adversarial pass: boost's to_number threw and
  // the tool died by SIGABRT).
  const std::string base = "\"baseTimeNanoseconds\": 1759000000000000000";
  REQUIRE(good.find(base) != std::string::npos);
  for (const char* v : {"10000000000000000000", "1.5", "1e30", "9223372036854775807"}) {
    CAPTURE(v);
    std::string odd = good;
    odd.replace(odd.find(base), base.size(), std::string("\"baseTimeNanoseconds\": ") + v);
    write(bad_event, odd);
    CHECK(input_error(bad_event).find("field 'baseTimeNanoseconds' is out of range") != std::string::npos);
  }

  std::string err;
  for (const fs::path& p : {half, half_gz, not_gz, no_events, bad_event}) {
    CAPTURE(p);
    CHECK(run_cli(p.string(), &err) == 1);
    CHECK(err.find(p.string()) != std::string::npos);
  }
}

TEST_CASE("real torch.profiler traces recorded on an H100 (scripts/record-kineto-traces.py) get their planted verdict") {
  // Recorded 2026-11-23 on an NVIDIA H100 80GB HBM3, torch 2.11: a decode loop with .item() per token, a small
  // MLP of many tiny kernels, big matmuls. schedule(wait=1, warmup=1, active=5): the first active step still
  // pays one-time costs, and the step policy leaves it out when it is slower.
  const std::pair<const char*, const char*> cases[] = {{"kineto_real_sync_bound.json.gz", "sync_bound"},
                                                      {"kineto_real_launch_bound.json.gz", "launch_bound"},
                                                      {"kineto_real_gpu_bound.json.gz", "gpu_bound"}};
  for (const auto& [file, expected] : cases) {
    CAPTURE(file);
    Analysis a = analyze::analyze_file((fixtures() / file).string(), {});
    CHECK(a.source_format == "kineto");
    CHECK(a.steps.name == "ProfilerStep");
    CHECK(a.steps.total == 5);
    CHECK(primary(a) == expected);
    REQUIRE_FALSE(a.kernels.empty());
    CHECK(a.kernels.front().launched_by != "-");  // launches linked to kernels through the correlation ids
  }
}
