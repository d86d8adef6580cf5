#!/usr/bin/env python3
"""GPU collector overhead on a launch-bound PyTorch step (budgets and figures: docs/benchmarks.md).

One process alternates windows with collection on and off, many rounds, and reports medians:

  # InferScope: run under iscope-run so libinferscope.so is loaded and CUPTI is attached; the script
  # switches the activity set at run time through libinferscope's C entry points (ctypes).
  iscope-run --no-python -o /tmp/bench.iscope -- python3 bench/gpu/gpt2_overhead.py --mode inferscope

  # torch.profiler on the same step, measured the same way (a separate process: CUPTI allows one tool).
  python3 bench/gpu/gpt2_overhead.py --mode torch-profiler

  # Sampled mode (mode: sampled, docs/sampled-mode.md), averaged over a long run: NOT under iscope-run (the script
  # starts and stops its own sessions); inferscope_py on PYTHONPATH (the build's python/ folder).
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode sampled --batches 1

  # Short windows, each a session of its own started and stopped in the running process (what a user who
  # profiles a few steps at a time pays, start included): NOT under iscope-run either.
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode windows --batches 1 --steps 10 --warm 0

  # A long run, each window one whole session of 1000 marked steps: adaptive and full capture against no session,
  # beside the floor (a bare CUPTI kernel-only session); read the mean column (the run's average step).
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode windows --batches 1 --steps 1000 --warm 0 \
      --rounds 5 --mark-steps --window-sets "mode=adaptive;mode=full;python=false,system=false,cupti_activities=kernel"

  # The live page left open: the same session with and without `live`, the page's /data and /metrics fetched
  # every second by another process (needs the server module, libinferscope_live_server.so, beside the runtime).
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode windows --batches 1 --steps 150 --warm 0 \
      --rounds 20 --mark-steps --window-sets "system=true;system=true,live=127.0.0.1:18791,live_token=false"

  # A CUDA graph replayed per step (one graph launch of 1,500 small kernels): which part of a session costs a
  # replay (Python tracer, system sampler, CUPTI), each against no session and against the defaults.
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode windows --model graph --batches 8 --steps 50 \
      --warm 2 --rounds 30 --against system=true \
      --window-sets "system=true;python=false;system=false;python=false,system=false"

  # The live page's cost over sampled mode on the program's own thread, on any machine (no GPU: a pure-Python step
  # of about 5 ms): sampled sessions with and without the page served and polled.
  PYTHONPATH=build/python python3 bench/gpu/gpt2_overhead.py --mode windows --model cpu --batches 5 --steps 200 \
      --warm 0 --rounds 20 --mark-steps --against mode=sampled \
      --window-sets "mode=sampled;mode=sampled,live=127.0.0.1:18791,live_token=false"

The step: transformers' GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)), random weights,
fp16, sequence 128, batch 1 and 32, no_grad, synchronized at the end of each step.
"""
import argparse
import os
import random
import statistics
import sys
import time

from overhead_common import (SessionWindow, WindowStats, build_cpu_step, build_graph_step, build_step, run_steps,
                             runtime_library, session_settings, start_before_cuda)


def load_inferscope():
    path = os.environ.get("INFERSCOPE_LIBRARY")
    if not path:
        for p in os.environ.get("LD_PRELOAD", "").split(":"):
            if "libinferscope" in p:
                path = p
                break
    if not path:
        sys.exit("run this mode under iscope-run (libinferscope.so must be loaded and recording)")
    return runtime_library(path)


def window(step, n):
    """Median step time and median time of the forward call (the host issuing the step's work) of n steps."""
    times, issue = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        issued = step()
        times.append(time.perf_counter() - t0)
        issue.append(issued - t0)
    return statistics.median(times), statistics.median(issue)


def measure(step, modes, enter, rounds, steps, warm):
    """modes: names; enter(mode) -> context manager active during the window. Returns {mode: [window medians]}
    for the step and for the forward call."""
    res = {m: [] for m in modes}
    issue = {m: [] for m in modes}
    for _ in range(rounds):
        order = list(modes)
        random.shuffle(order)
        for m in order:
            with enter(m):
                for _ in range(warm):
                    step()
                t, i = window(step, steps)
                res[m].append(t)
                issue[m].append(i)
    return res, issue


def report(title, measured, base, batch, f=sys.stdout):
    res, issue = measured
    b = statistics.median(res[base])
    print(f"\n## {title}, batch {batch}: median step {b * 1e3:.3f} ms with collection off", file=f)
    print("| mode | median step ms | overhead vs off (ratio of medians) | median of per-round ratios "
          "| forward call ms | its per-round ratio |", file=f)
    print("|---|---:|---:|---:|---:|---:|", file=f)
    for m, v in res.items():
        med = statistics.median(v)
        paired = statistics.median(a / o for a, o in zip(v, res[base]))
        fwd = statistics.median(issue[m])
        fwd_paired = statistics.median(a / o for a, o in zip(issue[m], issue[base]))
        print(f"| {m} | {med * 1e3:.3f} | {100 * (med / b - 1):+.2f} % | {100 * (paired - 1):+.2f} % "
              f"| {fwd * 1e3:.3f} | {100 * (fwd_paired - 1):+.2f} % |", file=f)
    f.flush()


class Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def sampled_blocks(step, batch, a, isc):
    """Sampled mode against no session, in one process: each round runs one block of steps with no session and one
    with a sampled session (started before the block, stopped after it; order shuffled), each block being
    `periods` x window_every_steps steps that hold exactly `periods` windows. The cost of sampled mode lies in its
    windows, so a block's MEAN step time is compared (a median would hide it); the steps inside and outside the
    windows are also compared on their own, and the long-run average is projected from them for the default
    schedule."""
    import tempfile
    W, N = a.window_steps, a.window_every_steps
    timed = a.periods * N
    in_window = set()
    for k in range(1, a.periods + 1):  # steps since the session started: windows after N, 2N, ... steps
        in_window.update(range(k * N, k * N + W))
    res = {"off": [], "sampled": []}
    parts = {"off": ([], []), "sampled": ([], [])}  # (inside windows, outside) per-round means
    tmp = tempfile.mkdtemp(prefix="iscope-sampled-")
    last_dump = None
    for r in range(a.rounds):
        order = ["off", "sampled"]
        random.shuffle(order)
        for m in order:
            if m == "sampled":
                last_dump = os.path.join(tmp, f"round{r}.iscope")
                if not isc.start(output=last_dump, mode="sampled", window_steps=W, window_every_steps=N,
                                 **session_settings(a.sampled_settings)):
                    sys.exit("inferscope_py.start(mode='sampled') failed (is a session already running? do not use iscope-run here)")
            times = []
            for i in range(W + timed):  # the first W steps are untimed: the block starts at step W
                t0 = time.perf_counter()
                with isc.scope("step"):
                    step()
                if i >= W:
                    times.append((i, time.perf_counter() - t0))
            if m == "sampled":
                isc.stop()
                if r + 1 < a.rounds:
                    os.unlink(last_dump)
            res[m].append(statistics.mean(t for _, t in times))
            inside = [t for i, t in times if i in in_window]
            outside = [t for i, t in times if i not in in_window]
            parts[m][0].append(statistics.mean(inside))
            parts[m][1].append(statistics.mean(outside))
    ratio = lambda xs, ys: statistics.median(x / y for x, y in zip(xs, ys))
    avg = ratio(res["sampled"], res["off"])
    inside = ratio(parts["sampled"][0], parts["off"][0])
    outside = ratio(parts["sampled"][1], parts["off"][1])
    default_w, default_n = 10, 500  # the configuration's defaults (window_steps, window_every_steps)
    projected = outside + default_w / default_n * (inside - outside)
    print(f"\n## Sampled mode, batch {batch}: window_steps={W} window_every_steps={N}, {a.periods} window(s) per "
          f"block of {timed} steps, {a.rounds} rounds; mean step {statistics.median(res['off']) * 1e3:.3f} ms with no session")
    print("| measure | median of per-round ratios (sampled / no session) |")
    print("|---|---:|")
    print(f"| mean step over the block (the long-run average at this schedule) | {100 * (avg - 1):+.2f} % |")
    print(f"| steps inside windows (full detail) | {100 * (inside - 1):+.2f} % |")
    print(f"| steps outside windows (the always-on part: step ranges, slow-step test) | {100 * (outside - 1):+.2f} % |")
    print(f"| projected long-run average at the defaults ({default_w} every {default_n}) | {100 * (projected - 1):+.2f} % |")
    if last_dump:
        d = isc._native._read_dump(last_dump)
        kinds = {}
        for rec in d["records"]:
            kinds[rec["kind"]] = kinds.get(rec["kind"], 0) + 1
        print(f"# last sampled block's dump: complete={d['complete']}, records by kind {dict(sorted(kinds.items()))}; "
              f"collectors {d['collectors']}")
        os.unlink(last_dump)
    sys.stdout.flush()


def steady_phase(step, a, isc, n):
    """The windows in one session that records all along (GPU only), its GPU collection switched on and off per
    window: what the windowed sessions pay beyond what collection itself costs. Returns (on, off) WindowStats."""
    import tempfile
    lib = runtime_library()  # the one inferscope_py loaded
    path = os.path.join(tempfile.mkdtemp(prefix="iscope-steady-"), "steady.iscope")
    if not isc.start(output=path, python=False, system=False, cupti_activities="none"):
        sys.exit("inferscope_py.start() failed")
    on, off = WindowStats(n), WindowStats(n)
    for _ in range(a.rounds):
        order = ["off", "on"]
        random.shuffle(order)
        for k in order:
            lib.inferscope_cupti_set_activities(b"default" if k == "on" else b"none")
            (on if k == "on" else off).add(run_steps(step, n), a.warm)
    isc.stop()
    os.unlink(path)
    return on, off


def print_windows(batch, a, n, stats, base_of, start_ms, stop_ms, dump_mb, polls):
    ratio = lambda xs, ys: 100 * (statistics.median(x / y for x, y in zip(xs, ys)) - 1)
    print(f"\n## Windows of {n} steps ({a.warm} untimed), each a session of its own, batch {batch}, {a.rounds} rounds; "
          f"median step {statistics.median(stats['off'].med) * 1e3:.3f} ms without a session")
    print(f"# start(): median {statistics.median(start_ms):.2f} ms (max {max(start_ms):.2f}); "
          f"stop(): median {statistics.median(stop_ms):.2f} ms (max {max(stop_ms):.2f}); both outside the timed steps")
    per_step = n <= 24  # a column per step position only for short windows (what starting leaves behind)
    print("| session settings | timed steps: median | timed steps: mean | dump (MB, median) |" +
          ("".join(f" step {i} |" for i in range(n)) if per_step else ""))
    print("|---|---:|---:|---:|" + ("---:|" * n if per_step else ""))
    for k, x in stats.items():
        if k == "off":
            continue
        base = base_of(k)
        cells = [f" {ratio(x.at[i], base.at[i]):+.1f} % |" for i in range(n)] if per_step else []
        size = f"{statistics.median(dump_mb[k]):.1f}" if k in dump_mb else "-"
        print(f"| {k} | {ratio(x.med, base.med):+.2f} % | {ratio(x.mean, base.mean):+.2f} % | {size} |" + "".join(cells))
    if a.against:
        if a.against not in stats:
            sys.exit(f"--against {a.against!r} is not one of --window-sets")
        ref = stats[a.against]
        print(f"\n| against `{a.against}` (round by round, both sessions) | timed steps: median | timed steps: mean |")
        print("|---|---:|---:|")
        for k, x in stats.items():
            if k != a.against and not k.startswith("steady"):
                print(f"| {k} | {ratio(x.med, ref.med):+.2f} % | {ratio(x.mean, ref.mean):+.2f} % |")
    for k, n_ok in polls.items():
        print(f"# {k}: the live page answered {statistics.median(n_ok):.0f} polls per window (median; "
              f"/data and /metrics every {a.live_poll_s} s from another process)")
        if not max(n_ok):
            print(f"# {k}: NO poll was answered: the live server did not run; this row measures no page")
    sys.stdout.flush()


def session_windows(step, batch, a, isc):
    """Windows of `warm` + `steps` steps, each either without a session or inside a session of its own, started
    just before the window's first step and stopped just after its last (order shuffled per round). Compares the
    timed steps (median of per-round ratios of the window medians and of the window means), every step position
    after the start on its own (what starting leaves behind), and prints how long start() and stop() took."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="iscope-windows-")
    kinds = ["off"] + [k for k in a.window_sets.split(";") if k]
    n = a.warm + a.steps
    stats = {k: WindowStats(n) for k in kinds}
    start_ms, stop_ms = [], []
    dump_mb = {}  # session settings -> the dump's size after each window (MB)
    polls = {}  # session settings with `live` -> the live page's answered polls in each window
    for r in range(a.rounds):
        order = list(kinds)
        random.shuffle(order)
        for k in order:
            path = os.path.join(tmp, f"w{r}.iscope")
            poller = waker = None
            window = Nothing()
            if k == WAKER:
                waker = start_waker()
            elif k != "off":
                window = SessionWindow(isc, path, session_settings(k))
            with window:
                if k != "off" and window.settings.get("live"):
                    poller = start_live_poller(window.settings["live"], a.live_poll_s)
                times = run_steps(step, n, isc if a.mark_steps else None)
                if poller:
                    polls.setdefault(k, []).append(stop_live_poller(poller))
            if waker:
                waker()
            elif k != "off":
                start_ms.append(window.start_ms)
                stop_ms.append(window.stop_ms)
                dump_mb.setdefault(k, []).append(window.dump_mb)
                os.unlink(path)
            stats[k].add(times, a.warm)
        write_raw(a, batch, r + 1, stats, start_ms, stop_ms, dump_mb)
    steady_off = None
    if a.steady_phase:
        stats["steady session, GPU on/off"], steady_off = steady_phase(step, a, isc, n)
    # The steady session's "on" windows are compared with its own "off" windows, the others with no session.
    base_of = lambda k: steady_off if k.startswith("steady") else stats["off"]
    print_windows(batch, a, n, stats, base_of, start_ms, stop_ms, dump_mb, polls)
    write_raw(a, batch, r + 1, stats, start_ms, stop_ms, dump_mb)


def write_raw(a, batch, rounds_done, stats, start_ms, stop_ms, dump_mb):
    """--raw: every window so far (rewritten after each round, so a run cut short by a time limit keeps them)."""
    if not a.raw:
        return
    import json
    path = a.raw if "," not in a.batches else a.raw.replace(".json", "") + f".b{batch}.json"
    with open(path + ".tmp", "w") as f:
        json.dump({"batch": batch, "steps": a.steps, "warm": a.warm, "rounds": rounds_done, "command": sys.argv,
                   "windows": {k: {"median": v.med, "mean": v.mean} for k, v in stats.items()},
                   "start_ms": start_ms, "stop_ms": stop_ms, "dump_mb": dump_mb}, f)
    os.replace(path + ".tmp", path)


# A window set with no session, only a thread that wakes every 20 ms as the session's writer does: whether a
# process with a periodically waking thread runs its steps faster on these hosts than one without
# (docs/history/benchmarks-2026-11.md, "Adaptive capture over a long run").
WAKER = "no-session+waker"


def start_waker(period=0.02):
    import threading
    done = threading.Event()
    t = threading.Thread(target=lambda: [None for _ in iter(lambda: done.wait(period), True)], daemon=True)
    t.start()
    return lambda: (done.set(), t.join())


# A page left open: another process (as a browser is) fetching /data and /metrics every `period` s; it prints how
# many fetches were answered when it is stopped. The session's `live_token` must be off (no token to pass).
_POLLER = r"""
import signal, sys, time, urllib.request
url, period, ok = sys.argv[1], float(sys.argv[2]), 0
signal.signal(signal.SIGTERM, lambda *a: (print(ok, flush=True), sys.exit(0)))
while True:
    for path in ("/data", "/metrics"):
        try:
            urllib.request.urlopen(url + path, timeout=2).read()
            ok += 1
        except Exception:
            pass
    time.sleep(period)
"""


def start_live_poller(live, period):
    import subprocess
    addr = live if ":" in live else "127.0.0.1:" + live
    return subprocess.Popen([sys.executable, "-c", _POLLER, "http://" + addr, str(period)],
                            stdout=subprocess.PIPE, text=True)


def stop_live_poller(p):
    p.terminate()
    out, _ = p.communicate(timeout=10)
    return int(out.strip() or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["inferscope", "torch-profiler", "plain", "sampled", "windows"], required=True)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--model", choices=["gpt2", "graph", "cpu"], default="gpt2",
                    help="the step: GPT-2's forward (default), one CUDA graph of small kernels replayed per step "
                         "(--graph-layers Linear+ReLU pairs of --graph-width, batch from --batches), or pure Python "
                         "work of about --batches ms and no GPU (windows mode: a session's cost on the program's own "
                         "thread, on any machine). In windows "
                         "mode a graph step is captured inside a first session started before CUDA is initialised, "
                         "as under iscope-run, so that CUPTI may trace it at graph level (docs/gpu-collector.md)")
    ap.add_argument("--graph-layers", type=int, default=750, help="graph step: Linear+ReLU pairs (2 kernels each)")
    ap.add_argument("--graph-width", type=int, default=256, help="graph step: features per layer")
    ap.add_argument("--against", default="",
                    help="windows mode: also compare every session setting with this one (one of --window-sets), "
                         "round by round: a comparison of two sessions, both with the writer's threads running")
    # Short windows and many rounds: on shared hosts neighbouring windows then differ less
    # (docs/history/benchmarks-2026-11.md, "Fifth run": 8-step windows x 100-150 rounds gave per-round medians within
    # ~1 point run to run).
    ap.add_argument("--rounds", type=int, default=None, help="default 100 (10 for --mode sampled: its blocks are whole periods)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per window")
    ap.add_argument("--warm", type=int, default=2, help="untimed steps at the start of each window")
    ap.add_argument("--sets", default="kernel;kernel,memcpy;kernel,memcpy,runtime;minimal;default;full",
                    help="';'-separated InferScope activity sets to compare with 'none' (collection off); "
                         "a set may end in @N (CUPTI's periodic flush every N ms in its windows; 0 = only when "
                         "a buffer is full; default 100), then in /cz (CUPTI zeroes each activity buffer on the thread "
                         "that asked for it instead of getting it zeroed) and /NNNk (activity buffers of NNN KiB; default "
                         "8192), and in +python or +python_full to trace Python calls too (default or full filters) "
                         "during its windows; run without --no-python for those")
    ap.add_argument("--window-steps", type=int, default=10, help="sampled mode: window_steps")
    ap.add_argument("--window-every-steps", type=int, default=500, help="sampled mode: window_every_steps")
    ap.add_argument("--periods", type=int, default=1, help="sampled mode: windows per timed block")
    ap.add_argument("--sampled-settings", default="",
                    help="sampled mode: more session settings, a comma list of key=value (e.g. python=false)")
    ap.add_argument("--live-poll-s", type=float, default=1.0,
                    help="windows mode: a window set with live=ADDR:PORT (and live_token=false) is polled by another "
                         "process every this many seconds, as the open page polls (default 1 s)")
    ap.add_argument("--seed", type=int, default=1, help="the window order's shuffle (give each process its own)")
    ap.add_argument("--raw", default="",
                    help="windows mode: also write every window's median and mean step per session setting, and "
                         "start()/stop() times and dump sizes, to this JSON file (for intervals computed afterwards)")
    ap.add_argument("--mark-steps", action="store_true",
                    help="windows mode: each step inside inferscope_py.scope('step') (adaptive and sampled sessions "
                         "count steps by it), in every window alike")
    ap.add_argument("--steady-phase", action="store_true",
                    help="windows mode: then the same windows in one GPU-only session switched on and off per window")
    ap.add_argument("--window-sets", default="system=true;python=false,system=false",
                    help="windows mode: ';'-separated session settings to compare with no session, each a comma list "
                         "of key=value (docs/configuration.md); 'system=true' alone is the defaults; "
                         f"'{WAKER}' is no session with a thread waking every 20 ms")
    a = ap.parse_args()
    if a.rounds is None:
        a.rounds = 10 if a.mode == "sampled" else 100

    if a.model == "cpu":
        if a.mode != "windows":
            sys.exit("--model cpu runs in --mode windows only")
        import inferscope_py as isc
        random.seed(a.seed)
        print(f"# session overhead on a pure-Python step (no GPU); python {sys.version.split()[0]}")
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rounds={a.rounds} steps/window={a.steps} "
              f"warm={a.warm}; command: {' '.join(sys.argv)}")
        for batch in [int(x) for x in a.batches.split(",")]:
            session_windows(build_cpu_step(batch), batch, a, isc)
        return

    import torch
    import transformers

    early = None
    if a.model == "graph" and a.mode == "windows":
        import tempfile
        import inferscope_py as early_isc
        early = os.path.join(tempfile.mkdtemp(prefix="iscope-early-"), "early.iscope")
        start_before_cuda(early_isc, early)
    print(f"# GPU collector overhead: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}, python {sys.version.split()[0]}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rounds={a.rounds} steps/window={a.steps} "
          f"warm={a.warm}; command: {' '.join(sys.argv)}")
    random.seed(a.seed)
    lib = load_inferscope() if a.mode == "inferscope" else None
    isc = None
    if (lib and "+python" in a.sets) or a.mode in ("sampled", "windows"):
        import inferscope_py as isc  # on PYTHONPATH (iscope-run puts it there)
    if lib:
        print(f"# collector: {lib.inferscope_cupti_status().decode()}")

    for batch in [int(x) for x in a.batches.split(",")]:
        if a.model == "graph":
            step = build_graph_step(batch, a.graph_layers, a.graph_width, "cuda")
            print(f"# step: one CUDA graph of {2 * a.graph_layers} kernels ({a.graph_layers} x Linear({a.graph_width}) "
                  f"+ ReLU, fp16, batch {batch}), replayed and synchronised")
        else:
            step = build_step(batch, a.seq, "cuda")
        for _ in range(10):
            step()
        if early:
            early_isc.stop()
            d = early_isc._native._read_dump(early)
            print(f"# the graph was captured in a session started before CUDA; its collectors: {d['collectors']}")
            os.unlink(early)
            early = None
        if a.mode == "inferscope":
            sets = ["none"] + a.sets.split(";")

            class Switch:
                def __init__(self, m):
                    self.m = m

                def __enter__(self):
                    activities, _, python = self.m.partition("+")
                    # "set@N/cz/NNNk": CUPTI's periodic flush every N ms in this window (0: only full
                    # buffers), buffers zeroed by CUPTI on the asking thread, buffers of NNN KiB.
                    activities, *opts = activities.split("/")
                    activities, _, flush = activities.partition("@")
                    lib.inferscope_cupti_set_flush_period(int(flush) if flush else 100)
                    kib = next((int(o[:-1]) for o in opts if o.endswith("k")), 8192)
                    rc = lib.inferscope_cupti_set_buffer_policy(kib, 0 if "cz" in opts else 1)
                    if rc == 0:
                        rc = lib.inferscope_cupti_set_activities(activities.encode())
                    if rc != 0:
                        sys.exit(f"inferscope_cupti_set_activities({activities}) = {rc}: "
                                 f"{lib.inferscope_cupti_status().decode()}")
                    if isc is not None:
                        # Python tracing only in the windows that ask for it ("none" has it off too).
                        isc.trace_python(bool(python), mode="full" if python == "python_full" else "default")

                def __exit__(self, *x):
                    return False

            res = measure(step, sets, Switch, a.rounds, a.steps, a.warm)
            lib.inferscope_cupti_set_activities(b"default")
            report("InferScope GPU collector", res, "none", batch)
        elif a.mode == "sampled":
            sampled_blocks(step, batch, a, isc)
        elif a.mode == "windows":
            session_windows(step, batch, a, isc)
        elif a.mode == "torch-profiler":
            from torch.profiler import ProfilerActivity, profile

            def enter(m):
                if m == "off":
                    return Nothing()
                return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])

            res = measure(step, ["off", "torch.profiler"], enter, a.rounds, a.steps, a.warm)
            report("torch.profiler (CPU+CUDA activities)", res, "off", batch)
        else:
            res = measure(step, ["plain"], lambda m: Nothing(), a.rounds, a.steps, a.warm)
            print(f"\n## no profiler, batch {batch}: median step {statistics.median(res[0]['plain']) * 1e3:.3f} ms")
        del step
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
