// libFuzzer target: the dump reader (every chunk parser, the record visitor, attributes, clock model) and the
// Perfetto writer on top of it. Built and run by scripts/fuzz.sh; its crashing inputs are replayed by ctest
// (tests/report/CMakeLists.txt, fuzz/regressions/fuzz_dump_reader/).
// fuzz-sources: lib/dump/*.cpp lib/text/*.cpp lib/export/perfetto*.cpp
// fuzz-seeds: dump
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"
#include "dump/visit.hpp"
#include "fuzz_support.hpp"
#include "export/perfetto.hpp"

#include <ostream>

using namespace inferscope;

namespace {
// Every record as the tools get it (visit.hpp): decoded, its attributes read, its first time converted.
struct Touch {
  const dump::DumpReader& r;
  const dump::ClockModel& clock;
  uint64_t sink = 0;
  void on(const auto&, const dump::RecordContext& rc) {
    sink += rc.thread + rc.header.size;
    if (record_has_attrs(rc.kind())) sink += r.attributes(rc.bytes).size();
    sink += static_cast<uint64_t>(clock.to_ns(dump::load<uint64_t>(rc.bytes + 8)));  // every kind has >= 16 bytes
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_dump_file(data, size);
  if (path.empty()) return 0;
  try {
    dump::DumpReader r(path);
    dump::ClockModel clock(r.calibration());
    (void)r.drops();
    (void)r.process_value("pid");
    Touch touch{r, clock};
    dump::visit_records(r, touch);
    fuzz::NullBuf nb;
    std::ostream out(&nb);
    exporter::write_perfetto(r, out);
    (void)touch.sink;
  } catch (const dump::DumpError&) {
    // A clear error for bad input is the expected outcome; a crash or any other exception is a bug.
  }
  return 0;
}
