// The analysis must not depend on how many worker threads ran it: the golden tests compare exact findings and
// reports. A dump with several application threads, deep nesting and tiny chunks (so that frames, their
// children and the calls waiting for them fall into different workers' runs) is analysed with 1 and with
// several workers, in-process and through the CLI's JSON report, and the results must be identical.
#include "support/files.hpp"
#include "analyze/analyzer.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;
using namespace inferscope;

namespace {

using testsupport::read;

fs::path work_dir() {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work";
  fs::create_directories(d);
  return d;
}


// 300 steps on the main thread (Python frames nested 7 deep, layer ranges, launches, a copy, a sync, a launch
// directly in the step range), a loader thread with its own Python work and async copies, a second GPU channel,
// kernels on another stream that run across several steps (the sweep's runs of steps must carry them); 1 KiB
// chunks.
void write_dump(const fs::path& path) {
  dump::DumpBuilder b(path.string(), 2.4);
  b.set_chunk_bytes(1024);
  testsupport::Sim sim(b);
  const uint32_t loader = b.thread("loader", 4300);
  const uint32_t copy_engine = b.channel("copy engine");
  const uint32_t load_code = b.code("Loader.next", "data.py", 3);
  const uint32_t decode_code = b.code("decode", "data.py", 9);
  uint32_t loader_corr = 5'000'000;
  for (int step = 0; step < 300; ++step) {
    const int64_t step_start = sim.now();
    if (step % 9 == 4)  // no launch record: unattributed, and running through the next steps
      b.kernel(sim.gpu_channel(), "background_kernel", 9'000'000 + step, step_start + 1'000, step_start + 1'500'000, 9);
    sim.range("step", [&] {
      sim.launch("prologue_kernel", 4'000);  // waits for the step range itself: no Python frame around it
      sim.py("Model.run_step", [&] {
        sim.copy(CopyKind::kHtoD, 1 << 16, 10.0, step % 3 ? MemoryKind::kPinned : MemoryKind::kPageable, true);
        std::function<void(int)> nest = [&](int depth) {
          sim.py("nest" + std::to_string(depth), [&] {
            sim.host(1'000 + depth * 300);
            if (depth < 7) nest(depth + 1);
            else sim.launch("deep_kernel", 2'000);
          });
        };
        nest(1);
        for (int layer = 0; layer < 4; ++layer)
          sim.range("model.layers." + std::to_string(layer), [&] {
            for (int op = 0; op < 5; ++op)
              sim.py(op % 2 ? "Linear.forward" : "GELU.forward", [&] {
                sim.host(3'000 + (op + step) % 4 * 700);
                sim.launch(op % 2 ? "gemm" : "gelu", 6'000 + (step % 5) * 1'000);
              });
          });
        if (step % 7 == 3) sim.malloc(1 << 20, 150'000);
        sim.py("Tensor.item", [&] { sim.sync("cudaStreamSynchronize"); });
      });
    });
    // The loader thread works during the step: an outer Python frame with nested ones and async copies.
    int64_t t = step_start + 500;
    const int64_t outer_start = t;
    for (int k = 0; k < 3; ++k) {
      const int64_t s = t;
      b.api(loader, "cudaMemcpyAsync", ++loader_corr, s + 100, s + 2'100);
      b.memcpy(copy_engine, CopyKind::kHtoD, 4096, loader_corr, s + 3'000, s + 5'000, MemoryKind::kPinned, 9, true);
      b.pycall(loader, decode_code, 1, s, s + 8'000);
      t = s + 9'000;
    }
    b.pycall(loader, load_code, 0, outer_start, t + 1'000);
    sim.host(20'000);
  }
  b.finish();
}

}  // namespace

TEST_CASE("the analysis is the same with 1 and with several worker threads") {
  const fs::path dump = work_dir() / "threads.iscope";
  write_dump(dump);
  {
    dump::DumpReader r(dump.string());
    REQUIRE(r.event_chunks().size() > 50);  // enough chunks for every worker to get several
  }

  analyze::AnalyzeOptions one;
  one.threads = 1;
  const analyze::Analysis base = analyze::analyze_file(dump.string(), one);
  REQUIRE(base.steps.count == 300);
  REQUIRE(!base.kernels.empty());
  REQUIRE(!base.python.empty());
  for (unsigned n : {2u, 3u, 5u, 16u}) {
    CAPTURE(n);
    analyze::AnalyzeOptions o;
    o.threads = n;
    const analyze::Analysis a = analyze::analyze_file(dump.string(), o);
    CHECK(analyze::findings_digest(a) == analyze::findings_digest(base));
    CHECK(a.events == base.events);
    CHECK(a.breakdown.step_ms == base.breakdown.step_ms);
    CHECK(a.breakdown.cpu_preprocessing_ms == base.breakdown.cpu_preprocessing_ms);
    CHECK(a.breakdown.idle_ms == base.breakdown.idle_ms);
    CHECK(a.breakdown.gpu_idle_waiting_on_host_ms == base.breakdown.gpu_idle_waiting_on_host_ms);
    REQUIRE(a.python.size() == base.python.size());
    for (size_t i = 0; i < a.python.size(); ++i) {
      CHECK(a.python[i].qualname == base.python[i].qualname);
      CHECK(a.python[i].self_ms == base.python[i].self_ms);  // self times cross the workers' runs
    }
    REQUIRE(a.ranges.size() == base.ranges.size());
    for (size_t i = 0; i < a.ranges.size(); ++i) CHECK(a.ranges[i].self_ms == base.ranges[i].self_ms);
    REQUIRE(a.kernels.size() == base.kernels.size());
    for (size_t i = 0; i < a.kernels.size(); ++i)
      CHECK(a.kernels[i].launched_by == base.kernels[i].launched_by);  // calls waiting for their frame
    REQUIRE(a.layers.size() == base.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) CHECK(a.layers[i].gpu_ms == base.layers[i].gpu_ms);
  }

  // Every number of the JSON report, through the CLI and INFERSCOPE_ANALYZE_THREADS.
  std::string first;
  for (int n : {1, 2, 7}) {
    CAPTURE(n);
    const fs::path out = work_dir() / ("threads-" + std::to_string(n) + ".json");
    const std::string cmd = "INFERSCOPE_ANALYZE_THREADS=" + std::to_string(n) + " " + ISCOPE_ANALYZE_EXE + " " +
                            dump.string() + " --json " + out.string() + " >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string json = read(out);
    REQUIRE(json.size() > 1000);
    if (first.empty()) first = json;
    else CHECK(json == first);
  }
}

// The reader checks every chunk's CRC-32C with three interleaved hardware streams on large chunks; the writer
// uses the same function, so only a comparison with the definition catches a wrong join of the lanes.
TEST_CASE("CRC-32C: every path equals the bitwise definition") {
  auto bitwise = [](const uint8_t* p, size_t n, uint32_t crc) {
    crc = ~crc;
    while (n--) {
      crc ^= *p++;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
  };
  std::vector<uint8_t> data(100'000);
  uint64_t x = 88172645463325252ull;
  for (auto& b : data) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = uint8_t(x);
  }
  CHECK(dump::crc32c("123456789", 9) == 0xE3069283u);  // the standard check value
  for (size_t n : {0, 1, 7, 8, 4095, 12287, 12288, 12289, 24583, 65536, 99'990})
    for (size_t off : {0, 3})
      for (uint32_t init : {0u, 0xDEADBEEFu}) {
        CAPTURE(n);
        CHECK(dump::crc32c(data.data() + off, n, init) == bitwise(data.data() + off, n, init));
      }
}
