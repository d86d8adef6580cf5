#include "collect/cupti/activity_translator.hpp"

#include "runtime/runtime.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace inferscope::cupti {

std::string demangle(const char* name) {
  if (!name) return "<unknown kernel>";
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out(d);
  std::free(d);
  return out;
}

namespace {

template <class T>
T header_for(RecordKind kind, uint8_t aux = 0) {
  T r{};
  r.h = RecordHeader{kind, aux, static_cast<uint16_t>(sizeof(T))};
  return r;
}

// The fields CUPTI's host/device copies and peer copies share (CUpti_ActivityMemcpy6, ...PtoP4).
template <class Copy>
GpuMemcpyRecord copy_record(const Copy* m, uint8_t copy_kind, uint32_t device, uint32_t dst_device) {
  auto r = header_for<GpuMemcpyRecord>(RecordKind::kGpuMemcpy, copy_kind);
  r.correlation = m->correlationId;
  r.start = m->start;
  r.end = m->end;
  r.bytes = m->bytes;
  r.device = device;
  r.context = m->contextId;
  r.stream = m->streamId;
  r.src_kind = static_cast<MemoryKind>(m->srcKind);
  r.dst_kind = static_cast<MemoryKind>(m->dstKind);
  r.is_async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0;
  r.graph_id = m->graphId;
  r.dst_device = dst_device;
  return r;
}

uint8_t overhead_code(uint32_t kind) {
  // CUPTI's overhead kinds are 0, 1 and multiples of 1 << 16: 0/1 stay, the others become 2, 3, ...
  return kind < (1u << 16) ? static_cast<uint8_t>(kind) : static_cast<uint8_t>((kind >> 16) + 1);
}

const char* overhead_name(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "cupti: driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "cupti: buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "cupti: instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "cupti: resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "cupti: module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "cupti: lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "cupti: command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "cupti: activity buffer request";
    default: return "cupti: overhead";
  }
}

// The interned name of an overhead kind: the string table's lock once per kind, not once per record.
uint32_t overhead_name_id(uint32_t kind) {
  static std::atomic<uint32_t> ids[256];
  std::atomic<uint32_t>& slot = ids[overhead_code(kind)];
  uint32_t id = slot.load(std::memory_order_relaxed);
  if (id == 0) slot.store(id = runtime::intern(overhead_name(kind)), std::memory_order_relaxed);
  return id;
}

}  // namespace

uint32_t ActivityTranslator::kernel_name(const char* mangled) {
  // Caller holds mu_.
  auto it = names_by_ptr_.find(mangled);
  if (it != names_by_ptr_.end()) return it->second;
  const uint32_t id = runtime::intern(demangle(mangled));
  names_by_ptr_.emplace(mangled, id);
  return id;
}

void ActivityTranslator::set_context_device(uint32_t context, uint32_t device) {
  std::lock_guard lk(mu_);
  ctx_device_[context] = device;
}

uint32_t ActivityTranslator::device_of_context(uint32_t context) const {
  auto it = ctx_device_.find(context);
  return it == ctx_device_.end() ? 0 : it->second;
}

void ActivityTranslator::ignore_correlation(uint32_t correlation) {
  std::lock_guard lk(mu_);
  ignored_.insert(correlation);
}

void ActivityTranslator::set_system_thread_ids(bool on) {
  std::lock_guard lk(mu_);
  system_tids_ = on;
}

void ActivityTranslator::begin_internal(uint32_t os_tid, uint64_t begin) {
  std::lock_guard lk(mu_);
  internal_.push_back({os_tid, begin, UINT64_MAX});
}

void ActivityTranslator::end_internal(uint32_t os_tid, uint64_t end) {
  std::lock_guard lk(mu_);
  for (auto it = internal_.rbegin(); it != internal_.rend(); ++it)
    if (it->os_tid == os_tid && it->end == UINT64_MAX) {
      it->end = end;
      return;
    }
}

bool ActivityTranslator::in_internal_window(uint32_t os_tid, uint64_t start) const {
  for (const auto& w : internal_)
    if (w.os_tid == os_tid && start >= w.begin && start <= w.end) return true;
  return false;
}

void ActivityTranslator::expect_clock_check(uint32_t correlation, uint32_t device, uint64_t host_before) {
  std::lock_guard lk(mu_);
  auto& c = checks_[correlation];
  c.device = device;
  c.before = host_before;
}

void ActivityTranslator::complete_clock_check(uint32_t correlation, uint64_t host_after) {
  std::lock_guard lk(mu_);
  auto it = checks_.find(correlation);
  if (it == checks_.end()) return;
  it->second.after = host_after;
  maybe_emit_check(correlation, it->second);
}

void ActivityTranslator::maybe_emit_check(uint32_t correlation, PendingCheck& c) {
  if (!c.have_gpu || c.after == 0) return;
  auto r = header_for<ClockCheckRecord>(RecordKind::kClockCheck);
  r.device = c.device;
  r.cpu_before = c.before;
  r.gpu_ts = c.gpu_start;
  r.cpu_after = c.after;
  r.gpu_end = c.gpu_end;
  ++stats_.clock_checks;
  emit(&r, sizeof(r));
  checks_.erase(correlation);
}

TranslateStats ActivityTranslator::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

bool ActivityTranslator::translate(const CUpti_Activity* a) {
  std::lock_guard lk(mu_);
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      auto r = header_for<GpuKernelRecord>(RecordKind::kGpuKernel);
      r.name = kernel_name(k->name);
      r.start = k->start;
      r.end = k->end;
      r.correlation = k->correlationId;
      r.device = k->deviceId;
      r.context = k->contextId;
      r.stream = k->streamId;
      r.grid[0] = static_cast<uint32_t>(k->gridX), r.grid[1] = static_cast<uint32_t>(k->gridY);
      r.grid[2] = static_cast<uint32_t>(k->gridZ);
      r.block[0] = static_cast<uint32_t>(k->blockX), r.block[1] = static_cast<uint32_t>(k->blockY);
      r.block[2] = static_cast<uint32_t>(k->blockZ);
      r.registers = k->registersPerThread;
      r.static_smem = static_cast<uint32_t>(k->staticSharedMemory);
      r.dynamic_smem = static_cast<uint32_t>(k->dynamicSharedMemory);
      r.graph_id = k->graphId;
      ++stats_.kernels;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      if (ignored_.count(m->correlationId)) return ++stats_.ignored, true;
      auto r = copy_record(m, m->copyKind, m->deviceId, m->deviceId);
      ++stats_.memcpys;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(a);
      auto r = copy_record(m, static_cast<uint8_t>(CopyKind::kPtoP), m->srcDeviceId, m->dstDeviceId);
      ++stats_.memcpys;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      if (auto it = checks_.find(m->correlationId); it != checks_.end()) {
        it->second.gpu_start = m->start;
        it->second.gpu_end = m->end;
        it->second.have_gpu = true;
        maybe_emit_check(m->correlationId, it->second);
        return true;
      }
      if (ignored_.count(m->correlationId)) return ++stats_.ignored, true;
      auto r = header_for<GpuMemsetRecord>(RecordKind::kGpuMemset, static_cast<uint8_t>(m->memoryKind));
      r.correlation = m->correlationId;
      r.start = m->start;
      r.end = m->end;
      r.bytes = m->bytes;
      r.device = m->deviceId;
      r.context = m->contextId;
      r.stream = m->streamId;
      r.value = m->value;
      ++stats_.memsets;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(a);
      auto r = header_for<GpuSyncRecord>(RecordKind::kGpuSync, static_cast<uint8_t>(s->type));
      r.correlation = s->correlationId;
      r.start = s->start;
      r.end = s->end;
      r.device = device_of_context(s->contextId);
      r.context = s->contextId;
      r.stream = s->streamId;
      r.event = s->cudaEventId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->cudaEventId;
      ++stats_.syncs;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(a);
      if (ignored_.count(m->correlationId)) return ++stats_.ignored, true;
      const uint8_t op = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE ? 2 : 1;
      auto r = header_for<GpuMemoryRecord>(RecordKind::kGpuMemory, op);
      r.correlation = m->correlationId;
      r.ts = m->timestamp;
      r.address = m->address;
      r.bytes = m->bytes;
      r.device = m->deviceId;
      r.stream = m->isAsync ? m->streamId : 0xffffffffu;
      r.memory_kind = static_cast<MemoryKind>(m->memoryKind);
      ++stats_.memory;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(a);
      auto r = header_for<GpuGraphLaunchRecord>(RecordKind::kGpuGraphLaunch);
      r.correlation = g->correlationId;
      r.start = g->start;
      r.end = g->end;
      r.device = g->deviceId;
      r.context = g->contextId;
      r.stream = g->streamId;
      r.graph_id = g->graphId;
      ++stats_.graphs;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(a);
      auto r = header_for<OverheadRecord>(RecordKind::kCollectorOverhead, overhead_code(o->overheadKind));
      r.name = overhead_name_id(o->overheadKind);
      r.start = o->start;
      r.end = o->end;
      ++stats_.overheads;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      // Selected calls recorded by CUPTI (ActivitySet::api_activity): the record the callbacks write on the
      // calling thread, but written to the "gpu" channel with the caller's OS thread id, which the analyzer
      // uses to put it on that thread. CUPTI's threadId is that id only with system thread ids (else it is
      // pthread_self() cut to 32 bits, and the caller stays unknown: os_tid 0).
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(a);
      const uint32_t tid = system_tids_ ? api->threadId : 0;
      if (tid && in_internal_window(tid, api->start)) return ++stats_.internal_api_calls, true;
      if (tid && thread_hook_ && seen_tids_.insert(tid).second) thread_hook_(tid);
      const bool runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      auto r = header_for<CudaApiRecord>(RecordKind::kCudaApi,
                                         static_cast<uint8_t>(runtime ? ApiDomain::kRuntime : ApiDomain::kDriver));
      r.cbid = api->cbid;
      r.start = api->start;
      r.end = api->end;
      r.correlation = api->correlationId;
      r.name = api_namer_ ? api_namer_(runtime, api->cbid) : 0;
      r.os_tid = tid;
      ++stats_.api_calls;
      emit(&r, sizeof(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      const auto* c = reinterpret_cast<const CUpti_ActivityContext3*>(a);
      ctx_device_[c->contextId] = c->deviceId;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace inferscope::cupti
