"""Shared scaffolding for the planted-bottleneck programs: each program plants ONE bottleneck in its step.

Each step is wrapped in inferscope_py.scope("step") when the binding is importable; otherwise the program
runs plain (iscope-run traces unmodified programs, and the analyzer then finds the repeated Python function
`step` or analyses the whole run). Every program stays under ~20 s and prints what it did.
"""
import contextlib
import os
import sys
import time

try:
    import inferscope_py as _isc  # noqa: F401
    def scope(name):
        return _isc.scope(name)
    HAVE_ISC = True
except Exception:  # not built, or another Python: run plain
    def scope(name):
        return contextlib.nullcontext()
    HAVE_ISC = False


def need_cuda():
    import torch
    if not torch.cuda.is_available():
        print(f"{os.path.basename(sys.argv[0])}: no CUDA device; nothing to plant", flush=True)
        sys.exit(77)
    return torch


def run(name, step, steps=30, warmup=3, budget_s=15.0):
    """Runs `step` (a callable taking the step index) `steps` times inside scope("step")."""
    import torch
    for i in range(warmup):
        step(-1 - i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    done = 0
    for i in range(steps):
        with scope("step"):
            step(i)
        done += 1
        if time.perf_counter() - t0 > budget_s:
            break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"{name}: {done} steps in {dt:.2f} s ({dt / max(done, 1) * 1e3:.2f} ms/step), "
          f"inferscope_py {'on' if HAVE_ISC else 'not importable (plain run)'}", flush=True)
