// The reader on real GPU data: tests/fixtures/cuda_sample.iscope (API calls through CUPTI callbacks, on the
// calling thread) and cuda_sample_cupti_api.iscope (the default since: CUPTI's API activity records in the GPU
// channel, naming their caller by OS thread id) were recorded on a GPU machine (H100) with
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

namespace {

// api_from_cupti: the API records come through the GPU channel (all of them), else on the calling thread.
void check_fixture(const std::string& path, bool api_from_cupti) {
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
  uint64_t from_channel = 0;
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    ++kinds[h.kind];
    if (h.kind != RecordKind::kCudaApi) return;
    auto a = dump::load<CudaApiRecord>(p);
    launched[a.correlation] = true;
    if (!r.threads().at(thread).is_channel()) return;
    // Recorded by CUPTI: the caller is an application thread of the thread table.
    ++from_channel;
    bool known = false;
    for (auto& [id, t] : r.threads()) known |= !t.is_channel() && t.os_tid == a.os_tid;
    CHECK(known);
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
  CHECK(from_channel == (api_from_cupti ? kinds[RecordKind::kCudaApi] : 0));
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

}  // namespace

TEST_CASE("the recorded CUDA sample holds its kernels, copies, launches and clock checks (API calls on callbacks)") {
  check_fixture(std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample.iscope", false);
}

TEST_CASE("the same with the API calls recorded by CUPTI (the default set)") {
  check_fixture(std::string(INFERSCOPE_SOURCE_DIR) + "/tests/fixtures/cuda_sample_cupti_api.iscope", true);
}
