// NVML counters on a real GPU: while a PyTorch child process keeps the GPU busy with matrix products (and
// then with host-to-device copies), the session's gpu.* samples show it. Exits 77 with the reason when
// there is no NVML, no GPU or no PyTorch with CUDA.
#include <doctest/doctest.h>

#include <inferscope/scope.hpp>

#include "collect/system/nvml.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

extern char** environ;
using namespace inferscope;

namespace {

const char* kPython = INFERSCOPE_TEST_PYTHON;

// Busy phase: fp16 matmuls for 4 s; copy phase: pinned 256 MB host-to-device copies for 1.5 s.
const char* kChild = R"PY(
import sys, time, torch
x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
for _ in range(3): y = x @ x
torch.cuda.synchronize()
print("busy", flush=True)
t = time.time()
while time.time() - t < 4.0:
    for _ in range(10): y = x @ x
    torch.cuda.synchronize()
print("copy", flush=True)
h = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
d = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
t = time.time()
while time.time() - t < 1.5:
    d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
print("done", flush=True)
)PY";

int run_python(const std::vector<std::string>& args, int* out_fd) {
  std::vector<char*> argv{const_cast<char*>(kPython)};
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int p[2] = {-1, -1};
  if (out_fd) {
    if (::pipe(p) != 0) return -1;
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
  }
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, kPython, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (out_fd) {
    ::close(p[1]);
    *out_fd = p[0];
  }
  return rc == 0 ? pid : -1;
}

int wait_exit(int pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("NVML samples follow a GPU busy loop") {
  {
    sys::Nvml probe;
    if (std::string err = probe.open(); !err.empty()) skip("no NVML here: " + err);
    std::printf("NVML device 0: %s\n", probe.device_name(0).c_str());
  }
  if (int pid = run_python({"-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"}, nullptr);
      pid < 0 || wait_exit(pid) != 0)
    skip(std::string("no PyTorch with CUDA at ") + kPython);

  Config cfg;
  cfg.output = "/tmp/iscope-system-gpu-" + std::to_string(::getpid()) + ".iscope";
  cfg.sample_period_ms = 10;
  cfg.cupti = false;
  cfg.python = false;
  REQUIRE(start(cfg));
  int fd = -1;
  const int pid = run_python({"-c", kChild}, &fd);
  REQUIRE(pid > 0);
  std::map<std::string, uint64_t> at;  // phase -> session ticks when the child announced it
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1) {
    if (c != '\n') {
      line += c;
      continue;
    }
    at[line] = detail::now();
    line.clear();
  }
  ::close(fd);
  const int rc = wait_exit(pid);
  REQUIRE(stop());
  REQUIRE(rc == 0);
  REQUIRE(at.count("busy"));
  REQUIRE(at.count("copy"));
  REQUIRE(at.count("done"));

  dump::DumpReader r(cfg.output);
  dump::ClockModel clock(r.calibration());
  std::string status;
  for (auto& [k, v] : r.collector_status())
    if (k == "system") status = v;
  INFO("status: " << status);
  std::printf("system collector status: %s\n", status.c_str());
  CHECK(status.find("via NVML") != std::string::npos);
  // The PCIe link the analyzer's copy peak comes from (docs/counters.md, "PCIe link"); every data-centre GPU
  // driver answers these queries.
  std::map<std::string, std::string> info;
  for (auto& [k, v] : r.process_info()) info[k] = v;
  std::printf("PCIe link of NVML device 0: gen %s (max %s, at start %s), width %s (max %s, at start %s)\n",
              info["gpu.0.pcie_gen"].c_str(), info["gpu.0.pcie_gen_max"].c_str(),
              info["gpu.0.pcie_gen_current"].c_str(), info["gpu.0.pcie_width"].c_str(),
              info["gpu.0.pcie_width_max"].c_str(), info["gpu.0.pcie_width_current"].c_str());
  CHECK(std::atoi(info["gpu.0.pcie_gen"].c_str()) >= 1);
  CHECK(std::atoi(info["gpu.0.pcie_width"].c_str()) >= 1);

  // NVML's utilization is an average over its own sampling window (up to 1 s): skip the first second.
  const uint64_t busy_from = at["busy"] + static_cast<uint64_t>(1e9 / clock.ns_per_tick());
  std::map<std::string, std::vector<double>> busy, copy;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t* p) {
    if (h.kind != RecordKind::kCounter) return;
    auto rec = dump::load<CounterRecord>(p);
    if (rec.scope != CounterScope::kDevice || rec.target != 0) return;
    const double v = h.aux == static_cast<uint8_t>(AttrType::kDouble) ? rec.value.d : double(rec.value.i);
    const std::string name = r.string_at(rec.name);
    if (rec.ts >= busy_from && rec.ts <= at["copy"]) busy[name].push_back(v);
    if (rec.ts >= at["copy"] && rec.ts <= at["done"]) copy[name].push_back(v);
  });
  std::remove(cfg.output.c_str());

  for (auto& [name, v] : busy)
    std::printf("busy  %-26s n=%-4zu median %.4g max %.4g\n", name.c_str(), v.size(), median(v),
                *std::max_element(v.begin(), v.end()));
  for (auto& [name, v] : copy)
    std::printf("copy  %-26s n=%-4zu median %.4g max %.4g\n", name.c_str(), v.size(), median(v),
                *std::max_element(v.begin(), v.end()));
  std::fflush(stdout);

  REQUIRE(busy.count("gpu.util_pct"));
  // Unchanged values are written once a second: a steady 99 % over 3 s still gives a few samples.
  CHECK(busy["gpu.util_pct"].size() >= 2);
  CHECK(median(busy["gpu.util_pct"]) > 50);
  REQUIRE(busy.count("gpu.mem_used_bytes"));
  CHECK(median(busy["gpu.mem_used_bytes"]) > 128e6);  // the child's 8192^2 fp16 matrices and context
  REQUIRE(busy.count("gpu.sm_clock_mhz"));
  CHECK(median(busy["gpu.sm_clock_mhz"]) > 100);
  REQUIRE(busy.count("gpu.power_mw"));
  CHECK(median(busy["gpu.power_mw"]) > 10'000);  // > 10 W while computing
  // PCIe byte counters are optional per device and driver; when present, the copies must show.
  if (copy.count("gpu.pcie_rx_bytes_per_s") && copy.count("gpu.pcie_tx_bytes_per_s")) {
    const double peak = std::max(*std::max_element(copy["gpu.pcie_rx_bytes_per_s"].begin(), copy["gpu.pcie_rx_bytes_per_s"].end()),
                                 *std::max_element(copy["gpu.pcie_tx_bytes_per_s"].begin(), copy["gpu.pcie_tx_bytes_per_s"].end()));
    CHECK(peak > 1e9);
  } else {
    std::printf("note: no PCIe byte counters on this device/driver\n");
  }
}
