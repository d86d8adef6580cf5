// NVTX capture and emission.
//
// Capture: libinferscope.so is an NVTX injection library. When NVTX_INJECTION64_PATH names it (iscope-run
// sets it), the first NVTX call of the application loads it and calls InitializeInjectionNvtx2, which points
// NVTX's function table at the handlers below. Push/pop ranges nest per thread and become kNvtxRange records
// (aux = depth) in the calling thread's ring; start/end ranges may end on another thread; marks become
// kNvtxMark records. Works without a GPU, without CUPTI.
//
// Emission (Config::nvtx_emit): ScopedRange::begin, only while a session records, reads one flag
// (detail::g_nvtx_emit); when set it calls nvtx_range_push below, which pushes a range of the "InferScope"
// NVTX domain through the NVTX v3 header-only API (it finds Nsight Systems' injection, or none). When this
// library is itself the injection, ranges of the InferScope domain are ignored so they are not recorded twice.
#include "collect/cupti/nvtx_hooks.hpp"

#include "runtime/runtime.hpp"

#include <inferscope/scope.hpp>

#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace inferscope::cupti {
namespace {

std::atomic<bool> g_capture{false};
std::atomic<bool> g_injected{false};
std::atomic<uint32_t> g_own_domain{0};
constexpr const char* kOwnDomain = "InferScope";

struct OpenRange {
  uint32_t name;
  uint64_t start;
};
thread_local std::vector<OpenRange> t_stack;

std::mutex g_started_mu;
std::unordered_map<uint64_t, OpenRange> g_started;
std::atomic<uint64_t> g_next_range{1};

uint32_t own_domain() {
  uint32_t id = g_own_domain.load(std::memory_order_relaxed);
  if (id == 0) {
    id = runtime::intern(kOwnDomain);
    g_own_domain.store(id, std::memory_order_relaxed);
  }
  return id;
}

bool is_own(nvtxDomainHandle_t d) { return d && static_cast<uint32_t>(reinterpret_cast<uintptr_t>(d)) == own_domain(); }

uint32_t unknown_id() {
  static const uint32_t id = runtime::intern("<nvtx>");
  return id;
}

uint32_t text_id(const char* s) { return s ? detail::intern_cached(s, std::strlen(s)) : unknown_id(); }

uint32_t message_id(const nvtxEventAttributes_t* a) {
  if (!a) return unknown_id();
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return text_id(a->message.ascii);
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a->message.registered));
  return unknown_id();
}

void emit_range(uint32_t name, uint64_t start, uint64_t end, size_t depth) {
  const RangeRecord r{{RecordKind::kNvtxRange, static_cast<uint8_t>(depth < 255 ? depth : 255),
                       static_cast<uint16_t>(sizeof(RangeRecord))},
                      name, start, end};
  detail::emit_record(&r, sizeof(r));
}

void emit_mark(uint32_t name) {
  if (!g_capture.load(std::memory_order_relaxed)) return;
  const MarkRecord m{{RecordKind::kNvtxMark, 0, static_cast<uint16_t>(sizeof(MarkRecord))}, name, detail::now()};
  detail::emit_record(&m, sizeof(m));
}

int push(uint32_t name) {
  // The stack is kept whether or not a session records, so pops always match their pushes.
  t_stack.push_back({name, detail::now()});
  return static_cast<int>(t_stack.size()) - 1;
}

int pop() {
  if (t_stack.empty()) return -1;
  const uint64_t end = detail::now();
  const OpenRange r = t_stack.back();
  t_stack.pop_back();
  if (g_capture.load(std::memory_order_relaxed)) emit_range(r.name, r.start, end, t_stack.size());
  return static_cast<int>(t_stack.size());
}

nvtxRangeId_t range_start(uint32_t name) {
  // Nothing records: no bookkeeping (and no lock) for start/end ranges; id 0 ends nothing.
  if (!g_capture.load(std::memory_order_relaxed) || detail::g_session.load(std::memory_order_relaxed) == 0) return 0;
  const uint64_t id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lk(g_started_mu);
  g_started[id] = {name, detail::now()};
  return id;
}

void range_end(nvtxRangeId_t id) {
  if (id == 0) return;
  const uint64_t end = detail::now();
  OpenRange r;
  {
    std::lock_guard lk(g_started_mu);
    auto it = g_started.find(id);
    if (it == g_started.end()) return;
    r = it->second;
    g_started.erase(it);
  }
  if (g_capture.load(std::memory_order_relaxed)) emit_range(r.name, r.start, end, 0);
}

// --- the handlers NVTX calls -----------------------------------------------------------------------------
void NVTX_API h_mark_ex(const nvtxEventAttributes_t* a) { emit_mark(message_id(a)); }
void NVTX_API h_mark_a(const char* m) { emit_mark(text_id(m)); }
nvtxRangeId_t NVTX_API h_start_ex(const nvtxEventAttributes_t* a) { return range_start(message_id(a)); }
nvtxRangeId_t NVTX_API h_start_a(const char* m) { return range_start(text_id(m)); }
void NVTX_API h_end(nvtxRangeId_t id) { range_end(id); }
int NVTX_API h_push_ex(const nvtxEventAttributes_t* a) { return push(message_id(a)); }
int NVTX_API h_push_a(const char* m) { return push(text_id(m)); }
int NVTX_API h_pop() { return pop(); }

void NVTX_API h_dmark(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  if (!is_own(d)) emit_mark(message_id(a));
}
nvtxRangeId_t NVTX_API h_dstart(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return is_own(d) ? 0 : range_start(message_id(a));
}
void NVTX_API h_dend(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  if (!is_own(d)) range_end(id);
}
int NVTX_API h_dpush(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return is_own(d) ? 0 : push(message_id(a));
}
int NVTX_API h_dpop(nvtxDomainHandle_t d) { return is_own(d) ? 0 : pop(); }
nvtxStringHandle_t NVTX_API h_register(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(text_id(s)));
}
nvtxDomainHandle_t NVTX_API h_domain(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(text_id(name ? name : "<domain>")));
}

template <class F>
void install(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

// --- emission --------------------------------------------------------------------------------------------
nvtxDomainHandle_t emit_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA(kOwnDomain);
  return d;
}

void nvtx_push_hook(const detail::StaticName& n) noexcept {
  try {
    thread_local std::unordered_map<const detail::StaticName*, nvtxStringHandle_t> handles;
    auto it = handles.find(&n);
    if (it == handles.end()) {
      std::string text = n.is_function ? runtime::function_name_from_pretty(n.text) : std::string(n.text);
      it = handles.emplace(&n, nvtxDomainRegisterStringA(emit_domain(), text.c_str())).first;
    }
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = it->second;
    nvtxDomainRangePushEx(emit_domain(), &a);
  } catch (...) {
  }
}

void nvtx_pop_hook() noexcept { nvtxDomainRangePop(emit_domain()); }

class NvtxCollector final : public runtime::Collector {
 public:
  const char* name() const override { return "nvtx"; }
  bool wanted(const Config& c) const override { return c.nvtx_capture || c.nvtx_emit; }
  std::string start(const Config& c) override {
    g_capture.store(c.nvtx_capture);
    runtime::set_nvtx_hooks(nvtx_push_hook, nvtx_pop_hook);
    detail::g_nvtx_emit.store(c.nvtx_emit, std::memory_order_relaxed);
    std::string s = "on:";
    if (c.nvtx_capture)
      s += g_injected.load() ? " capturing the application's NVTX ranges"
                             : " capturing NVTX ranges once NVTX loads this library (NVTX_INJECTION64_PATH)";
    if (c.nvtx_emit) s += std::string(c.nvtx_capture ? ";" : "") + " emitting ISCOPE ranges as NVTX (domain InferScope)";
    return s;
  }
  void stop() override {
    detail::g_nvtx_emit.store(false, std::memory_order_relaxed);
    g_capture.store(false);
  }
};

}  // namespace

void register_nvtx_collector() {
  runtime::register_collector([] { return std::unique_ptr<runtime::Collector>(new NvtxCollector); });
}

}  // namespace inferscope::cupti

extern "C" INFERSCOPE_API int InitializeInjectionNvtx2(const void* (*get_export_table)(unsigned int)) {
  using namespace inferscope::cupti;
  if (!get_export_table) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!cb || !cb->GetModuleFunctionTable) return 0;
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) {
    install(t, n, NVTX_CBID_CORE_MarkEx, h_mark_ex);
    install(t, n, NVTX_CBID_CORE_MarkA, h_mark_a);
    install(t, n, NVTX_CBID_CORE_RangeStartEx, h_start_ex);
    install(t, n, NVTX_CBID_CORE_RangeStartA, h_start_a);
    install(t, n, NVTX_CBID_CORE_RangeEnd, h_end);
    install(t, n, NVTX_CBID_CORE_RangePushEx, h_push_ex);
    install(t, n, NVTX_CBID_CORE_RangePushA, h_push_a);
    install(t, n, NVTX_CBID_CORE_RangePop, h_pop);
  }
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) {
    install(t, n, NVTX_CBID_CORE2_DomainMarkEx, h_dmark);
    install(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, h_dstart);
    install(t, n, NVTX_CBID_CORE2_DomainRangeEnd, h_dend);
    install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, h_dpush);
    install(t, n, NVTX_CBID_CORE2_DomainRangePop, h_dpop);
    install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, h_register);
    install(t, n, NVTX_CBID_CORE2_DomainCreateA, h_domain);
  }
  g_injected.store(true);
  return 1;
}
