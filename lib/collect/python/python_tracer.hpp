// The CPython tracing collector: every Python call the filters keep becomes one PyCallRecord (code id, start
// and end ticks, depth), written on the calling thread's ring when the call returns or yields.
//
// It needs libpython's symbols, so it is compiled into the inferscope_py extension module, not into
// libinferscope.so (which must load in processes that never run Python).
//
//   CPython >= 3.12: sys.monitoring, tool id 2 (PROFILER_ID), callbacks implemented in C for PY_START,
//                    PY_RESUME, PY_THROW (a call or a resumption begins) and PY_RETURN, PY_YIELD, PY_UNWIND (it
//                    ends). Code the filters exclude gets sys.monitoring.DISABLE, so it costs nothing after its
//                    first call.
//   CPython < 3.12:  the C profile hook (what cProfile uses) on every thread that exists, and on threads started
//                    later through threading.setprofile with a tiny hook that swaps itself for the C one.
//
// Every function here must be called with the GIL held, except Collector::stop() (it only clears a flag; the
// hooks notice it and take themselves out, or the module unhooks them while the interpreter is alive).
#pragma once

#include "runtime/runtime.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace inferscope::pytrace {

/// Which Python code is traced. docs/python.md explains the default.
struct Filters {
  std::string mode = "default";      ///< default: user code and model forward passes; full: every Python function
  std::vector<std::string> include;  ///< module or path prefixes; non-empty: only code matching one is traced
  std::vector<std::string> exclude;  ///< module or path prefixes never traced (wins over include)
  uint32_t max_depth = 0;            ///< deepest recorded nesting of traced calls per thread; 0 = unlimited
};

/// Splits a comma list ("a, b,c") into trimmed, non-empty items.
std::vector<std::string> split_list(const std::string& text);

/// Filters from a session's configuration (python_mode, python_include, python_exclude, python_max_depth).
/// Throws std::invalid_argument for an unknown mode.
Filters filters_from_config(const Config& config);

/// One-time setup at module import: reserves the code-object extra slot and remembers the package directory
/// of inferscope_py (its own code is never traced, whatever the filters). False with `error` set when
/// tracing cannot work in this interpreter.
bool init(const std::string& package_dir, std::string* error);

/// Marks a file outside the package as the profiler's own, never traced (the sitecustomize.py iscope-run puts
/// on PYTHONPATH, as its co_filename reads).
void add_own_file(const std::string& file);

/// Installs the hooks with these filters (replacing any earlier filters). Returns "" on success, otherwise a
/// one-line reason (e.g. sys.monitoring's PROFILER_ID is taken) and nothing is installed.
std::string enable(const Filters& filters);
/// Removes the hooks. Safe to call when not enabled. `at_exit`: the interpreter is about to finalize, so the
/// tool id need not be left clean for another user.
void disable(bool at_exit = false);
/// Whether the hooks are installed and recording.
bool is_enabled();
const Filters& current_filters();
/// "sys.monitoring (tool id 2)" or "C profile hook (all threads)".
const char* mechanism();
/// The collector status line for the current state ("on: ..." or "off: ...").
std::string status_line();

/// Counters for tests and the status line.
struct Stats {
  uint64_t codes_traced = 0;    ///< code objects classified as traced
  uint64_t codes_excluded = 0;  ///< code objects classified as excluded
  uint64_t toggles = 0;         ///< enable/disable transitions
  bool direct_code_extra = false;  ///< the hot path reads code objects' extra slot directly (checked at init)
  int direct_frame_code = -1;      ///< 3.11: frames' code read directly (1), through the API (0), not seen yet or n/a (-1)
};
Stats stats();

/// The runtime-facing collector (registered by the module so every session start applies the session's
/// python_* settings, and attached to a session that was already running when the module was imported).
std::unique_ptr<runtime::Collector> make_collector();

}  // namespace inferscope::pytrace
