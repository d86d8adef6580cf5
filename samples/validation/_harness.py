"""Small shared helpers for the validation programs (samples/validation/*.py).

Only argument parsing, the "no CUDA here" exit, the timing line and the in-process A/B live here; each program
keeps its own loop, written the way ordinary inference code is written (no InferScope annotations, warm-up
inside the same loop as the measured steps). Nothing here imports torch at module level, so `--help` works
where torch is absent.
"""
import argparse
import os
import statistics
import sys
import time

CATEGORIES = ("cpu_bound", "launch_bound", "sync_bound", "h2d_bound", "d2h_bound", "gpu_bound", "memory_alloc",
              "cpu_contention", "pcie_saturation", "wait")


def parse(doc, steps=30, window=5):
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    ap.add_argument("--fixed", action="store_true", help="run the fixed variant (the bottleneck removed)")
    ap.add_argument("--steps", type=int, default=steps, help="steps to run (the first one is the warm-up)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="in-process A/B: alternate windows of the broken and fixed variants ROUNDS times and "
                         "print 'AB broken_ms=.. fixed_ms=.. saving_pct=..'")
    ap.add_argument("--window", type=int, default=window, help="steps per A/B window (default %(default)s)")
    return ap.parse_args()


def _prog():
    return os.path.basename(sys.argv[0]) or "program"


def need_cuda(*modules):
    """Returns torch, or exits 77 with a message when torch (or one of `modules`) or a CUDA device is missing."""
    try:
        import torch
    except ImportError as e:
        print(f"{_prog()}: torch is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    for m in modules:
        try:
            __import__(m)
        except ImportError as e:
            print(f"{_prog()}: {m} is not importable ({e}); nothing to run", flush=True)
            sys.exit(77)
    if not torch.cuda.is_available():
        print(f"{_prog()}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    return torch


def report(name, variant, t0, t_first, t_end, steps):
    """One line: total, the first (warm-up) step as the host saw it, and the mean wall time of the others."""
    rest = (t_end - t_first) / max(steps - 1, 1) * 1e3
    print(f"{name} ({variant}): {steps} steps in {t_end - t0:.2f} s; first step {(t_first - t0) * 1e3:.1f} ms "
          f"(warm-up), then {rest:.2f} ms/step", flush=True)


def ab(torch, broken, fixed, rounds, window=5, warmup=2, alternatives=None):
    """Alternates windows of `window` calls of broken(i) and fixed(i) (order rotated every round) after a warm-up
    of both; prints the medians of the per-window mean step times. The device is synchronized at each window's
    edges only.

    `alternatives` maps a category to another fix of the same step (e.g. {"launch_bound": graphed}): a program
    whose planted cause is not the only one measures the competing fix in the same rotation, so the suite can
    tell which cause a fix of which saves the most. Each prints 'AB_ALT category=.. fixed_ms=.. saving_pct=..'."""
    variants = [broken, fixed] + list((alternatives or {}).values())
    for f in variants:
        for i in range(warmup):
            f(i)
    torch.cuda.synchronize()
    times = {id(f): [] for f in variants}
    i = 0
    for r in range(rounds):
        k = r % len(variants)
        for f in (variants[k:] + variants[:k]) if r % 2 == 0 else list(reversed(variants[k:] + variants[:k])):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(window):
                f(i)
                i += 1
            torch.cuda.synchronize()
            times[id(f)].append((time.perf_counter() - t) / window * 1e3)
    b, x = statistics.median(times[id(broken)]), statistics.median(times[id(fixed)])
    print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={rounds} "
          f"window={window}", flush=True)
    for category, f in (alternatives or {}).items():
        a = statistics.median(times[id(f)])
        print(f"AB_ALT category={category} fixed_ms={a:.3f} saving_pct={(b - a) / b * 100:.1f}", flush=True)
