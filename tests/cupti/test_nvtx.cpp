// NVTX without a GPU: ranges and marks the application emits are captured through the injection
// (NVTX_INJECTION64_PATH = libinferscope.so), and with nvtx_emit the ISCOPE ranges are pushed to NVTX too,
// without being recorded twice and without changing the ranges InferScope records. That the emitted ranges
// arrive at an NVTX tool is checked by test_nvtx_emit (NVTX loads one tool per process; here it is us).
#include "dump/reader.hpp"

#include <inferscope/scope.hpp>

#include <nvtx3/nvToolsExt.h>

#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <string>

using namespace inferscope;

TEST_CASE("NVTX capture through the injection, and ISCOPE ranges emitted to NVTX") {
  // Before the first NVTX call of the process: NVTX reads the variable once, when it initialises.
  ::setenv("NVTX_INJECTION64_PATH", INFERSCOPE_LIB, 1);
  Config cfg;
  cfg.output = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/nvtx." + std::to_string(::getpid()) + ".iscope";
  cfg.cupti = false;
  cfg.system = false;
  cfg.python = false;
  cfg.nvtx_capture = true;
  cfg.nvtx_emit = true;
  REQUIRE(inferscope::start(cfg));
  {
    ISCOPE_RANGE("iscope_outer");
    nvtxRangePushA("nvtx_outer");
    nvtxRangePushA("nvtx_inner");
    nvtxMarkA("nvtx_mark");
    nvtxRangePop();
    nvtxRangePop();
    ISCOPE_RANGE_ATTRS("iscope_attrs", {"batch", 32});
    nvtxRangeId_t id = nvtxRangeStartA("nvtx_startend");
    nvtxRangeEnd(id);
  }
  REQUIRE(inferscope::stop());
  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  std::map<std::string, int> nvtx, ranges, marks;
  std::map<std::string, int> depth;
  size_t attrs = 0;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind == RecordKind::kNvtxRange) {
      auto rr = dump::load<RangeRecord>(p);
      ++nvtx[r.string_at(rr.name)];
      depth[r.string_at(rr.name)] = h.aux;
      CHECK(rr.end >= rr.start);
    } else if (h.kind == RecordKind::kRange) {
      auto rr = dump::load<RangeRecord>(p);
      ++ranges[r.string_at(rr.name)];
      if (r.string_at(rr.name) == "iscope_attrs") attrs = r.attributes(p).size();
    } else if (h.kind == RecordKind::kNvtxMark) {
      ++marks[r.string_at(dump::load<MarkRecord>(p).name)];
    }
  });
  CHECK(nvtx["nvtx_outer"] == 1);
  CHECK(nvtx["nvtx_inner"] == 1);
  CHECK(depth["nvtx_outer"] == 0);
  CHECK(depth["nvtx_inner"] == 1);
  CHECK(nvtx["nvtx_startend"] == 1);
  CHECK(marks["nvtx_mark"] == 1);
  // The ISCOPE ranges went to NVTX (domain InferScope) but were not captured back as NVTX ranges.
  CHECK(nvtx.count("iscope_outer") == 0);
  CHECK(nvtx.size() == 3);
  CHECK(ranges["iscope_outer"] == 1);
  CHECK(ranges["iscope_attrs"] == 1);
  CHECK(attrs == 1);
  std::string status;
  for (auto& [k, v] : r.collector_status())
    if (k == "nvtx") status = v;
  CHECK(status.find("emitting ISCOPE ranges as NVTX") != std::string::npos);
  ::unlink(cfg.output.c_str());
}
