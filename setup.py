"""setuptools glue for `pip install .`: runs the project's CMake build and lays its outputs out as a wheel.

The wheel holds one package, inferscope_py, shaped like an install prefix so that every relative lookup the
C++ code already does keeps working:

    inferscope_py/__init__.py, __main__.py, torch.py, _try.py   the binding (bindings/python/inferscope_py)
    inferscope_py/_native.<abi>.so                      the extension, RPATH $ORIGIN/lib
    inferscope_py/lib/libinferscope.so.0                the runtime (its soname, which _native needs)
    inferscope_py/bin/iscope-run, -analyze, -config     the real tools; the session's report-at-exit finds
                                                        iscope-analyze at <library dir>/../bin
    inferscope_py/site/sitecustomize.py                 what iscope-run puts on PYTHONPATH

plus _inferscope_tools.py, whose functions are the iscope-* commands on PATH: they exec the real tools with
INFERSCOPE_LIBRARY and INFERSCOPE_PYTHON_DIR pointing into the package (a venv's bin/ is not the prefix the
tools look in). It needs nothing from a package index: Debian's python3-setuptools and python3-wheel, and
`pip install --no-build-isolation .`.
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("iscope-run", "iscope-analyze", "iscope-config", "iscope-diff")
TARGETS = ("inferscope", "inferscope_live_server", "inferscope_py") + TOOLS


def project_version():
    """The one version the project has: project(inferscope VERSION x.y.z) in the top CMakeLists.txt."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*inferscope\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        raise RuntimeError("setup.py: no project(inferscope VERSION ...) in CMakeLists.txt")
    return m.group(1)


class CMakeBuild(build_ext):
    """Builds the CMake targets the wheel needs (Release, Ninja, this interpreter) and copies them into the
    package in build_lib. The CMake build folder is build_temp, so a second `pip install .` is incremental;
    INFERSCOPE_CMAKE_ARGS adds configure arguments (space-separated)."""

    def run(self):
        for tool in ("cmake", "ninja"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"setup.py: {tool} is not installed (scripts/deps.sh installs what the build needs)")
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        stage = os.path.abspath(os.path.join(self.build_temp, "stage"))
        configure = ["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DINFERSCOPE_BUILD_BENCH=OFF",
                     "-DINFERSCOPE_BUILD_TESTS=OFF", "-DINFERSCOPE_BUILD_SAMPLES=OFF",
                     "-DCMAKE_INSTALL_LIBDIR=lib", "-DINFERSCOPE_PYTHON_INSTALL_RPATH=$ORIGIN/lib"]
        if shutil.which("ccache") and not os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER"):
            configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        configure += os.environ.get("INFERSCOPE_CMAKE_ARGS", "").split()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(len(os.sched_getaffinity(0)))  # = nproc
        self.spawn(configure)
        self.spawn(["cmake", "--build", build, "-j", jobs, "--target", *TARGETS])
        if os.path.isdir(stage):
            shutil.rmtree(stage)
        self.spawn(["cmake", "--install", build, "--prefix", stage])
        self.lay_out(stage)

    def lay_out(self, stage):
        pkg = os.path.join(os.path.abspath(self.build_lib), "inferscope_py")
        staged_pkg = os.path.join(stage, "lib", "inferscope", "python", "inferscope_py")
        native = [f for f in os.listdir(staged_pkg) if f.startswith("_native.") and f.endswith(".so")]
        if len(native) != 1:
            raise RuntimeError(f"setup.py: expected one _native module in {staged_pkg}, found {native}")
        self.copy(os.path.join(staged_pkg, native[0]), os.path.join(pkg, native[0]))
        # A wheel cannot hold symlinks: one real file, named by the soname that _native and iscope-run load.
        soname = "libinferscope.so." + project_version().split(".")[0]
        self.copy(os.path.realpath(os.path.join(stage, "lib", soname)), os.path.join(pkg, "lib", soname))
        # The live page's server module (docs/live.md), loaded from beside libinferscope when `live` is set.
        module = "libinferscope_live_server.so"
        self.copy(os.path.join(stage, "lib", module), os.path.join(pkg, "lib", module))
        for tool in TOOLS:
            self.copy(os.path.join(stage, "bin", tool), os.path.join(pkg, "bin", tool))
        self.copy(os.path.join(ROOT, "bindings", "python", "sitecustomize.py"),
                  os.path.join(pkg, "site", "sitecustomize.py"))

    def copy(self, src, dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)

    # The one Extension below only marks the wheel as platform-specific; CMake builds it.
    def get_outputs(self):
        return []


# setuptools' default build/ is the CMake build folder of scripts/build.sh: everything goes to build-pip/.
os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)
setup(
    version=project_version(),
    packages=["inferscope_py"],
    py_modules=["_inferscope_tools"],
    package_dir={"": "bindings/python"},
    ext_modules=[Extension("inferscope_py._native", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
    zip_safe=False,
)
