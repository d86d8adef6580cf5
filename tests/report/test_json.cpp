#include "report/report.hpp"
#include "report_test_util.hpp"
#include "sample_analysis.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report::testing;
namespace json = boost::json;

namespace {

std::string json_text(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_json(a, out);
  return out.str();
}

std::vector<std::string> keys(const json::object& o) {
  std::vector<std::string> k;
  for (const auto& kv : o) k.emplace_back(kv.key());
  return k;
}

}  // namespace

TEST_CASE("json report has the documented keys in a fixed order") {
  const std::string text = json_text(sample_analysis());
  json::value v = json::parse(text);
  const auto& root = v.as_object();
  CHECK(keys(root) == std::vector<std::string>{"schema_version", "source", "source_format", "process", "events",
                                                "trace_ms", "end_to_end_ms", "steps", "breakdown", "waits", "program",
                                                "findings", "tables", "alignment", "drops", "warnings", "partial",
                                                "gpu_work_recorded", "children", "representative"});
  REQUIRE(root.at("children").as_array().size() == 2);
  CHECK(root.at("children").at(0).at("pid").to_number<uint64_t>() == 4250);
  CHECK(root.at("children").at(0).at("primary").as_string() == "cpu_bound");
  CHECK(root.at("children").at(1).at("error").as_string() == "/tmp/gpt2.4251.iscope: cut short");
  CHECK(root.at("schema_version").as_int64() == 1);
  CHECK(root.at("end_to_end_ms").as_double() == 12.5);
  CHECK(root.at("source").as_string() == "/tmp/gpt2.iscope");
  CHECK(root.at("events").to_number<uint64_t>() == 184467);
  CHECK(root.at("process").at("gpu.name").as_string() == "NVIDIA H100");

  const auto& steps = root.at("steps").as_object();
  CHECK(steps.at("count").to_number<uint64_t>() == 100);
  CHECK(steps.at("p99_ms").as_double() == 18.9);
  CHECK(steps.at("slowest").as_array().size() == 3);
  CHECK(steps.at("slowest").at(0).at("index").to_number<uint64_t>() == 41);

  const auto& b = root.at("breakdown").as_object();
  CHECK(keys(b) == std::vector<std::string>{"step_ms", "cpu_preprocessing_ms", "h2d_ms", "gpu_compute_ms", "gpu_comm_ms", "d2h_ms",
                                             "sync_wait_ms", "framework_overhead_ms", "idle_ms", "gpu_utilization",
                                             "gpu_idle_waiting_on_host_ms", "gpu_idle_gaps_between_kernels_ms",
                                             "gpu_idle_waiting_on_sync_ms", "gpu_idle_in_memory_ms", "host_running_ms",
                                             "host_contention_ms", "host_waiting_ms", "host_state_measured", "by_cause"});
  {  // by cause, in the findings' categories, adding up to the step
    const auto& c = b.at("by_cause").as_object();
    std::vector<std::string> k = keys(c);
    std::erase(k, std::string("unattributed"));
    CHECK(k == std::vector<std::string>{"gpu_bound", "h2d_bound", "d2h_bound", "cpu_bound", "cpu_contention", "wait",
                                        "launch_bound", "sync_bound", "memory_alloc"});
    double sum = 0;
    for (const auto& [k, v] : c) sum += v.to_number<double>();
    CHECK(sum == doctest::Approx(b.at("step_ms").to_number<double>()).epsilon(1e-6));
  }
  double sum = 0;
  for (const char* k : {"cpu_preprocessing_ms", "h2d_ms", "gpu_compute_ms", "d2h_ms", "sync_wait_ms",
                        "framework_overhead_ms", "idle_ms"})
    sum += b.at(k).as_double();
  CHECK(sum == doctest::Approx(b.at("step_ms").as_double()));

  const auto& findings = root.at("findings").as_array();
  REQUIRE(findings.size() == 2);
  const auto& f = findings[0].as_object();
  CHECK(keys(f) == std::vector<std::string>{"bottleneck_type", "rule", "title", "confidence", "uncertain", "primary",
                                             "informational", "impact", "evidence", "metrics", "examples", "suggestions"});
  CHECK(f.at("bottleneck_type").as_string() == "launch_bound");
  CHECK(f.at("rule").as_string() == "launch_bound");  // the finding was made without a rule name: its category's
  CHECK(f.at("primary").as_bool());
  CHECK_FALSE(f.at("uncertain").as_bool());
  CHECK(f.at("impact").at("ms").as_double() == 5.5);
  CHECK(f.at("impact").at("pct").as_double() == 44.0);
  CHECK(f.at("metrics").at("kernels_per_step").as_double() == 412);
  CHECK(f.at("examples").at(0).at("start_ms").as_double() == 520.5);
  const auto& sug = f.at("suggestions").as_array();
  REQUIRE(sug.size() >= 3);
  CHECK(keys(sug[0].as_object()) == std::vector<std::string>{"action", "priority", "impact_ms", "estimated", "model", "try_command", "measured", "needs"});
  CHECK(sug[0].at("priority").as_string() == "high");
  CHECK(sug[0].at("estimated").as_bool());
  CHECK(sug[0].at("impact_ms").as_double() == 4.5);
  // A saving without a model behind it is null, never a made-up number.
  CHECK_FALSE(sug[1].at("estimated").as_bool());
  CHECK(sug[1].at("impact_ms").is_null());
  CHECK(findings[1].at("uncertain").as_bool());

  const auto& t = root.at("tables").as_object();
  CHECK(keys(t) == std::vector<std::string>{"kernels", "kernel_families", "tensor_core_share", "python", "ranges",
                                             "copies", "syncs", "allocations", "graph_launches", "layers", "threads"});
  // Syncs, allocations and graph launches name their callers like kernels name their launcher.
  const auto& sync_caller = t.at("syncs").at(0).at("callers").at(0).as_object();
  CHECK(keys(sync_caller) == std::vector<std::string>{"api", "called_from", "count", "total_ms"});
  CHECK(sync_caller.at("called_from").as_string() == "generate (utils.py:1500)");
  CHECK(t.at("allocations").at(0).at("called_from").as_string() == "Block.forward (model.py:88)");
  CHECK(t.at("allocations").at(1).at("callers").as_array().empty());
  CHECK(t.at("graph_launches").at(0).at("api").as_string() == "cudaGraphLaunch");
  CHECK(t.at("graph_launches").at(0).at("callers").at(0).at("count").to_number<uint64_t>() == 100);
  CHECK(t.at("kernels").at(1).at("launched_by").as_string() == "transformer.h.3.attn");
  CHECK(t.at("copies").at(0).at("bytes").to_number<uint64_t>() == 13107200);
  CHECK(t.at("python").at(0).at("line").to_number<uint64_t>() == 312);
  CHECK(t.at("threads").at(0).at("involuntary_switches").to_number<uint64_t>() == 42);
  CHECK(root.at("alignment").at("ok").as_bool());
  CHECK(root.at("drops").at("buffer_full").to_number<uint64_t>() == 17);
  CHECK(root.at("warnings").as_array().size() == 1);
  CHECK_FALSE(root.at("partial").as_bool());
  CHECK(root.at("representative").at("lanes").as_array().size() == 2);
  CHECK(root.at("representative").at("lanes").at(1).at("gpu").as_bool());
}

TEST_CASE("json report keeps each kernel's full name with the short name the other reports print") {
  auto a = sample_analysis();
  a.kernels.push_back(a.kernels[0]);
  a.kernels.back().name += "(int)";  // shortens like the first one
  json::value v = json::parse(json_text(a));
  const auto& k = v.at("tables").at("kernels");
  CHECK(k.at(0).at("name").as_string() == "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>>");
  CHECK(k.at(0).at("short_name").as_string() == "vectorized_elementwise_kernel<4, AddFunctor<\xE2\x80\xA6>> #1");
  CHECK(k.at(2).at("short_name").as_string() == "vectorized_elementwise_kernel<4, AddFunctor<\xE2\x80\xA6>> #2");
  CHECK(k.at(1).at("short_name").as_string() == "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn");
}

TEST_CASE("json report is deterministic") {
  CHECK(json_text(sample_analysis()) == json_text(sample_analysis()));
}

TEST_CASE("json report keeps hostile names as valid JSON strings") {
  const std::string text = json_text(sample_analysis(/*hostile=*/true));
  CHECK(is_valid_utf8(text));
  json::value v = json::parse(text);
  const std::string name(v.at("tables").at("kernels").at(0).at("name").as_string());
  CHECK(name.find("<script>alert('x')</script> & \"q\" | `t` \xEF\xBF\xBD\xEF\xBF\xBD") != std::string::npos);
}

TEST_CASE("json report writes non-finite numbers as null") {
  auto a = sample_analysis();
  a.breakdown.gpu_utilization = std::nan("");
  a.findings[0].impact_pct = INFINITY;
  json::value v = json::parse(json_text(a));
  CHECK(v.at("breakdown").at("gpu_utilization").is_null());
  CHECK(v.at("findings").at(0).at("impact").at("pct").is_null());
}
