"""The iscope-run, iscope-analyze, iscope-config and iscope-diff commands of a pip-installed InferScope.

pip puts these launchers in the environment's bin/; the real executables are in inferscope_py/bin, where
iscope-run would look for the library and the Python directory relative to itself (../lib) and not find them
under a package's layout. The launcher says where they are (INFERSCOPE_LIBRARY, INFERSCOPE_PYTHON_DIR; values
the user set win) and execs the tool, so its exit status, signals and stdio are the tool's own.

This is a module of its own on purpose: importing inferscope_py would load libinferscope into the launcher,
which under INFERSCOPE_ENABLE=1 would start a session in it.
"""

import importlib.util
import os
import sys


def _package_dir():
    spec = importlib.util.find_spec("inferscope_py")  # finds without importing
    if spec is None or not spec.submodule_search_locations:
        print("iscope: the inferscope_py package is not installed beside this command", file=sys.stderr)
        sys.exit(127)
    return list(spec.submodule_search_locations)[0]


def _exec(tool):
    pkg = _package_dir()
    exe = os.path.join(pkg, "bin", tool)
    libs = sorted(f for f in os.listdir(os.path.join(pkg, "lib")) if f.startswith("libinferscope.so"))
    if libs:
        os.environ.setdefault("INFERSCOPE_LIBRARY", os.path.join(pkg, "lib", libs[0]))
    os.environ.setdefault("INFERSCOPE_PYTHON_DIR", os.path.join(pkg, "site"))
    try:
        os.execv(exe, [tool] + sys.argv[1:])
    except OSError as e:  # 127, as iscope-run itself and a shell say when a program cannot be started
        print(f"{tool}: cannot run {exe}: {e.strerror}", file=sys.stderr)
        sys.exit(127)


def iscope_run():
    _exec("iscope-run")


def iscope_analyze():
    _exec("iscope-analyze")


def iscope_config():
    _exec("iscope-config")


def iscope_diff():
    _exec("iscope-diff")
