// NVML loaded at run time (dlopen "libnvidia-ml.so.1" + dlsym): the runtime has no link dependency on the
// driver and loads on machines without one. nvml.h is not needed: the few types and
// prototypes used are declared in nvml.cpp (NVML's ABI is stable; the _v2 entry points have existed since
// driver 331).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::sys {

/// One reading of a device. A counter the device does not support is absent (never a failure).
struct GpuSample {
  std::optional<uint32_t> util_pct;          ///< nvmlDeviceGetUtilizationRates().gpu: % of time a kernel ran
  std::optional<uint32_t> mem_util_pct;      ///< .memory: % of time device memory was read or written
  std::optional<uint64_t> mem_used_bytes;
  std::optional<uint64_t> mem_total_bytes;
  std::optional<uint64_t> pcie_tx_bytes;     ///< cumulative PCIe bytes sent by the GPU (field 197)
  std::optional<uint64_t> pcie_rx_bytes;     ///< cumulative PCIe bytes received by the GPU (field 198)
  std::optional<uint32_t> sm_clock_mhz;
  std::optional<uint32_t> power_mw;
  std::optional<uint64_t> throttle_reasons;  ///< nvmlClocksThrottleReason* bit mask
  std::optional<uint32_t> temperature_c;
};

/// A device's PCIe link as NVML reports it; a value the driver does not report is absent.
struct PcieLink {
  std::optional<uint32_t> max_gen;    ///< nvmlDeviceGetMaxPcieLinkGeneration: GPU and system together
  std::optional<uint32_t> max_width;  ///< nvmlDeviceGetMaxPcieLinkWidth: lanes GPU and slot both have
  std::optional<uint32_t> cur_gen;    ///< nvmlDeviceGetCurrPcieLinkGeneration: drops while the GPU idles
  std::optional<uint32_t> cur_width;  ///< nvmlDeviceGetCurrPcieLinkWidth: what the link trained to
};

/// The link a copy can use: the maximum generation (the current one is lowered by power management while
/// the GPU idles, so it understates what a copy gets) and the narrower of the maximum and the current
/// width (a link that trained narrow, e.g. x8 in an x16 slot, stays narrow under load). Absent unless
/// both a generation and a width are known.
std::optional<std::pair<uint32_t, uint32_t>> effective_pcie_link(const PcieLink& link);

/// Groups of NVML queries, so costly ones can be read less often (and timed apart in bench/system).
enum GpuPart : uint32_t {
  kGpuUtil = 1u << 0,      ///< utilization (gpu, memory)
  kGpuMemory = 1u << 1,    ///< memory used and total
  kGpuClock = 1u << 2,     ///< SM clock
  kGpuThrottle = 1u << 3,  ///< clock throttle (event) reasons
  kGpuTemp = 1u << 4,      ///< temperature
  kGpuPower = 1u << 5,     ///< instantaneous power (field 186), else the averaged nvmlDeviceGetPowerUsage
  kGpuPcie = 1u << 6,      ///< PCIe byte counters (fields 197, 198)
  kGpuAll = 0x7f,
};

/// The NVML library and its devices. Not thread-safe: one sampling thread owns it.
class Nvml {
 public:
  Nvml() = default;
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  /// Loads `library` (default libnvidia-ml.so.1), initialises NVML and opens every device. Returns "" on
  /// success, else one line saying what failed (library missing, symbol missing, nvmlInit error, no device).
  std::string open(const std::string& library = "libnvidia-ml.so.1");
  bool is_open() const { return lib_ != nullptr; }
  uint32_t device_count() const { return static_cast<uint32_t>(devices_.size()); }
  /// Device name ("NVIDIA H100 80GB HBM3"), empty when unknown.
  std::string device_name(uint32_t index) const;
  /// The device's PCI location as format_pci_location writes it, empty when NVML does not say.
  std::string pci_location(uint32_t index) const;
  /// The device's UUID ("GPU-8e6f..."), empty when unknown.
  std::string uuid(uint32_t index) const;
  /// Reads the `parts` (GpuPart bits) of one device.
  GpuSample sample(uint32_t index, uint32_t parts = kGpuAll);
  /// The PCIe link of one device (read once: it does not change during a run, except the idle downshift).
  PcieLink pcie_link(uint32_t index) const;
  void close();

 private:
  struct Api;
  void* lib_ = nullptr;
  Api* api_ = nullptr;
  std::vector<void*> devices_;
  std::vector<bool> pcie_fields_ok_;  // false once the driver said the PCIe byte counters are unsupported
  std::vector<bool> power_instant_ok_;
};

/// How NVML's devices map onto CUDA's ordinals, and what the mapping came from ("pci_location",
/// "CUDA_VISIBLE_DEVICES" or "nvml_order": process info nvml.device_map).
struct NvmlDeviceMap {
  std::vector<int> cuda;  ///< index = NVML index; CUDA's ordinal, -1 when not visible to this process
  std::string source;
};

/// CUDA's ordinal of each NVML device. By PCI location
/// once the GPU collector has published CUDA's (`cuda_locations`, runtime::cuda_device_locations) and NVML
/// gives locations; otherwise from CUDA_VISIBLE_DEVICES as CUDA reads it (`visible_devices`, null when
/// unset: every device in order): a comma list of indices or UUID prefixes ("GPU-8e6f"), up to the first
/// entry that names no device, a repeated one or a MIG instance (NVML's counters are per GPU, not per
/// instance). Indices follow NVML's order, the PCI bus order, which is CUDA's on a machine of one GPU model;
/// CUDA's default FASTEST_FIRST order can differ on a mixed machine, which the PCI locations settle.
NvmlDeviceMap map_nvml_to_cuda(const std::vector<std::string>& nvml_locations,
                               const std::vector<std::string>& nvml_uuids,
                               const std::vector<std::string>& cuda_locations, const char* visible_devices);

/// Test hook: the library path the system collector passes to Nvml::open ("" = the default). Lets a test
/// on a machine with a driver check the no-NVML path.
void set_nvml_library_for_testing(const std::string& path);
const std::string& nvml_library_for_testing();

}  // namespace inferscope::sys
