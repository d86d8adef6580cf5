"""Starts InferScope's Python collector in unmodified programs run under iscope-run.

iscope-run puts this directory first on PYTHONPATH and sets INFERSCOPE_ENABLE=1 (and LD_PRELOAD, which starts
the session as libinferscope loads). Importing inferscope_py attaches Python call tracing to that session and
makes sure the dump is completed at interpreter exit. Any other sitecustomize found later on sys.path (a
distribution's or a virtual environment's) still runs, first: it is not the user's program, and what it and
this file call (importlib) would otherwise be traced as if it were. Nothing of this file is traced.
"""

import os
import sys


def _truthy(value):
    return value.strip().lower() in ("1", "true", "yes", "on")


def _start_inferscope():
    if not _truthy(os.environ.get("INFERSCOPE_ENABLE", "")):
        return
    try:
        _import_inferscope_py()  # importing is what attaches the collector
        sys.modules["inferscope_py"]._native._own_file(__file__)  # as co_filename reads it
    except Exception as e:  # never break the user's program
        print(f"inferscope: Python collector not started: {type(e).__name__}: {e}", file=sys.stderr)
        return
    if os.environ.get("INFERSCOPE_TRY"):  # iscope-run --try: the tried settings (inferscope_py/_try.py)
        try:
            from inferscope_py import _try
            _try.install()
        except Exception as e:
            print(f"inferscope: --try settings not applied: {type(e).__name__}: {e}", file=sys.stderr)


def _import_inferscope_py():
    try:
        import inferscope_py  # noqa: F401
        return
    except ModuleNotFoundError as e:
        # A pip install keeps this file in inferscope_py/site/. A Python other than the environment's (the
        # venv not activated, `iscope-run -- /usr/bin/python3 ...`) does not see that site-packages: load
        # the package from here, without putting the rest of site-packages on its path.
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        init = os.path.join(pkg, "__init__.py")
        if e.name != "inferscope_py" or os.path.basename(pkg) != "inferscope_py" or not os.path.isfile(init):
            raise
    import importlib.util

    spec = importlib.util.spec_from_file_location("inferscope_py", init, submodule_search_locations=[pkg])
    module = importlib.util.module_from_spec(spec)
    sys.modules["inferscope_py"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["inferscope_py"]
        raise


def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        print(f"inferscope: error in {spec.origin}: {type(e).__name__}: {e}", file=sys.stderr)


_chain_next_sitecustomize()
_start_inferscope()
