// inferscope_py._native: the Python binding of the InferScope runtime, written against the Python C API only.
//
// Ranges from Python (scope(), the decorator, model-layer ranges) are the same complete RangeRecords that
// ISCOPE_RANGE writes, on the same per-thread ring and with the same depth counter (detail::t_state.depth), so
// C++ and Python ranges on one thread nest correctly. ScopedRange itself cannot be held by a Python object
// (it cannot live on the heap), hence OpenRange below: the begin/end halves of ScopedRange.
//
// Locking rule: the runtime's control functions (start, stop, flush_ring, attach_collector) may call back into
// the Python collector, which takes the GIL; so they are always called with the GIL released.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <inferscope/scope.hpp>
#include <inferscope/version.hpp>

#include "collect/python/python_tracer.hpp"
#include "collect/python/thread_names.hpp"
#include "config/settings.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"
#include "dump/visit.hpp"
#include "runtime/runtime.hpp"
#include "runtime/tree_outputs.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using inferscope::AttrRecord;
using inferscope::AttrType;
namespace detail = inferscope::detail;
namespace runtime = inferscope::runtime;
namespace pytrace = inferscope::pytrace;

constexpr size_t kMaxAttrs = 64;
bool g_tracer_ok = false;
std::string g_tracer_error;
uint32_t g_owned_epoch = 0;  // the session this module started (or joined from the environment) and stops at exit

// --- helpers --------------------------------------------------------------------------------------------

// Error convention (issue 18): every function below that can fail returns false/0/nullptr with a Python
// exception set, and every caller returns NULL (-1 from tp_init) right after; nothing leaves an exception set
// behind a successful return (CPython's SystemError "returned a result with an exception set").

// Adds a PEP 678 note naming the argument to the exception being raised (3.11+), so a UnicodeEncodeError
// from a lone surrogate says which argument held it. The exception keeps its type.
void note_argument(const char* what) {
#if PY_VERSION_HEX >= 0x030B0000
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyErr_NormalizeException(&et, &ev, &tb);
  if (ev) {
    if (PyObject* r = PyObject_CallMethod(ev, "add_note", "s", what)) Py_DECREF(r);
    else PyErr_Clear();
  }
  PyErr_Restore(et, ev, tb);
#else
  (void)what;
#endif
}

// The UTF-8 bytes of str `s`. A str that UTF-8 cannot encode (a lone surrogate, e.g. "\ud800") gives false with
// UnicodeEncodeError set and `what` (the argument, e.g. "scope(): name") noted on it.
bool utf8(PyObject* s, const char* what, std::string& out) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) {
    note_argument((std::string(what) + " must be encodable as UTF-8").c_str());
    return false;
  }
  out.assign(c, static_cast<size_t>(n));
  return true;
}

// A file path (str or os.PathLike resolving to str) in the filesystem encoding, so a name Python decoded with
// surrogateescape reaches open() as the bytes it came from. False with TypeError/UnicodeEncodeError set.
bool fs_path(PyObject* v, const char* what, std::string& out) {
  PyObject* p = PyOS_FSPath(v);
  if (!p) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a str or os.PathLike, not %s", what, Py_TYPE(v)->tp_name);
    return false;
  }
  if (!PyUnicode_Check(p)) {
    PyErr_Format(PyExc_TypeError, "%s must be a str or os.PathLike, not %s", what, Py_TYPE(p)->tp_name);
    Py_DECREF(p);
    return false;
  }
  PyObject* b = PyUnicode_EncodeFSDefault(p);
  Py_DECREF(p);
  if (!b) {
    note_argument((std::string(what) + " must be encodable in the filesystem encoding").c_str());
    return false;
  }
  out.assign(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
  Py_DECREF(b);
  return true;
}

// Text from the runtime or a dump (range and thread names, status lines, paths). Such bytes are not checked to
// be UTF-8 where they are made (a C++ range name may be any bytes), so decoding never fails: bad bytes become
// U+FFFD. nullptr only on MemoryError.
PyObject* text(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}
PyObject* path_text(const std::string& s) {
  return PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
}

// Interns str `s`; false with UnicodeEncodeError set (see utf8()). `id` is never 0 on success.
bool intern_str(PyObject* s, const char* what, uint32_t& id) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) {
    note_argument((std::string(what) + " must be encodable as UTF-8").c_str());
    return false;
  }
  // The UTF-8 buffer lives as long as the str object: literals and long-lived names hit the per-thread cache.
  id = detail::intern_cached(c, static_cast<size_t>(n));
  return true;
}

// Converts keyword attributes to attribute records (keys and string values interned). Returns false with a
// TypeError/ValueError set on a value that is not int, float, bool or str.
bool convert_attrs(const char* what, PyObject* kwargs, std::vector<AttrRecord>& out) {
  if (!kwargs) return true;
  if (static_cast<size_t>(PyDict_Size(kwargs)) > kMaxAttrs) {
    PyErr_Format(PyExc_ValueError, "%s: at most %d attributes, got %zd", what, int(kMaxAttrs), PyDict_Size(kwargs));
    return false;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    AttrRecord a{};
    if (!intern_str(key, (std::string(what) + " attribute names").c_str(), a.key)) return false;
    if (PyBool_Check(value)) {
      a.type = AttrType::kBool;
      a.value.i = value == Py_True;
    } else if (PyLong_Check(value)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow) {
        PyErr_Format(PyExc_ValueError, "%s: attribute '%U' does not fit in 64 bits", what, key);
        return false;
      }
      a.type = AttrType::kInt;
      a.value.i = v;
    } else if (PyFloat_Check(value)) {
      a.type = AttrType::kDouble;
      a.value.d = PyFloat_AS_DOUBLE(value);
    } else if (PyUnicode_Check(value)) {
      a.type = AttrType::kString;
      uint32_t id = 0;
      if (!intern_str(value, (std::string(what) + " attribute values").c_str(), id)) return false;
      a.value.s = id;
    } else {
      PyErr_Format(PyExc_TypeError, "%s: attribute '%U' must be int, float, bool or str, not %s", what, key,
                   Py_TYPE(value)->tp_name);
      return false;
    }
    out.push_back(a);
  }
  return true;
}

bool check_name(const char* what, PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "%s: name must be a str, not %s", what, Py_TYPE(name)->tp_name);
    return false;
  }
  if (PyUnicode_GetLength(name) == 0) {
    PyErr_Format(PyExc_ValueError, "%s: name must not be empty", what);
    return false;
  }
  // Encoded (and cached in the str) now, so that interning the name later cannot fail.
  if (!PyUnicode_AsUTF8AndSize(name, nullptr)) {
    note_argument((std::string(what) + ": name must be encodable as UTF-8").c_str());
    return false;
  }
  return true;
}

// --- ranges ----------------------------------------------------------------------------------------------

struct OpenRange {
  uint64_t start = 0;  // 0: not recording
  uint32_t depth = 0;
  uint32_t epoch = 0;
  detail::ThreadState* ts = nullptr;
  uint64_t thread = 0;  // scope(): the entering thread's serial (ScopeThread), recording or not
};

// --- scopes exited on another thread than the one that entered them ------------------------------------------
//
// A with-block normally exits on the thread that entered it. When it does not (a context handed to a worker,
// a generator resumed on another thread), the exit is ignored and counted, not raised: the profiled program
// must behave as it would without us (issue 18), and without us that exit is legal Python. The range is not
// recorded (its start is on the entering thread's ring, which only that thread writes), and the depth its
// start took there is given back by the entering thread itself, at its next Python range once the ranges
// opened inside the orphan have closed: a thread never writes another thread's depth, which is plain
// thread-local state the owner reads and writes without synchronisation.

struct ScopeThread {
  uint64_t serial = 0;
  unsigned long os_tid = 0;
  std::vector<uint32_t> orphan_depths;  // levels to give back; guarded by orphans_mu()
};
std::mutex& orphans_mu() {
  static auto* m = new std::mutex;  // never destroyed: threads may exit during static destruction
  return *m;
}
std::unordered_map<uint64_t, ScopeThread*>& scope_threads() {  // guarded by orphans_mu()
  static auto* m = new std::unordered_map<uint64_t, ScopeThread*>;
  return *m;
}
std::atomic<uint32_t> g_orphans_pending{0};  // all threads' orphan_depths: 0 keeps the range hot path to one load
std::atomic<uint64_t> g_cross_thread_exits{0};
std::string g_last_cross_thread_exit;  // guarded by orphans_mu()

struct ScopeThreadSlot {
  ScopeThread* t = nullptr;
  ~ScopeThreadSlot() {
    if (!t) return;
    {
      std::lock_guard lk(orphans_mu());
      scope_threads().erase(t->serial);
      g_orphans_pending.fetch_sub(static_cast<uint32_t>(t->orphan_depths.size()));
    }
    delete t;
  }
};
thread_local ScopeThreadSlot t_scope_thread;

ScopeThread& this_scope_thread() {
  ScopeThread*& t = t_scope_thread.t;
  if (INFERSCOPE_UNLIKELY(!t)) {
    static std::atomic<uint64_t> next{1};
    t = new ScopeThread;
    t->serial = next.fetch_add(1);
    t->os_tid = PyThread_get_thread_native_id();
    std::lock_guard lk(orphans_mu());
    scope_threads()[t->serial] = t;
  }
  return *t;
}

// The calling thread gives back the levels of its orphaned ranges that are innermost now (see above).
void settle_orphans() {
  ScopeThread& me = this_scope_thread();
  std::lock_guard lk(orphans_mu());
  auto& v = me.orphan_depths;
  if (v.empty()) return;
  std::sort(v.begin(), v.end(), std::greater<uint32_t>());  // innermost first
  uint32_t& depth = detail::t_state.depth;
  size_t done = 0;
  for (; done < v.size(); ++done) {
    if (depth == v[done] + 1) depth = v[done];  // nothing open inside it any more
    else if (depth > v[done] + 1) break;        // ranges opened inside it are still open: later
    // depth <= v[done]: the level is gone already (nothing to give back)
  }
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(done));
  g_orphans_pending.fetch_sub(static_cast<uint32_t>(done));
}

inline void maybe_settle_orphans() {
  if (INFERSCOPE_UNLIKELY(g_orphans_pending.load(std::memory_order_relaxed) != 0)) settle_orphans();
}

// Called on the exiting thread for a range `scope_name` entered on another thread: counts it and hands the
// depth level back to its owner (which may have exited meanwhile: then there is nothing to give back).
void abandon_range(const OpenRange& o, PyObject* scope_name) {
  const unsigned long exiting = this_scope_thread().os_tid;
  const uint64_t n = g_cross_thread_exits.fetch_add(1) + 1;
  std::string name;
  if (PyObject* b = PyUnicode_AsUTF8String(scope_name)) {  // checked at init: cannot fail but for memory
    name.assign(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
    Py_DECREF(b);
  } else {
    PyErr_Clear();
  }
  std::string line;
  {
    std::lock_guard lk(orphans_mu());
    auto it = scope_threads().find(o.thread);
    const bool alive = it != scope_threads().end();
    const std::string entering = alive ? "thread " + std::to_string(it->second->os_tid) : "an exited thread";
    if (alive && o.start != 0) {
      it->second->orphan_depths.push_back(o.depth);
      g_orphans_pending.fetch_add(1);
    }
    g_last_cross_thread_exit = "scope '" + name + "' entered on " + entering + ", exited on thread " +
                               std::to_string(exiting);
    line = std::to_string(n) + " scope exit(s) on another thread than the enter ignored (not recorded); last: " +
           g_last_cross_thread_exit;
  }
  if (inferscope::is_active()) runtime::set_collector_status("python_scopes", line);
}

inline void range_begin(OpenRange& o) {
  o.start = 0;
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return;
  detail::ThreadState& ts = detail::t_state;
  if (ts.epoch != e && !detail::bind_thread(e)) return;
  maybe_settle_orphans();
  o.depth = ts.depth++;
  o.epoch = e;
  o.ts = &ts;
  o.start = detail::now();
}

// Ends the range on the calling thread; `error` (a string id, 0 = none) adds an "error" attribute naming the
// exception that left the range.
void range_end(const OpenRange& o, uint32_t name, const AttrRecord* attrs, size_t n, uint32_t error) {
  if (o.start == 0) return;
  const uint64_t end = detail::now();
  detail::ThreadState& ts = detail::t_state;
  if (&ts != o.ts) return;  // callers end on the entering thread (scope(): abandon_range otherwise)
  --ts.depth;
  maybe_settle_orphans();
  if (ts.epoch != o.epoch || detail::g_session.load(std::memory_order_relaxed) != o.epoch) return;
  if (n == 0 && error == 0) {
    detail::write_range(ts.ring, inferscope::RecordKind::kRange, name, o.depth, o.start, end);
    detail::note_step(name, o.start, end);  // sampled mode: scope("step") drives the windows
    return;
  }
  AttrRecord buf[kMaxAttrs + 1];
  std::memcpy(buf, attrs, n * sizeof(AttrRecord));
  if (error) {
    static const uint32_t key = runtime::intern("error");
    buf[n] = AttrRecord{};
    buf[n].key = key;
    buf[n].type = AttrType::kString;
    buf[n].value.s = error;
    ++n;
  }
  detail::write_range_attrs(ts.ring, name, o.depth, o.start, end, buf, static_cast<uint32_t>(n));
  detail::note_step(name, o.start, end);
}

uint32_t exception_name_id(PyObject* exc_type) {
  if (!exc_type || exc_type == Py_None || !PyType_Check(exc_type)) return 0;
  const char* n = reinterpret_cast<PyTypeObject*>(exc_type)->tp_name;
  if (const char* dot = std::strrchr(n, '.')) n = dot + 1;
  return detail::intern_cached(n, std::strlen(n));
}

// --- Scope: context manager (the Python subclass `inferscope_py.scope` adds the decorator) ------------------

constexpr int kMaxOpen = 16;

struct ScopeObject {
  PyObject_HEAD
  uint32_t name;
  int nopen;
  PyObject* name_obj;
  PyObject* kwargs;  // dict or nullptr, for repr and the decorator
  std::vector<AttrRecord>* attrs;
  OpenRange open[kMaxOpen];
};

int Scope_init(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  if (self->nopen != 0) {  // re-initialising would forget the open ranges and leave their depth taken
    PyErr_Format(PyExc_RuntimeError, "scope '%U' cannot be re-initialised while it is entered", self->name_obj);
    return -1;
  }
  PyObject* name = nullptr;
  if (!PyArg_ParseTuple(args, "O:scope", &name)) return -1;
  if (!check_name("scope()", name)) return -1;
  std::vector<AttrRecord> attrs;
  if (!convert_attrs("scope()", kwargs, attrs)) return -1;
  uint32_t id = 0;
  if (!intern_str(name, "scope(): name", id)) return -1;
  PyObject* kw_copy = nullptr;
  if (kwargs && !(kw_copy = PyDict_Copy(kwargs))) return -1;
  Py_INCREF(name);
  Py_XSETREF(self->name_obj, name);
  Py_XSETREF(self->kwargs, kw_copy);
  self->name = id;
  delete self->attrs;
  self->attrs = attrs.empty() ? nullptr : new std::vector<AttrRecord>(std::move(attrs));
  self->nopen = 0;
  return 0;
}

void Scope_dealloc(PyObject* self_obj) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  Py_XDECREF(self->name_obj);
  Py_XDECREF(self->kwargs);
  delete self->attrs;
  Py_TYPE(self_obj)->tp_free(self_obj);
}

PyObject* Scope_enter(PyObject* self_obj, PyObject*) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  if (self->nopen == kMaxOpen) {
    PyErr_Format(PyExc_RuntimeError, "scope '%U' is entered %d times without exit; use a new scope() per with-block",
                 self->name_obj, kMaxOpen);
    return nullptr;
  }
  OpenRange& o = self->open[self->nopen++];
  range_begin(o);
  o.thread = this_scope_thread().serial;
  Py_INCREF(self_obj);
  return self_obj;
}

PyObject* Scope_exit(PyObject* self_obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  if (self->nopen == 0) {
    PyErr_Format(PyExc_RuntimeError, "scope '%U' exited without being entered", self->name_obj);
    return nullptr;
  }
  // One scope object may be entered on several threads at once (a module-level `with step:`): each thread
  // ends its own innermost entry, wherever other threads' entries sit in the array.
  const uint64_t me = this_scope_thread().serial;
  int i = self->nopen - 1;
  while (i >= 0 && self->open[i].thread != me) --i;
  if (i < 0) {  // every open entry is another thread's: this exit ends the innermost of them
    abandon_range(self->open[--self->nopen], self->name_obj);
    Py_RETURN_FALSE;
  }
  const OpenRange o = self->open[i];
  std::memmove(&self->open[i], &self->open[i + 1], sizeof(OpenRange) * static_cast<size_t>(self->nopen - 1 - i));
  --self->nopen;
  const AttrRecord* a = self->attrs ? self->attrs->data() : nullptr;
  const size_t n = self->attrs ? self->attrs->size() : 0;
  range_end(o, self->name, a, n, nargs >= 1 ? exception_name_id(args[0]) : 0);
  Py_RETURN_FALSE;  // exceptions propagate
}

PyObject* Scope_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  return PyUnicode_FromFormat("<inferscope_py.scope %R>", self->name_obj ? self->name_obj : Py_None);
}

PyObject* Scope_get_name(PyObject* self_obj, void*) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  PyObject* n = self->name_obj ? self->name_obj : Py_None;
  Py_INCREF(n);
  return n;
}
PyObject* Scope_get_attrs(PyObject* self_obj, void*) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  return self->kwargs ? PyDict_Copy(self->kwargs) : PyDict_New();
}

PyMethodDef Scope_methods[] = {
    {"__enter__", Scope_enter, METH_NOARGS, "Begins the range."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Scope_exit)), METH_FASTCALL,
     "Ends the range; an exception adds an 'error' attribute and propagates."},
    {nullptr, nullptr, 0, nullptr}};
PyGetSetDef Scope_getset[] = {{"name", Scope_get_name, nullptr, "the range name", nullptr},
                              {"attrs", Scope_get_attrs, nullptr, "the attributes (a copy)", nullptr},
                              {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject ScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- ScopedCall: the decorator's wrapper for plain functions and methods -------------------------------------

struct ScopedCallObject {
  PyObject_HEAD
  uint32_t name;
  PyObject* func;
  PyObject* dict;  // functools.update_wrapper stores __name__, __doc__, __wrapped__ here
  std::vector<AttrRecord>* attrs;
};

PyObject* ScopedCall_new(PyTypeObject* type, PyObject* args, PyObject*) {
  PyObject *scope, *func;
  if (!PyArg_ParseTuple(args, "O!O:ScopedCall", &ScopeType, &scope, &func)) return nullptr;
  if (!PyCallable_Check(func)) {
    PyErr_Format(PyExc_TypeError, "scope(): can only decorate a callable, not %s", Py_TYPE(func)->tp_name);
    return nullptr;
  }
  auto* self = reinterpret_cast<ScopedCallObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  auto* s = reinterpret_cast<ScopeObject*>(scope);
  self->name = s->name;
  self->attrs = s->attrs ? new std::vector<AttrRecord>(*s->attrs) : nullptr;
  Py_INCREF(func);
  self->func = func;
  return reinterpret_cast<PyObject*>(self);
}

int ScopedCall_traverse(PyObject* self_obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<ScopedCallObject*>(self_obj);
  Py_VISIT(self->func);
  Py_VISIT(self->dict);
  return 0;
}
int ScopedCall_clear(PyObject* self_obj) {
  auto* self = reinterpret_cast<ScopedCallObject*>(self_obj);
  Py_CLEAR(self->func);
  Py_CLEAR(self->dict);
  return 0;
}
void ScopedCall_dealloc(PyObject* self_obj) {
  PyObject_GC_UnTrack(self_obj);
  ScopedCall_clear(self_obj);
  delete reinterpret_cast<ScopedCallObject*>(self_obj)->attrs;
  Py_TYPE(self_obj)->tp_free(self_obj);
}

PyObject* ScopedCall_call(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<ScopedCallObject*>(self_obj);
  if (!self->func) {
    PyErr_SetString(PyExc_RuntimeError, "scoped function was cleared");
    return nullptr;
  }
  OpenRange o;
  range_begin(o);
  PyObject* r = PyObject_Call(self->func, args, kwargs);
  uint32_t error = 0;
  if (!r && o.start) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    error = exception_name_id(et);
    PyErr_Restore(et, ev, tb);
  }
  range_end(o, self->name, self->attrs ? self->attrs->data() : nullptr, self->attrs ? self->attrs->size() : 0, error);
  return r;
}

// Methods: binds like a function does.
PyObject* ScopedCall_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* ScopedCall_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<ScopedCallObject*>(self_obj);
  return PyUnicode_FromFormat("<inferscope_py scoped %R>", self->func ? self->func : Py_None);
}

PyGetSetDef ScopedCall_getset[] = {{"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
                                   {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject ScopedCallType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- model-layer ranges (inferscope_py.torch): begin in a pre-hook, end in a post-hook ------------------------

struct LayerRange {
  uint32_t name;
  OpenRange open;
};
thread_local std::vector<LayerRange> t_layers;

PyObject* py_layer_begin(PyObject*, PyObject* name) {
  if (!check_name("_layer_begin", name)) return nullptr;
  LayerRange l{0, {}};
  if (!intern_str(name, "_layer_begin(): name", l.name)) return nullptr;
  range_begin(l.open);
  t_layers.push_back(l);
  Py_RETURN_NONE;
}

// Ends the innermost open layer range named `name`; ranges opened inside it and not ended (a forward that
// raised without its post-hook running) are closed with it, so depth stays consistent.
PyObject* py_layer_end(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_layer_end(name, exc_type=None): name must be a str");
    return nullptr;
  }
  uint32_t name = 0;
  if (!intern_str(args[0], "_layer_end(): name", name)) return nullptr;
  const uint32_t error = nargs >= 2 ? exception_name_id(args[1]) : 0;
  auto& v = t_layers;
  size_t i = v.size();
  while (i > 0 && v[i - 1].name != name) --i;
  if (i == 0) Py_RETURN_NONE;
  while (v.size() >= i) {
    LayerRange l = v.back();
    v.pop_back();
    range_end(l.open, l.name, nullptr, 0, v.size() + 1 == i ? error : 0);
  }
  Py_RETURN_NONE;
}

// --- marks, threads ------------------------------------------------------------------------------------------

PyObject* py_mark_event(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* name = nullptr;
  if (!PyArg_ParseTuple(args, "O:mark_event", &name)) return nullptr;
  if (!check_name("mark_event()", name)) return nullptr;
  std::vector<AttrRecord> attrs;
  if (!convert_attrs("mark_event()", kwargs, attrs)) return nullptr;
  uint32_t name_id = 0;
  if (!intern_str(name, "mark_event(): name", name_id)) return nullptr;
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) Py_RETURN_NONE;
  detail::ThreadState& ts = detail::t_state;
  if (ts.epoch != e && !detail::bind_thread(e)) Py_RETURN_NONE;
  const uint32_t n = static_cast<uint32_t>(attrs.size());
  const uint32_t size = sizeof(inferscope::MarkRecord) +
                        (n ? sizeof(inferscope::AttrListHeader) + n * sizeof(AttrRecord) : 0);
  const inferscope::MarkRecord m{{inferscope::RecordKind::kMark, 0, static_cast<uint16_t>(size)}, name_id,
                                 detail::now()};
  uint8_t* p = detail::ring_reserve(ts.ring, size);
  if (!p) Py_RETURN_NONE;
  std::memcpy(p, &m, sizeof(m));
  if (n) {
    const inferscope::AttrListHeader lh{static_cast<uint16_t>(n), 0};
    std::memcpy(p + sizeof(m), &lh, sizeof(lh));
    std::memcpy(p + sizeof(m) + sizeof(lh), attrs.data(), n * sizeof(AttrRecord));
  }
  detail::ring_commit(ts.ring, size);
  Py_RETURN_NONE;
}

PyObject* py_set_thread_name(PyObject*, PyObject* name) {
  if (!check_name("set_thread_name()", name)) return nullptr;
  std::string n;
  if (!utf8(name, "set_thread_name(): name", n)) return nullptr;
  inferscope::set_thread_name(n);
  Py_RETURN_NONE;
}

// --- session control -------------------------------------------------------------------------------------

// A string setting: a str, or an os.PathLike (output, report). Paths go through the filesystem encoding, so a
// name that os.listdir decoded with surrogateescape names the same file.
bool set_string(std::string& out, PyObject* v, const char* key) {
  PyObject* p = PyOS_FSPath(v);  // a str is returned as it is
  if (!p || !PyUnicode_Check(p)) {
    Py_XDECREF(p);
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "start(): %s must be a str, not %s", key, Py_TYPE(v)->tp_name);
    return false;
  }
  const bool ok = fs_path(p, (std::string("start(): ") + key).c_str(), out);
  Py_DECREF(p);
  return ok;
}
// A comma list given as "a,b" or ["a", "b"].
bool set_list(std::string& out, PyObject* v, const char* key, const char* fn) {
  if (v == Py_None) {
    out.clear();
    return true;
  }
  const std::string what = std::string(fn) + ": " + key;
  if (PyUnicode_Check(v)) return utf8(v, what.c_str(), out);
  if (PyList_Check(v) || PyTuple_Check(v)) {
    std::string joined, item_text;
    // A list or tuple: the items are read in place (no copy, nothing that can fail).
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(v, i);
      if (!PyUnicode_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s: every item of %s must be a str, not %s", fn, key, Py_TYPE(item)->tp_name);
        return false;
      }
      if (!utf8(item, what.c_str(), item_text)) return false;
      joined += (joined.empty() ? "" : ",") + item_text;
    }
    out = joined;
    return true;
  }
  PyErr_Format(PyExc_TypeError, "%s: %s must be a str (comma list) or a list of str, not %s", fn, key,
               Py_TYPE(v)->tp_name);
  return false;
}
// start(**config): every setting that .inferscope.yaml and INFERSCOPE_* accept is a keyword (lib/config's
// table, docs/configuration.md). The Python type is checked here, since a str where a bool belongs is a
// mistake rather than the word "yes"; the value then goes through config::resolve like a command-line flag,
// so ranges, choices and their error messages are the config file's. A keyword wins over the environment and the
// config file, which set every setting not given (as C++ inferscope::start does for the fields the code left
// alone); the runtime then starts exactly that configuration.
const std::map<std::string, std::string>& setting_types() {
  static const std::map<std::string, std::string> types = [] {
    std::map<std::string, std::string> m;
    for (const auto& k : inferscope::config::keys()) m[k.key] = k.type;
    return m;
  }();
  return types;
}

// The keyword's value as the text a config file would hold; false with a TypeError set when its Python type
// cannot be that setting's.
bool keyword_text(const std::string& key, const std::string& type, PyObject* v, std::string& text) {
  const char* k = key.c_str();
  if (type == "boolean") {
    if (!PyBool_Check(v)) {
      PyErr_Format(PyExc_TypeError, "start(): %s must be a bool, not %s", k, Py_TYPE(v)->tp_name);
      return false;
    }
    text = v == Py_True ? "true" : "false";
    return true;
  }
  if (type == "integer" || type == "number") {
    const bool ok = !PyBool_Check(v) && (PyLong_Check(v) || (type == "number" && PyFloat_Check(v)));
    if (!ok) {
      PyErr_Format(PyExc_TypeError, "start(): %s must be %s, not %s", k, type == "integer" ? "an int" : "a number",
                   Py_TYPE(v)->tp_name);
      return false;
    }
    PyObject* r = PyObject_Repr(v);  // ints exactly; floats in the shortest form that reads back the same
    if (!r) return false;
    const bool encoded = utf8(r, k, text);
    Py_DECREF(r);
    return encoded;
  }
  if (type == "list") return set_list(text, v, k, "start()");
  return set_string(text, v, k);  // string (str or os.PathLike) and choice
}

bool resolve_keywords(PyObject* kwargs, inferscope::Config& out) {
  inferscope::config::ResolveOptions ro;
  ro.flag_noun = "start()";
  ro.flag_spelling = "keyword argument";
  bool unknown = false;
  if (kwargs) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      std::string k, text;
      if (!utf8(key, "start(): keyword names", k)) return false;
      auto it = setting_types().find(k);
      if (it == setting_types().end()) {
        unknown = true;  // resolve() says so, with the closest key
      } else if (!keyword_text(k, it->second, value, text)) {
        return false;
      }
      ro.flags.emplace_back(std::move(k), std::move(text));
    }
  }
  try {
    const inferscope::config::Resolved resolved = inferscope::config::resolve(ro);
    out = resolved.config;
    inferscope::runtime::own_files_below_root(resolved, out);
    return true;
  } catch (const inferscope::config::ConfigError& e) {
    // An unknown keyword is a TypeError, as Python raises for any function's unexpected keyword.
    PyErr_Format(unknown ? PyExc_TypeError : PyExc_ValueError, "%s", e.what());  // %s: never a decode error
    return false;
  } catch (const std::exception& e) {  // nothing C++ may unwind through the interpreter's frames
    PyErr_Format(PyExc_ValueError, "start(): %s", e.what());
    return false;
  }
}

PyObject* py_start(PyObject*, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "start() takes keyword arguments only, e.g. start(output='run.iscope')");
    return nullptr;
  }
  inferscope::Config cfg;
  if (!resolve_keywords(kwargs, cfg)) return nullptr;
  if (inferscope::is_active()) Py_RETURN_FALSE;  // the running session (e.g. INFERSCOPE_ENABLE=1) goes on
  bool ok;
  Py_BEGIN_ALLOW_THREADS
  ok = inferscope::start_exactly(cfg);  // already resolved: a keyword equal to a default must not yield to the env
  Py_END_ALLOW_THREADS
  if (!ok) {
    PyErr_Format(PyExc_RuntimeError, "inferscope: could not start recording to '%s' (the reason is on stderr)",
                 cfg.output.empty() ? inferscope::default_output_path().c_str() : cfg.output.c_str());
    return nullptr;
  }
  g_owned_epoch = detail::g_session.load();
  Py_RETURN_TRUE;
}

// Threads renamed since the session started (Thread.name = ...) carry their new names into the dump; GIL held.
void name_renamed_threads() {
  if (inferscope::is_active()) pytrace::name_python_threads(/*changed_only=*/true);
}

PyObject* py_stop(PyObject*, PyObject*) {
  pytrace::disable();  // unhook while we hold the GIL; the collector's stop() only clears a flag
  name_renamed_threads();
  bool was;
  Py_BEGIN_ALLOW_THREADS
  was = inferscope::stop();
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(was);
}

PyObject* py_is_active(PyObject*, PyObject*) { return PyBool_FromLong(inferscope::is_active()); }

PyObject* py_output_path(PyObject*, PyObject*) {
  std::string p;
  Py_BEGIN_ALLOW_THREADS
  p = inferscope::output_path();
  Py_END_ALLOW_THREADS
  if (p.empty()) Py_RETURN_NONE;
  return path_text(p);
}

PyObject* py_flush_ring(PyObject*, PyObject*) {
  std::string p;
  Py_BEGIN_ALLOW_THREADS
  p = inferscope::flush_ring();
  Py_END_ALLOW_THREADS
  if (p.empty()) Py_RETURN_NONE;
  return path_text(p);
}

// trace_python(enabled, *, mode=None, include=None, exclude=None, max_depth=None) -> previous state
PyObject* py_trace_python(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"enabled", "mode", "include", "exclude", "max_depth", nullptr};
  PyObject *enabled = nullptr, *mode = Py_None, *include = Py_None, *exclude = Py_None, *max_depth = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOOO:trace_python", const_cast<char**>(kw), &enabled, &mode,
                                   &include, &exclude, &max_depth))
    return nullptr;
  if (!PyBool_Check(enabled)) {
    PyErr_Format(PyExc_TypeError, "trace_python(): enabled must be a bool, not %s", Py_TYPE(enabled)->tp_name);
    return nullptr;
  }
  // Filters not given are the running session's (python_mode, python_include, ...), not an earlier call's.
  pytrace::Filters f;
  try {
    inferscope::Config c = runtime::active_config();
    if (c.python_mode == "off") c.python_mode = "default";
    f = pytrace::filters_from_config(c);
  } catch (const std::exception&) {
  }
  if (mode != Py_None) {
    std::string m;
    if (!PyUnicode_Check(mode) || !utf8(mode, "trace_python(): mode", m) || (m != "default" && m != "full")) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "trace_python(): mode must be 'default' or 'full', not %R", mode);
      return nullptr;
    }
    f.mode = m;
  }
  std::string list;
  if (include != Py_None) {
    if (!set_list(list, include, "include", "trace_python()")) return nullptr;
    f.include = pytrace::split_list(list);
  }
  if (exclude != Py_None) {
    if (!set_list(list, exclude, "exclude", "trace_python()")) return nullptr;
    f.exclude = pytrace::split_list(list);
  }
  if (max_depth != Py_None) {
    if (!PyLong_Check(max_depth) || PyBool_Check(max_depth)) {
      PyErr_Format(PyExc_TypeError, "trace_python(): max_depth must be an int, not %s", Py_TYPE(max_depth)->tp_name);
      return nullptr;
    }
    long d = PyLong_AsLong(max_depth);
    if (d < 0 || d > 100000) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "trace_python(): max_depth=%R is out of range [0, 100000]", max_depth);
      return nullptr;
    }
    f.max_depth = static_cast<uint32_t>(d);
  }
  const bool was = pytrace::is_enabled();
  if (enabled == Py_True) {
    if (!g_tracer_ok) {
      PyErr_Format(PyExc_RuntimeError, "trace_python(): Python tracing cannot work here: %s", g_tracer_error.c_str());
      return nullptr;
    }
    if (!inferscope::is_active()) {
      PyErr_SetString(PyExc_RuntimeError,
                      "trace_python(True): no session is recording; call inferscope_py.start() first "
                      "(or run with INFERSCOPE_ENABLE=1)");
      return nullptr;
    }
    std::string error = pytrace::enable(f);
    runtime::set_collector_status("python", pytrace::status_line());
    if (!error.empty()) {
      PyErr_Format(PyExc_RuntimeError, "trace_python(True): %s", error.c_str());
      return nullptr;
    }
  } else {
    pytrace::disable();
    if (inferscope::is_active()) runtime::set_collector_status("python", "off: switched off by trace_python(False)");
  }
  return PyBool_FromLong(was);
}

PyObject* py_tracer_state(PyObject*, PyObject*) {
  const auto& f = pytrace::current_filters();
  const auto st = pytrace::stats();
  // Filters may come from INFERSCOPE_PYTHON_* (any bytes): text() decodes without failing.
  auto list = [](const std::vector<std::string>& v) -> PyObject* {
    PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
    for (size_t i = 0; l && i < v.size(); ++i) {
      PyObject* o = text(v[i]);
      if (!o) Py_CLEAR(l);
      else PyList_SET_ITEM(l, static_cast<Py_ssize_t>(i), o);
    }
    return l;
  };
  // "N" steals its argument, and Py_BuildValue fails (with the error kept) when one is NULL.
  return Py_BuildValue("{s:O,s:s,s:N,s:N,s:N,s:I,s:K,s:K,s:K,s:N,s:O,s:i}", "enabled",
                       pytrace::is_enabled() ? Py_True : Py_False, "mechanism", pytrace::mechanism(), "mode",
                       text(f.mode), "include", list(f.include), "exclude", list(f.exclude), "max_depth",
                       f.max_depth, "codes_traced", static_cast<unsigned long long>(st.codes_traced),
                       "codes_excluded", static_cast<unsigned long long>(st.codes_excluded), "toggles",
                       static_cast<unsigned long long>(st.toggles), "status", text(pytrace::status_line()),
                       "direct_code_extra", st.direct_code_extra ? Py_True : Py_False, "direct_frame_code",
                       st.direct_frame_code);
}

// Scope exits ignored because they ran on another thread than the enter (tests, the dump's python_scopes).
PyObject* py_scope_stats(PyObject*, PyObject*) {
  std::string last;
  uint32_t pending;
  {
    std::lock_guard lk(orphans_mu());
    last = g_last_cross_thread_exit;
    pending = g_orphans_pending.load();
  }
  return Py_BuildValue("{s:K,s:N,s:I}", "cross_thread_exits",
                       static_cast<unsigned long long>(g_cross_thread_exits.load()), "last", text(last),
                       "depths_pending", pending);
}

// _setup(package_dir): called once by inferscope_py/__init__.py.
PyObject* py_setup(PyObject*, PyObject* dir) {
  if (!PyUnicode_Check(dir)) {
    PyErr_SetString(PyExc_TypeError, "_setup(package_dir: str)");
    return nullptr;
  }
  static bool done = false;
  if (done) Py_RETURN_NONE;
  std::string package_dir;
  if (!fs_path(dir, "_setup(): package_dir", package_dir)) return nullptr;
  done = true;
  // Before the session below is joined: threads started from here on name themselves as they start.
  std::string naming_error;
  const bool naming = pytrace::install_thread_naming(&naming_error);
  g_tracer_ok = pytrace::init(package_dir, &g_tracer_error);
  if (!naming && inferscope::is_active()) runtime::set_collector_status("python_thread_names", "off: " + naming_error);
  if (g_tracer_ok) {
    // Every later session applies its python_* settings through the collector.
    runtime::register_collector([] { return pytrace::make_collector(); });
    // INFERSCOPE_ENABLE=1 started the session when libinferscope loaded: join it.
    if (inferscope::is_active()) {
      bool attached;
      Py_BEGIN_ALLOW_THREADS
      attached = runtime::attach_collector(pytrace::make_collector());
      Py_END_ALLOW_THREADS
      (void)attached;
      if (std::getenv("INFERSCOPE_ENABLE")) g_owned_epoch = detail::g_session.load();
    }
  } else if (inferscope::is_active()) {
    runtime::set_collector_status("python", "off: " + g_tracer_error);
  }
  // Python has read its signal dispositions by now: the handlers an environment-started session held back
  // (so that signal.getsignal() shows what it would without us) can go in.
  runtime::install_deferred_signal_handlers();
  Py_RETURN_NONE;
}

// _own_file(path): code in that file is the profiler's own and never traced (called by sitecustomize.py).
PyObject* py_own_file(PyObject*, PyObject* arg) {
  std::string path;
  if (!fs_path(arg, "_own_file(): path", path)) return nullptr;
  pytrace::add_own_file(path);
  Py_RETURN_NONE;
}

// The dump-completing half of _atexit, for a path that skips atexit (os._exit in a recorded fork child).
PyObject* py_finish_before_exit(PyObject*, PyObject*) {
  pytrace::disable(/*at_exit=*/true);
  name_renamed_threads();
  g_owned_epoch = 0;
  Py_BEGIN_ALLOW_THREADS
  runtime::finish_session_of_this_process();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

// Registered with atexit by __init__.py: runs while the interpreter is alive, before finalization.
PyObject* py_atexit(PyObject*, PyObject*) {
  pytrace::disable(/*at_exit=*/true);
  name_renamed_threads();
  const uint32_t e = detail::g_session.load();
  if (e != 0 && e == g_owned_epoch) {
    Py_BEGIN_ALLOW_THREADS
    inferscope::stop();
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

// os.register_at_fork(after_in_child=...): a forked child records nothing unless follow_children gave it a
// session of its own (the runtime started it in fork's child handler, without the Python collector: Python was
// not whole again yet). Either way the parent's hooks go; a recording child attaches its own collector now.
// Returns whether this child records.
PyObject* py_after_fork_child(PyObject*, PyObject*) {
  pytrace::disable(/*at_exit=*/true);
  g_owned_epoch = 0;
  if (!inferscope::is_active()) Py_RETURN_FALSE;
  if (g_tracer_ok) {
    bool attached;
    Py_BEGIN_ALLOW_THREADS
    attached = runtime::attach_collector(pytrace::make_collector());
    Py_END_ALLOW_THREADS
    (void)attached;
  } else {
    runtime::set_collector_status("python", "off: " + g_tracer_error);
  }
  g_owned_epoch = detail::g_session.load();
  Py_RETURN_TRUE;
}

// --- reading a dump back (tests, notebooks) --------------------------------------------------------------

PyObject* attr_value(const inferscope::dump::Attr& a) {
  switch (a.type) {
    case AttrType::kInt: return PyLong_FromLongLong(a.i);
    case AttrType::kBool: return PyBool_FromLong(a.i != 0);
    case AttrType::kDouble: return PyFloat_FromDouble(a.d);
    case AttrType::kString: return text(a.s);
    default: Py_RETURN_NONE;
  }
}

// d[k] = v, taking v; false with the error set (v NULL: its maker's error).
bool set_item(PyObject* d, const std::string& k, PyObject* v) {
  if (!v) return false;
  PyObject* key = text(k);
  const int r = key ? PyDict_SetItem(d, key, v) : -1;
  Py_XDECREF(key);
  Py_DECREF(v);
  return r == 0;
}

// Owns a new reference until released; the dump readers below return early on any failure.
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* release() {
    PyObject* o = p;
    p = nullptr;
    return o;
  }
};

// A dict of key -> str (status lines, process info); nullptr with the error set.
PyObject* text_dict(const std::vector<std::pair<std::string, std::string>>& kv) {
  Ref d(PyDict_New());
  if (!d.p) return nullptr;
  for (const auto& [k, v] : kv)
    if (!set_item(d.p, k, text(v))) return nullptr;
  return d.release();
}

// _read_dump's visitor: ISCOPE ranges, Python calls, ISCOPE marks and thread names, each a dict appended to
// `records` (ranges and marks with their attributes). After a Python error (`failed`, the error set) it reads
// no further.
class RecordDicts {
 public:
  RecordDicts(const inferscope::dump::DumpReader& r, PyObject* records)
      : r(r), clock(r.calibration()), records(records) {}
  bool failed = false;

  void on(const inferscope::RangeRecord& rec, const inferscope::dump::RecordContext& rc) {
    if (rc.kind() != inferscope::RecordKind::kRange) return;
    add(span(rc, "range", r.string_at(rec.name), rec.start, rec.end), rc);
  }
  void on(const inferscope::PyCallRecord& rec, const inferscope::dump::RecordContext& rc) {
    auto it = r.code_table().find(rec.code);
    std::string name = it == r.code_table().end() ? "<code " + std::to_string(rec.code) + ">" : it->second.qualname;
    PyObject* d = span(rc, "python_call", name, rec.start, rec.end);
    if (d && it != r.code_table().end() &&
        (!set_item(d, "file", path_text(it->second.file)) ||
         !set_item(d, "line", PyLong_FromUnsignedLong(it->second.line))))
      Py_CLEAR(d);
    add(d, rc);
  }
  // The coroutine that ran in the python_call just before it: its object, whether this run began it and whether
  // it ended it.
  void on(const inferscope::PyCoroutineRecord& rec, const inferscope::dump::RecordContext& rc) {
    auto it = r.code_table().find(rec.code);
    std::string name = it == r.code_table().end() ? "<code " + std::to_string(rec.code) + ">" : it->second.qualname;
    PyObject* d = span(rc, "python_coroutine", name, rec.start, rec.start);
    if (d && (!set_item(d, "object", PyLong_FromUnsignedLongLong(rec.object)) ||
              !set_item(d, "first", PyBool_FromLong((rc.aux() & inferscope::kCoroutineFirstRun) != 0)) ||
              !set_item(d, "last", PyBool_FromLong((rc.aux() & inferscope::kCoroutineLastRun) != 0))))
      Py_CLEAR(d);
    add(d, rc);
  }
  // Short calls of one function the tracer counted instead of recording: their count and summed time.
  void on(const inferscope::PyElidedRecord& rec, const inferscope::dump::RecordContext& rc) {
    auto it = r.code_table().find(rec.code);
    std::string name = it == r.code_table().end() ? "<code " + std::to_string(rec.code) + ">" : it->second.qualname;
    PyObject* d = span(rc, "python_elided", name, rec.first, rec.last);
    if (d && (!set_item(d, "calls", PyLong_FromUnsignedLong(rec.calls)) ||
              !set_item(d, "total_ns", PyFloat_FromDouble(clock.duration_ns(rec.total))) ||
              (rec.owner != 0 && !set_item(d, "thread", PyLong_FromUnsignedLong(rec.owner - 1)))))
      Py_CLEAR(d);
    add(d, rc);
  }
  void on(const inferscope::MarkRecord& rec, const inferscope::dump::RecordContext& rc) {
    if (rc.kind() != inferscope::RecordKind::kMark) return;
    add(span(rc, "mark", r.string_at(rec.name), rec.ts, rec.ts), rc);
  }
  void on(const inferscope::ThreadNameRecord& rec, const inferscope::dump::RecordContext& rc) {
    add(span(rc, "thread_name", r.string_at(rec.name), rec.ts, rec.ts), rc);
  }

 private:
  PyObject* span(const inferscope::dump::RecordContext& rc, const char* kind, const std::string& name, uint64_t a,
                 uint64_t b) {
    if (failed) return nullptr;
    return Py_BuildValue("{s:s,s:I,s:i,s:N,s:K,s:K,s:L,s:L,s:d}", "kind", kind, "thread", rc.thread, "depth",
                         int(rc.aux()), "name", text(name), "start", static_cast<unsigned long long>(a), "end",
                         static_cast<unsigned long long>(b), "start_ns", static_cast<long long>(clock.to_ns(a)),
                         "end_ns", static_cast<long long>(clock.to_ns(b)), "dur_ns",
                         b > a ? clock.duration_ns(b - a) : 0.0);
  }
  // Takes `record` (nullptr: a Python error), adds the attributes of the kinds that carry them, appends it.
  void add(PyObject* record, const inferscope::dump::RecordContext& rc) {
    if (failed) return;
    Ref d(record);
    if (!d.p) {
      failed = true;
      return;
    }
    if (inferscope::record_has_attrs(rc.kind())) {
      PyObject* attrs = PyDict_New();
      for (const auto& a : r.attributes(rc.bytes))
        if (attrs && !set_item(attrs, a.key, attr_value(a))) Py_CLEAR(attrs);
      if (!set_item(d.p, "attrs", attrs)) {
        failed = true;
        return;
      }
    }
    if (PyList_Append(records, d.p) < 0) failed = true;
  }

  const inferscope::dump::DumpReader& r;
  const inferscope::dump::ClockModel clock;
  PyObject* records;
};

// Throws std::exception for a file that is not a dump (the caller turns it into ValueError); otherwise a new
// dict, or nullptr with the Python error set.
PyObject* read_dump(const std::string& path) {
  namespace dump = inferscope::dump;
  dump::DumpReader r(path);
  Ref out(PyDict_New());
  Ref records(PyList_New(0));
  Ref threads(PyDict_New());
  if (!out.p || !records.p || !threads.p) return nullptr;
  if (!set_item(out.p, "complete", PyBool_FromLong(r.complete())) ||
      !set_item(out.p, "dropped", PyLong_FromUnsignedLongLong(r.total_dropped_records())))
    return nullptr;
  for (const auto& [id, t] : r.threads())
    if (!set_item(threads.p, std::to_string(id),
                  Py_BuildValue("{s:N,s:I,s:O}", "name", text(t.name), "os_tid", t.os_tid, "channel",
                                t.is_channel() ? Py_True : Py_False)))
      return nullptr;
  if (!set_item(out.p, "threads", threads.release())) return nullptr;
  if (!set_item(out.p, "collectors", text_dict(r.collector_status())) ||
      !set_item(out.p, "process", text_dict(r.process_info())))
    return nullptr;
  RecordDicts dicts(r, records.p);
  dump::visit_records(r, dicts);
  if (dicts.failed) return nullptr;
  if (!set_item(out.p, "records", records.release())) return nullptr;
  if (r.damage() && !set_item(out.p, "damage", text(r.damage()->message))) return nullptr;
  return out.release();
}

PyObject* py_read_dump(PyObject*, PyObject* arg) {
  std::string path;
  if (!fs_path(arg, "_read_dump(): path", path)) return nullptr;
  try {
    return read_dump(path);
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "%s", e.what());
    return nullptr;
  }
}

// _dump_stats's visitor: records by kind number, Python calls by function.
struct KindCounts {
  const inferscope::dump::DumpReader& r;
  std::map<std::string, uint64_t> kinds, py_calls;
  template <class Rec>
  void on(const Rec& rec, const inferscope::dump::RecordContext& rc) {
    ++kinds[std::to_string(static_cast<int>(rc.kind()))];
    count(rec);
  }
  void count(const inferscope::PyCallRecord& c) {
    auto it = r.code_table().find(c.code);
    ++py_calls[it == r.code_table().end() ? std::string("?") : it->second.qualname];
  }
  void count(const auto&) {}
};

// Counts per record kind without building a dict per record (benchmarks, large dumps).
PyObject* py_dump_stats(PyObject*, PyObject* arg) {
  std::string path;
  if (!fs_path(arg, "_dump_stats(): path", path)) return nullptr;
  try {
    inferscope::dump::DumpReader r(path);
    KindCounts v{r, {}, {}};
    inferscope::dump::visit_records(r, v);
    const auto& kinds = v.kinds;
    const auto& py_calls = v.py_calls;
    auto counts = [](const std::map<std::string, uint64_t>& m) -> PyObject* {
      Ref d(PyDict_New());
      if (!d.p) return nullptr;
      for (auto& [name, n] : m)
        if (!set_item(d.p, name, PyLong_FromUnsignedLongLong(n))) return nullptr;
      return d.release();
    };
    return Py_BuildValue("{s:O,s:K,s:K,s:N,s:N}", "complete", r.complete() ? Py_True : Py_False, "records",
                         static_cast<unsigned long long>(r.record_count()), "dropped",
                         static_cast<unsigned long long>(r.total_dropped_records()), "kinds", counts(kinds),
                         "python_calls", counts(py_calls));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "%s", e.what());
    return nullptr;
  }
}

// --- module ------------------------------------------------------------------------------------------------

PyMethodDef module_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_start)), METH_VARARGS | METH_KEYWORDS,
     "start(**config) -> bool: starts recording; False when a session already records."},
    {"stop", py_stop, METH_NOARGS, "stop() -> bool: stops recording and completes the dump."},
    {"is_active", py_is_active, METH_NOARGS, "is_active() -> bool"},
    {"output_path", py_output_path, METH_NOARGS, "output_path() -> str | None: the running (or last) session's dump."},
    {"flush_ring", py_flush_ring, METH_NOARGS, "flush_ring() -> str | None: ring or sampled mode: writes what the ring holds to a dump now."},
    {"set_thread_name", py_set_thread_name, METH_O, "set_thread_name(name): names the calling thread in the dump."},
    {"mark_event", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_mark_event)),
     METH_VARARGS | METH_KEYWORDS, "mark_event(name, **attrs): an instant event."},
    {"trace_python", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_trace_python)),
     METH_VARARGS | METH_KEYWORDS,
     "trace_python(enabled, *, mode=None, include=None, exclude=None, max_depth=None) -> bool (previous state)"},
    {"_tracer_state", py_tracer_state, METH_NOARGS, "the Python tracer's state (tests)"},
    {"_scope_stats", py_scope_stats, METH_NOARGS, "scope exits ignored for running on another thread (tests)"},
    {"_layer_begin", py_layer_begin, METH_O, "begins a model-layer range (inferscope_py.torch)"},
    {"_layer_end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_layer_end)), METH_FASTCALL,
     "ends a model-layer range (inferscope_py.torch)"},
    {"_setup", py_setup, METH_O, "module setup (inferscope_py/__init__.py)"},
    {"_own_file", py_own_file, METH_O, "_own_file(path): that file's code is the profiler's own, never traced"},
    {"_atexit", py_atexit, METH_NOARGS, "unhooks tracing and stops the session this module owns"},
    {"_after_fork_child", py_after_fork_child, METH_NOARGS, "unhooks tracing in a forked child"},
    {"_finish_before_exit", py_finish_before_exit, METH_NOARGS, "completes this process's dump (os._exit)"},
    {"_dump_stats", py_dump_stats, METH_O, "_dump_stats(path) -> dict: record counts per kind and per Python function"},
    {"_read_dump", py_read_dump, METH_O, "_read_dump(path) -> dict: a dump's records (ranges, marks, Python calls)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native", "InferScope runtime binding (see inferscope_py).", -1,
                          module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  ScopeType.tp_name = "inferscope_py._native.Scope";
  ScopeType.tp_basicsize = sizeof(ScopeObject);
  ScopeType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  ScopeType.tp_doc = "Scope(name, **attrs): a range while the with-block runs.";
  ScopeType.tp_new = PyType_GenericNew;
  ScopeType.tp_init = Scope_init;
  ScopeType.tp_dealloc = Scope_dealloc;
  ScopeType.tp_repr = Scope_repr;
  ScopeType.tp_methods = Scope_methods;
  ScopeType.tp_getset = Scope_getset;

  ScopedCallType.tp_name = "inferscope_py._native.ScopedCall";
  ScopedCallType.tp_basicsize = sizeof(ScopedCallObject);
  ScopedCallType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  ScopedCallType.tp_doc = "A function whose every call is a range (made by the scope decorator).";
  ScopedCallType.tp_new = ScopedCall_new;
  ScopedCallType.tp_dealloc = ScopedCall_dealloc;
  ScopedCallType.tp_traverse = ScopedCall_traverse;
  ScopedCallType.tp_clear = ScopedCall_clear;
  ScopedCallType.tp_call = ScopedCall_call;
  ScopedCallType.tp_descr_get = ScopedCall_get;
  ScopedCallType.tp_repr = ScopedCall_repr;
  ScopedCallType.tp_dictoffset = offsetof(ScopedCallObject, dict);
  ScopedCallType.tp_getset = ScopedCall_getset;

  if (PyType_Ready(&ScopeType) < 0 || PyType_Ready(&ScopedCallType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  // PyModule_AddObject steals only on success: the references are taken back when it fails.
  Py_INCREF(&ScopeType);
  if (PyModule_AddObject(m, "Scope", reinterpret_cast<PyObject*>(&ScopeType)) < 0) {
    Py_DECREF(&ScopeType);
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(&ScopedCallType);
  if (PyModule_AddObject(m, "ScopedCall", reinterpret_cast<PyObject*>(&ScopedCallType)) < 0) {
    Py_DECREF(&ScopedCallType);
    Py_DECREF(m);
    return nullptr;
  }
  if (PyModule_AddStringConstant(m, "tracing_mechanism", pytrace::mechanism()) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  // The CMake project version, compiled in: inferscope_py.__version__ is the tools' --version.
  if (PyModule_AddStringConstant(m, "__version__", INFERSCOPE_VERSION_STRING) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
