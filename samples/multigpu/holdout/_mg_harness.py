"""Shared helpers for the multi-GPU programs (samples/multigpu/*.py).

Argument parsing (--fix, --steps N, --ab ROUNDS, --window W, --smoke), start-up of torch.distributed from the
environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), the step loop and the
in-process A/B. Each program keeps its own model and its own step function; only the loop lives here.

Every step runs inside `inferscope_py.scope("step")` when inferscope_py is importable (it is on PYTHONPATH when
a program is recorded; otherwise the scope is a no-op) and ends with a device synchronisation, so that a step's
time is its wall time on that rank.

--smoke (or ISCOPE_MG_SMOKE=1) selects backend gloo and device cpu with the program's tiny sizes, to check the
logic on a machine without GPUs. Nothing here imports torch at module level, so --help works without torch.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

try:
    import inferscope_py as _isc
except ImportError:
    _isc = None


def _prog():
    return os.path.basename(sys.argv[0]) or "program"


def _env_true(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def parse(doc, steps, window, smoke_steps=6, smoke_window=2):
    """--fix, --steps, --ab ROUNDS, --window, --smoke. In smoke mode the defaults of --steps and --window are the
    smoke ones (a value given on the command line wins)."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    ap.add_argument("--fix", "--fixed", dest="fix", action="store_true",
                    help="run the fixed variant (the bottleneck removed)")
    ap.add_argument("--steps", type=int, default=None,
                    help=f"steps to run, the first ones being the warm-up (default {steps}; smoke {smoke_steps})")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="in-process A/B: ROUNDS rounds of one window of the broken and one of the fixed variant; "
                         "prints 'AB {\"broken_ms\": .., \"fixed_ms\": .., \"saving_pct\": .., \"rounds\": ..}'")
    ap.add_argument("--window", type=int, default=None,
                    help=f"steps per A/B window (default {window}; smoke {smoke_window})")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, backend gloo, device cpu (also: ISCOPE_MG_SMOKE=1)")
    args = ap.parse_args()
    args.smoke = args.smoke or _env_true("ISCOPE_MG_SMOKE")
    if args.steps is None:
        args.steps = smoke_steps if args.smoke else steps
    if args.window is None:
        args.window = smoke_window if args.smoke else window
    if args.steps < 1 or args.window < 1 or args.ab < 0:
        ap.error("--steps and --window must be at least 1, --ab at least 0")
    return args


def need_torch():
    try:
        import torch
    except ImportError as e:
        print(f"{_prog()}: torch is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    return torch


def need_gpus(torch, n):
    """Exits 77, saying why, unless at least n CUDA devices are visible."""
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < n:
        print(f"{_prog()}: needs {n} CUDA device(s), sees {have}; nothing to run (--smoke runs on the CPU)",
              flush=True)
        sys.exit(77)


def step_scope():
    """inferscope_py.scope("step") when inferscope_py is importable, else a no-op context."""
    if _isc is None:
        return contextlib.nullcontext()
    return _isc.scope("step")


def cuda_sync(torch, devices):
    """A function that waits for all the work queued on `devices` (no-op for CPU devices)."""
    cuda = [d for d in devices if getattr(d, "type", str(d)).startswith("cuda")]
    if not cuda:
        return lambda: None

    def sync():
        for d in cuda:
            torch.cuda.synchronize(d)
    return sync


class Dist:
    """One rank of a torchrun job: the process group (nccl on cuda:LOCAL_RANK, or gloo on the CPU when smoke)."""

    def __init__(self, smoke):
        for k in ("RANK", "WORLD_SIZE"):
            if k not in os.environ:
                print(f"{_prog()}: {k} is not set; start me with torchrun, e.g. "
                      f"python3 -m torch.distributed.run --nproc_per_node 2 {sys.argv[0]}", flush=True)
                sys.exit(2)
        self.torch = torch = need_torch()
        import torch.distributed as dist
        self.dist = dist
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.smoke = smoke
        if smoke:
            torch.set_num_threads(1)
            self.device = torch.device("cpu")
            self.backend = "gloo"
        else:
            need_gpus(torch, self.local_rank + 1)
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
            self.backend = "nccl"
        dist.init_process_group(self.backend)
        self.is_main = self.rank == 0
        self.sync = cuda_sync(torch, [self.device])
        self._flag = torch.zeros(1, device=self.device)

    def barrier(self):
        """All ranks here, and this rank's device idle (a one-element all_reduce, the same on every backend)."""
        self.dist.all_reduce(self._flag)
        self.sync()

    def max_over_ranks(self, values):
        """The element-wise maximum of a list of floats over all ranks (each rank passes a list of equal length)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def close(self):
        self.barrier()
        self.dist.destroy_process_group()


def _timed_step(step, i, sync):
    t = time.perf_counter()
    with step_scope():
        step(i)
        sync()
    return time.perf_counter() - t


def run_steps(name, variant, step, steps, sync, rank=None):
    """Runs step(i) for i in range(steps), each in a "step" scope and synchronised; prints one timing line (every
    rank prints its own: a straggler's line differs from the others')."""
    t0 = time.perf_counter()
    times = [_timed_step(step, i, sync) for i in range(steps)]
    total = time.perf_counter() - t0
    rest = times[1:] or times
    who = "" if rank is None else f" rank {rank}"
    print(f"{name} ({variant}){who}: {steps} steps in {total:.2f} s; first step {times[0] * 1e3:.1f} ms (warm-up), "
          f"then median {statistics.median(rest) * 1e3:.3f} ms/step, mean {statistics.mean(rest) * 1e3:.3f}",
          flush=True)
    return times


def ab(name, broken, fixed, rounds, window, sync, dist=None, warmup=3):
    """The in-process A/B. After `warmup` steps of each variant, ROUNDS rounds each run one window of `window` steps
    of the broken and one of the fixed variant (the order flips every round). Which variant a window runs depends
    only on its index, so all ranks switch together; each window starts at a barrier. A step's time is its wall time
    (step + device synchronisation); with several ranks, a step counts at the slowest rank's time (the maximum over
    ranks, taken once at the end). Prints, on rank 0, the medians of the step times of each variant as one line
    'AB {json}' and returns the dict (on every rank)."""
    barrier = dist.barrier if dist is not None else sync
    variants = {"broken": broken, "fixed": fixed}
    i = 0
    for v in ("broken", "fixed"):
        for _ in range(warmup):
            _timed_step(variants[v], i, sync)
            i += 1
    times = {"broken": [], "fixed": []}
    for r in range(rounds):
        for v in (("broken", "fixed") if r % 2 == 0 else ("fixed", "broken")):
            barrier()
            for _ in range(window):
                times[v].append(_timed_step(variants[v], i, sync))
                i += 1
    if dist is not None and dist.world > 1:
        n = len(times["broken"])
        both = dist.max_over_ranks(times["broken"] + times["fixed"])
        times = {"broken": both[:n], "fixed": both[n:]}
    b = statistics.median(times["broken"]) * 1e3
    x = statistics.median(times["fixed"]) * 1e3
    result = {"broken_ms": round(b, 3), "fixed_ms": round(x, 3), "saving_pct": round((b - x) / b * 100, 1),
              "rounds": rounds, "window": window}
    if dist is None or dist.is_main:
        print("AB " + json.dumps(result), flush=True)
    return result
