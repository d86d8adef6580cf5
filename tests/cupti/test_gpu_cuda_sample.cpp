// GPU test (label gpu): the CUDA sample under iscope-run on a real GPU. Every kernel and copy is captured
// with the right kinds, bytes and pageable/pinned flags; every kernel is linked to its launch call; no
// kernel starts more than 1 us before its launch call began (>= 100,000 kernels); nothing is dropped.
// Exits 77 (skipped) without a GPU.
#include "dump/clock_model.hpp"
#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "gpu_skip.hpp"
#include "run_util.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>

using namespace inferscope;
using iscope_test::have_gpu;
using iscope_test::run;
using iscope_test::skip;

namespace {

long field(const std::string& out, const std::string& key) {
  auto p = out.find(key + "=");
  REQUIRE_MESSAGE(p != std::string::npos, "sample output lacks " << key << ": " << out);
  return std::atol(out.c_str() + p + key.size() + 1);
}

std::string temp_path(const char* name) {
  return std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/" + name + "." + std::to_string(::getpid()) + ".iscope";
}

struct Checked {
  uint64_t kernels = 0, api = 0, api_from_channel = 0, linked = 0, violations = 0, clock_checks = 0, clock_violations = 0;
  double worst_ns = -1e18;        // max over kernels of (api start - kernel start): > 0 means the kernel started first
  double worst_check_ns = -1e18;  // max shortfall of a clock check
  std::string status;
  std::string pci_location;  // CUDA's device 0, and NVML's view of it
};

// Reads a dump of the sample and checks it against the sample's own account of what it did.
Checked check_sample_dump(const std::string& path, const std::string& out) {
  dump::DumpReader r(path);
  CHECK(r.complete());
  CHECK(r.total_dropped_records() == 0);
  dump::ClockModel clock(r.calibration());
  Checked c;
  for (auto& [k, v] : r.collector_status())
    if (k == "cupti") c.status = v;
  CHECK_MESSAGE(c.status.rfind("on: CUPTI", 0) == 0, c.status);
  // The system collector's NVML counters carry CUDA's device numbers: its device 0 sits where the driver told
  // the GPU collector CUDA's device 0 sits (later values of a key win; how NVML's were mapped is printed).
  std::map<std::string, std::string> info;
  for (auto& [k, v] : r.process_info()) info[k] = v;
  CHECK(info.count("gpu.0.pci_location") == 1);
  if (info.count("gpu.0.nvml_pci_location")) CHECK(info["gpu.0.nvml_pci_location"] == info["gpu.0.pci_location"]);
  c.pci_location = info["gpu.0.pci_location"] + " (NVML: " + (info.count("gpu.0.nvml_pci_location") ? info["gpu.0.nvml_pci_location"] : "-") + ", " + info["nvml.device_map"] + ")";

  std::unordered_map<uint32_t, uint64_t> api_start;  // correlation -> start ticks, application threads only
  std::vector<std::pair<uint32_t, uint64_t>> kernels;  // correlation, start
  std::vector<GpuMemcpyRecord> copies;
  std::vector<GpuMemsetRecord> memsets;
  std::vector<ClockCheckRecord> checks;
  std::map<std::string, int> kernel_names;
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    switch (h.kind) {
      case RecordKind::kCudaApi: {
        // On the calling thread (callbacks), or in the GPU channel naming a caller the thread table knows
        // (CUPTI's API activity records, the default).
        auto a = dump::load<CudaApiRecord>(p);
        if (r.threads().at(thread).is_channel()) {
          ++c.api_from_channel;
          bool known = false;
          for (auto& [id, t] : r.threads()) known |= !t.is_channel() && t.os_tid == a.os_tid;
          CHECK_MESSAGE(known, "API record in a channel names os_tid " << a.os_tid << ", which the thread table lacks");
        }
        // A runtime call's nested driver call shares the correlation id: the runtime call's start counts.
        auto [it, fresh] = api_start.emplace(a.correlation, a.start);
        if (!fresh) it->second = std::min(it->second, a.start);
        ++c.api;
        break;
      }
      case RecordKind::kGpuKernel: {
        auto k = dump::load<GpuKernelRecord>(p);
        kernels.emplace_back(k.correlation, k.start);
        ++kernel_names[r.string_at(k.name)];
        break;
      }
      case RecordKind::kGpuMemcpy: copies.push_back(dump::load<GpuMemcpyRecord>(p)); break;
      case RecordKind::kGpuMemset: memsets.push_back(dump::load<GpuMemsetRecord>(p)); break;
      case RecordKind::kClockCheck: checks.push_back(dump::load<ClockCheckRecord>(p)); break;
      default: break;
    }
  });
  c.kernels = kernels.size();
  CHECK(static_cast<long>(kernels.size()) == field(out, "kernels"));
  // The sample's kernels live in an anonymous namespace: "(anonymous namespace)::tiny_kernel(float*, int)".
  CHECK(kernel_names["(anonymous namespace)::tiny_kernel(float*, int)"] == field(out, "tiny_kernels"));
  CHECK(kernel_names["(anonymous namespace)::long_kernel(float*, long long)"] == 1);
  for (auto& [corr, start] : kernels) {
    auto it = api_start.find(corr);
    if (it == api_start.end()) continue;
    ++c.linked;
    const double d = static_cast<double>(clock.to_ns(it->second) - clock.to_ns(start));
    c.worst_ns = std::max(c.worst_ns, d);
    if (d > 1000.0) ++c.violations;
  }
  CHECK(c.linked == c.kernels);
  CHECK(c.violations == 0);

  int pageable = 0, pinned = 0, d2h = 0;
  for (auto& m : copies) {
    const auto kind = static_cast<CopyKind>(m.h.aux);
    CHECK(api_start.count(m.correlation) == 1);
    if (kind == CopyKind::kHtoD && m.src_kind == MemoryKind::kPageable) {
      ++pageable;
      CHECK(static_cast<long>(m.bytes) == field(out, "h2d_pageable_bytes"));
    } else if (kind == CopyKind::kHtoD && m.src_kind == MemoryKind::kPinned) {
      ++pinned;
      CHECK(static_cast<long>(m.bytes) == field(out, "h2d_pinned_bytes"));
    } else if (kind == CopyKind::kDtoH) {
      ++d2h;
      CHECK(m.dst_kind == MemoryKind::kPageable);
      CHECK(static_cast<long>(m.bytes) == field(out, "d2h_bytes"));
    }
  }
  // A pageable H2D copy may be split by the driver into several staged pieces; the sample makes one call.
  CHECK(pageable >= 1);
  CHECK(pinned == 1);
  CHECK(d2h >= 1);
  REQUIRE(memsets.size() == 1);
  CHECK(static_cast<long>(memsets[0].bytes) == field(out, "memset_bytes"));

  for (auto& k : checks) {
    ++c.clock_checks;
    const double before = static_cast<double>(clock.to_ns(k.cpu_before) - clock.to_ns(k.gpu_ts));
    const double after = static_cast<double>(clock.to_ns(k.gpu_end) - clock.to_ns(k.cpu_after));
    const double worst = std::max(before, after);
    c.worst_check_ns = std::max(c.worst_check_ns, worst);
    if (worst > 1000.0) ++c.clock_violations;
  }
  CHECK(c.clock_checks >= 1);
  CHECK(c.clock_violations == 0);

  // The analyzer puts every launch on the sample's thread, inside its ISCOPE ranges, wherever CUPTI delivered it.
  analyze::Analysis a = analyze::analyze_file(path, {});
  CHECK(a.alignment.kernels_checked >= c.kernels);  // kernels, and the syncs checked against them
  CHECK(a.alignment.violations_over_1us == 0);
  for (auto& k : a.kernels) {
    CAPTURE(k.name);
    CHECK(k.launched_by.find("range ") != std::string::npos);
  }
  return c;
}

void report(const char* what, const Checked& c) {
  std::printf("%s: %llu kernels, %llu API records (%llu recorded by CUPTI), %llu kernels linked to their launch; worst (launch start - kernel "
              "start) = %.0f ns, %llu beyond 1 us; %llu clock checks, worst shortfall %.0f ns\n  status: %s\n  device 0 at %s\n",
              what, (unsigned long long)c.kernels, (unsigned long long)c.api, (unsigned long long)c.api_from_channel,
              (unsigned long long)c.linked, c.worst_ns,
              (unsigned long long)c.violations, (unsigned long long)c.clock_checks, c.worst_check_ns, c.status.c_str(),
              c.pci_location.c_str());
}

#ifdef SAMPLE_CUDA_INFER
// The sample under iscope-run (`options` before "--"; ISCOPE_GPU_TEST_KERNELS tiny kernels, default 100,000),
// its dump checked, then removed unless ISCOPE_KEEP_DUMPS is set.
Checked sample_under_iscope_run(const char* name, const std::vector<std::string>& options) {
  const char* env_kernels = std::getenv("ISCOPE_GPU_TEST_KERNELS");
  const std::string dump = temp_path(name);
  std::vector<std::string> argv = {ISCOPE_RUN, "-q", "-o", dump};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--", SAMPLE_CUDA_INFER, "--kernels", env_kernels ? env_kernels : "100000"});
  auto r = run(argv);
  REQUIRE_MESSAGE(r.status == 0, r.out);
  Checked c = check_sample_dump(dump, r.out);
  if (!std::getenv("ISCOPE_KEEP_DUMPS")) ::unlink(dump.c_str());
  return c;
}
#endif

}  // namespace

TEST_CASE("the CUDA sample under iscope-run: every kernel and copy, linked, on one clock") {
#ifndef SAMPLE_CUDA_INFER
  skip("the CUDA sample was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  Checked c = sample_under_iscope_run("cuda_sample", {});
  CHECK(c.kernels >= 100000);
  CHECK(c.api_from_channel == 0);  // the default records API calls through callbacks, on the calling thread
  // A run of seconds: the system collector has seen CUDA's PCI locations and numbered NVML's devices by them.
  CHECK_MESSAGE(c.pci_location.find(", pci_location)") != std::string::npos, c.pci_location);
  report("iscope-run (CUDA injection)", c);
#endif
}

TEST_CASE("the same with the API calls recorded by CUPTI (api_activity): named by OS thread id, linked, on one clock") {
#ifndef SAMPLE_CUDA_INFER
  skip("the CUDA sample was not built (nvcc not found at configure time)");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  Checked c = sample_under_iscope_run("cuda_sample_api_activity", {"--cupti-activities", "default,api_activity"});
  CHECK(c.kernels >= 100000);
  CHECK(c.api_from_channel == c.api);
  CHECK(c.status.find("api_activity") != std::string::npos);
  report("iscope-run, api_activity", c);
#endif
}

TEST_CASE("the CUDA sample with INFERSCOPE_ENABLE only: the session starts before CUDA, in-process") {
#ifndef SAMPLE_CUDA_INFER
  skip("the CUDA sample was not built");
#else
  if (!have_gpu()) skip("no CUDA GPU or driver on this machine");
  const std::string dump = temp_path("cuda_sample_env");
  ::setenv("INFERSCOPE_ENABLE", "1", 1);
  ::setenv("INFERSCOPE_OUTPUT", dump.c_str(), 1);
  auto r = run({SAMPLE_CUDA_INFER, "--kernels", "1000"});
  ::unsetenv("INFERSCOPE_ENABLE");
  ::unsetenv("INFERSCOPE_OUTPUT");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  report("in-process (INFERSCOPE_ENABLE)", check_sample_dump(dump, r.out));
  ::unlink(dump.c_str());
#endif
}
