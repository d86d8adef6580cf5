// A stand-in for libnvidia-ml.so.1 with two devices and fixed PCIe links, so the system collector's NVML
// path (what it writes into process info) is tested on machines without a driver. Only the entry points
// Nvml::open requires and the PCIe link queries exist; every other counter is "not exported", which the
// collector must treat as unsupported.
extern "C" {

namespace {
struct FakeDevice {
  unsigned max_gen, max_width, cur_gen, cur_width;
};
// Device 0: a Gen4 x16 link idling at Gen1 (the current generation must not be taken as the peak).
// Device 1: a Gen5 GPU whose link trained to x8 (the current width must be).
FakeDevice g_devices[] = {{4, 16, 1, 16}, {5, 16, 5, 8}};
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

}  // extern "C"
