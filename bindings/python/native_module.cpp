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
#include "config/settings.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"
#include "runtime/runtime.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
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

std::string utf8(PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  return c ? std::string(c, static_cast<size_t>(n)) : std::string();
}

uint32_t intern_str(PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) return 0;
  // The UTF-8 buffer lives as long as the str object: literals and long-lived names hit the per-thread cache.
  return detail::intern_cached(c, static_cast<size_t>(n));
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
    a.key = intern_str(key);
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
      a.value.s = intern_str(value);
    } else {
      PyErr_Format(PyExc_TypeError, "%s: attribute '%U' must be int, float, bool or str, not %s", what, key,
                   Py_TYPE(value)->tp_name);
      return false;
    }
    if (PyErr_Occurred()) return false;
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
  return true;
}

// --- ranges ----------------------------------------------------------------------------------------------

struct OpenRange {
  uint64_t start = 0;  // 0: not recording
  uint32_t depth = 0;
  uint32_t epoch = 0;
  detail::ThreadState* ts = nullptr;
};

inline void range_begin(OpenRange& o) {
  o.start = 0;
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return;
  detail::ThreadState& ts = detail::t_state;
  if (ts.epoch != e && !detail::bind_thread(e)) return;
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
  if (&ts != o.ts) return;  // ended on another thread: its depth is not ours to touch
  --ts.depth;
  if (ts.epoch != o.epoch || detail::g_session.load(std::memory_order_relaxed) != o.epoch) return;
  if (n == 0 && error == 0) {
    detail::write_range(ts.ring, inferscope::RecordKind::kRange, name, o.depth, o.start, end);
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
  PyObject* name = nullptr;
  if (!PyArg_ParseTuple(args, "O:scope", &name)) return -1;
  if (!check_name("scope()", name)) return -1;
  std::vector<AttrRecord> attrs;
  if (!convert_attrs("scope()", kwargs, attrs)) return -1;
  Py_INCREF(name);
  Py_XSETREF(self->name_obj, name);
  Py_XSETREF(self->kwargs, kwargs ? PyDict_Copy(kwargs) : nullptr);
  self->name = intern_str(name);
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
  range_begin(self->open[self->nopen++]);
  Py_INCREF(self_obj);
  return self_obj;
}

PyObject* Scope_exit(PyObject* self_obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<ScopeObject*>(self_obj);
  if (self->nopen == 0) {
    PyErr_Format(PyExc_RuntimeError, "scope '%U' exited without being entered", self->name_obj);
    return nullptr;
  }
  const OpenRange& o = self->open[--self->nopen];
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
  LayerRange l{intern_str(name), {}};
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
  const uint32_t name = intern_str(args[0]);
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
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) Py_RETURN_NONE;
  detail::ThreadState& ts = detail::t_state;
  if (ts.epoch != e && !detail::bind_thread(e)) Py_RETURN_NONE;
  const uint32_t n = static_cast<uint32_t>(attrs.size());
  const uint32_t size = sizeof(inferscope::MarkRecord) +
                        (n ? sizeof(inferscope::AttrListHeader) + n * sizeof(AttrRecord) : 0);
  const inferscope::MarkRecord m{{inferscope::RecordKind::kMark, 0, static_cast<uint16_t>(size)}, intern_str(name),
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
  inferscope::set_thread_name(utf8(name));
  Py_RETURN_NONE;
}

// --- session control -------------------------------------------------------------------------------------

bool set_string(std::string& out, PyObject* v, const char* key) {
  if (PyUnicode_Check(v)) {
    out = utf8(v);
    return true;
  }
  // os.PathLike for output/report.
  if (PyObject* p = PyOS_FSPath(v)) {
    bool ok = PyUnicode_Check(p);
    if (ok) out = utf8(p);
    Py_DECREF(p);
    if (ok) return true;
  }
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError, "start(): %s must be a str, not %s", key, Py_TYPE(v)->tp_name);
  return false;
}
// A comma list given as "a,b" or ["a", "b"].
bool set_list(std::string& out, PyObject* v, const char* key, const char* fn) {
  if (v == Py_None) {
    out.clear();
    return true;
  }
  if (PyUnicode_Check(v)) {
    out = utf8(v);
    return true;
  }
  if (PyList_Check(v) || PyTuple_Check(v)) {
    std::string joined;
    PyObject* seq = PySequence_Fast(v, "");
    for (Py_ssize_t i = 0; seq && i < PySequence_Fast_GET_SIZE(seq); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
      if (!PyUnicode_Check(item)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_TypeError, "%s: every item of %s must be a str, not %s", fn, key, Py_TYPE(item)->tp_name);
        return false;
      }
      joined += (joined.empty() ? "" : ",") + utf8(item);
    }
    Py_XDECREF(seq);
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
// so ranges, choices and their error messages are the config file's. Only the keywords apply: like C++
// inferscope::start(Config{}), the environment and the config file are not read.
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
    text = utf8(r);
    Py_DECREF(r);
    return true;
  }
  if (type == "list") return set_list(text, v, k, "start()");
  return set_string(text, v, k);  // string (str or os.PathLike) and choice
}

bool resolve_keywords(PyObject* kwargs, inferscope::Config& out) {
  inferscope::config::ResolveOptions ro;
  ro.read_environment = false;
  ro.read_file = false;
  ro.flag_noun = "start()";
  ro.flag_spelling = "keyword argument";
  bool unknown = false;
  if (kwargs) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      std::string k = utf8(key), text;
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
    out = inferscope::config::resolve(ro).config;
    return true;
  } catch (const inferscope::config::ConfigError& e) {
    // An unknown keyword is a TypeError, as Python raises for any function's unexpected keyword.
    PyErr_SetString(unknown ? PyExc_TypeError : PyExc_ValueError, e.what());
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
  ok = inferscope::start(cfg);
  Py_END_ALLOW_THREADS
  if (!ok) {
    PyErr_Format(PyExc_RuntimeError, "inferscope: could not start recording to '%s' (the reason is on stderr)",
                 cfg.output.empty() ? inferscope::default_output_path().c_str() : cfg.output.c_str());
    return nullptr;
  }
  g_owned_epoch = detail::g_session.load();
  Py_RETURN_TRUE;
}

PyObject* py_stop(PyObject*, PyObject*) {
  pytrace::disable();  // unhook while we hold the GIL; the collector's stop() only clears a flag
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
  return PyUnicode_FromStringAndSize(p.data(), static_cast<Py_ssize_t>(p.size()));
}

PyObject* py_flush_ring(PyObject*, PyObject*) {
  std::string p;
  Py_BEGIN_ALLOW_THREADS
  p = inferscope::flush_ring();
  Py_END_ALLOW_THREADS
  if (p.empty()) Py_RETURN_NONE;
  return PyUnicode_FromStringAndSize(p.data(), static_cast<Py_ssize_t>(p.size()));
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
    if (!PyUnicode_Check(mode) || ((m = utf8(mode)) != "default" && m != "full")) {
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
  auto list = [](const std::vector<std::string>& v) {
    PyObject* l = PyList_New(0);
    for (const auto& s : v) {
      PyObject* o = PyUnicode_FromString(s.c_str());
      PyList_Append(l, o);
      Py_DECREF(o);
    }
    return l;
  };
  PyObject* inc = list(f.include);
  PyObject* exc = list(f.exclude);
  PyObject* r = Py_BuildValue("{s:O,s:s,s:s,s:N,s:N,s:I,s:K,s:K,s:K,s:s,s:O,s:i}", "enabled",
                              pytrace::is_enabled() ? Py_True : Py_False, "mechanism", pytrace::mechanism(), "mode",
                              f.mode.c_str(), "include", inc, "exclude", exc, "max_depth", f.max_depth,
                              "codes_traced", static_cast<unsigned long long>(st.codes_traced), "codes_excluded",
                              static_cast<unsigned long long>(st.codes_excluded), "toggles",
                              static_cast<unsigned long long>(st.toggles), "status", pytrace::status_line().c_str(),
                              "direct_code_extra", st.direct_code_extra ? Py_True : Py_False, "direct_frame_code",
                              st.direct_frame_code);
  return r;
}

// _setup(package_dir): called once by inferscope_py/__init__.py.
PyObject* py_setup(PyObject*, PyObject* dir) {
  if (!PyUnicode_Check(dir)) {
    PyErr_SetString(PyExc_TypeError, "_setup(package_dir: str)");
    return nullptr;
  }
  static bool done = false;
  if (done) Py_RETURN_NONE;
  done = true;
  g_tracer_ok = pytrace::init(utf8(dir), &g_tracer_error);
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

// The dump-completing half of _atexit, for a path that skips atexit (os._exit in a recorded fork child).
PyObject* py_finish_before_exit(PyObject*, PyObject*) {
  pytrace::disable(/*at_exit=*/true);
  g_owned_epoch = 0;
  Py_BEGIN_ALLOW_THREADS
  runtime::finish_session_of_this_process();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

// Registered with atexit by __init__.py: runs while the interpreter is alive, before finalization.
PyObject* py_atexit(PyObject*, PyObject*) {
  pytrace::disable(/*at_exit=*/true);
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
    case AttrType::kString: return PyUnicode_FromStringAndSize(a.s.data(), static_cast<Py_ssize_t>(a.s.size()));
    default: Py_RETURN_NONE;
  }
}

int set_item(PyObject* d, const char* k, PyObject* v) {
  if (!v) return -1;
  int r = PyDict_SetItemString(d, k, v);
  Py_DECREF(v);
  return r;
}

PyObject* read_dump(const std::string& path) {
  namespace dump = inferscope::dump;
  using inferscope::RecordKind;
  dump::DumpReader r(path);
  dump::ClockModel clock(r.calibration());
  PyObject* out = PyDict_New();
  PyObject* records = PyList_New(0);
  set_item(out, "complete", PyBool_FromLong(r.complete()));
  set_item(out, "dropped", PyLong_FromUnsignedLongLong(r.total_dropped_records()));
  PyObject* threads = PyDict_New();
  for (const auto& [id, t] : r.threads())
    set_item(threads, std::to_string(id).c_str(), Py_BuildValue("{s:s,s:I,s:O}", "name", t.name.c_str(), "os_tid",
                                                                t.os_tid, "channel", t.is_channel() ? Py_True : Py_False));
  set_item(out, "threads", threads);
  PyObject* status = PyDict_New();
  for (const auto& [k, v] : r.collector_status()) set_item(status, k.c_str(), PyUnicode_FromString(v.c_str()));
  set_item(out, "collectors", status);
  PyObject* process = PyDict_New();
  for (const auto& [k, v] : r.process_info()) set_item(process, k.c_str(), PyUnicode_FromString(v.c_str()));
  set_item(out, "process", process);
  bool failed = false;
  r.for_each_record([&](uint32_t thread, const inferscope::RecordHeader& h, const uint8_t* p) {
    if (failed) return;
    PyObject* d = nullptr;
    auto span = [&](const char* kind, const std::string& name, uint64_t a, uint64_t b) {
      return Py_BuildValue("{s:s,s:I,s:i,s:s,s:K,s:K,s:L,s:L,s:d}", "kind", kind, "thread", thread, "depth", int(h.aux),
                           "name", name.c_str(), "start", static_cast<unsigned long long>(a), "end",
                           static_cast<unsigned long long>(b), "start_ns", static_cast<long long>(clock.to_ns(a)),
                           "end_ns", static_cast<long long>(clock.to_ns(b)), "dur_ns",
                           b > a ? clock.duration_ns(b - a) : 0.0);
    };
    switch (h.kind) {
      case RecordKind::kRange: {
        auto rec = dump::load<inferscope::RangeRecord>(p);
        d = span("range", r.string_at(rec.name), rec.start, rec.end);
        break;
      }
      case RecordKind::kPyCall: {
        auto rec = dump::load<inferscope::PyCallRecord>(p);
        auto it = r.code_table().find(rec.code);
        std::string name = it == r.code_table().end() ? "<code " + std::to_string(rec.code) + ">" : it->second.qualname;
        d = span("python_call", name, rec.start, rec.end);
        if (d && it != r.code_table().end()) {
          set_item(d, "file", PyUnicode_FromString(it->second.file.c_str()));
          set_item(d, "line", PyLong_FromUnsignedLong(it->second.line));
        }
        break;
      }
      case RecordKind::kMark: {
        auto rec = dump::load<inferscope::MarkRecord>(p);
        d = span("mark", r.string_at(rec.name), rec.ts, rec.ts);
        break;
      }
      case RecordKind::kThreadName: {
        auto rec = dump::load<inferscope::ThreadNameRecord>(p);
        d = span("thread_name", r.string_at(rec.name), rec.ts, rec.ts);
        break;
      }
      default: return;
    }
    if (!d) {
      failed = true;
      return;
    }
    if (inferscope::record_has_attrs(h.kind)) {
      PyObject* attrs = PyDict_New();
      for (const auto& a : r.attributes(p)) set_item(attrs, a.key.c_str(), attr_value(a));
      set_item(d, "attrs", attrs);
    }
    PyList_Append(records, d);
    Py_DECREF(d);
  });
  set_item(out, "records", records);
  if (failed) {
    Py_DECREF(out);
    return nullptr;
  }
  if (r.damage()) set_item(out, "damage", PyUnicode_FromString(r.damage()->message.c_str()));
  return out;
}

PyObject* py_read_dump(PyObject*, PyObject* arg) {
  PyObject* p = PyOS_FSPath(arg);
  if (!p) return nullptr;
  if (!PyUnicode_Check(p)) {
    Py_DECREF(p);
    PyErr_SetString(PyExc_TypeError, "_read_dump(path): path must be a str or os.PathLike");
    return nullptr;
  }
  std::string path = utf8(p);
  Py_DECREF(p);
  try {
    return read_dump(path);
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "%s", e.what());
    return nullptr;
  }
}

// Counts per record kind without building a dict per record (benchmarks, large dumps).
PyObject* py_dump_stats(PyObject*, PyObject* arg) {
  PyObject* p = PyOS_FSPath(arg);
  if (!p) return nullptr;
  std::string path = PyUnicode_Check(p) ? utf8(p) : std::string();
  Py_DECREF(p);
  try {
    inferscope::dump::DumpReader r(path);
    std::map<std::string, uint64_t> kinds;
    std::map<std::string, uint64_t> py_calls;
    r.for_each_record([&](uint32_t, const inferscope::RecordHeader& h, const uint8_t* rec) {
      ++kinds[std::to_string(static_cast<int>(h.kind))];
      if (h.kind == inferscope::RecordKind::kPyCall) {
        auto c = inferscope::dump::load<inferscope::PyCallRecord>(rec);
        auto it = r.code_table().find(c.code);
        ++py_calls[it == r.code_table().end() ? std::string("?") : it->second.qualname];
      }
    });
    PyObject* k = PyDict_New();
    for (auto& [name, n] : kinds) set_item(k, name.c_str(), PyLong_FromUnsignedLongLong(n));
    PyObject* pc = PyDict_New();
    for (auto& [name, n] : py_calls) set_item(pc, name.c_str(), PyLong_FromUnsignedLongLong(n));
    return Py_BuildValue("{s:O,s:K,s:K,s:N,s:N}", "complete", r.complete() ? Py_True : Py_False, "records",
                         static_cast<unsigned long long>(r.record_count()), "dropped",
                         static_cast<unsigned long long>(r.total_dropped_records()), "kinds", k, "python_calls", pc);
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
    {"flush_ring", py_flush_ring, METH_NOARGS, "flush_ring() -> str | None: ring mode: writes the window now."},
    {"set_thread_name", py_set_thread_name, METH_O, "set_thread_name(name): names the calling thread in the dump."},
    {"mark_event", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_mark_event)),
     METH_VARARGS | METH_KEYWORDS, "mark_event(name, **attrs): an instant event."},
    {"trace_python", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_trace_python)),
     METH_VARARGS | METH_KEYWORDS,
     "trace_python(enabled, *, mode=None, include=None, exclude=None, max_depth=None) -> bool (previous state)"},
    {"_tracer_state", py_tracer_state, METH_NOARGS, "the Python tracer's state (tests)"},
    {"_layer_begin", py_layer_begin, METH_O, "begins a model-layer range (inferscope_py.torch)"},
    {"_layer_end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_layer_end)), METH_FASTCALL,
     "ends a model-layer range (inferscope_py.torch)"},
    {"_setup", py_setup, METH_O, "module setup (inferscope_py/__init__.py)"},
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
  Py_INCREF(&ScopeType);
  Py_INCREF(&ScopedCallType);
  PyModule_AddObject(m, "Scope", reinterpret_cast<PyObject*>(&ScopeType));
  PyModule_AddObject(m, "ScopedCall", reinterpret_cast<PyObject*>(&ScopedCallType));
  PyModule_AddStringConstant(m, "tracing_mechanism", pytrace::mechanism());
  // The CMake project version, compiled in: inferscope_py.__version__ is the tools' --version.
  PyModule_AddStringConstant(m, "__version__", INFERSCOPE_VERSION_STRING);
  return m;
}
