// Turns CUPTI activity records into InferScope records (include/inferscope/records.hpp). Pure translation:
// no CUPTI call, so tests feed it synthetic CUpti_Activity* structs built with the real headers.
#pragma once

#include <inferscope/records.hpp>

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <string>
#include <unordered_set>
#include <vector>

namespace inferscope::cupti {

/// Counts of what was translated (for the status line and tests).
struct TranslateStats {
  uint64_t kernels = 0, memcpys = 0, memsets = 0, syncs = 0, memory = 0, graphs = 0, overheads = 0;
  uint64_t clock_checks = 0, ignored = 0, api_calls = 0, internal_api_calls = 0;
};

class ActivityTranslator {
 public:
  /// Receives each finished record (size bytes).
  using Sink = std::function<void(const void* record, uint32_t size)>;
  explicit ActivityTranslator(Sink sink) : sink_(std::move(sink)) {}

  /// Translates one record; returns false for kinds that are not translated. Thread-safe.
  bool translate(const CUpti_Activity* record);

  /// Names runtime (domain_runtime = true) and driver API calls by callback id: interned string id. Needed only
  /// for API activity records (ActivitySet::api_activity); without it they are named by id 0.
  using ApiNamer = std::function<uint32_t(bool domain_runtime, uint32_t cbid)>;
  void set_api_namer(ApiNamer namer) { api_namer_ = std::move(namer); }

  /// Whether CUPTI's threadId in API activity records is the OS thread id (cuptiSetThreadIdType(SYSTEM)
  /// succeeded): then each CudaApiRecord carries it as os_tid, else os_tid is 0 (caller unknown).
  void set_system_thread_ids(bool on);
  /// Called once per OS thread id first seen in an API activity record (the collector enters the caller in
  /// the session's thread table: runtime::thread_for_os_tid). Never once per record: it takes a lock.
  using ThreadHook = std::function<void(uint32_t os_tid)>;
  void set_thread_hook(ThreadHook hook) { thread_hook_ = std::move(hook); }
  /// The collector's own CUDA calls (clock checks) run on thread `os_tid` from `begin` until end_internal
  /// (session ticks): API activity records of that thread starting in that window are not the application's.
  /// A window, not the whole thread: stop() runs the checks on whichever application thread stops the session.
  void begin_internal(uint32_t os_tid, uint64_t begin);
  void end_internal(uint32_t os_tid, uint64_t end);

  /// Device of a context id (synchronization records carry only the context).
  void set_context_device(uint32_t context, uint32_t device);

  /// A marker memset issued by the collector for a clock check: its activity becomes a ClockCheckRecord.
  /// `host_after` may be 0 when not known yet; complete_clock_check supplies it later.
  void expect_clock_check(uint32_t correlation, uint32_t device, uint64_t host_before);
  void complete_clock_check(uint32_t correlation, uint64_t host_after);
  /// Activities of the collector's own calls (their correlation id) are not part of the application's trace.
  void ignore_correlation(uint32_t correlation);

  /// Interned, demangled kernel name (cached by CUPTI's name pointer, which is stable per function).
  uint32_t kernel_name(const char* mangled);

  TranslateStats stats() const;

 private:
  struct PendingCheck {
    uint32_t device = 0;
    uint64_t before = 0, after = 0, gpu_start = 0, gpu_end = 0;
    bool have_gpu = false;
  };
  void emit(const void* r, uint32_t size) { sink_(r, size); }
  void maybe_emit_check(uint32_t correlation, PendingCheck& c);
  uint32_t device_of_context(uint32_t context) const;
  bool in_internal_window(uint32_t os_tid, uint64_t start) const;
  struct InternalWindow {
    uint32_t os_tid;
    uint64_t begin, end;
  };

  Sink sink_;
  ApiNamer api_namer_;
  ThreadHook thread_hook_;
  bool system_tids_ = false;
  std::vector<InternalWindow> internal_;     // a few per session (one per clock-check round)
  std::unordered_set<uint32_t> seen_tids_;  // callers already handed to thread_hook_
  mutable std::mutex mu_;
  std::unordered_map<const char*, uint32_t> names_by_ptr_;
  std::unordered_map<uint32_t, uint32_t> ctx_device_;
  std::map<uint32_t, PendingCheck> checks_;
  std::unordered_set<uint32_t> ignored_;
  TranslateStats stats_;
};

/// Demangles a C++ kernel name ("_Z6vecAddPfS_S_i" -> "vecAdd(float*, float*, float*, int)"); returns the
/// input when it is not a mangled name.
std::string demangle(const char* name);

}  // namespace inferscope::cupti
