"""The validation programs' shared helpers (../../validation/_harness.py), re-exported for the programs here.

Loaded by path so there is one implementation: parse() (--fixed, --steps, --ab ROUNDS, --window), need_cuda()
(exit 77 without torch or a CUDA device), report() (the timing line) and ab() (the in-process A/B).
"""
import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "validation", "_harness.py")
_spec = importlib.util.spec_from_file_location("_validation_harness", _PATH)
_mod = sys.modules.get("_validation_harness")
if _mod is None:
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["_validation_harness"] = _mod
    _spec.loader.exec_module(_mod)

ab = _mod.ab
need_cuda = _mod.need_cuda
parse = _mod.parse
report = _mod.report

__all__ = ["ab", "need_cuda", "parse", "report"]
