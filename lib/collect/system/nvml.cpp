#include "collect/system/nvml.hpp"

#include "runtime/runtime.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace inferscope::sys {
namespace {

// The subset of nvml.h used here (values and layouts as in every nvml.h since CUDA 7).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr unsigned kClockSm = 1;          // NVML_CLOCK_SM
constexpr unsigned kTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, mW
constexpr unsigned kFieldPcieTxBytes = 197;   // NVML_FI_DEV_PCIE_COUNT_TX_BYTES
constexpr unsigned kFieldPcieRxBytes = 198;   // NVML_FI_DEV_PCIE_COUNT_RX_BYTES

// nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v3; v2 is the same).
struct nvmlPciInfo_t {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct nvmlUtilization_t {
  unsigned gpu;
  unsigned memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlFieldValue_t {
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;
  long long latencyUsec;
  unsigned valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  union {
    double dVal;
    unsigned uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
  } value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40);

std::optional<uint64_t> field_as_u64(const nvmlFieldValue_t& f) {
  if (f.nvmlReturn != kSuccess) return std::nullopt;
  switch (f.valueType) {
    case 0: return f.value.dVal < 0 ? 0 : static_cast<uint64_t>(f.value.dVal);
    case 1: return f.value.uiVal;
    case 2: return f.value.ulVal;
    case 3: return f.value.ullVal;
    case 4: return f.value.sllVal < 0 ? 0 : static_cast<uint64_t>(f.value.sllVal);
    case 5: return f.value.siVal < 0 ? 0 : static_cast<uint64_t>(f.value.siVal);
    case 6: return f.value.usVal;
  }
  return std::nullopt;
}

std::string g_library_override;

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_count)(unsigned*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*fields)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pcie_max_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_max_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_cur_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_cur_width)(nvmlDevice_t, unsigned*) = nullptr;
};

Nvml::~Nvml() { close(); }

std::string Nvml::open(const std::string& library) {
  close();
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    return "cannot load " + library + " (" + (e ? e : "dlopen failed") + ")";
  }
  auto* api = new Api;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    return fn != nullptr;
  };
  // Required entry points; the rest are optional (a counter the driver lacks is simply not sampled).
  const char* missing = nullptr;
  if (!sym(api->init, "nvmlInit_v2")) missing = "nvmlInit_v2";
  else if (!sym(api->shutdown, "nvmlShutdown")) missing = "nvmlShutdown";
  else if (!sym(api->get_count, "nvmlDeviceGetCount_v2")) missing = "nvmlDeviceGetCount_v2";
  else if (!sym(api->get_handle, "nvmlDeviceGetHandleByIndex_v2")) missing = "nvmlDeviceGetHandleByIndex_v2";
  if (missing) {
    delete api;
    ::dlclose(lib);
    return library + " lacks " + missing;
  }
  sym(api->error_string, "nvmlErrorString");
  sym(api->get_name, "nvmlDeviceGetName");
  sym(api->utilization, "nvmlDeviceGetUtilizationRates");
  sym(api->memory, "nvmlDeviceGetMemoryInfo");
  sym(api->clock, "nvmlDeviceGetClockInfo");
  sym(api->power, "nvmlDeviceGetPowerUsage");
  // Renamed in CUDA 12.2 (clock "event" reasons); the old name stays exported for compatibility.
  if (!sym(api->throttle, "nvmlDeviceGetCurrentClocksEventReasons"))
    sym(api->throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  sym(api->temperature, "nvmlDeviceGetTemperature");
  sym(api->fields, "nvmlDeviceGetFieldValues");
  if (!sym(api->pci_info, "nvmlDeviceGetPciInfo_v3")) sym(api->pci_info, "nvmlDeviceGetPciInfo_v2");
  sym(api->uuid, "nvmlDeviceGetUUID");
  sym(api->pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
  sym(api->pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
  sym(api->pcie_cur_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  sym(api->pcie_cur_width, "nvmlDeviceGetCurrPcieLinkWidth");

  auto err = [&](nvmlReturn_t r) {
    const char* s = api->error_string ? api->error_string(r) : nullptr;
    return std::string(s ? s : "error") + " (" + std::to_string(r) + ")";
  };
  if (nvmlReturn_t r = api->init(); r != kSuccess) {
    std::string msg = "nvmlInit failed: " + err(r);
    delete api;
    ::dlclose(lib);
    return msg;
  }
  unsigned count = 0;
  if (nvmlReturn_t r = api->get_count(&count); r != kSuccess || count == 0) {
    std::string msg = r != kSuccess ? "nvmlDeviceGetCount failed: " + err(r) : std::string("NVML sees no GPU");
    api->shutdown();
    delete api;
    ::dlclose(lib);
    return msg;
  }
  lib_ = lib;
  api_ = api;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    // A device NVML cannot open (lost, no permission) keeps its index with a null handle: it samples nothing.
    if (api->get_handle(i, &d) != kSuccess) d = nullptr;
    devices_.push_back(d);
  }
  pcie_fields_ok_.assign(count, api->fields != nullptr);
  power_instant_ok_.assign(count, api->fields != nullptr);
  return {};
}

std::string Nvml::device_name(uint32_t index) const {
  if (!api_ || index >= devices_.size() || !devices_[index] || !api_->get_name) return {};
  char buf[128] = {};
  if (api_->get_name(devices_[index], buf, sizeof(buf) - 1) != kSuccess) return {};
  return buf;
}

GpuSample Nvml::sample(uint32_t index, uint32_t parts) {
  GpuSample s;
  if (!api_ || index >= devices_.size() || !devices_[index]) return s;
  nvmlDevice_t d = devices_[index];
  if ((parts & kGpuUtil) && api_->utilization) {
    nvmlUtilization_t u{};
    if (api_->utilization(d, &u) == kSuccess) {
      s.util_pct = u.gpu;
      s.mem_util_pct = u.memory;
    }
  }
  if ((parts & kGpuMemory) && api_->memory) {
    nvmlMemory_t m{};
    if (api_->memory(d, &m) == kSuccess) {
      s.mem_used_bytes = m.used;
      s.mem_total_bytes = m.total;
    }
  }
  if ((parts & kGpuClock) && api_->clock) {
    unsigned mhz = 0;
    if (api_->clock(d, kClockSm, &mhz) == kSuccess) s.sm_clock_mhz = mhz;
  }
  if ((parts & kGpuThrottle) && api_->throttle) {
    unsigned long long r = 0;
    if (api_->throttle(d, &r) == kSuccess) s.throttle_reasons = r;
  }
  if ((parts & kGpuTemp) && api_->temperature) {
    unsigned c = 0;
    if (api_->temperature(d, kTemperatureGpu, &c) == kSuccess) s.temperature_c = c;
  }
  // PCIe through the cumulative byte counters: nvmlDeviceGetPcieThroughput would block ~20 ms per
  // direction. Power through the instantaneous field: nvmlDeviceGetPowerUsage is a one-second average on
  // recent GPUs.
  nvmlFieldValue_t f[3];
  int nf = 0;
  const bool want_pcie = (parts & kGpuPcie) && pcie_fields_ok_[index];
  const bool want_power = (parts & kGpuPower) && power_instant_ok_[index];
  if (want_pcie) {
    f[nf] = {};
    f[nf++].fieldId = kFieldPcieTxBytes;
    f[nf] = {};
    f[nf++].fieldId = kFieldPcieRxBytes;
  }
  if (want_power) {
    f[nf] = {};
    f[nf++].fieldId = kFieldPowerInstant;
  }
  if (nf > 0) {
    if (api_->fields(d, nf, f) == kSuccess) {
      int i = 0;
      if (want_pcie) {
        s.pcie_tx_bytes = field_as_u64(f[0]);
        s.pcie_rx_bytes = field_as_u64(f[1]);
        if (f[0].nvmlReturn != kSuccess || f[1].nvmlReturn != kSuccess) pcie_fields_ok_[index] = false;
        i = 2;
      }
      if (want_power) {
        if (auto p = field_as_u64(f[i])) s.power_mw = static_cast<uint32_t>(*p);
        else power_instant_ok_[index] = false;
      }
    } else {
      pcie_fields_ok_[index] = power_instant_ok_[index] = false;
    }
  }
  if ((parts & kGpuPower) && !s.power_mw && !power_instant_ok_[index] && api_->power) {
    unsigned mw = 0;
    if (api_->power(d, &mw) == kSuccess) s.power_mw = mw;
  }
  return s;
}

std::string Nvml::pci_location(uint32_t index) const {
  if (!api_ || index >= devices_.size() || !devices_[index] || !api_->pci_info) return {};
  nvmlPciInfo_t info{};
  if (api_->pci_info(devices_[index], &info) != kSuccess) return {};
  return runtime::format_pci_location(info.domain, info.bus, info.device);
}

std::string Nvml::uuid(uint32_t index) const {
  if (!api_ || index >= devices_.size() || !devices_[index] || !api_->uuid) return {};
  char buf[96] = {};
  if (api_->uuid(devices_[index], buf, sizeof(buf) - 1) != kSuccess) return {};
  return buf;
}

PcieLink Nvml::pcie_link(uint32_t index) const {
  PcieLink l;
  if (!api_ || index >= devices_.size() || !devices_[index]) return l;
  auto read = [&](nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*), std::optional<uint32_t>& out) {
    unsigned v = 0;
    // 0 is what some virtualised drivers answer for "unknown".
    if (fn && fn(devices_[index], &v) == kSuccess && v > 0) out = v;
  };
  read(api_->pcie_max_gen, l.max_gen);
  read(api_->pcie_max_width, l.max_width);
  read(api_->pcie_cur_gen, l.cur_gen);
  read(api_->pcie_cur_width, l.cur_width);
  return l;
}

NvmlDeviceMap map_nvml_to_cuda(const std::vector<std::string>& nvml_locations,
                               const std::vector<std::string>& nvml_uuids,
                               const std::vector<std::string>& cuda_locations, const char* visible_devices) {
  const size_t n = nvml_locations.size();
  NvmlDeviceMap map{std::vector<int>(n, -1), "pci_location"};
  std::vector<int>& out = map.cuda;
  const bool nvml_knows = std::any_of(nvml_locations.begin(), nvml_locations.end(), [](auto& l) { return !l.empty(); });
  if (!cuda_locations.empty() && nvml_knows) {
    for (size_t i = 0; i < n; ++i)
      if (!nvml_locations[i].empty())
        if (auto it = std::find(cuda_locations.begin(), cuda_locations.end(), nvml_locations[i]); it != cuda_locations.end())
          out[i] = static_cast<int>(it - cuda_locations.begin());
    return map;
  }
  if (!visible_devices) {
    map.source = "nvml_order";
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int>(i);
    return map;
  }
  map.source = "CUDA_VISIBLE_DEVICES";
  const std::string list = visible_devices;
  int next = 0;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = list.substr(at, comma - at);
    at = comma + 1;
    while (!entry.empty() && entry.front() == ' ') entry.erase(entry.begin());
    while (!entry.empty() && entry.back() == ' ') entry.pop_back();
    size_t index = n;
    if (!entry.empty() && std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      if (entry.size() < 6) index = std::stoul(entry);
    } else if (entry.rfind("GPU-", 0) == 0) {
      for (size_t i = 0; i < nvml_uuids.size() && i < n; ++i)
        if (nvml_uuids[i].rfind(entry, 0) == 0) {
          if (index != n) {  // a prefix that fits two devices names none
            index = n;
            break;
          }
          index = i;
        }
    }
    if (index >= n || out[index] != -1) break;  // CUDA stops at the first entry that names no device
    out[index] = next++;
  }
  return map;
}

std::optional<std::pair<uint32_t, uint32_t>> effective_pcie_link(const PcieLink& link) {
  const std::optional<uint32_t> gen = link.max_gen ? link.max_gen : link.cur_gen;
  std::optional<uint32_t> width = link.max_width;
  if (link.cur_width && (!width || *link.cur_width < *width)) width = link.cur_width;
  if (!gen || !width) return std::nullopt;
  return std::make_pair(*gen, *width);
}

void Nvml::close() {
  if (api_) {
    api_->shutdown();
    delete api_;
    api_ = nullptr;
  }
  if (lib_) {
    ::dlclose(lib_);
    lib_ = nullptr;
  }
  devices_.clear();
  pcie_fields_ok_.clear();
  power_instant_ok_.clear();
}

void set_nvml_library_for_testing(const std::string& path) { g_library_override = path; }
const std::string& nvml_library_for_testing() { return g_library_override; }

}  // namespace inferscope::sys
