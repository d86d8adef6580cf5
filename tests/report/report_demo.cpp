// Writes the four report outputs from the hand-made sample analysis and a small synthetic dump, so the report
// writers can be seen before the analyzer is merged:  iscope-report-demo OUTDIR
//   OUTDIR/report.md, report.html, report.json (from the sample analysis), trace.json (open in ui.perfetto.dev)
#include "dump/builder.hpp"
#include "export/perfetto.hpp"
#include "report/report.hpp"
#include "sample_analysis.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>

using namespace inferscope;

namespace {

void build_dump(const std::string& path) {
  dump::DumpBuilder b(path, 2.5);
  const uint32_t main = b.thread("main", 1234);
  const uint32_t gpu = b.channel("cupti");
  const uint32_t sys = b.channel("system");
  int64_t t = 0;
  uint32_t corr = 1;
  for (int step = 0; step < 5; ++step) {
    const int64_t step_start = t;
    t += 300'000;  // tokenize
    b.range(main, "tokenize", 1, step_start, t);
    b.api(main, "cudaMemcpyAsync", corr, t, t + 8'000);
    b.memcpy(gpu, CopyKind::kHtoD, 4 << 20, corr++, t + 6'000, t + 180'000);
    t += 10'000;
    const int64_t fwd_start = t;
    for (int k = 0; k < 40; ++k) {
      b.api(main, "cudaLaunchKernel", corr, t, t + 6'000);
      const int64_t ks = std::max<int64_t>(t + 8'000, step_start + 180'000 + k * 9'000);
      b.kernel(gpu, k % 2 ? "ampere_fp16_gemm" : "vectorized_elementwise_kernel<4>", corr++, ks, ks + 8'500);
      t += 7'000;
    }
    b.range(main, "forward", 1, fwd_start, t);
    b.api(main, "cudaStreamSynchronize", corr, t, t + 200'000);
    b.sync(gpu, SyncKind::kStreamSynchronize, corr++, t + 1'000, t + 199'000, 7);
    t += 200'000;
    b.range(main, "inference_step", 0, step_start, t);
    b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, t, 1'000'000 * (step + 1));
    b.counter_double(sys, "gpu.util_pct", CounterScope::kDevice, 0, t, 40.0 + step);
    t += 50'000;
  }
  b.mark(main, "done", t);
  b.finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: iscope-report-demo OUTDIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const auto a = report::testing::sample_analysis();
  {
    std::ofstream f(dir / "report.md");
    report::write_markdown(a, f);
  }
  {
    std::ofstream f(dir / "report.html");
    report::write_html(a, f);
  }
  {
    std::ofstream f(dir / "report.json");
    report::write_json(a, f);
  }
  const std::string dump_path = (dir / "demo.iscope").string();
  build_dump(dump_path);
  dump::DumpReader reader(dump_path);
  std::ofstream f(dir / "trace.json");
  exporter::write_perfetto(reader, f);
  if (!f) {
    std::cerr << "iscope-report-demo: cannot write " << (dir / "trace.json") << "\n";
    return 1;
  }
  std::cout << "wrote " << (dir / "report.md").string() << ", report.html, report.json, trace.json\n";
  return 0;
}
