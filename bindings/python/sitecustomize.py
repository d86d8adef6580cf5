"""Starts InferScope's Python collector in unmodified programs run under iscope-run.

iscope-run puts this directory first on PYTHONPATH and sets INFERSCOPE_ENABLE=1 (and LD_PRELOAD, which starts
the session as libinferscope loads). Importing inferscope_py attaches Python call tracing to that session and
makes sure the dump is completed at interpreter exit. Any other sitecustomize found later on sys.path (a
distribution's or a virtual environment's) still runs.
"""

import os
import sys


def _truthy(value):
    return value.strip().lower() in ("1", "true", "yes", "on")


def _start_inferscope():
    if not _truthy(os.environ.get("INFERSCOPE_ENABLE", "")):
        return
    try:
        import inferscope_py  # noqa: F401  (importing is what attaches the collector)
    except Exception as e:  # never break the user's program
        print(f"inferscope: Python collector not started: {type(e).__name__}: {e}", file=sys.stderr)


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


_start_inferscope()
_chain_next_sitecustomize()
