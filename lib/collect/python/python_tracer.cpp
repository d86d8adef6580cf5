// CPython tracing collector (see python_tracer.hpp for the mechanisms per version).
//
// Hot path per traced call: one code-object extra-slot read (the code's classification and code id are
// cached there, tagged with the filter generation), one push of {code, start ticks} on a per-thread stack at
// entry, and at exit a pop plus one 24-byte PyCallRecord into the thread's ring. Nothing allocates, nothing
// locks, no Python object is created. A coroutine's run (a task's step, from its first run or a resumption to the
// next await) also notes which coroutine object ran, and is followed by a 24-byte PyCoroutineRecord: that is how a
// request served by several tasks' steps becomes one span (CPython 3.11 and later; before, the calls alone).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include <opcode.h>  // RESUME: a 3.11 frame's first run (first_run)
#endif

#include "collect/python/python_tracer.hpp"
#include "collect/python/thread_names.hpp"

#include <inferscope/internal/hot_path.hpp>
#include <inferscope/wait_points.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <string_view>
#include <utility>

#if PY_VERSION_HEX >= 0x030C0000
#define ISCOPE_PY_MONITORING 1
#else
#define ISCOPE_PY_MONITORING 0
#endif
// 3.11's frame objects point at an interpreter frame (see frame_code below).
#define ISCOPE_PY_311 (PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000)

namespace inferscope::pytrace {
namespace {

// --- code-object extra slot ------------------------------------------------------------------------------

#if PY_VERSION_HEX >= 0x030C0000
inline int code_get_extra(PyObject* code, Py_ssize_t i, void** out) { return PyUnstable_Code_GetExtra(code, i, out); }
inline int code_set_extra(PyObject* code, Py_ssize_t i, void* v) { return PyUnstable_Code_SetExtra(code, i, v); }
inline Py_ssize_t request_extra_index() { return PyUnstable_Eval_RequestCodeExtraIndex(nullptr); }
#else
inline int code_get_extra(PyObject* code, Py_ssize_t i, void** out) { return _PyCode_GetExtra(code, i, out); }
inline int code_set_extra(PyObject* code, Py_ssize_t i, void* v) { return _PyCode_SetExtra(code, i, v); }
inline Py_ssize_t request_extra_index() { return _PyEval_RequestCodeExtraIndex(nullptr); }
#endif

// The hot path reads the slot without the API call: a code object's co_extra points at {size, slots[]}
// (Objects/codeobject.c, the same since 3.6). init() checks the direct read against the API on a code object
// of its own and keeps the API when they disagree.
struct CodeExtraLayout {
  Py_ssize_t ce_size;
  void* ce_extras[1];
};
bool g_extra_direct = false;
inline void* code_extra_direct(PyObject* code, Py_ssize_t i) {
  const auto* e = static_cast<const CodeExtraLayout*>(reinterpret_cast<PyCodeObject*>(code)->co_extra);
  return e && i < e->ce_size ? e->ce_extras[i] : nullptr;
}

// The slot holds (generation << 34) | (coroutine << 33) | (excluded << 32) | code id; 0 means "not classified
// yet". A filter change bumps the generation, so every code object is classified again on its next call.
constexpr uint64_t kExcludedBit = 1ull << 32;
constexpr uint64_t kCoroutineBit = 1ull << 33;  // async def, async generator or @types.coroutine generator
constexpr int kGenShift = 34;

// --- short calls, counted instead of recorded (docs/python.md, "Short calls") -----------------------------------
//
// A function called hundreds of thousands of times for a few microseconds each (a generator expression in a stop
// check, a recursive JSON normaliser) filled a 50 MB capture in two generate() calls with records nobody reads one
// by one: what the analysis needs of them is their count and time, and their callers' recorded calls hold that time
// already. Once a function has been recorded kRecordedBeforeEliding times, its calls shorter than kElideBelowNs are
// counted in a tally per function and written as one PyElidedRecord every kElidedPerRecord calls (and when tracing
// stops). Never a coroutine's runs (a request's life needs each) nor a wait point (whom a thread waited on needs each).
/// Calls of a function recorded one by one before its short ones are counted: enough for its distribution in the
/// tables and any step or token analysis (a step repeats at most a few thousand times in a capture's baseline).
constexpr uint32_t kRecordedBeforeEliding = 1000;
/// Shorter than a launching call can be (a CUDA launch from PyTorch costs 5 us or more on the host), so no call
/// that launches GPU work, no per-token forward and no step is ever counted instead of recorded.
constexpr double kElideBelowNs = 5000;
constexpr uint32_t kElidedPerRecord = 4096;
constexpr uint64_t kNoElideBit = 1ull << 31;  // in the slot's id half: ids stay far below 2^31

// --- global state: written with the GIL held; the hooks run with the GIL held too -------------------------

Py_ssize_t g_extra_index = -1;
std::atomic<bool> g_active{false};  // hooks record; cleared by Collector::stop() from any thread
bool g_installed = false;           // hooks are installed
uint32_t g_code_gen = 1;            // classification generation (31 bits used)
uint32_t g_stack_gen = 1;           // per-thread stacks older than this are stale (tracing was switched)
Filters g_filters;
std::string g_package_dir;
std::vector<std::string> g_own_files;     // the profiler's code outside the package (add_own_file)
std::vector<std::string> g_library_dirs;  // stdlib and site-packages, each ending in '/'
Stats g_stats;
std::string g_last_error;

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// --- per-thread call stack ------------------------------------------------------------------------------

struct Frame {
  PyObject* code;  // borrowed: identifies the activation at its exit; the frame keeps the code alive
  uint64_t start;
  uint32_t id;     // code id; 0 = traced but deeper than max_depth, not recorded
  uint8_t coroutine_flags = 0;  // PyCoroutineRecord's aux, for a coroutine's run
  bool elidable = false;        // a short call of it may be counted instead of recorded
  uint64_t coroutine = 0;       // the coroutine object's address; 0: not a coroutine (or not known)
};

// Per code id: how many of its calls were recorded one by one (by every thread: how hot a function is does not
// depend on the thread). Touched with the GIL held only (the hooks, classification).
std::vector<uint32_t> g_recorded;  // by code id
uint64_t g_elide_ticks = 0;        // kElideBelowNs in session ticks (0: not measured yet, nothing is elided)

void size_code_slots(uint32_t id) {
  if (id >= g_recorded.size()) g_recorded.resize(size_t(id) + 1);
}

// One thread's short calls of one function, counted since its last PyElidedRecord.
struct CodeTally {
  uint32_t calls = 0;
  uint64_t first = 0, last = 0, total = 0;
};

// `owner`: 0 when the calling thread's own calls (the record goes to its ring, as the dump format's records do);
// else the dump thread id + 1 of the thread whose calls they are, when tracing stops and another thread writes them.
void emit_elided(uint32_t id, CodeTally& t, uint32_t owner) {
  const PyElidedRecord r{{RecordKind::kPyElided, 0, static_cast<uint16_t>(sizeof(PyElidedRecord))}, id, t.first, t.last,
                         t.total, t.calls, owner};
  detail::emit_record(&r, sizeof(r));
  t.calls = 0;
  t.total = 0;
}

struct ThreadTrace;
// Every thread's stack and tallies, for disable(): the short calls a thread counted but has not written yet are
// written when tracing stops, whichever thread stops it. A thread adds its own when its stack is made and removes
// it when the stack goes (thread exit, or its profile object freed): the lock, not the GIL, guards the list. Never
// destroyed: a thread may end after the process's static objects are.
std::mutex g_traces_mutex;
std::vector<ThreadTrace*>& all_traces() {
  static auto* traces = new std::vector<ThreadTrace*>;
  return *traces;
}
// Counts of threads that ended while tracing ran: written by disable() on their behalf (a thread's records cannot
// be written while it exits: its buffer may be gone already).
struct EndedThreadCount {
  uint32_t dump_thread, id;
  CodeTally tally;
};
std::vector<EndedThreadCount>& ended_threads_counts() {
  static auto* counts = new std::vector<EndedThreadCount>;
  return *counts;
}

struct ThreadTrace {
  uint32_t gen = 0;
  std::vector<Frame> frames;
  std::vector<CodeTally> tallies;  // by code id; sized when the thread first counts a call of the id
  uint32_t dump_thread = 0;        // its dump thread id in this session, when thread_known
  bool thread_known = false;       // taken when it first counts a call; forgotten when tracing stops
  ThreadTrace() {
    frames.reserve(256);
    std::lock_guard lock(g_traces_mutex);
    all_traces().push_back(this);
  }
  ~ThreadTrace() {  // the thread ends (or its profile object goes): its counts wait for disable() to write them
    std::lock_guard lock(g_traces_mutex);
    std::erase(all_traces(), this);
    if (thread_known)
      for (uint32_t id = 0; id < tallies.size(); ++id)
        if (tallies[id].calls) ended_threads_counts().push_back({dump_thread, id, tallies[id]});
  }
  ThreadTrace(const ThreadTrace&) = delete;
  ThreadTrace& operator=(const ThreadTrace&) = delete;
};

// The short calls still counted, written now (tracing stops; the GIL is held, so no hook runs): the calling thread's
// as its own, every other thread's on its behalf.
void flush_elided() {
  const uint32_t self = runtime::current_thread_id();
  std::lock_guard lock(g_traces_mutex);
  for (ThreadTrace* t : all_traces()) {
    for (uint32_t id = 0; id < t->tallies.size(); ++id)
      if (t->tallies[id].calls) emit_elided(id, t->tallies[id], t->dump_thread == self ? 0 : t->dump_thread + 1);
    t->thread_known = false;  // a later session numbers its threads anew
  }
  for (EndedThreadCount& c : ended_threads_counts()) emit_elided(c.id, c.tally, c.dump_thread + 1);
  ended_threads_counts().clear();
}

#if ISCOPE_PY_MONITORING
// sys.monitoring callbacks get no per-thread argument: the stack hangs off the runtime's per-thread block
// (initial-exec TLS in libinferscope.so). No thread-local of the module's own on the hot path: an extension
// module is dlopen'ed, often after libraries (torch) that used up glibc's small static-TLS surplus, so its own
// would be general-dynamic, a __tls_get_addr call per access. The owner below (only touched when a stack is
// made) frees it at thread exit.
inline ThreadTrace*& t_trace_slot() { return reinterpret_cast<ThreadTrace*&>(detail::t_state.py_trace); }
struct ThreadTraceOwner {
  ~ThreadTraceOwner() {
    delete t_trace_slot();
    t_trace_slot() = nullptr;
  }
};
thread_local ThreadTraceOwner t_trace_owner;

__attribute__((noinline)) ThreadTrace* new_thread_trace() {
  (void)&t_trace_owner;  // registers the thread-exit cleanup
  return t_trace_slot() = new ThreadTrace;
}
inline ThreadTrace* thread_trace() {
  ThreadTrace* t = t_trace_slot();
  return INFERSCOPE_LIKELY(t != nullptr) ? t : new_thread_trace();
}
#endif

// --- classification// --- classification (once per code object and filter generation) -----------------------------------------

std::string utf8_attr(PyObject* obj, const char* attr) {
  std::string out;
  if (PyObject* v = PyObject_GetAttrString(obj, attr)) {
    if (PyUnicode_Check(v)) {
      Py_ssize_t n = 0;
      if (const char* s = PyUnicode_AsUTF8AndSize(v, &n)) out.assign(s, static_cast<size_t>(n));
    }
    Py_DECREF(v);
  }
  PyErr_Clear();
  return out;
}

// "pkg.sub.mod" for a file: relative to the longest sys.path entry that contains it.
std::string module_name_for(const std::string& file) {
  std::string best;
  if (PyObject* path = PySys_GetObject("path"); path && PyList_Check(path)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); ++i) {
      PyObject* item = PyList_GET_ITEM(path, i);
      if (!PyUnicode_Check(item)) continue;
      const char* s = PyUnicode_AsUTF8(item);
      if (!s) {
        PyErr_Clear();
        continue;
      }
      std::string dir = s;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      if (dir.empty() || dir.size() <= best.size()) continue;
      if (file.size() > dir.size() && starts_with(file, dir) && file[dir.size()] == '/') best = dir;
    }
  }
  std::string rel = best.empty() ? file.substr(file.rfind('/') + 1) : file.substr(best.size() + 1);
  for (std::string_view ext : {".py", ".pyc", ".pyw"})
    if (rel.size() > ext.size() && rel.compare(rel.size() - ext.size(), ext.size(), ext) == 0) {
      rel.resize(rel.size() - ext.size());
      break;
    }
  if (rel.size() > 9 && rel.compare(rel.size() - 9, 9, "/__init__") == 0) rel.resize(rel.size() - 9);
  for (char& c : rel)
    if (c == '/') c = '.';
  return rel;
}

// The profiler's own code: never traced, whatever the filters (an include that happens to cover the package,
// e.g. a project directory holding the virtual environment, must not bring it in). Filtered here, as each code
// object is classified, rather than when a report is made: the tracer knows by file exactly what is ours, it
// costs nothing per call (3.12: DISABLE), every reader of the dump (analyzer, Perfetto and SQLite exports,
// _read_dump) sees the same calls, and no report has to guess from a name whether a function is ours.
bool is_own_code(const std::string& file) {
  if (!g_package_dir.empty() && starts_with(file, g_package_dir)) return true;
  for (const auto& f : g_own_files)
    if (file == f) return true;
  return false;
}

bool decide(const std::string& file, const std::string& name, const std::string& qualname) {
  if (is_own_code(file)) return false;
  std::string module;
  bool have_module = false;
  auto matches = [&](const std::string& prefix) {
    if (prefix.find('/') != std::string::npos) return starts_with(file, prefix);
    if (!have_module) {
      module = module_name_for(file);
      have_module = true;
    }
    return module == prefix || (starts_with(module, prefix) && module.size() > prefix.size() &&
                                module[prefix.size()] == '.');
  };
  for (const auto& e : g_filters.exclude)
    if (matches(e)) return false;
  if (!g_filters.include.empty()) {
    for (const auto& i : g_filters.include)
      if (matches(i)) return true;
    return false;
  }
  if (g_filters.mode == "full") return true;
  // default: the user's code, model forward passes, a library's `generate` (Hugging Face's GenerationMixin.generate:
  // the call a user means by one step of generation, however it is decorated or called; once per request, so it
  // costs nothing measurable), and the library calls where threads hand work to each other (wait_points.hpp:
  // Queue.get, Condition.wait, a DataLoader's __next__, ...), which say whom a thread waited on.
  if (file.empty() || file[0] == '<') return !starts_with(file, "<frozen");
  bool library = file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos;
  for (const auto& d : g_library_dirs)
    if (!library && starts_with(file, d)) library = true;
  if (!library || name == "forward" || name == "generate") return true;
  if (!have_module) module = module_name_for(file);
  return find_wait_point(module, qualname) != nullptr;
}

__attribute__((noinline)) uint64_t classify(PyObject* code) {
  // The hooks may run while an exception propagates: keep it intact.
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  const std::string file = utf8_attr(code, "co_filename");
  const std::string name = utf8_attr(code, "co_name");
  std::string qualname = utf8_attr(code, "co_qualname");  // 3.11+
  if (qualname.empty()) qualname = name;
  long line = 0;
  if (PyObject* l = PyObject_GetAttrString(code, "co_firstlineno")) {
    line = PyLong_AsLong(l);
    Py_DECREF(l);
  }
  PyErr_Clear();
  const bool traced = decide(file, name, qualname);
  long flags = 0;
  if (PyObject* f = PyObject_GetAttrString(code, "co_flags")) {
    flags = PyLong_AsLong(f);
    Py_DECREF(f);
  }
  PyErr_Clear();
  const bool coroutine = traced && (flags & (CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
  const bool no_elide = coroutine || (traced && find_wait_point(module_name_for(file), qualname) != nullptr);
  uint32_t id = 0;
  if (traced) {
    id = runtime::intern_code(qualname, file, static_cast<uint32_t>(line > 0 ? line : 0));
    ++g_stats.codes_traced;
  } else {
    ++g_stats.codes_excluded;
  }
  if (traced) size_code_slots(id);  // sized here, not on the hot path
  const uint64_t v = (uint64_t(g_code_gen) << kGenShift) | (traced ? 0 : kExcludedBit) | (coroutine ? kCoroutineBit : 0) |
                     (no_elide ? kNoElideBit : 0) | id;
#if ISCOPE_PY_MONITORING
  // Excluded code is answered with DISABLE, so its local events stop firing without a cache; leave the
  // interpreter's static (deep-frozen, immortal) code objects untouched, as they are shared and finalized
  // specially.
  const bool cache = traced || !_Py_IsImmortal(code);
#else
  const bool cache = true;
#endif
  if (cache && code_set_extra(code, g_extra_index, reinterpret_cast<void*>(static_cast<uintptr_t>(v))) != 0)
    PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  return v;
}

inline uint64_t code_info(PyObject* code) {
  void* extra = nullptr;
  if (INFERSCOPE_LIKELY(g_extra_direct)) {
    extra = code_extra_direct(code, g_extra_index);
  } else if (code_get_extra(code, g_extra_index, &extra) != 0) {
    PyErr_Clear();
    extra = nullptr;
  }
  const uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(extra));
  if (INFERSCOPE_LIKELY(v != 0 && (v >> kGenShift) == g_code_gen)) return v;
  return classify(code);
}

// --- the two events every mechanism reduces to -------------------------------------------------------------

// The coroutine object that owns `frame` (its address) and whether this run is its first; {0, 0} when the frame
// belongs to none. The frame object is made once per coroutine (later runs find it), so the cost falls on
// coroutine code alone. Needs PyFrame_GetGenerator (3.11).
struct CoroutineRun {
  uint64_t object = 0;
  uint8_t flags = 0;
};
__attribute__((noinline)) CoroutineRun coroutine_of(PyFrameObject* frame, bool first_run) {
  CoroutineRun run;
#if PY_VERSION_HEX >= 0x030B0000
  if (frame == nullptr) return run;
  if (PyObject* gen = PyFrame_GetGenerator(frame)) {
    run.object = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(gen));
    run.flags = first_run ? kCoroutineFirstRun : 0;
    Py_DECREF(gen);
  }
#else
  (void)frame;
  (void)first_run;
#endif
  return run;
}

// A call or resumption of `code` begins on the thread that owns `t`. Returns false when the code is excluded.
// `run_of()` says which coroutine runs (a CoroutineRun); it is only called for coroutine code.
template <class RunOf>
inline bool on_enter(ThreadTrace* t, PyObject* code, RunOf&& run_of) {
  const uint64_t info = code_info(code);
  if (info & kExcludedBit) return false;
  if (INFERSCOPE_UNLIKELY(t->gen != g_stack_gen)) {  // tracing was switched since this thread last traced
    t->frames.clear();
    t->gen = g_stack_gen;
  }
  const uint32_t max = g_filters.max_depth;
  const uint32_t id = (max == 0 || t->frames.size() < max) ? static_cast<uint32_t>(info & ~kNoElideBit) : 0;
  Frame f{code, detail::now(), id};
  f.elidable = !(info & (kNoElideBit | kCoroutineBit));
  if (INFERSCOPE_UNLIKELY((info & kCoroutineBit) && id != 0)) {
    const CoroutineRun run = run_of();
    f.coroutine = run.object;
    f.coroutine_flags = run.flags;
  }
  t->frames.push_back(f);
  return true;
}

// A call of `code` returns, yields or unwinds. Returns false when the code is excluded. `ended()` says whether a
// coroutine's run ended its life (returned or raised) rather than suspending it; asked of coroutine runs only.
template <class Ended>
inline bool on_exit(ThreadTrace* t, PyObject* code, Ended&& ended) {
  const uint64_t end = detail::now();
  // Only traced code is ever pushed, so a match on the top of the stack needs no classification.
  if (INFERSCOPE_UNLIKELY(t == nullptr || t->gen != g_stack_gen || t->frames.empty() || t->frames.back().code != code))
    return !(code_info(code) & kExcludedBit);  // excluded, or an activation that began before tracing did
  const Frame f = t->frames.back();
  t->frames.pop_back();
  if (f.id != 0 && f.elidable && end - f.start < g_elide_ticks && f.id < g_recorded.size() &&
      g_recorded[f.id] >= kRecordedBeforeEliding) {
    if (INFERSCOPE_UNLIKELY(f.id >= t->tallies.size())) t->tallies.resize(size_t(f.id) + 1);
    CodeTally& c = t->tallies[f.id];
    if (c.calls == 0) {
      c.first = f.start;
      if (INFERSCOPE_UNLIKELY(!t->thread_known)) {
        t->dump_thread = runtime::current_thread_id();
        t->thread_known = true;
      }
    }
    c.last = end;
    c.total += end - f.start;
    if (++c.calls >= kElidedPerRecord) emit_elided(f.id, c, 0);
    return true;
  }
  if (f.id != 0) {
    if (f.id < g_recorded.size()) ++g_recorded[f.id];
    const size_t depth = t->frames.size();
    const PyCallRecord r{{RecordKind::kPyCall, static_cast<uint8_t>(depth < 255 ? depth : 255),
                          static_cast<uint16_t>(sizeof(PyCallRecord))},
                         f.id, f.start, end};
    detail::emit_record(&r, sizeof(r));
    if (INFERSCOPE_UNLIKELY(f.coroutine != 0)) {
      const uint8_t flags = static_cast<uint8_t>(f.coroutine_flags | (ended() ? kCoroutineLastRun : 0));
      const PyCoroutineRecord c{{RecordKind::kPyCoroutine, flags, static_cast<uint16_t>(sizeof(PyCoroutineRecord))},
                                f.id, f.start, f.coroutine};
      detail::emit_record(&c, sizeof(c));
    }
  }
  return true;
}

#if ISCOPE_PY_MONITORING
// --- CPython >= 3.12: sys.monitoring -----------------------------------------------------------------------

constexpr int kToolId = 2;  // sys.monitoring.PROFILER_ID
constexpr const char* kToolName = "inferscope";
PyObject* g_monitoring = nullptr;  // sys.monitoring
PyObject* g_disable = nullptr;     // sys.monitoring.DISABLE
bool g_returned_disable = false;   // some location is disabled for our tool id: restart_events() before reuse

inline PyObject* ret_none() { Py_RETURN_NONE; }
inline PyObject* ret_disable() {
  g_returned_disable = true;
  Py_INCREF(g_disable);
  return g_disable;
}

// The callbacks are called through the vectorcall protocol directly: each is an instance of a small callable
// type whose vectorcall slot is the function itself, which skips the builtin-function layer
// (cfunction_vectorcall_FASTCALL) on every event.
// Local events (PY_START, PY_RESUME, PY_RETURN, PY_YIELD) may answer DISABLE for code that is not traced.
// The coroutine that runs, read from the current frame: sys.monitoring calls back from inside the frame that
// begins. PY_START is a call, or a coroutine's first run (its RESUME 0: creating it runs no event); PY_RESUME is a
// resumption after an await or a yield.
inline CoroutineRun current_run(bool first_run) { return coroutine_of(PyEval_GetFrame(), first_run); }
PyObject* mon_enter(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (INFERSCOPE_UNLIKELY(PyVectorcall_NARGS(nargsf) < 1 || !g_active.load(std::memory_order_relaxed))) return ret_disable();
  return on_enter(thread_trace(), args[0], [] { return current_run(true); }) ? ret_none() : ret_disable();
}
PyObject* mon_resume(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (INFERSCOPE_UNLIKELY(PyVectorcall_NARGS(nargsf) < 1 || !g_active.load(std::memory_order_relaxed))) return ret_disable();
  return on_enter(thread_trace(), args[0], [] { return current_run(false); }) ? ret_none() : ret_disable();
}
// PY_RETURN ends a call or a coroutine's life; PY_YIELD suspends a coroutine (an await) or a generator.
PyObject* mon_exit(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (INFERSCOPE_UNLIKELY(PyVectorcall_NARGS(nargsf) < 1 || !g_active.load(std::memory_order_relaxed))) return ret_disable();
  return on_exit(t_trace_slot(), args[0], [] { return true; }) ? ret_none() : ret_disable();
}
PyObject* mon_yield(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (INFERSCOPE_UNLIKELY(PyVectorcall_NARGS(nargsf) < 1 || !g_active.load(std::memory_order_relaxed))) return ret_disable();
  return on_exit(t_trace_slot(), args[0], [] { return false; }) ? ret_none() : ret_disable();
}
// PY_THROW and PY_UNWIND cannot be disabled per location.
PyObject* mon_enter_nonlocal(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (PyVectorcall_NARGS(nargsf) >= 1 && g_active.load(std::memory_order_relaxed))
    on_enter(thread_trace(), args[0], [] { return current_run(false); });  // PY_THROW: thrown into a suspended frame
  return ret_none();
}
PyObject* mon_exit_nonlocal(PyObject*, PyObject* const* args, size_t nargsf, PyObject*) {
  if (PyVectorcall_NARGS(nargsf) >= 1 && g_active.load(std::memory_order_relaxed))
    on_exit(t_trace_slot(), args[0], [] { return true; });  // PY_UNWIND: an exception leaves the frame for good
  return ret_none();
}

struct MonCallback {
  PyObject_HEAD
  vectorcallfunc call;
};
PyTypeObject MonCallbackType = {PyVarObject_HEAD_INIT(nullptr, 0)};
constexpr vectorcallfunc g_mon_funcs[6] = {mon_enter, mon_exit, mon_enter_nonlocal, mon_exit_nonlocal, mon_resume, mon_yield};
PyObject* g_mon_callbacks[6] = {};

// Calls sys.monitoring.<method>(*args); returns a new reference or nullptr with the error described.
PyObject* mon_call(const char* method, PyObject* args, std::string* error) {
  PyObject* r = nullptr;
  if (PyObject* f = PyObject_GetAttrString(g_monitoring, method)) {
    r = PyObject_CallObject(f, args);
    Py_DECREF(f);
  }
  Py_XDECREF(args);
  if (!r && error) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    std::string what = "unknown error";
    if (ev) {
      if (PyObject* s = PyObject_Str(ev)) {
        if (const char* c = PyUnicode_AsUTF8(s)) what = c;
        Py_DECREF(s);
      }
    }
    *error = std::string("sys.monitoring.") + method + " failed: " + what;
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
  }
  PyErr_Clear();
  return r;
}

long event_bit(const char* name) {
  long v = 0;
  if (PyObject* events = PyObject_GetAttrString(g_monitoring, "events")) {
    if (PyObject* e = PyObject_GetAttrString(events, name)) {
      v = PyLong_AsLong(e);
      Py_DECREF(e);
    }
    Py_DECREF(events);
  }
  PyErr_Clear();
  return v;
}

struct EventCallback {
  const char* event;
  int callback;
};
constexpr EventCallback kEvents[] = {{"PY_START", 0},  {"PY_RESUME", 4}, {"PY_RETURN", 1},
                                     {"PY_YIELD", 5},  {"PY_THROW", 2},  {"PY_UNWIND", 3}};

// Another tool holding PROFILER_ID (cProfile since 3.12, or any sys.monitoring profiler) keeps it: install_hooks()
// refuses. sys.setprofile() needs no check here: since 3.12 it runs on a tool id of its own and coexists with
// ours, nothing is taken from it.
std::string foreign_profiler() { return {}; }

std::string install_hooks() {
  std::string error;
  PyObject* tool = mon_call("get_tool", Py_BuildValue("(i)", kToolId), &error);
  if (!tool) return error;
  if (tool != Py_None) {
    const char* owner = PyUnicode_Check(tool) ? PyUnicode_AsUTF8(tool) : nullptr;
    std::string who = owner ? owner : "?";
    Py_DECREF(tool);
    PyErr_Clear();
    if (who != kToolName)
      return "sys.monitoring tool id 2 (PROFILER_ID) is already used by '" + who +
             "' (another profiler, e.g. cProfile, is running); Python calls are not traced";
  } else {
    Py_DECREF(tool);
    PyObject* r = mon_call("use_tool_id", Py_BuildValue("(is)", kToolId, kToolName), &error);
    if (!r) return error;
    Py_DECREF(r);
  }
  long mask = 0;
  for (const auto& ev : kEvents) {
    const long bit = event_bit(ev.event);
    mask |= bit;
    PyObject* r = mon_call("register_callback", Py_BuildValue("(ilO)", kToolId, bit, g_mon_callbacks[ev.callback]), &error);
    if (!r) return error;
    Py_DECREF(r);
  }
  if (g_returned_disable) {
    // Locations disabled under an older filter generation (or while inactive) must fire again.
    if (PyObject* r = mon_call("restart_events", nullptr, &error)) Py_DECREF(r);
    g_returned_disable = false;
  }
  PyObject* r = mon_call("set_events", Py_BuildValue("(il)", kToolId, mask), &error);
  if (!r) return error;
  Py_DECREF(r);
  return {};
}

void remove_hooks(bool at_exit) {
  if (PyObject* r = mon_call("set_events", Py_BuildValue("(ii)", kToolId, 0), nullptr)) Py_DECREF(r);
  for (const auto& ev : kEvents)
    if (PyObject* r = mon_call("register_callback", Py_BuildValue("(ilO)", kToolId, event_bit(ev.event), Py_None), nullptr))
      Py_DECREF(r);
  // The next user of PROFILER_ID (cProfile) must not inherit locations we disabled. At interpreter exit there
  // is no next user: skip re-instrumenting every code object.
  if (g_returned_disable && !at_exit) {
    if (PyObject* r = mon_call("restart_events", nullptr, nullptr)) Py_DECREF(r);
    g_returned_disable = false;
  }
  if (PyObject* r = mon_call("free_tool_id", Py_BuildValue("(i)", kToolId), nullptr)) Py_DECREF(r);
}

bool init_mechanism(std::string* error) {
  g_monitoring = PySys_GetObject("monitoring");  // borrowed; sys keeps it
  if (!g_monitoring) {
    *error = "sys.monitoring is missing";
    return false;
  }
  Py_INCREF(g_monitoring);
  g_disable = PyObject_GetAttrString(g_monitoring, "DISABLE");
  if (!g_disable) {
    PyErr_Clear();
    *error = "sys.monitoring.DISABLE is missing";
    return false;
  }
  MonCallbackType.tp_name = "inferscope_py._native.monitoring_callback";
  MonCallbackType.tp_basicsize = sizeof(MonCallback);
  MonCallbackType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  MonCallbackType.tp_vectorcall_offset = offsetof(MonCallback, call);
  MonCallbackType.tp_call = PyVectorcall_Call;
  if (PyType_Ready(&MonCallbackType) < 0) {
    PyErr_Clear();
    *error = "cannot create the sys.monitoring callback type";
    return false;
  }
  for (int i = 0; i < 6; ++i) {
    auto* cb = PyObject_New(MonCallback, &MonCallbackType);
    if (cb) cb->call = g_mon_funcs[i];
    g_mon_callbacks[i] = reinterpret_cast<PyObject*>(cb);
    if (!g_mon_callbacks[i]) {
      PyErr_Clear();
      *error = "cannot create the sys.monitoring callbacks";
      return false;
    }
  }
  return true;
}

#else
// --- CPython < 3.12: the C profile hook on every thread -------------------------------------------------------

// Each thread's profile object holds its call stack: the hook gets it as its first argument, so the hot path
// needs no thread-local lookup, and the stack goes away with the thread state.
struct TraceHolder {
  PyObject_HEAD
  ThreadTrace* trace;
};
void TraceHolder_dealloc(PyObject* self) {
  delete reinterpret_cast<TraceHolder*>(self)->trace;
  Py_TYPE(self)->tp_free(self);
}
PyTypeObject TraceHolderType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* new_holder() {
  auto* h = PyObject_New(TraceHolder, &TraceHolderType);
  if (!h) return nullptr;
  h->trace = new ThreadTrace;
  return reinterpret_cast<PyObject*>(h);
}

#if ISCOPE_PY_311
// 3.11: PyFrame_GetCode is an exported call and a reference count up and down per event. The frame object points
// at its interpreter frame, whose fifth field is the code (Include/internal/pycore_frame.h); the first event
// compares that with PyFrame_GetCode and keeps the API when they differ. Borrowed: the frame holds the code.
struct FrameObjectLayout311 {
  PyObject_HEAD
  PyFrameObject* f_back;
  PyObject** f_frame;  // struct _PyInterpreterFrame*: f_func, f_globals, f_builtins, f_locals, f_code, ...
};
int g_frame_direct = -1;  // -1: not checked yet
inline PyObject* frame_code_direct(PyFrameObject* f) { return reinterpret_cast<FrameObjectLayout311*>(f)->f_frame[4]; }
#endif

// The frame's code, borrowed: the frame holds a reference while the hook runs.
inline PyObject* frame_code(PyFrameObject* frame) {
#if ISCOPE_PY_311
  if (INFERSCOPE_LIKELY(g_frame_direct == 1)) return frame_code_direct(frame);
#endif
#if PY_VERSION_HEX >= 0x03090000
  PyCodeObject* code = PyFrame_GetCode(frame);
  Py_DECREF(code);
#if ISCOPE_PY_311
  if (g_frame_direct < 0) g_frame_direct = frame_code_direct(frame) == reinterpret_cast<PyObject*>(code) ? 1 : 0;
#endif
  return reinterpret_cast<PyObject*>(code);
#else
  return reinterpret_cast<PyObject*>(frame->f_code);
#endif
}

#if ISCOPE_PY_311
// The instruction `frame` stands at, from the code's unquickened bytes (PyCode_GetCode caches them on the code
// object): its opcode and oparg; {-1, -1} before the frame's first instruction, {-2, -2} when unreadable.
std::pair<int, int> instruction_at(PyFrameObject* frame) {
  const int lasti = PyFrame_GetLasti(frame);
  if (lasti < 0) return {-1, -1};
  PyCodeObject* code = PyFrame_GetCode(frame);
  PyObject* bytes = code ? PyCode_GetCode(code) : nullptr;
  std::pair<int, int> at{-2, -2};
  if (bytes && PyBytes_Check(bytes) && lasti + 1 < PyBytes_GET_SIZE(bytes)) {
    const auto* b = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(bytes));
    at = {b[lasti], b[lasti + 1]};
  }
  Py_XDECREF(bytes);
  Py_XDECREF(code);
  PyErr_Clear();
  return at;
}
#endif

// A 'call' event of a generator's frame is its first run when the frame stands at its RESUME 0, the instruction
// every function starts at (3.11: a resumption stands at the YIELD_VALUE it suspended at, and the RESUME after it
// has oparg 1-3). Only asked for coroutine code.
inline bool first_run(PyFrameObject* frame) {
#if ISCOPE_PY_311
  const auto [op, arg] = instruction_at(frame);
  return op == -1 || (op == RESUME && arg == 0);
#else
  (void)frame;
  return false;
#endif
}

// A 'return' event of a generator's frame ends its life unless the frame stands at a YIELD_VALUE (it suspended at
// an await or a yield). Only asked for coroutine code.
inline bool ended_run(PyFrameObject* frame) {
#if ISCOPE_PY_311
  return instruction_at(frame).first != YIELD_VALUE;
#else
  (void)frame;
  return false;  // unknown before 3.11: never claimed
#endif
}

int profile_hook(PyObject* obj, PyFrameObject* frame, int what, PyObject*) {
  if (what != PyTrace_CALL && what != PyTrace_RETURN) return 0;
  if (INFERSCOPE_UNLIKELY(!g_active.load(std::memory_order_relaxed) || obj == nullptr)) {
    // Stopped from outside the interpreter (a signal, the C++ API): take the hook out of this thread.
    PyEval_SetProfile(nullptr, nullptr);
    return 0;
  }
  ThreadTrace* t = reinterpret_cast<TraceHolder*>(obj)->trace;
  PyObject* code = frame_code(frame);
  if (what == PyTrace_CALL) on_enter(t, code, [frame] { return coroutine_of(frame, first_run(frame)); });
  else on_exit(t, code, [frame] { return ended_run(frame); });
  return 0;
}

void set_profile(Py_tracefunc func) {
  PyObject* holder = func ? new_holder() : nullptr;
  if (func && !holder) {
    PyErr_Clear();
    return;
  }
  PyEval_SetProfile(func, holder);
  Py_XDECREF(holder);
}

// threading.setprofile() hook: the first event in a new thread swaps it for the C hook.
PyObject* thread_bootstrap(PyObject*, PyObject*) {
  set_profile(g_active.load(std::memory_order_relaxed) ? profile_hook : nullptr);
  Py_RETURN_NONE;
}
PyMethodDef g_bootstrap_def = {"_inferscope_thread_profile", thread_bootstrap, METH_VARARGS, nullptr};
PyObject* g_bootstrap = nullptr;

bool set_threading_profile(PyObject* hook) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (!threading) {
    PyErr_Clear();
    return false;
  }
  PyObject* r = PyObject_CallMethod(threading, "setprofile", "(O)", hook);
  Py_DECREF(threading);
  if (!r) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(r);
  return true;
}

// The profile hook is one slot per thread: whoever sets it last wins. Ours goes in (and comes out) only where
// the slot is free or already ours, so another profiler set on a thread after us (cProfile, sys.setprofile)
// keeps it, including when tracing is switched off.
inline bool slot_free_or_ours(PyThreadState* ts) {
  return ts->c_profilefunc == nullptr || ts->c_profilefunc == profile_hook;
}

void set_profile_all_threads(Py_tracefunc func) {
#if PY_VERSION_HEX >= 0x03090000
  PyInterpreterState* interp = PyThreadState_Get()->interp;
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
    if (!slot_free_or_ours(ts)) continue;
    PyObject* holder = func ? new_holder() : nullptr;
    if (func && !holder) {
      PyErr_Clear();
      continue;
    }
    if (_PyEval_SetProfile(ts, func, holder) < 0) PyErr_Clear();
    Py_XDECREF(holder);
  }
#else
  if (slot_free_or_ours(PyThreadState_Get())) set_profile(func);  // 3.8: other threads pick it up through threading
#endif
}

// threading's hook for threads started later (threading.setprofile), borrowed; nullptr when it cannot be read.
PyObject* threading_profile_hook() {
  PyObject* threading = PyImport_ImportModule("threading");
  PyObject* hook = threading ? PyObject_GetAttrString(threading, "_profile_hook") : nullptr;
  Py_XDECREF(threading);
  PyErr_Clear();
  Py_XDECREF(hook);  // the module keeps it
  return hook;
}

// A reason to refuse, when another profiler holds the hook on any thread (issue 18: taking it would leave
// cProfile, or whatever set sys.setprofile, seeing nothing); "" when every slot is free or ours.
std::string foreign_profiler() {
  PyThreadState* self = PyThreadState_Get();
#if PY_VERSION_HEX >= 0x03090000
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(self->interp); ts; ts = PyThreadState_Next(ts))
#else
  for (PyThreadState* ts = self; ts; ts = nullptr)
#endif
    if (!slot_free_or_ours(ts))
      return "another profiler holds the profile hook on " +
             (ts == self ? std::string("this thread") : "thread " + std::to_string(ts->thread_id)) +
             " (cProfile, sys.setprofile or a C profiler); it is left in place and Python calls are not traced";
  PyObject* hook = threading_profile_hook();
  if (hook && hook != Py_None && hook != g_bootstrap)
    return "another profiler is set for new threads (threading.setprofile); it is left in place and Python "
           "calls are not traced";
  return {};
}

std::string install_hooks() {
  // threading.setprofile runs Python code: call it before our hook is in, and g_active is already set (a hook
  // that sees g_active false takes itself out).
  set_threading_profile(g_bootstrap);
  set_profile_all_threads(profile_hook);
  return {};
}

void remove_hooks(bool) {
  if (threading_profile_hook() == g_bootstrap) set_threading_profile(Py_None);
  set_profile_all_threads(nullptr);
}

bool init_mechanism(std::string* error) {
  TraceHolderType.tp_name = "inferscope_py._native.ThreadTrace";
  TraceHolderType.tp_basicsize = sizeof(TraceHolder);
  TraceHolderType.tp_flags = Py_TPFLAGS_DEFAULT;
  TraceHolderType.tp_dealloc = TraceHolder_dealloc;
  if (PyType_Ready(&TraceHolderType) < 0) {
    PyErr_Clear();
    *error = "cannot create the per-thread trace type";
    return false;
  }
  g_bootstrap = PyCFunction_New(&g_bootstrap_def, nullptr);
  if (!g_bootstrap) {
    PyErr_Clear();
    *error = "cannot create the thread bootstrap hook";
    return false;
  }
  return true;
}
#endif

bool same_filters(const Filters& a, const Filters& b) {
  return a.mode == b.mode && a.include == b.include && a.exclude == b.exclude && a.max_depth == b.max_depth;
}

// --- sampled mode: tracing switched on and off by the writer ----------------------------------------------
//
// The writer thread must never wait for the GIL: the application may hold it while it waits for the writer
// (stop(), flush_ring()). So a thread of this module's own takes the GIL and switches; it is detached, never
// joined, so one that finalization leaves waiting for the GIL keeps no exit waiting. A forked child starts a
// new one (the parent's does not exist there).

std::atomic<bool> g_switch_allowed{false};  // a sampled session runs and the interpreter is not exiting

class DetailSwitch {
 public:
  // Only the writer thread calls this, so the check outside the lock races with nothing.
  void request(bool on, const Filters& filters) {
    if (owner_ != ::getpid()) start();
    std::lock_guard lk(mu_);
    want_ = on;
    filters_ = filters;
    cv_.notify_one();
  }
  // The session turned tracing on itself (adaptive mode's baseline, at start): the switch must know it is on, or the
  // writer's first request to turn it off would equal what the switch believes and never be carried out.
  void assume_on(const Filters& filters) {
    if (owner_ != ::getpid()) start();
    std::lock_guard lk(mu_);
    want_ = have_ = true;
    filters_ = filters;
  }

 private:
  // A new process (or the first request): the thread that served a parent is not here, and its lock may have
  // been held at the fork.
  void start() {
    new (&mu_) std::mutex;
    new (&cv_) std::condition_variable;
    owner_ = ::getpid();
    want_ = have_ = false;
    std::thread([this] { run(); }).detach();
  }
  void run() {
    const pid_t mine = ::getpid();
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return want_ != have_ || owner_ != mine; });
      if (owner_ != mine) return;
      const bool on = want_;
      const Filters f = filters_;
      lk.unlock();
      if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        if (g_switch_allowed.load()) on ? (void)enable(f) : disable();
        PyGILState_Release(gil);
      }
      lk.lock();
      have_ = on;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  pid_t owner_ = 0;
  bool want_ = false, have_ = false;
  Filters filters_;
};

DetailSwitch& detail_switch() {
  static DetailSwitch* s = new DetailSwitch;  // never destroyed: its thread may outlive every static
  return *s;
}

// --- the runtime's view -----------------------------------------------------------------------------------

class PythonCollector final : public runtime::Collector {
 public:
  const char* name() const override { return "python"; }
  bool wanted(const Config&) const override { return true; }  // reports "off: ..." itself when disabled

  std::string start(const Config& config) override {
    if (!Py_IsInitialized()) return "off: the Python interpreter is not running";
    // Sessions may start on a thread that does not hold the GIL (the module releases it around start()).
    PyGILState_STATE gil = PyGILState_Ensure();
    name_python_threads(/*changed_only=*/false);  // threads already running carry their names too, traced or not
    std::string status = start_tracing(config);
    PyGILState_Release(gil);
    return status;
  }

  // Sampled mode: the writer asks; the switch's own thread takes the GIL (DetailSwitch).
  void set_detail(bool on) override {
    if (sampled_) detail_switch().request(on, filters_);
  }

  // May run on the writer thread (a signal) or after the interpreter finalized (C atexit): touch no Python.
  void stop() override {
    g_switch_allowed.store(false);
    g_active.store(false, std::memory_order_relaxed);
  }

 private:
  // The status line; GIL held. Sampled mode leaves tracing off until a window opens.
  std::string start_tracing(const Config& config) {
    if (!config.python || config.python_mode == "off")
      return "off: disabled by the configuration (python=false or python_mode=off)";
    Filters f;
    try {
      f = filters_from_config(config);
    } catch (const std::exception& e) {
      return std::string("off: ") + e.what();
    }
    filters_ = f;
    sampled_ = records_in_windows(config.mode);
    g_switch_allowed.store(sampled_);
    if (detail_at_start(config.mode)) {  // full, and adaptive's first part: tracing from the start
      std::string error = enable(f);
      if (!error.empty()) return "off: " + error;
      if (sampled_) detail_switch().assume_on(f);
      return status_line() + (sampled_ ? ", then inside sampled windows only" : "");
    }
    disable();  // a full session before may have left tracing on
    return std::string("on: ") + mechanism() + ", Python " + PY_VERSION + ", mode " + f.mode +
           ", inside sampled windows only";
  }

  Filters filters_;
  bool sampled_ = false;
};

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    pos = comma + 1;
  }
  return out;
}

Filters filters_from_config(const Config& config) {
  Filters f;
  f.mode = config.python_mode.empty() ? "default" : config.python_mode;
  if (f.mode != "default" && f.mode != "full")
    throw std::invalid_argument("unknown python_mode '" + f.mode + "' (expected default, full or off)");
  f.include = split_list(config.python_include);
  f.exclude = split_list(config.python_exclude);
  f.max_depth = config.python_max_depth;
  return f;
}

// Whether code_extra_direct() reads what the API reads, on a fresh code object (before and after a set).
bool check_extra_direct() {
  PyObject* code = Py_CompileString("0", "<inferscope extra check>", Py_eval_input);
  if (!code) {
    PyErr_Clear();
    return false;
  }
  bool ok = PyCode_Check(code) && code_extra_direct(code, g_extra_index) == nullptr;
  void* marker = reinterpret_cast<void*>(uintptr_t{0x5eed});
  void* via_api = nullptr;
  ok = ok && code_set_extra(code, g_extra_index, marker) == 0 && code_get_extra(code, g_extra_index, &via_api) == 0 &&
       via_api == marker && code_extra_direct(code, g_extra_index) == marker;
  if (ok) code_set_extra(code, g_extra_index, nullptr);
  PyErr_Clear();
  Py_DECREF(code);
  return ok;
}

bool init(const std::string& package_dir, std::string* error) {
  g_package_dir = package_dir;
  if (!g_package_dir.empty() && g_package_dir.back() != '/') g_package_dir += '/';
  g_extra_index = request_extra_index();
  if (g_extra_index < 0) {
    PyErr_Clear();
    *error = "no code-object extra slot is left";
    return false;
  }
  g_extra_direct = check_extra_direct();
  // The standard library and installed packages, as this interpreter lays them out.
  if (PyObject* sysconfig = PyImport_ImportModule("sysconfig")) {
    if (PyObject* paths = PyObject_CallMethod(sysconfig, "get_paths", nullptr)) {
      for (const char* key : {"stdlib", "platstdlib", "purelib", "platlib"}) {
        PyObject* v = PyDict_GetItemString(paths, key);  // borrowed
        if (v && PyUnicode_Check(v))
          if (const char* s = PyUnicode_AsUTF8(v)) {
            std::string d = s;
            if (!d.empty() && d.back() != '/') d += '/';
            g_library_dirs.push_back(d);
          }
      }
      Py_DECREF(paths);
    }
    Py_DECREF(sysconfig);
  }
  PyErr_Clear();
  return init_mechanism(error);
}

void add_own_file(const std::string& file) {
  if (file.empty() || is_own_code(file)) return;
  g_own_files.push_back(file);
  if (++g_code_gen >= (1u << 30)) g_code_gen = 1;  // code of that file classified before is classified again
}

// kElideBelowNs in session ticks, from two calibration points 2 ms apart (once per process: the TSC's rate does not
// change). A clock that is not the TSC counts nanoseconds.
uint64_t elide_ticks() {
  const dump::CalibrationPoint a = runtime::take_calibration_point();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const dump::CalibrationPoint b = runtime::take_calibration_point();
  const double ns = double(b.monotonic_ns - a.monotonic_ns), ticks = double(b.ticks - a.ticks);
  const double per_ns = ns > 0 && ticks > 0 ? ticks / ns : 1.0;
  return static_cast<uint64_t>(kElideBelowNs * per_ns);
}

std::string enable(const Filters& filters) {
  if (g_extra_index < 0) return "the tracer was not initialised";
  // Checked before anything changes, on the first enable and on a re-enable alike: cProfile may have taken the
  // hook of a thread since our hooks went in, and re-arming would take it back.
  if (std::string error = foreign_profiler(); !error.empty()) {
    if (!g_installed) g_last_error = error;
    return error;
  }
  if (!same_filters(filters, g_filters)) {
    g_filters = filters;
    if (++g_code_gen >= (1u << 30)) g_code_gen = 1;
#if ISCOPE_PY_MONITORING
    g_returned_disable = true;  // DISABLE answers given under the old filters must be undone
#endif
  }
  ++g_stack_gen;
  if (g_elide_ticks == 0) g_elide_ticks = elide_ticks();
  g_active.store(true);
  if (!g_installed) {
    std::string error = install_hooks();
    if (!error.empty()) {
      g_last_error = error;
      g_active.store(false);
      return error;
    }
    g_installed = true;
    ++g_stats.toggles;
  } else {
#if ISCOPE_PY_MONITORING
    // Re-enabling while installed (new filters, or a stop from outside left the hooks in): re-arm.
    std::string error = install_hooks();
    if (!error.empty()) {
      g_active.store(false);
      return error;
    }
#else
    set_profile_all_threads(profile_hook);
#endif
  }
  g_last_error.clear();
  g_active.store(true);
  return {};
}

void disable(bool at_exit) {
  if (at_exit) g_switch_allowed.store(false);  // no sampled window switches tracing on again from here
  flush_elided();
  g_active.store(false);
  if (g_installed) {
    remove_hooks(at_exit);
    g_installed = false;
    ++g_stats.toggles;
  }
  ++g_stack_gen;
}

bool is_enabled() { return g_installed && g_active.load(); }
const Filters& current_filters() { return g_filters; }
Stats stats() {
  Stats s = g_stats;
  s.direct_code_extra = g_extra_direct;
#if ISCOPE_PY_311
  s.direct_frame_code = g_frame_direct;
#endif
  return s;
}

const char* mechanism() {
#if ISCOPE_PY_MONITORING
  return "sys.monitoring (tool id 2, PROFILER_ID)";
#else
  return "C profile hook (all threads)";
#endif
}

std::string status_line() {
  if (!is_enabled()) return g_last_error.empty() ? "off: Python tracing switched off" : "off: " + g_last_error;
  std::string s = std::string("on: ") + mechanism() + ", Python " + PY_VERSION + ", mode " + g_filters.mode;
  auto list = [](const std::vector<std::string>& v) {
    std::string o;
    for (const auto& x : v) o += (o.empty() ? "" : ",") + x;
    return o;
  };
  if (!g_filters.include.empty()) s += ", include " + list(g_filters.include);
  if (!g_filters.exclude.empty()) s += ", exclude " + list(g_filters.exclude);
  if (g_filters.max_depth) s += ", max depth " + std::to_string(g_filters.max_depth);
  return s;
}

std::unique_ptr<runtime::Collector> make_collector() { return std::make_unique<PythonCollector>(); }

}  // namespace inferscope::pytrace
