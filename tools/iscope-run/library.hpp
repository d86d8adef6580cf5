// The library iscope-run injects and the Python package it puts on PYTHONPATH: where they are found, whether the
// loader can preload the library, and how it is named in LD_PRELOAD (docs/reliability.md, "Install layout").
#pragma once

#include <string>

namespace iscope_run {

/// libinferscope to inject: INFERSCOPE_LIBRARY when set; else beside this executable, as an install or a copy lays
/// it out: its own directory, then ../<libdir> and ../lib (libinferscope.so, or only its soname
/// libinferscope.so.N, as a Python wheel holds it); else, for the iscope-run in the build tree alone, the build's.
/// "" when there is none.
std::string find_library();

/// Why the loader cannot preload `path` into a program ("" when it can): it cannot be opened, is a directory, not
/// an ELF file, built for another class, byte order or machine, or an executable (a position-independent one
/// too: /bin/ls) rather than a shared library. Read from its headers, never loaded: loading it would run its
/// constructors in iscope-run.
std::string not_loadable(const std::string& path);

/// The Python package's directory (sitecustomize.py, inferscope_py): INFERSCOPE_PYTHON_DIR, else ../<libdir> or
/// ../lib beside this executable, else the build tree's (for the iscope-run there). "" when there is none.
std::string find_python_dir();

/// Puts `library` in LD_PRELOAD: a path with a space goes as its directory in LD_LIBRARY_PATH and its file name in
/// LD_PRELOAD, which splits at spaces. A path with a ':' cannot be expressed (the caller refuses it).
void preload(const std::string& library);

}  // namespace iscope_run
