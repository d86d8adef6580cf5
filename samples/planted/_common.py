"""Shared scaffolding for the planted-bottleneck programs: each program plants ONE bottleneck in its step.

Each step is wrapped in inferscope_py.scope("step") when the binding is importable; otherwise the program
runs plain (iscope-run traces unmodified programs, and the analyzer then finds the repeated Python function
`step` or analyses the whole run). Every program stays under ~20 s and prints what it did.

Each program with a fix (HAS_FIX, default True) passes it to run(): `prog --fixed` runs the fixed step instead,
and `prog --ab ROUNDS [--window N]` alternates windows of both in one process without the profiler and prints
`AB broken_ms=.. fixed_ms=.. saving_pct=..` (the A/B of samples/validation/_harness.py, shared).
"""
import argparse
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation"))

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
    try:
        import torch
    except ImportError as e:
        print(f"{os.path.basename(sys.argv[0])}: torch is not importable ({e}); nothing to plant", flush=True)
        sys.exit(77)
    if not torch.cuda.is_available():
        print(f"{os.path.basename(sys.argv[0])}: no CUDA device; nothing to plant", flush=True)
        sys.exit(77)
    return torch


def _args():
    ap = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or "").strip().split("\n")[0])
    ap.add_argument("--fixed", action="store_true", help="run the fixed step (the planted bottleneck removed)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="in-process A/B of the planted and the fixed step, without the profiler")
    ap.add_argument("--window", type=int, default=5, help="steps per A/B window (default %(default)s)")
    return ap.parse_args()


def run(name, step, steps=30, warmup=3, budget_s=15.0, fixed=None):
    """Runs `step` (a callable taking the step index) `steps` times inside scope("step"); `fixed` is the same
    step with the planted bottleneck removed (--fixed, --ab)."""
    import torch
    args = _args()
    if (args.fixed or args.ab) and fixed is None:
        print(f"{name}: this program has no fixed variant", flush=True)
        sys.exit(2)
    if args.ab:
        from _harness import ab
        ab(torch, step, fixed, args.ab, args.window, warmup=warmup)
        return
    if args.fixed:
        step = fixed
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
