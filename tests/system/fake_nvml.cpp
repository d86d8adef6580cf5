// A stand-in for libnvidia-ml.so.1 with two devices, fixed PCIe links, PCI locations and UUIDs, and a
// utilization reading that tells the devices apart (40 % and 41 %), so the system collector's NVML path
// (what it writes into process info, under which device number) is tested on machines without a driver.
// Only the entry points Nvml::open requires and these queries exist; every other counter is "not
// exported", which the collector must treat as unsupported.
extern "C" {

namespace {
struct FakeDevice {
  unsigned max_gen, max_width, cur_gen, cur_width;
  unsigned bus;
  const char* uuid;
  unsigned util;
};
// Device 0: a Gen4 x16 link idling at Gen1 (the current generation must not be taken as the peak).
// Device 1: a Gen5 GPU whose link trained to x8 (the current width must be).
FakeDevice g_devices[] = {{4, 16, 1, 16, 0x19, "GPU-aaaa1111-0000-0000-0000-000000000000", 40},
                          {5, 16, 5, 8, 0x3b, "GPU-bbbb2222-0000-0000-0000-000000000000", 41}};
struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Utilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};
int g_fake_device_tag[2];
void* handle(unsigned i) { return &g_fake_device_tag[i]; }
FakeDevice* dev(void* h) {
  for (unsigned i = 0; i < 2; ++i)
    if (h == handle(i)) return &g_devices[i];
  return nullptr;
}
int get(void* h, unsigned FakeDevice::*field, unsigned* out) {
  FakeDevice* d = dev(h);
  if (!d || !out) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *out = d->*field;
  return 0;
}
}  // namespace

__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if (i >= 2) return 2;
  *h = handle(i);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxPcieLinkGeneration(void* h, unsigned* v) {
  return get(h, &FakeDevice::max_gen, v);
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxPcieLinkWidth(void* h, unsigned* v) {
  return get(h, &FakeDevice::max_width, v);
}
__attribute__((visibility("default"))) int nvmlDeviceGetCurrPcieLinkGeneration(void* h, unsigned* v) {
  return get(h, &FakeDevice::cur_gen, v);
}
__attribute__((visibility("default"))) int nvmlDeviceGetCurrPcieLinkWidth(void* h, unsigned* v) {
  return get(h, &FakeDevice::cur_width, v);
}

__attribute__((visibility("default"))) int nvmlDeviceGetPciInfo_v3(void* h, PciInfo* p) {
  FakeDevice* d = dev(h);
  if (!d || !p) return 2;
  *p = PciInfo{};
  p->domain = 0;
  p->bus = d->bus;
  p->device = 0;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* h, char* out, unsigned len) {
  FakeDevice* d = dev(h);
  if (!d || !out || len < 41) return 2;
  for (unsigned i = 0; i < 41; ++i) out[i] = d->uuid[i];
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* h, Utilization* u) {
  FakeDevice* d = dev(h);
  if (!d || !u) return 2;
  u->gpu = d->util;
  u->memory = 0;
  return 0;
}

}  // extern "C"
