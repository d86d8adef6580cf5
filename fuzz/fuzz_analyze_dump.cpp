// libFuzzer target: the analyzer on hostile dumps, and the Markdown, HTML and JSON writers on whatever
// analysis comes out (names from the trace reach every writer). Built and run by scripts/fuzz.sh, which fails
// (exit 2) when a source below is missing.
// fuzz-sources: lib/dump/*.cpp lib/import/*.cpp lib/analyze/*.cpp lib/analyze/serving/*.cpp lib/analyze/run/*.cpp lib/analyze/waits/*.cpp lib/analyze/generation/*.cpp lib/analyze/what_if/*.cpp lib/analyze/support/*.cpp lib/analyze/rules/*.cpp lib/text/*.cpp lib/report/*.cpp
// fuzz-seeds: dump
// The analyzer's packed(4) GpuOp/ApiOp (lib/analyze/model.hpp) bind misaligned int64 members to references
// (std::min/std::max on x.start): UBSan's alignment check stops at the first seed. Harmless on x86; switched
// off here so the fuzzer reaches everything else. Remove once the analyzer copies those fields first. The define
// matters only to lib/rulefile (fuzz_rules); the same flags let scripts/fuzz.sh compile the shared sources once.
// fuzz-flags: -fno-sanitize=alignment -DINFERSCOPE_HAVE_MUPARSER=1
// fuzz-libs: -lz
#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "fuzz_support.hpp"
#include "report/report.hpp"

#include <ostream>

using namespace inferscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_dump_file(data, size);
  if (path.empty()) return 0;
  try {
    dump::DumpReader r(path);
    analyze::AnalyzeOptions opt;
    const analyze::Analysis a = analyze::analyze_dump(r, opt);
    fuzz::NullBuf nb;
    std::ostream out(&nb);
    report::write_markdown(a, out);
    report::write_html(a, out);
    report::write_json(a, out);
  } catch (const dump::DumpError&) {
  } catch (const analyze::InputError&) {
    // Clear errors for bad input are expected; a crash or any other exception is a bug.
  }
  return 0;
}
