// GPU test (label gpu): a decode loop replayed as a CUDA graph (samples/graph_replay) under iscope-run.
// By default each graph launch is one record (CUPTI's graph-level trace) linked to its cudaGraphLaunch call,
// none of the graph's kernels is recorded one by one, and the analyzer reports the graph as one unit of GPU
// work launched from the "replay_graph" range inside each "decode" step; the eager "prefill" kernels are still
// recorded one by one. With graph_nodes=true every kernel node of every launch is recorded instead. A session
// started in-process after the graph was instantiated records its nodes one by one (CUPTI crashes when such a
// graph is launched with graph-level tracing on), and says why. Exits 77 (skipped, with the reason)
// without a GPU or without the sample.
#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "gpu_skip.hpp"
#include "run_util.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

using namespace inferscope;
using iscope_test::have_gpu;
using iscope_test::run;
using iscope_test::skip;

namespace {

[[maybe_unused]] long field(const std::string& out, const std::string& key) {
  const auto p = out.find(key + "=");
  REQUIRE_MESSAGE(p != std::string::npos, "sample output lacks " << key << ": " << out);
  return std::atol(out.c_str() + p + key.size() + 1);
}

struct Counted {
  uint64_t graph_launches = 0, node_kernels = 0, other_kernels = 0, graph_calls = 0, linked_graphs = 0;
};

// What a dump of the sample holds: graph launch records (and how many match a cudaGraphLaunch call by
// correlation id), kernel records of graph nodes and of eager launches.
[[maybe_unused]] Counted count(const dump::DumpReader& r) {
  Counted c;
  std::set<uint32_t> graph_call_ids, graph_record_ids;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind == RecordKind::kGpuGraphLaunch) {
      ++c.graph_launches;
      graph_record_ids.insert(dump::load<GpuGraphLaunchRecord>(p).correlation);
    } else if (h.kind == RecordKind::kGpuKernel) {
      ++(dump::load<GpuKernelRecord>(p).graph_id ? c.node_kernels : c.other_kernels);
    } else if (h.kind == RecordKind::kCudaApi) {
      const auto a = dump::load<CudaApiRecord>(p);
      const std::string n = r.string_at(a.name);
      if (n.find("GraphLaunch") != std::string::npos) graph_call_ids.insert(a.correlation);
    }
  });
  c.graph_calls = graph_call_ids.size();
  for (uint32_t id : graph_record_ids) c.linked_graphs += graph_call_ids.count(id);
  return c;
}

[[maybe_unused]] std::string dump_path(const char* tag) {
  return std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/graph_" + tag + "." + std::to_string(::getpid()) + ".iscope";
}

}  // namespace

TEST_CASE("a CUDA graph replay is recorded at graph level by default, one record per launch, at its launch site") {
#ifndef SAMPLE_GRAPH_REPLAY
  skip("samples/graph_replay was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const std::string path = dump_path("level");
  auto r = run({ISCOPE_RUN, "-q", "-o", path, "--", SAMPLE_GRAPH_REPLAY, "--kernels", "1500", "--steps", "60",
                "--eager-steps", "3"});
  REQUIRE_MESSAGE(r.status == 0, r.out);
  std::printf("%s", r.out.c_str());
  dump::DumpReader d(path);
  CHECK(d.complete());
  CHECK(d.total_dropped_records() == 0);
  const Counted c = count(d);
  std::printf("graph level: %llu graph launch records (%llu linked to their call), %llu node kernels, %llu eager\n",
              (unsigned long long)c.graph_launches, (unsigned long long)c.linked_graphs,
              (unsigned long long)c.node_kernels, (unsigned long long)c.other_kernels);
  CHECK(c.graph_launches == uint64_t(field(r.out, "graph_launches")));
  CHECK(c.linked_graphs == c.graph_launches);
  CHECK(c.node_kernels == 0);
  CHECK(c.other_kernels >= uint64_t(field(r.out, "eager_kernels")));
  const analyze::Analysis a = analyze::analyze_dump(d, {});
  CHECK(a.steps.name == "decode");
  const analyze::KernelRow* graph = nullptr;
  for (const auto& k : a.kernels)
    if (k.whole_graph) graph = &k;
  REQUIRE(graph != nullptr);
  CHECK(graph->name.rfind("CUDA graph ", 0) == 0);
  CHECK(graph->count == c.graph_launches);
  CHECK_MESSAGE(graph->launched_by == "range replay_graph", graph->launched_by);
  CHECK(a.breakdown.gpu_compute_ms > 0);
  CHECK(a.alignment.ok);
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(path.c_str());
#endif
}

TEST_CASE("graph_nodes=true records every kernel node of every launch instead") {
#ifndef SAMPLE_GRAPH_REPLAY
  skip("samples/graph_replay was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const std::string path = dump_path("nodes");
  auto r = run({ISCOPE_RUN, "-q", "-o", path, "--set", "graph_nodes=true", "--", SAMPLE_GRAPH_REPLAY, "--kernels",
                "200", "--steps", "20", "--eager-steps", "1"});
  REQUIRE_MESSAGE(r.status == 0, r.out);
  dump::DumpReader d(path);
  CHECK(d.complete());
  CHECK(d.total_dropped_records() == 0);
  const Counted c = count(d);
  std::printf("node level: %llu graph launch records, %llu node kernels, %llu eager\n",
              (unsigned long long)c.graph_launches, (unsigned long long)c.node_kernels,
              (unsigned long long)c.other_kernels);
  CHECK(c.graph_launches == 0);
  CHECK(c.node_kernels == uint64_t(field(r.out, "graph_launches") * field(r.out, "kernels_per_graph")));
  const analyze::Analysis a = analyze::analyze_dump(d, {});
  for (const auto& k : a.kernels) CHECK_FALSE(k.whole_graph);
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(path.c_str());
#endif
}

TEST_CASE("a session started after the graph was instantiated does not crash the program: nodes one by one, said why") {
#ifndef SAMPLE_GRAPH_REPLAY
  skip("samples/graph_replay was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const std::string path = dump_path("late");
  auto r = run({SAMPLE_GRAPH_REPLAY, "--kernels", "200", "--steps", "20", "--eager-steps", "0", "--session", path});
  REQUIRE_MESSAGE(r.status == 0, "the program did not exit cleanly: status " << r.status << "\n" << r.out);
  dump::DumpReader d(path);
  CHECK(d.complete());
  const Counted c = count(d);
  std::printf("late session: %llu graph launch records, %llu node kernels\n", (unsigned long long)c.graph_launches,
              (unsigned long long)c.node_kernels);
  CHECK(c.graph_launches == 0);
  CHECK(c.node_kernels == uint64_t(field(r.out, "graph_launches") * field(r.out, "kernels_per_graph")));
  bool said = false;
  for (auto& [k, v] : d.collector_status())
    if (k == "cupti") {
      std::printf("status: %s\n", v.c_str());
      said = v.find("CUDA graphs node by node") != std::string::npos;
    }
  CHECK(said);
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(path.c_str());
#endif
}
