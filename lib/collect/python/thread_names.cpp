// Python threads named after their `threading` names (see thread_names.hpp).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/python/thread_names.hpp"

#include "runtime/runtime.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace inferscope::pytrace {
namespace {

// The name each OS thread was last given here, and in which session (GIL held).
struct Given {
  std::string name;
  uint32_t session = 0;
};
std::unordered_map<uint32_t, Given>& given_names() {
  static auto* m = new std::unordered_map<uint32_t, Given>;  // never destroyed: threads exit during static destruction
  return *m;
}

void give_name(uint32_t tid, const std::string& name) {
  if (tid == 0 || name.empty()) return;
  runtime::name_os_thread(tid, name);
  given_names()[tid] = Given{name, detail::g_session.load(std::memory_order_relaxed)};
}

// A Thread's attribute, new reference: the private one (instance dict: reading it runs no Python code, so no
// call of ours can show among the traced ones), else the public property. nullptr (no error set) when neither.
PyObject* thread_attr(PyObject* thread, const char* private_name, const char* public_name) {
  PyObject* v = PyObject_GetAttrString(thread, private_name);
  if (!v) {
    PyErr_Clear();
    v = PyObject_GetAttrString(thread, public_name);
  }
  if (!v) PyErr_Clear();
  return v;
}

// The thread's threading name in UTF-8; "" when it has none that can be read.
std::string threading_name(PyObject* thread) {
  std::string out;
  if (PyObject* v = thread_attr(thread, "_name", "name")) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_Check(v) ? PyUnicode_AsUTF8AndSize(v, &n) : nullptr;
    if (s) out.assign(s, static_cast<size_t>(n));
    else PyErr_Clear();
    Py_DECREF(v);
  }
  return out;
}

// The thread's OS thread id; 0 when it has not started.
uint32_t native_id(PyObject* thread) {
  uint32_t id = 0;
  if (PyObject* v = thread_attr(thread, "_native_id", "native_id")) {
    const unsigned long x = PyLong_Check(v) ? PyLong_AsUnsignedLong(v) : 0;
    if (PyErr_Occurred()) PyErr_Clear();
    else id = static_cast<uint32_t>(x);
    Py_DECREF(v);
  }
  return id;
}

// The thread is about to exit: the name it ends with stays (it may have been renamed while it ran), and its OS
// thread id is free for a later thread.
void thread_exits(PyObject* thread, uint32_t tid, const std::string& at_start) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);  // whatever _bootstrap_inner raised goes on unchanged
  const std::string last = threading_name(thread);
  if (!last.empty() && last != at_start) runtime::name_os_thread(tid, last);
  given_names().erase(tid);
  runtime::forget_os_thread_name(tid);
  PyErr_Restore(et, ev, tb);
}

// --- the wrapper of threading.Thread._bootstrap_inner ----------------------------------------------------------

struct BootstrapInner {
  PyObject_HEAD
  vectorcallfunc call;
  PyObject* original;  // the Python function it wraps
};

// Runs on the new thread as it starts: names it, then runs the thread as threading would.
PyObject* bootstrap_inner_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* original = reinterpret_cast<BootstrapInner*>(self)->original;
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames) return PyObject_Vectorcall(original, args, nargsf, kwnames);
  PyObject* thread = args[0];
  const auto tid = static_cast<uint32_t>(PyThread_get_thread_native_id());
  const std::string at_start = threading_name(thread);
  give_name(tid, at_start);
  PyObject* result = PyObject_Vectorcall(original, args, nargsf, kwnames);
  thread_exits(thread, tid, at_start);
  return result;
}

// Looked up on a Thread, it binds like a function does.
PyObject* bootstrap_inner_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

void bootstrap_inner_dealloc(PyObject* self) {
  Py_XDECREF(reinterpret_cast<BootstrapInner*>(self)->original);
  PyObject_Free(self);
}

PyTypeObject BootstrapInnerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

bool ready_type(std::string* error) {
  BootstrapInnerType.tp_name = "inferscope_py._native.thread_bootstrap";
  BootstrapInnerType.tp_basicsize = sizeof(BootstrapInner);
  BootstrapInnerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  BootstrapInnerType.tp_vectorcall_offset = offsetof(BootstrapInner, call);
  BootstrapInnerType.tp_call = PyVectorcall_Call;
  BootstrapInnerType.tp_descr_get = bootstrap_inner_get;
  BootstrapInnerType.tp_dealloc = bootstrap_inner_dealloc;
  BootstrapInnerType.tp_doc = "threading.Thread._bootstrap_inner, naming the thread in InferScope's dump first";
  if (PyType_Ready(&BootstrapInnerType) == 0) return true;
  PyErr_Clear();
  *error = "cannot create the thread bootstrap wrapper type";
  return false;
}

// threading.Thread, new reference; nullptr (no error set) when it cannot be had.
PyObject* thread_class() {
  PyObject* threading = PyImport_ImportModule("threading");
  PyObject* cls = threading ? PyObject_GetAttrString(threading, "Thread") : nullptr;
  Py_XDECREF(threading);
  if (!cls) PyErr_Clear();
  return cls;
}

}  // namespace

bool install_thread_naming(std::string* error) {
  static bool installed = false;
  if (installed) return true;
  if (!ready_type(error)) return false;
  PyObject* cls = thread_class();
  PyObject* original = cls ? PyObject_GetAttrString(cls, "_bootstrap_inner") : nullptr;
  if (!original || !PyCallable_Check(original)) {
    PyErr_Clear();
    Py_XDECREF(original);
    Py_XDECREF(cls);
    *error = "threading.Thread has no _bootstrap_inner: threads are named at session start and stop only";
    return false;
  }
  auto* w = PyObject_New(BootstrapInner, &BootstrapInnerType);
  if (w) {
    w->call = bootstrap_inner_call;
    w->original = original;  // the wrapper's reference now
  } else {
    Py_DECREF(original);
  }
  installed = w && PyObject_SetAttrString(cls, "_bootstrap_inner", reinterpret_cast<PyObject*>(w)) == 0;
  Py_XDECREF(w);
  Py_DECREF(cls);
  if (!installed) {
    PyErr_Clear();
    *error = "cannot replace threading.Thread._bootstrap_inner";
  }
  return installed;
}

void name_python_threads(bool changed_only) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyObject* threading = PyImport_ImportModule("threading");
  PyObject* active = threading ? PyObject_GetAttrString(threading, "_active") : nullptr;
  PyObject* dummy = threading ? PyObject_GetAttrString(threading, "_DummyThread") : nullptr;
  // A copy: naming takes no Python lock, but the dict is threading's own.
  PyObject* threads = active && PyDict_Check(active) ? PyDict_Values(active) : nullptr;
  const uint32_t session = detail::g_session.load(std::memory_order_relaxed);
  for (Py_ssize_t i = 0; threads && i < PyList_GET_SIZE(threads); ++i) {
    PyObject* t = PyList_GET_ITEM(threads, i);
    if (dummy && PyObject_IsInstance(t, dummy) == 1) continue;
    const uint32_t tid = native_id(t);
    const std::string name = threading_name(t);
    auto it = given_names().find(tid);
    if (changed_only && it != given_names().end() && it->second.name == name && it->second.session == session) continue;
    give_name(tid, name);
  }
  Py_XDECREF(threads);
  Py_XDECREF(dummy);
  Py_XDECREF(active);
  Py_XDECREF(threading);
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

}  // namespace inferscope::pytrace
