// The reader on real GPU data: tests/fixtures/cuda_sample.iscope was recorded on a GPU machine with
//   iscope-run -o cuda_sample.iscope -- sample_cuda_infer --kernels 200
// (scripts/gpu-cupti-tests.sh). CI has no GPU, so this is where GPU records meet the reader there.
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

using namespace inferscope;

TEST_CASE("the recorded CUDA sample holds its kernels, copies, launches and clock checks") {
  const std::string path = std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope";
  if (::access(path.c_str(), R_OK) != 0) {
    std::printf("skipped: %s is not there\n", path.c_str());
    std::exit(77);
  }
  dump::DumpReader r(path);
  CHECK(r.complete());
  CHECK(r.total_dropped_records() == 0);
  CHECK(r.process_value("gpu.count") != "");
  CHECK(r.process_value("gpu.0.name") != "");
  std::map<RecordKind, uint64_t> kinds;
  std::map<uint32_t, bool> launched;
  uint64_t kernels_linked = 0, pageable = 0, pinned = 0, tiny = 0;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    ++kinds[h.kind];
    if (h.kind == RecordKind::kCudaApi) launched[dump::load<CudaApiRecord>(p).correlation] = true;
  });
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind == RecordKind::kGpuKernel) {
      auto k = dump::load<GpuKernelRecord>(p);
      kernels_linked += launched.count(k.correlation);
      tiny += r.string_at(k.name) == "(anonymous namespace)::tiny_kernel(float*, int)";
    }
    if (h.kind == RecordKind::kGpuMemcpy) {
      auto m = dump::load<GpuMemcpyRecord>(p);
      if (static_cast<CopyKind>(m.h.aux) == CopyKind::kHtoD) {
        pageable += m.src_kind == MemoryKind::kPageable;
        pinned += m.src_kind == MemoryKind::kPinned;
      }
    }
  });
  CHECK(kinds[RecordKind::kGpuKernel] == 201);  // 200 tiny + 1 long
  CHECK(tiny == 200);
  CHECK(kernels_linked == 201);
  CHECK(pageable >= 1);
  CHECK(pinned == 1);
  CHECK(kinds[RecordKind::kGpuMemset] == 1);
  CHECK(kinds[RecordKind::kClockCheck] >= 1);
  CHECK(kinds[RecordKind::kRange] >= 7);  // the sample's ISCOPE_RANGEs
  CHECK(r.calibration().size() >= 2);
  dump::ClockModel clock(r.calibration());
  CHECK(clock.ns_per_tick() > 0);
}
