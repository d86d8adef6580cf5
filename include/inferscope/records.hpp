// InferScope event records: the one definition of every record the runtime writes and the dump holds.
//
// Every record starts with a 4-byte RecordHeader {kind, aux, size}; `size` counts the whole record including
// the header and any trailing attributes, so a reader skips kinds it does not know. Kinds are append-only:
// a number is never reused or given another meaning, and a kind may only grow by appending fields (a reader
// accepts size >= the size it knows). docs/dump-format.md documents the layout byte by byte.
//
// Timestamps are raw clock ticks of the session's clock (TSC ticks, or CLOCK_MONOTONIC_RAW nanoseconds where
// there is no invariant TSC); the dump's calibration pairs convert them late.
#pragma once

#include <cstddef>
#include <cstdint>

namespace inferscope {

/// Record kinds. Append-only: never renumber, never reuse.
enum class RecordKind : uint8_t {
  kPad = 0,           ///< filler at the end of a ring segment; skipped by readers
  kRange = 1,         ///< RangeRecord: a complete CPU range (ISCOPE_RANGE, ISCOPE_FUNC, inferscope_py.scope)
  kMark = 2,          ///< MarkRecord: an instant event
  kThreadName = 3,    ///< ThreadNameRecord: the thread was (re)named at `ts`
  kAsyncRange = 4,    ///< AsyncRangeRecord: a span that may begin and end on different threads
  kThreadEnd = 5,     ///< ThreadEndRecord: the thread exited at `ts`
  kPyCall = 6,        ///< PyCallRecord: a complete Python function call (code id from the code table)
  kNvtxRange = 7,     ///< RangeRecord layout: an NVTX push/pop or start/end range the application emitted
  kNvtxMark = 8,      ///< MarkRecord layout: an NVTX mark
  kPyCoroutine = 9,   ///< PyCoroutineRecord: which coroutine object the PyCallRecord just before it ran
  kPyElided = 10,     ///< PyElidedRecord: short calls of one function, counted instead of recorded one by one
  kGpuKernel = 32,    ///< GpuKernelRecord
  kGpuMemcpy = 33,    ///< GpuMemcpyRecord
  kGpuMemset = 34,    ///< GpuMemsetRecord
  kGpuSync = 35,      ///< GpuSyncRecord: cudaDeviceSynchronize / stream / event synchronization
  kGpuMemory = 36,    ///< GpuMemoryRecord: device allocation or free
  kCudaApi = 37,      ///< CudaApiRecord: a runtime or driver API call (selected callback ids only)
  kGpuGraphLaunch = 38,  ///< GpuGraphLaunchRecord: a CUDA graph executed
  kCollectorOverhead = 39,  ///< OverheadRecord: time a collector itself spent (CUPTI buffer flush, ...)
  kClockCheck = 40,   ///< ClockCheckRecord: a CUDA-event round trip cross-checking CPU/GPU alignment
  kCounter = 48,      ///< CounterRecord: one sample of a named counter (system collector, NVML, ...)
};

/// Attribute value types (AttrRecord::type).
enum class AttrType : uint8_t { kNone = 0, kInt = 1, kDouble = 2, kString = 3, kBool = 4 };

#pragma pack(push, 1)

struct RecordHeader {
  RecordKind kind;
  uint8_t aux;    ///< kind-specific: nesting depth for ranges (saturates at 255), domain for API records, ...
  uint16_t size;  ///< bytes of the whole record, header and trailing attributes included
};
static_assert(sizeof(RecordHeader) == 4);

/// Optional attributes follow the fixed part of a Range, Mark or AsyncRange record: a u16 count, u16 zero,
/// then `count` AttrRecord. Their presence is told by size > the kind's fixed size.
struct AttrListHeader {
  uint16_t count;
  uint16_t reserved;
};
struct AttrRecord {
  uint32_t key;  ///< string id
  AttrType type;
  uint8_t reserved[3];
  union {
    int64_t i;
    double d;
    uint64_t s;  ///< string id for kString
  } value;
};
static_assert(sizeof(AttrListHeader) == 4);
static_assert(sizeof(AttrRecord) == 16);

/// A complete range, written once at its end. aux = depth on its thread (0 = outermost).
struct RangeRecord {
  RecordHeader h;
  uint32_t name;  ///< string id
  uint64_t start;
  uint64_t end;
};
static_assert(sizeof(RangeRecord) == 24);

struct MarkRecord {
  RecordHeader h;
  uint32_t name;
  uint64_t ts;
};
static_assert(sizeof(MarkRecord) == 16);

struct ThreadNameRecord {
  RecordHeader h;
  uint32_t name;
  uint64_t ts;
};
static_assert(sizeof(ThreadNameRecord) == 16);

struct ThreadEndRecord {
  RecordHeader h;
  uint32_t reserved;
  uint64_t ts;
};
static_assert(sizeof(ThreadEndRecord) == 16);

/// Written by the thread that ends the span; begin_thread names where it began.
struct AsyncRangeRecord {
  RecordHeader h;
  uint32_t name;
  uint64_t start;
  uint64_t end;
  uint64_t id;            ///< unique per process
  uint32_t begin_thread;  ///< dump thread id
  uint32_t end_thread;    ///< dump thread id
};
static_assert(sizeof(AsyncRangeRecord) == 40);

/// A Python call. aux = depth of Python frames on this thread (saturating). `code` indexes the code table.
struct PyCallRecord {
  RecordHeader h;
  uint32_t code;
  uint64_t start;
  uint64_t end;
};
static_assert(sizeof(PyCallRecord) == 24);

/// Written right after the PyCallRecord of a coroutine, an async generator or a generator-based coroutine: the
/// object that ran, so one task's resumptions (each a PyCallRecord of its own, from resumption to the next await)
/// can be joined into the task's life from its first run to its return. `code` and `start` repeat the call's, so a
/// reader pairs them even where a record was lost in between. The object's address is unique among the coroutines
/// alive at once and may be reused after one is freed: a run flagged kCoroutineFirstRun starts a new life.
/// aux: flags (kCoroutineFirstRun).
struct PyCoroutineRecord {
  RecordHeader h;
  uint32_t code;    ///< the code id of the call it describes
  uint64_t start;   ///< that call's start
  uint64_t object;  ///< the coroutine object's address
};
static_assert(sizeof(PyCoroutineRecord) == 24);
/// PyCoroutineRecord aux bit: this run began the coroutine (its first run), not a resumption after an await.
inline constexpr uint8_t kCoroutineFirstRun = 1;
/// PyCoroutineRecord aux bit: this run ended the coroutine (it returned or raised), not a suspension at an await:
/// the life is over when this record is read, which a live reader needs (since 2026-12-02; clear in older dumps).
inline constexpr uint8_t kCoroutineLastRun = 2;

/// Calls of one function on this thread that the tracer counted instead of recording one by one: calls shorter than
/// its elision bound of a function already recorded in full many times (docs/python.md, "Short calls"). Their time
/// is inside their callers' recorded calls, as a call's children are.
struct PyElidedRecord {
  RecordHeader h;     ///< aux unused
  uint32_t code;      ///< code id
  uint64_t first;     ///< the start of the first call counted
  uint64_t last;      ///< the end of the last call counted
  uint64_t total;     ///< their durations, summed (ticks)
  uint32_t calls;     ///< how many
  /// 0: the calls of the chunk's thread. Else the dump thread id + 1 of the thread whose calls they are: when tracing
  /// stops, the stopping thread writes every thread's calls still counted (the others run no Python then).
  uint32_t owner;
};
static_assert(sizeof(PyElidedRecord) == 40);

/// Memory kinds as CUPTI names them (CUpti_ActivityMemoryKind values 0..5 map 1:1).
enum class MemoryKind : uint8_t { kUnknown = 0, kPageable = 1, kPinned = 2, kDevice = 3, kArray = 4, kManaged = 5,
                                  kDeviceStatic = 6, kManagedStatic = 7 };
/// "pageable", "pinned", "device", ...: the name reports and traces use for a memory kind.
constexpr const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::kPageable: return "pageable";
    case MemoryKind::kPinned: return "pinned";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kArray: return "array";
    case MemoryKind::kManaged: return "managed";
    case MemoryKind::kDeviceStatic: return "device_static";
    case MemoryKind::kManagedStatic: return "managed_static";
    default: return "unknown";
  }
}

/// Copy directions (CUpti_ActivityMemcpyKind values map 1:1).
enum class CopyKind : uint8_t { kUnknown = 0, kHtoD = 1, kDtoH = 2, kHtoA = 3, kAtoH = 4, kAtoA = 5, kAtoD = 6,
                                kDtoA = 7, kDtoD = 8, kHtoH = 9, kPtoP = 10 };
/// "h2d", "d2h", "d2d", "h2h", "peer": the direction reports, tables and the SQLite export use for a copy.
constexpr const char* copy_direction_name(CopyKind k) {
  switch (k) {
    case CopyKind::kHtoD: case CopyKind::kHtoA: return "h2d";
    case CopyKind::kDtoH: case CopyKind::kAtoH: return "d2h";
    case CopyKind::kDtoD: case CopyKind::kAtoA: case CopyKind::kAtoD: case CopyKind::kDtoA: return "d2d";
    case CopyKind::kHtoH: return "h2h";
    case CopyKind::kPtoP: return "peer";
    default: return "unknown";
  }
}

struct GpuKernelRecord {
  RecordHeader h;         ///< aux unused
  uint32_t name;          ///< demangled kernel name, string id
  uint64_t start;
  uint64_t end;
  uint32_t correlation;   ///< links to the CudaApiRecord of the launch
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t registers;     ///< per thread
  uint32_t static_smem;   ///< bytes per block
  uint32_t dynamic_smem;  ///< bytes per block
  uint32_t graph_id;      ///< 0 when not launched from a graph
};
static_assert(sizeof(GpuKernelRecord) == 80);

struct GpuMemcpyRecord {
  RecordHeader h;  ///< aux = CopyKind
  uint32_t correlation;
  uint64_t start;
  uint64_t end;
  uint64_t bytes;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  MemoryKind src_kind;
  MemoryKind dst_kind;
  uint8_t is_async;
  uint8_t reserved;
  uint32_t graph_id;
  uint32_t dst_device;  ///< peer copies; equals device otherwise
};
static_assert(sizeof(GpuMemcpyRecord) == 56);

struct GpuMemsetRecord {
  RecordHeader h;  ///< aux = MemoryKind of the destination
  uint32_t correlation;
  uint64_t start;
  uint64_t end;
  uint64_t bytes;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t value;
};
static_assert(sizeof(GpuMemsetRecord) == 48);

/// Synchronization kinds (CUpti_ActivitySynchronizationType values map 1:1).
enum class SyncKind : uint8_t { kUnknown = 0, kEventSynchronize = 1, kStreamWaitEvent = 2, kStreamSynchronize = 3,
                                kContextSynchronize = 4 };

struct GpuSyncRecord {
  RecordHeader h;  ///< aux = SyncKind
  uint32_t correlation;
  uint64_t start;
  uint64_t end;
  uint32_t device;
  uint32_t context;
  uint32_t stream;  ///< 0xffffffff when not stream-specific
  uint32_t event;   ///< CUDA event id when event-related, else 0
};
static_assert(sizeof(GpuSyncRecord) == 40);

struct GpuMemoryRecord {
  RecordHeader h;  ///< aux: 1 = allocation, 2 = release
  uint32_t correlation;
  uint64_t ts;
  uint64_t address;
  uint64_t bytes;
  uint32_t device;
  uint32_t stream;  ///< 0xffffffff when not stream-ordered
  MemoryKind memory_kind;
  uint8_t reserved[3];
};
static_assert(sizeof(GpuMemoryRecord) == 44);

enum class ApiDomain : uint8_t { kRuntime = 1, kDriver = 2 };

/// A CUDA API call on an application thread. aux = ApiDomain. Kernels, copies, syncs and allocations with
/// the same correlation id were caused by this call.
struct CudaApiRecord {
  RecordHeader h;
  uint32_t cbid;         ///< CUPTI callback id within the domain
  uint64_t start;
  uint64_t end;
  uint32_t correlation;
  uint32_t name;         ///< function name, string id
  uint32_t os_tid;       ///< OS thread id of the caller (dump thread ids live in the thread table)
  uint32_t reserved;
};
static_assert(sizeof(CudaApiRecord) == 40);

struct GpuGraphLaunchRecord {
  RecordHeader h;
  uint32_t correlation;
  uint64_t start;
  uint64_t end;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t graph_id;
};
static_assert(sizeof(GpuGraphLaunchRecord) == 40);

struct OverheadRecord {
  RecordHeader h;  ///< aux: collector-defined overhead kind
  uint32_t name;   ///< what the time was spent on, string id
  uint64_t start;
  uint64_t end;
};
static_assert(sizeof(OverheadRecord) == 24);

/// One CPU/GPU round trip: the host read the clock (`cpu_before`) just before enqueuing a 1-byte marker
/// memset on a stream of its own, and again (`cpu_after`) once cuStreamSynchronize returned; the GPU work
/// ran from `gpu_ts` to `gpu_end` as CUPTI reports it (converted to session ticks through the timestamp
/// callback). Causality demands cpu_before <= gpu_ts <= gpu_end <= cpu_after; the largest shortfall over
/// all records is the measured alignment error. Values in session ticks. docs/gpu-collector.md.
struct ClockCheckRecord {
  RecordHeader h;
  uint32_t device;
  uint64_t cpu_before;
  uint64_t gpu_ts;
  uint64_t cpu_after;
  uint64_t gpu_end;  ///< appended by the GPU collector
};
static_assert(sizeof(ClockCheckRecord) == 40);

/// Counter scopes (CounterRecord::scope); the target each names is in CounterRecord. Append-only.
enum class CounterScope : uint8_t {
  kProcess = 0,   ///< target 0: the recording process
  kThread = 1,    ///< target: dump thread id (a thread the session knows; the thread table gives its os_tid)
  kDevice = 2,    ///< target: GPU index (NVML's device index)
  kMachine = 3,   ///< target 0: the whole machine
  kNumaNode = 4,  ///< target: NUMA node number
  kOsThread = 5,  ///< target: OS thread id of a thread of this process the session does not know (it never
                  ///< recorded, or not yet); process info "os_thread.<tid>.name" names it
  kChildProcess = 6,  ///< target: process id of a child (or grandchild) process of the recording process;
                      ///< process info "child.<pid>.name" (its comm) and "child.<pid>.parent" name it
};

/// One sample of a counter. aux = AttrType of the value (kInt or kDouble). `name` is a string id such as
/// "cpu.user_ns" or "gpu.util_pct"; `target` is per `scope` (see CounterScope). Per-thread counters of a
/// thread use kThread once the session knows the thread and kOsThread before: a reader joins the two series
/// through the thread table's os_tid. docs/counters.md lists every counter name, unit and scope.
struct CounterRecord {
  RecordHeader h;
  uint32_t name;
  uint64_t ts;
  union {
    int64_t i;
    double d;
  } value;
  CounterScope scope;
  uint8_t reserved[3];
  uint32_t target;
};
static_assert(sizeof(CounterRecord) == 32);

#pragma pack(pop)

/// Fixed size of a kind (the smallest size a reader accepts), 0 for unknown kinds.
constexpr uint16_t fixed_record_size(RecordKind k) {
  switch (k) {
    case RecordKind::kPad: return sizeof(RecordHeader);
    case RecordKind::kRange: case RecordKind::kNvtxRange: return sizeof(RangeRecord);
    case RecordKind::kMark: case RecordKind::kNvtxMark: return sizeof(MarkRecord);
    case RecordKind::kThreadName: return sizeof(ThreadNameRecord);
    case RecordKind::kAsyncRange: return sizeof(AsyncRangeRecord);
    case RecordKind::kThreadEnd: return sizeof(ThreadEndRecord);
    case RecordKind::kPyCall: return sizeof(PyCallRecord);
    case RecordKind::kPyCoroutine: return sizeof(PyCoroutineRecord);
    case RecordKind::kPyElided: return sizeof(PyElidedRecord);
    case RecordKind::kGpuKernel: return sizeof(GpuKernelRecord);
    case RecordKind::kGpuMemcpy: return sizeof(GpuMemcpyRecord);
    case RecordKind::kGpuMemset: return sizeof(GpuMemsetRecord);
    case RecordKind::kGpuSync: return sizeof(GpuSyncRecord);
    case RecordKind::kGpuMemory: return sizeof(GpuMemoryRecord);
    case RecordKind::kCudaApi: return sizeof(CudaApiRecord);
    case RecordKind::kGpuGraphLaunch: return sizeof(GpuGraphLaunchRecord);
    case RecordKind::kCollectorOverhead: return sizeof(OverheadRecord);
    case RecordKind::kClockCheck: return sizeof(ClockCheckRecord);
    case RecordKind::kCounter: return sizeof(CounterRecord);
  }
  return 0;
}

/// Whether a kind may carry a trailing attribute list.
constexpr bool record_has_attrs(RecordKind k) {
  return k == RecordKind::kRange || k == RecordKind::kMark || k == RecordKind::kAsyncRange;
}

}  // namespace inferscope
