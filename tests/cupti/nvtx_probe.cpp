// An NVTX tool for tests, in place of Nsight Systems: loaded through NVTX_INJECTION64_PATH, it logs the domain
// ranges it receives, one line each ("push <domain>/<message> <depth>", "pop <domain>"), so a test can check
// that the ranges a program emits arrive, with their names and nesting. nvtx_probe_log() returns the log.
#include <nvtx3/nvToolsExt.h>

#include <deque>
#include <mutex>
#include <string>

namespace {

std::mutex g_mu;
std::string g_log;
std::string g_copy;
thread_local int t_depth = 0;

// Domain and string handles point into this store, which lives as long as the process: a handle stays
// valid while NVTX may use it, and LeakSanitizer sees the strings as reachable, not leaked.
std::deque<std::string> g_handles;

const std::string* keep(const char* s) {
  std::lock_guard lk(g_mu);
  return &g_handles.emplace_back(s ? s : "");
}

std::string text_of(const void* handle) { return handle ? *static_cast<const std::string*>(handle) : std::string(); }

std::string message_of(const nvtxEventAttributes_t* a) {
  if (!a) return "<none>";
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) return text_of(a->message.registered);
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) return a->message.ascii;
  return "<other>";
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<std::string*>(keep(name)));
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<std::string*>(keep(s)));
}

int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::lock_guard lk(g_mu);
  g_log += "push " + text_of(d) + "/" + message_of(a) + " " + std::to_string(t_depth) + "\n";
  return t_depth++;
}

int NVTX_API domain_pop(nvtxDomainHandle_t d) {
  std::lock_guard lk(g_mu);
  g_log += "pop " + text_of(d) + "\n";
  return --t_depth;
}

template <class F>
void install(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(unsigned int)) {
  if (!get_export_table) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!cb || !cb->GetModuleFunctionTable) return 0;
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) return 0;
  install(t, n, NVTX_CBID_CORE2_DomainCreateA, domain_create);
  install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, register_string);
  install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, domain_push);
  install(t, n, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  return 1;
}

/// Everything received so far, one line per call.
extern "C" __attribute__((visibility("default"))) const char* nvtx_probe_log() {
  std::lock_guard lk(g_mu);
  g_copy = g_log;
  return g_copy.c_str();
}
