// Python threads carry their `threading` names into the dump, with no call from the program.
//
// A thread started after inferscope_py's import names itself as it starts: threading.Thread._bootstrap_inner,
// which every threading.Thread runs first on its new thread in CPython 3.8 to 3.13, is wrapped by a C callable
// (no Python frame of ours on the thread's stack, so nothing of the profiler's shows in its traced calls). A
// thread that was running before (the main thread, threads started before the import) is named from the
// session's start, by reading threading's table of live threads. Renames (Thread.name = ...) are picked up as
// the renamed thread exits and when the session stops from Python.
//
// Names go through runtime::name_os_thread: a thread's own set_thread_name() stays stronger, and naming a
// thread neither binds it nor writes a record. Threads threading made up for code it did not start
// (_DummyThread, "Dummy-N") keep the kernel's name, which says more.
//
// Every function here must be called with the GIL held.
#pragma once

#include <string>

namespace inferscope::pytrace {

/// Wraps threading.Thread._bootstrap_inner (once per process). False with `error` set when threading does not
/// have it (then only the session-start and stop scans name threads).
bool install_thread_naming(std::string* error);

/// Names every live Python thread in the running session. `changed_only`: skips a thread whose threading name
/// is the one it was last given here, so that a name the thread gave itself meanwhile (set_thread_name) stays.
void name_python_threads(bool changed_only);

}  // namespace inferscope::pytrace
