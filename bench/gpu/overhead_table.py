#!/usr/bin/env python3
"""The overhead table: every overhead budget of DESIGN.md measured by one command, each row with its 95 % interval
and a verdict only where the interval excludes the budget (docs/benchmarks.md, "Current figures").

    PYTHONPATH=build-gpu/python python3 bench/gpu/overhead_table.py --json table.json          # ~7 min on an H200
    PYTHONPATH=build-gpu/python python3 bench/gpu/overhead_table.py --decompose --json d.json  # ~6 min: where
        # full capture's cost goes (CUPTI parts, Python tracing, the system sampler, and how they interact)
    python3 bench/gpu/overhead_table.py --quick [--decompose]   # a smoke test of the same (~2 min)
    python3 bench/gpu/overhead_table.py --list                  # the groups, their windows and expected durations
    python3 bench/gpu/overhead_table.py --from-json table.json   # the table again from a run's raw windows

Not under iscope-run: each window's session is started and stopped in the measuring process (inferscope_py on
PYTHONPATH: the build's python/ folder).

Each row group runs in a process of its own (`--child`, started by this command): windows with collection on and
off, interleaved, the order drawn anew for each round from a fixed seed (printed), at least 30 rounds, each window's
figure the median of its timed steps (the mean for the long run, whose cost sits in a minority of its steps). The
statistics, the verdicts and the table are overhead_stats.py's. Rows that cannot run here (no torch, no
transformers, no GPU) print "skipped: <reason>". The command keeps within --budget-s: each group gets a share of
it, and a group whose share runs out stops after its current round (a row with fewer than 30 rounds gets no
verdict).
"""
import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import overhead_stats as st
from overhead_stats import Budget, Row

T0 = time.monotonic()
HERE = os.path.dirname(os.path.abspath(__file__))

# --- what is measured -------------------------------------------------------------------------------------------

FULL = {"mode": "full"}  # full capture, every other setting at its default
FLOOR = {"mode": "full", "python": False, "system": False, "cupti_activities": "kernel"}  # a bare CUPTI kernel session
# What the analysis reads of the GPU and nothing else: kernels, copies and memsets, the selected API calls (which
# name each launch's thread and caller); no memory or overhead records, no Python tracing, no system sampler.
LEAN = "kernel,memcpy,memset,runtime,driver"
GPU_EVIDENCE = {"mode": "full", "python": False, "system": False, "cupti_activities": LEAN}

DEFINITIONS = {
    "ratio": "per round, the window with the setting / the window without collection of the same round (a window's "
             "figure: the median of its timed steps; the long run's: the mean, its total time); the row's figure is "
             "the median over rounds, minus 1",
    "interval": "95 % percentile bootstrap over rounds (rounds drawn with replacement; every series of a row drawn "
                "with the same rounds), a fixed seed",
    "verdict": "'within budget' when the interval's upper end is below the budget, 'over budget' when its lower end "
               "is above it, 'not resolved' otherwise, and with fewer than 30 rounds",
    "above the floor": "median(full capture's ratio) - median(the floor's ratio), in points, both from the same "
                       "rounds of one process; the floor is a bare CUPTI kernel-only session "
                       "(cupti_activities=kernel, python=false, system=false)",
    "within noise": "the interval contains 0 and lies inside +-2 %; an interval wholly above 0 is a resolved cost "
                    "('over budget'), a wider one 'not resolved'",
    "host noise": "interquartile range / median of the group's windows without collection: how much the host "
                  "itself moved from window to window",
    "no collection": "no session at that window; once the process's first session attached CUPTI it stays "
                     "subscribed with every activity kind and callback off (InferScope never unsubscribes)",
    "torch.profiler": "its windows and their windows without it run in a process of their own: CUPTI allows one "
                      "subscriber per process, InferScope's stays subscribed after its first session, and Kineto "
                      "registers activity-buffer callbacks of its own; so its multiple of full capture compares two "
                      "processes, resampled independently",
}

# Nominal times on an H200 host (docs/benchmarks.md's runs), for the printed estimate and the groups' shares of
# --budget-s; each group prints what it measures once it runs.
DEFAULT_BUDGET_S, QUICK_BUDGET_S = 450.0, 180.0  # --budget-s when not given: the whole command's time
STARTUP_S = 15.0  # python, torch and transformers imported, CUDA initialised, the model built and warmed


def gpt2_step_s(batch, layers):
    return 0.0005 + layers * (0.00054 if batch <= 8 else 0.00075)


def sets_text(settings):
    """A window's settings as the docs write them (a switch group's windows are already text)."""
    if settings is None or isinstance(settings, str):
        return settings or "no session"
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items())


def group(name, title, runner, model, sets, rounds, warm, steps, step_s, window_s=0.03, stat="median",
          baseline="off", startup_s=STARTUP_S, **kw):
    """A row group: one process, its windows (`sets`: [label, settings]), rounds, and what its step is."""
    return dict(name=name, title=title, runner=runner, model=model, sets=sets, rounds=rounds, warm=warm, steps=steps,
                step_s=step_s, window_s=window_s, stat=stat, baseline=baseline, startup_s=startup_s, **kw)


def nominal_s(g):
    warm_s = g.get("warm_step_s", g["step_s"])
    per_window = [g["warm"] * warm_s + g["steps"] * g["step_s"] + (0 if s is None else g["window_s"])
                  for _, s in g["sets"]]
    return g["startup_s"] + g["rounds"] * sum(per_window)


def allowance_s(groups, i, left):
    """Group i's share of the time left: up to 1.5 x its expected time, less the later groups' start-up. So the groups
    come first in the order they are listed: a slow host or a long build leaves the last groups (the torch.profiler
    reference last of all) with fewer rounds or none, rather than every group a few rounds short of a verdict."""
    later = sum(g["startup_s"] for g in groups[i + 1:])
    return max(10.0, min(1.5 * nominal_s(groups[i]), left - later))


# Sampled and adaptive capture over a long run, from parts measured in short windows. Their cost falls in a minority
# of steps (a window of window_steps in every window_every_steps; adaptive's first baseline_steps in full), so a
# direct measurement needs windows of a whole long run, and 32 rounds of those left intervals of +-3 to +-8 % at the
# host's noise (docs/benchmarks.md): they cannot show a 1 % budget either way. The parts can: what a sampled session
# costs between its windows (BETWEEN_WINDOWS: no window ever opens) and what full capture costs, each in short
# windows over many rounds, combined with the defaults' duty cycle (docs/configuration.md: window_steps 10,
# window_every_steps 500, baseline_steps 100). Left out of the model, and small at these defaults: the two switches
# per window (~0.2 ms each, bench/gpu/noise_study.py), one step in 500 (a 6 ms step: under 0.02 %); a window's
# first step paying the switch (one step in 500); and the slow-step detector's update at each step's end, which a
# 6-step session never reaches (it waits for 200 steps of history): ~0.2 us of CPU a step, bench/runtime/
# bench_sampling. A slow step outside a window opens one more window, at most one per period (docs/sampled-mode.md):
# the bound row doubles the duty cycle for that case.
WINDOW_STEPS, WINDOW_EVERY_STEPS, BASELINE_STEPS = 10, 500, 100
BETWEEN_WINDOWS = {"mode": "sampled", "window_every_steps": 1000000000}
DUTY = WINDOW_STEPS / WINDOW_EVERY_STEPS
SAMPLED_PARTS = {"between windows": 1 - DUTY, "full": DUTY}  # a "model" row: weights that add to 1
SAMPLED_BOUND_PARTS = {"between windows": 1 - 2 * DUTY, "full": 2 * DUTY}
ADAPTIVE_RUN_STEPS = 1000


def adaptive_full_steps(run_steps, baseline=BASELINE_STEPS, window=WINDOW_STEPS, every=WINDOW_EVERY_STEPS):
    """Steps an adaptive run of `run_steps` records in full: the baseline, then a window every `every` steps counted
    from the baseline's close (lib/runtime/sampling/window_scheduler.cpp: the first periodic window falls due
    `every` steps after it), the last one cut at the run's end."""
    full = min(baseline, run_steps)
    start = baseline + every
    while start < run_steps:
        full += min(window, run_steps - start)
        start += every
    return full


_full_share = adaptive_full_steps(ADAPTIVE_RUN_STEPS) / ADAPTIVE_RUN_STEPS
ADAPTIVE_PARTS = {"full": _full_share, "between windows": 1 - _full_share}


def duty_groups(rounds, warm, steps):
    """Each window's figure is its mean step (stat "mean"), as the long group's: the budgets are of a long run's
    whole time, which counts the steps that hold a recurring cost (NVML's read, a calibration point) too."""
    return [group(f"duty-b{b}", f"GPT-2 fp16, batch {b}, sequence 128, 12 layers; sampled capture between its windows "
                                f"(window_every_steps=1e9: none opens) and full capture, windows of {warm} untimed + "
                                f"{steps} timed steps, each window a session of its own", "sessions", "gpt2",
                  [["off", None], ["full", FULL], ["between windows", BETWEEN_WINDOWS]], rounds, warm, steps,
                  gpt2_step_s(b, 12), stat="mean", batch=b, seq=128, layers=12) for b in (1, 32)]


def duty_rows():
    """Rows of kind "model": an overhead modelled from the parts, its verdict the model's (what it leaves out is
    listed above its constants)."""
    rows = []
    for b in (1, 32):
        name = f"duty-b{b}"
        rows += [
            Row(f"sampled between its windows, batch {b}", name, "overhead", {"between windows": 1},
                Budget("none", text="- (a part of the next rows)")),
            Row(f"sampled over a long run, modelled: {SAMPLED_PARTS['between windows']:.2f} x between windows + "
                f"{SAMPLED_PARTS['full']:.2f} x full capture, batch {b}", name, "model", SAMPLED_PARTS,
                Budget("at_most", 0.01, "<= 1 %")),
            Row(f"sampled, modelled with a slow-step window in every period (the most those open): "
                f"{SAMPLED_BOUND_PARTS['between windows']:.2f} x between + {SAMPLED_BOUND_PARTS['full']:.2f} x full, "
                f"batch {b}", name, "model", SAMPLED_BOUND_PARTS, Budget("none", text="- (the row above's bound)")),
            Row(f"adaptive (the default) over a {ADAPTIVE_RUN_STEPS:,}-step run, modelled: "
                f"{ADAPTIVE_PARTS['full']:.3f} x full capture + {ADAPTIVE_PARTS['between windows']:.3f} x between "
                f"windows, batch {b}", name, "model", ADAPTIVE_PARTS, Budget("at_most", 0.02, "<= 2 %")),
        ]
    return rows


GPT2_SETS = [["off", None], ["full", FULL], ["floor", FLOOR], ["gpu evidence", GPU_EVIDENCE]]


def floor_rows(name, b, prefix="", floor="floor: a bare CUPTI kernel-only session",
               full="full capture (mode=full, the defaults)"):
    """A GPT-2 group's rows against the budgets: the floor, full capture, full capture above the floor, and why."""
    return [
        Row(f"{prefix}{floor}, batch {b}", name, "overhead", {"floor": 1}, Budget("none", text="- (the floor)")),
        Row(f"{prefix}{full}, batch {b}", name, "overhead", {"full": 1},
            Budget("at_most", 0.05, "<= 5 % (and the next row)") if b >= 32 else
            Budget("none", text="the floor + 2 points: next row")),
        Row(f"{prefix}full capture above the floor, batch {b}", name, "contrast", {"full": 1, "floor": -1},
            Budget("at_most", 0.02, "<= 2 points")),
    ] + why_rows(prefix, name, b)


def generate_rows(prefix, name, nt, floor_note=""):
    """A generate() group's rows: full capture per call against its budget, the floor, and full above the floor."""
    return [Row(f"{prefix}generate() per call ({nt} new tokens), full capture", name, "overhead", {"full": 1},
                Budget("at_most", 0.05, "<= 5 %")),
            Row(f"{prefix}generate() per call: floor{floor_note}", name, "overhead", {"floor": 1},
                Budget("none", text="- (the floor)")),
            Row(f"{prefix}generate() per call: full capture above the floor", name, "contrast", {"full": 1, "floor": -1},
                Budget("at_most", 0.02, "<= 2 points"))]


def why_rows(prefix, name, b):
    """Why full capture is above the floor, from the 'gpu evidence' window of the same rounds: how much is CUPTI
    recording what the analysis reads (a session with only those records), and how much is the rest."""
    return [
        Row(f"{prefix}the GPU records the analysis reads (copies, memsets, API calls) above the floor, batch {b}", name,
            "contrast", {"gpu evidence": 1, "floor": -1}, Budget("none", text="- (why: CUPTI's part)")),
        Row(f"{prefix}full capture above those records (Python tracing, the sampler, memory records), batch {b}",
            name, "contrast", {"full": 1, "gpu evidence": -1}, Budget("none", text="- (why: InferScope's part)")),
    ]


def table_plan(a):
    """The table's groups and rows."""
    q = a.quick
    # Short windows, many rounds (bench/gpu/noise_study.py, docs/benchmarks.md "Why short windows"): the host's
    # speed drifts slowly but also jumps (7.5 to 6.0 ms between two windows of one round), and a round whose windows
    # straddle a jump gives a ratio far off. Windows of 2 + 4 steps (~70 ms) straddle fewer jumps than 2 + 20 did,
    # and 150 rounds let the median over rounds set those few aside (the long run, optional since the duty groups
    # model it from short windows, leaves the time for four windows a round).
    r_short, r_long = (4, 3) if q else (150, 32)
    warm, steps = (1, 5) if q else (2, 4)
    groups, rows = [], []
    for b in (1, 32):
        name = f"short-b{b}"
        groups.append(group(name, f"GPT-2 fp16, batch {b}, sequence 128, 12 layers; windows of {warm} untimed + "
                                  f"{steps} timed steps, each window a session of its own", "sessions", "gpt2",
                            GPT2_SETS, r_short, warm, steps, gpt2_step_s(b, 12), batch=b, seq=128, layers=12))
        rows += floor_rows(name, b)
    # The same rows in a session's steady state: each window's session first runs ~150 ms of untimed steps, past
    # what a session does once at its start (the sampler's first round reads every thread; its first machine and
    # NVML round comes at 100 ms; Python tracing names each code object once per session), then the same 4 timed
    # steps. The "off" window runs the same untimed steps.
    for b in (1, 32):
        name = f"steady-b{b}"
        sw = 2 if q else max(2, int(0.15 / gpt2_step_s(b, 12)) + 1)
        groups.append(group(name, f"GPT-2 fp16, batch {b}, sequence 128, 12 layers; windows of {sw} untimed steps "
                                  f"(~150 ms, past the session's start) + {steps} timed steps, each window a session "
                                  f"of its own", "sessions", "gpt2",
                            GPT2_SETS, r_short, sw, steps, gpt2_step_s(b, 12), batch=b, seq=128, layers=12,
                            optional=True))
        rows += floor_rows(name, b, "steady state: ", "floor", "full capture")
    gl, gw = (50, 256) if q else (750, 256)
    groups.append(group("graph", f"one CUDA graph of {2 * gl} kernels ({gl} x Linear({gw}) + ReLU, fp16, batch 8) "
                                 f"replayed per step, captured in a session started before CUDA; windows of {warm} + "
                                 f"{5 if q else 10} steps", "sessions", "graph", [["off", None], ["full", FULL]],
                        4 if q else 120, warm, 5 if q else 10, 0.0036 * gl / 750 + 0.0002, batch=8, graph_layers=gl,
                        graph_width=gw))
    rows.append(Row("CUDA-graph replay, full capture (graph-level records)", "graph", "overhead", {"full": 1},
                    Budget("noise", st.NOISE_HALF_WIDTH, "within noise (interval holds 0, inside +-2 %)")))
    groups += duty_groups(r_short, warm, steps)
    rows += duty_rows()
    ls = 60 if q else a.long_steps
    groups.append(group("long", f"a long run: GPT-2 fp16, batch 1, sequence 128, {a.long_layers} layers; each window "
                                f"one whole session of {ls} marked steps (start and stop untimed); figure: the "
                                f"window's mean step", "sessions", "gpt2",
                        [["off", None], ["adaptive", {"mode": "adaptive"}], ["sampled", {"mode": "sampled"}]],
                        r_long, 0, ls, gpt2_step_s(1, a.long_layers), window_s=0.1, stat="mean", batch=1, seq=128,
                        layers=a.long_layers, optional=True))
    rows += [Row(f"adaptive (the default) over a {ls}-step run", "long", "overhead", {"adaptive": 1},
                 Budget("at_most", 0.02, "<= 2 %")),
             Row(f"sampled over a {ls}-step run", "long", "overhead", {"sampled": 1}, Budget("at_most", 0.01, "<= 1 %"))]
    nt, calls = (4, 1) if q else (32, 1)
    groups.append(group("generate", f"Hugging Face generate(), GPT-2 fp16 (12 layers), batch 1, prompt 128, {nt} new "
                                    f"tokens per call; windows of one untimed 2-token call + {calls} timed calls",
                        "sessions", "generate", [["off", None], ["full", FULL], ["floor", FLOOR]], 3 if q else 60,
                        1, calls, 0.0112 * nt, **dict(GEN, new_tokens=nt)))
    # The floor in the same rounds says how much of generate()'s 5 % budget CUPTI's kernel records alone take.
    rows += generate_rows("", "generate", nt, " (a bare CUPTI kernel-only session)")
    # The same call past the session's start (see the steady groups): ~150 ms of untimed 2-token calls first.
    groups.append(group("generate-steady", f"Hugging Face generate(), as the row above; windows of "
                                           f"{1 if q else 5} untimed 2-token calls (~150 ms, past the session's "
                                           f"start) + {calls} timed calls", "sessions", "generate",
                        [["off", None], ["full", FULL], ["floor", FLOOR]], 3 if q else 60, 1 if q else 5, calls,
                        0.0112 * nt, optional=True, **dict(GEN, new_tokens=nt)))
    rows += generate_rows("steady state: ", "generate-steady", nt)
    for b in [int(x) for x in a.torch_batches.split(",") if x]:
        name = f"torch-b{b}"
        groups.append(group(name, f"torch.profiler (activities {a.torch_activities}, record_shapes off) on GPT-2 fp16, "
                                  f"batch {b}, in a process of its own (see 'torch.profiler' below); windows of {warm} "
                                  f"+ {steps} steps", "torch", "gpt2",
                            [["off", None], ["torch.profiler", f"profile(activities={a.torch_activities}, "
                                                               f"record_shapes=False)"]],
                            3 if q else 40, warm, steps, gpt2_step_s(b, 12) * 1.3, window_s=1.0, batch=b, seq=128,
                            layers=12, activities=a.torch_activities))
        rows += [Row(f"torch.profiler, batch {b} (own process)", name, "overhead", {"torch.profiler": 1},
                     Budget("none", text="- (reference)")),
                 Row(f"torch.profiler's overhead / full capture's, batch {b}", name, "multiple", {"torch.profiler": 1},
                     Budget("at_least", 6.0, ">= 6x (the issue's goal)"), den_group=f"short-b{b}", den_set="full")]
    # No GPU needed: a pure-Python step, to smoke-test the whole command on a development machine.
    groups.append(group("cpu", "a pure-Python step of about 2 ms (no GPU); windows of 1 + 10 steps", "sessions",
                        "cpu", [["off", None], ["full", FULL], ["between windows", BETWEEN_WINDOWS]], 4 if q else 30,
                        1, 10, 0.003, startup_s=2.0, batch=2, optional=True))
    rows += [Row("full capture on a pure-Python step (no GPU; its generator expression is traced item by item)",
                 "cpu", "overhead", {"full": 1}, Budget("none", text="- (checks the command, not a budget)")),
             Row("sampled capture on a pure-Python step, from its parts (checks the duty rows' settings)", "cpu",
                 "model", SAMPLED_PARTS, Budget("none", text="- (checks the command, not a budget)"))]
    return groups, rows


# The decomposition's windows inside one session, switched at run time: CUPTI's activity set (an ActivitySet
# specification, lib/collect/cupti/cupti_collector.hpp) and Python tracing ('+python', '+python_full' for every
# function, '+python_depth1' recording only the outermost call: the hooks run, almost nothing is written).
SWITCH_SETS = ["none", "kernel", "kernel,runtime,driver", LEAN, LEAN + ",memory", "default", "default,overhead",
               "default,api_activity",
               "none+python",
               "kernel+python", "kernel,runtime,driver+python", "default+python", "default,api_activity+python",
               "default+python_depth1", "none+python_full", "default+python_full"]


def switch_rows(name, b):
    """Parts of full capture's GPU and Python cost, each against the same session recording nothing ('none')."""
    part = lambda label, terms, const=0.0: Row(f"{label}, batch {b}", name, "contrast", terms,  # noqa: E731
                                               Budget("effect", text="-"), const=const)
    ratio = lambda label, s: Row(f"{label}, batch {b}", name, "overhead", {s: 1}, Budget("effect", text="-"))  # noqa: E731
    return [
        ratio("CUPTI kernel records (the floor)", "kernel"),
        part("+ runtime and driver API callbacks, over the floor", {"kernel,runtime,driver": 1, "kernel": -1}),
        part("+ the other activity kinds of the default set (memcpy, memset, memory, graph), over that",
             {"default": 1, "kernel,runtime,driver": -1}),
        part("  of which copy and memset records", {LEAN: 1, "kernel,runtime,driver": -1}),
        part("  of which allocation records (memory)", {LEAN + ",memory": 1, LEAN: -1}),
        part("  the rest (graph: off in a process that used CUDA first, so this should be 0)",
             {"default": 1, LEAN + ",memory": -1}),
        part("CUPTI's overhead records, over the default set (no longer in it)", {"default,overhead": 1,
                                                                                   "default": -1}),
        ratio("the default GPU set", "default"),
        part("API calls as activity records instead of callbacks (default,api_activity - default)",
             {"default,api_activity": 1, "default": -1}),
        ratio("Python tracing alone (default filters)", "none+python"),
        part("Python tracing on top of the default GPU set", {"default+python": 1, "default": -1}),
        part("interaction: kernel records x Python tracing", {"kernel+python": 1, "kernel": -1, "none+python": -1}, 1.0),
        part("interaction: API callbacks (with kernel records) x Python tracing",
             {"kernel,runtime,driver+python": 1, "kernel,runtime,driver": -1, "none+python": -1}, 1.0),
        part("interaction: the default GPU set x Python tracing", {"default+python": 1, "default": -1,
                                                                  "none+python": -1}, 1.0),
        part("interaction: default,api_activity x Python tracing",
             {"default,api_activity+python": 1, "default,api_activity": -1, "none+python": -1}, 1.0),
        part("Python records written (depth unlimited - depth 1), on the default GPU set",
             {"default+python": 1, "default+python_depth1": -1}),
        ratio("Python tracing alone, every function (python_mode=full)", "none+python_full"),
        part("interaction: the default GPU set x Python tracing of every function",
             {"default+python_full": 1, "default": -1, "none+python_full": -1}, 1.0),
    ]


def noff(**kw):
    return dict(FULL, **kw)


# The decomposition in whole sessions (the system sampler cannot be switched within one): a 2 x 2 x 2 design of
# CUPTI, Python tracing and the system sampler, each session against no session, and the system sampler's parts.
SESSION_SETS = [
    ["off", None], ["full", FULL], ["no python", noff(python=False)], ["no system", noff(system=False)],
    ["no cupti", noff(cupti=False)], ["cupti only", noff(python=False, system=False)],
    ["python only", noff(cupti=False, system=False)], ["system only", noff(cupti=False, python=False)],
    ["writer only", noff(cupti=False, python=False, system=False)], ["full, nvml off", noff(nvml=False)],
    ["full, thread_sample_us=0", noff(thread_sample_us=0)], ["full, ring buffer", noff(buffer_mode="ring")],
    ["full, 128 KiB thread rings", noff(thread_buffer_kb=128)],
]


def session_rows(name, b):
    part = lambda label, terms, const=0.0: Row(f"{label}, batch {b}", name, "contrast", terms,  # noqa: E731
                                               Budget("effect", text="-"), const=const)
    ratio = lambda label, s: Row(f"{label}, batch {b}", name, "overhead", {s: 1}, Budget("effect", text="-"))  # noqa: E731
    inter = lambda a_, b_, both, neither: {both: 1, a_: -1, b_: -1, neither: 1}  # noqa: E731
    return [
        ratio("full capture", "full"),
        ratio("a session's writer alone (cupti, python and system off)", "writer only"),
        part("CUPTI (default set) over the writer alone", {"cupti only": 1, "writer only": -1}),
        part("Python tracing over the writer alone", {"python only": 1, "writer only": -1}),
        part("the system sampler over the writer alone", {"system only": 1, "writer only": -1}),
        part("the issue's test: full - (no python) - (no cupti) + no session",
             {"full": 1, "no python": -1, "no cupti": -1}, 1.0),
        part("interaction CUPTI x Python, system off", inter("cupti only", "python only", "no system", "writer only")),
        part("interaction CUPTI x Python, system on", inter("no python", "no cupti", "full", "system only")),
        part("interaction CUPTI x system, python off", inter("cupti only", "system only", "no python", "writer only")),
        part("interaction Python x system, cupti off", inter("python only", "system only", "no cupti", "writer only")),
        part("NVML sampling (full - full with nvml off)", {"full": 1, "full, nvml off": -1}),
        part("the 1 kHz thread sampling (full - full with thread_sample_us=0)", {"full": 1,
                                                                                 "full, thread_sample_us=0": -1}),
        part("streaming the dump (full - full in ring mode)", {"full": 1, "full, ring buffer": -1}),
        part("1 MiB thread rings against 128 KiB (full - full with 128 KiB)", {"full": 1,
                                                                               "full, 128 KiB thread rings": -1}),
    ]


# The system sampler's parts, switched within one session of full capture (inferscope_system_set_parts,
# lib/collect/system/sampler_parts.hpp); every window names its tick period, since a period set stays set.
SYSTEM_SETS = ["none", "rounds", "rounds,nvml", "rounds,ticks", "rounds,ticks,blocked_in", "rounds,ticks,exact_clock",
               "all", "all,tick_us=4000"]


def system_rows(name, b):
    """The sampler's cost and its parts, each against the same session with the sampler paused ('none')."""
    part = lambda label, terms: Row(f"{label}, batch {b}", name, "contrast", terms,  # noqa: E731
                                    Budget("effect", text="-"))
    ratio = lambda label, s: Row(f"{label}, batch {b}", name, "overhead", {s: 1}, Budget("effect", text="-"))  # noqa: E731
    return [
        ratio("the system sampler, every part (as a recording runs it)", "all"),
        ratio("  its 10 ms rounds alone (process, threads, children, machine; no NVML)", "rounds"),
        part("  NVML, over the rounds", {"rounds,nvml": 1, "rounds": -1}),
        part("  the 1 kHz thread ticks (schedstat only), over the rounds", {"rounds,ticks": 1, "rounds": -1}),
        part("  what known threads are blocked in, over the ticks", {"rounds,ticks,blocked_in": 1, "rounds,ticks": -1}),
        part("  the threads' CPU-time clocks, over the ticks", {"rounds,ticks,exact_clock": 1, "rounds,ticks": -1}),
        part("every part with ticks every 4 ms instead of 1 ms (all - all at 4 ms)", {"all": 1,
                                                                                      "all,tick_us=4000": -1}),
    ]


def decompose_plan(a):
    q = a.quick
    # Short windows and many rounds, as the table's (table_plan). Switching within one session costs ~0.2 ms and
    # needs no session start, so its windows can be shorter still: one untimed step after the switch, two timed.
    warm, steps = (1, 5) if q else (2, 4)

    def switch(b, rounds):
        warm, steps = (1, 5) if q else (1, 2)
        return group(f"switch-b{b}", f"GPT-2 fp16, batch {b}, 12 layers; one session (python, system off at start, "
                                     f"ring buffer) whose CUPTI set and Python tracing are switched per window; "
                                     f"windows of {warm} + {steps} steps; baseline: the session recording nothing",
                     "switch", "gpt2", [[s, s] for s in SWITCH_SETS], 3 if q else rounds, warm, steps,
                     gpt2_step_s(b, 12) * 1.04, window_s=0.005, baseline="none", batch=b, seq=128, layers=12)

    sessions = group("sessions-b1", f"GPT-2 fp16, batch 1, 12 layers; each window a session of its own (mode=full "
                                    f"and the settings named); windows of {warm} + {steps} steps", "sessions",
                     "gpt2", SESSION_SETS, 3 if q else 90, warm, steps, gpt2_step_s(1, 12) * 1.03, batch=1,
                     seq=128, layers=12)
    def system(b, rounds):
        # Windows of at least ~110 ms: NVML is read every 100 ms, so each window holds about one NVML read. The
        # window's figure is its mean step: the median of 12-16 steps would leave out the one step that holds it.
        warm, steps = (1, 5) if q else (2, max(4, int(0.11 / gpt2_step_s(b, 12)) + 1))
        return group(f"system-b{b}", f"GPT-2 fp16, batch {b}, 12 layers; one session of full capture (ring buffer) "
                                     f"whose system sampler's parts are switched per window; windows of {warm} + "
                                     f"{steps} steps; baseline: the same session with the sampler paused",
                     "system", "gpt2", [[s, s] for s in SYSTEM_SETS], 3 if q else rounds, warm, steps,
                     gpt2_step_s(b, 12) * 1.1, window_s=0.002, stat="mean", baseline="none", optional=True, batch=b,
                     seq=128, layers=12)

    # Batch 32 last: it is the group a short budget trims.
    groups = [switch(1, 150), sessions, system(1, 60), system(32, 50), switch(32, 100)]
    rows = (switch_rows("switch-b1", 1) + session_rows("sessions-b1", 1) + system_rows("system-b1", 1) +
            system_rows("system-b32", 32) + switch_rows("switch-b32", 32))
    gen_groups, gen_rows = generate_decompose_plan(q)
    copy_groups, copy_rows = copies_plan(q)
    return groups + gen_groups + copy_groups, rows + gen_rows + copy_rows


# Copies and memsets apart (optional groups copies-b1, copies-b32): together they cost about 2 points at batch 32 in
# the switched decomposition although a GPT-2 step makes 1 copy and 24 memsets against 219 kernels, so which kind
# costs, and whether it costs per record or for being on at all, decides what can be done about it.
COPY_SETS = ["none", "kernel,runtime,driver", "kernel,runtime,driver,memcpy", "kernel,runtime,driver,memset", LEAN]


def copies_plan(q):
    groups, rows = [], []
    for b in (1, 32):
        name = f"copies-b{b}"
        steps = 5 if q else 2
        groups.append(group(name, f"GPT-2 fp16, batch {b}, 12 layers; one session (python, system off) whose CUPTI set "
                                  f"is switched per window; windows of 1 + {steps} steps; baseline: the session "
                                  f"recording nothing", "switch", "gpt2", [[s, s] for s in COPY_SETS],
                            3 if q else 300, 1, steps, gpt2_step_s(b, 12) * 1.04, window_s=0.005, baseline="none",
                            optional=True, batch=b, seq=128, layers=12))
        krd = "kernel,runtime,driver"
        part = lambda label, terms: Row(f"{label}, batch {b}", name, "contrast", terms,  # noqa: E731
                                        Budget("effect", text="-"))
        rows += [part("copy records (memcpy) over kernels and API callbacks", {krd + ",memcpy": 1, krd: -1}),
                 part("memset records over kernels and API callbacks", {krd + ",memset": 1, krd: -1}),
                 part("both over kernels and API callbacks", {LEAN: 1, krd: -1}),
                 part("interaction: memcpy x memset", {LEAN: 1, krd + ",memcpy": -1, krd + ",memset": -1, krd: 1})]
    return groups, rows


# generate()'s parts (optional groups: name them with --groups). Its full capture sat 3.6 to 6.6 points above its
# floor in two H200 runs (docs/benchmarks.md): each new token is a short forward of small kernels plus Python calls
# of the generation loop (cache updates, logits processors, stopping criteria) that a step does not make.
GEN_SWITCH_SETS = ["none", "kernel", "kernel,runtime,driver", LEAN, "default", "none+python", "default+python",
                   "default+python_depth1"]
GEN = dict(batch=1, seq=128, new_tokens=32, warm_tokens=2, warm_step_s=0.035, startup_s=20.0)


def generate_decompose_plan(q):
    nt = 4 if q else GEN["new_tokens"]
    gen = dict(GEN, new_tokens=nt)
    # Switching costs ~0.2 ms and no session start, so the switched windows take three timed calls: one call per
    # window left every difference 8-14 points wide on the H200 (2026-12-03; three did not narrow them either).
    calls = 1 if q else 3
    switch = group("switch-generate", f"Hugging Face generate(), GPT-2 fp16 (12 layers), batch 1, prompt 128, {nt} "
                                      f"new tokens; one session (python, system off at start, ring buffer) whose CUPTI "
                                      f"set and Python tracing are switched per window; windows of one untimed "
                                      f"2-token call + {calls} timed calls; baseline: the session recording nothing",
                   "switch", "generate", [[s, s] for s in GEN_SWITCH_SETS], 3 if q else 40, 1, calls, 0.0112 * nt,
                   window_s=0.005, baseline="none", optional=True, **gen)
    # The same parts on calls of 8 new tokens (~60-90 ms on the H200): a round of eight windows then spans ~2 s of
    # the host's drift instead of ~8 s (a GPT-2 switched round spans ~0.4 s), and 120 rounds fit about the same time.
    short_nt = 4 if q else 8
    switch_short = group("switch-generate-8", f"generate() as above with {short_nt} new tokens per call; windows of "
                                              f"one untimed 2-token call + {calls} timed calls, switched as above",
                         "switch", "generate", [[s, s] for s in GEN_SWITCH_SETS], 3 if q else 120, 1, calls,
                         0.0112 * short_nt, window_s=0.005, baseline="none", optional=True,
                         **dict(gen, new_tokens=short_nt))
    sessions = group("sessions-generate", f"generate() as above; each window a session of its own (the settings "
                                          f"named); windows of one untimed 2-token call + 1 timed call",
                     "sessions", "generate",
                     [["off", None], ["full", FULL], ["floor", FLOOR], ["gpu evidence", GPU_EVIDENCE],
                      ["no python", noff(python=False)], ["no system", noff(system=False)]],
                     3 if q else 60, 1, 1, 0.0112 * nt, optional=True, **gen)
    part = lambda label, name, terms: Row(f"generate(): {label}", name, "contrast", terms,  # noqa: E731
                                          Budget("effect", text="-"))
    ratio = lambda label, name, s: Row(f"generate(): {label}", name, "overhead", {s: 1},  # noqa: E731
                                       Budget("effect", text="-"))
    se = "sessions-generate"
    rows = []
    for sw, tag in (("switch-generate", ""), ("switch-generate-8", f" ({short_nt}-token calls)")):
        rows += [
            ratio(f"CUPTI kernel records (the floor), in one session{tag}", sw, "kernel"),
            part(f"+ runtime and driver API callbacks, over the floor{tag}", sw,
                 {"kernel,runtime,driver": 1, "kernel": -1}),
            part(f"+ copy and memset records, over that{tag}", sw, {LEAN: 1, "kernel,runtime,driver": -1}),
            part(f"+ the rest of the default set (memory, graph), over that{tag}", sw, {"default": 1, LEAN: -1}),
            ratio(f"the default GPU set{tag}", sw, "default"),
            ratio(f"Python tracing alone (default filters){tag}", sw, "none+python"),
            part(f"Python tracing on top of the default GPU set{tag}", sw, {"default+python": 1, "default": -1}),
            part(f"  of which Python records written (depth unlimited - depth 1){tag}", sw,
                 {"default+python": 1, "default+python_depth1": -1}),
        ]
    rows += [
        ratio("full capture, each window a session", se, "full"),
        ratio("the floor, each window a session", se, "floor"),
        part("full capture above the floor", se, {"full": 1, "floor": -1}),
        part("the GPU records the analysis reads, above the floor", se, {"gpu evidence": 1, "floor": -1}),
        part("Python tracing: full capture - full capture without it", se, {"full": 1, "no python": -1}),
        part("the system sampler: full capture - full capture without it", se, {"full": 1, "no system": -1}),
    ]
    return [switch, switch_short, sessions], rows


# --- the child: one group's windows in this process ---------------------------------------------------------------


class Skip(Exception):
    """The group cannot run here; the message says why."""


def need_inferscope():
    try:
        import inferscope_py as isc
    except ImportError as e:
        raise Skip(f"inferscope_py cannot be imported ({e}); put the build's python/ folder on PYTHONPATH")
    if isc.is_active():
        raise Skip("a session already records in this process: run this command without iscope-run or "
                   "INFERSCOPE_ENABLE (it starts its own sessions)")
    return isc


def need_torch():
    try:
        import torch
    except ImportError:
        raise Skip("torch is not installed")
    return torch


def need_gpu(torch):
    if not torch.cuda.is_available():
        raise Skip("no GPU: torch.cuda.is_available() is False")


def need_transformers():
    try:
        import transformers
    except ImportError:
        raise Skip("transformers is not installed")
    return transformers


class Child:
    """One row group: builds its step, then runs its rounds of windows, rewriting its part (the raw windows) after
    every round so that a process stopped by a time limit leaves the rounds it completed."""

    def __init__(self, spec):
        self.g = spec
        self.tmp = tempfile.mkdtemp(prefix=f"iscope-{spec['name']}-")
        self.part = {k: spec[k] for k in ("name", "title", "runner", "stat", "baseline", "warm", "steps")}
        self.part.update(sets={label: sets_text(s) for label, s in spec["sets"]}, seed=spec["seed"], rounds=0,
                         windows={label: {"median": [], "mean": []} for label, _ in spec["sets"]}, notes=[],
                         orders=[], env={}, session_ms={}, checks={})
        self.isc = None
        self.mark = None  # inferscope_py when the steps are marked scope("step")

    def save(self):
        path = self.g["part"]
        with open(path + ".tmp", "w") as f:
            json.dump(self.part, f)
        os.replace(path + ".tmp", path)

    def note(self, text):
        self.part["notes"].append(text)
        print(f"# {self.g['name']}: {text}", flush=True)

    def check(self, key, detail):
        """What a window recorded (dump contents, collector status lines): in the JSON, not on the screen."""
        self.part["checks"][key] = detail

    # -- the step --

    def build(self):
        g = self.g
        runner, model = g["runner"], g["model"]
        torch = None
        if model != "cpu":
            # torch and transformers before inferscope_py, the order every GPU run of gpt2_overhead.py had: each
            # brings shared libraries with initial-exec thread-locals, which a late dlopen must fit into glibc's small
            # static TLS reserve.
            torch = need_torch()
            if model in ("gpt2", "generate"):
                self.part["env"]["transformers"] = need_transformers().__version__
        if runner != "torch":  # the torch.profiler process never loads InferScope (CUPTI: one subscriber)
            self.isc = self.mark = need_inferscope()
        if model == "cpu":
            from overhead_common import build_cpu_step
            self.step = build_cpu_step(g["batch"])
            self.part["env"] = {"python": sys.version.split()[0], "device": "none (pure-Python step)"}
            return
        early = None
        if model == "graph":
            from overhead_common import start_before_cuda
            early = os.path.join(self.tmp, "early.iscope")
            start_before_cuda(self.isc, early)  # before CUDA's first call, torch.cuda.is_available() included
        try:
            need_gpu(torch)
            import overhead_common as oc
            if model == "gpt2":
                self.step = oc.build_step(g["batch"], g["seq"], "cuda", g["layers"])
            elif model == "generate":
                call = oc.build_generate_call(g["batch"], g["seq"], "cuda", g["new_tokens"])
                self.step, self.warm_step = call, (lambda: call(g["warm_tokens"]))
            else:
                self.step = oc.build_graph_step(g["batch"], g["graph_layers"], g["graph_width"], "cuda")
            for _ in range(2 if model == "generate" else 10):
                self.step()
            if model == "generate":
                self.note(f"each generate() call made {self.step.tokens_made} new tokens")
        finally:
            if early:
                self.isc.stop()
        if early:
            self.check("early session (the graph captured in it, before CUDA)", self.dump_summary(early))
        self.part["env"].update(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                                python=sys.version.split()[0])
        if self.isc:
            self.part["env"]["inferscope"] = self.isc.__version__

    def body(self):
        """One window's timed step times (its untimed warm-up first)."""
        from overhead_common import run_steps
        g = self.g
        if g["model"] == "generate":
            run_steps(self.warm_step, g["warm"], self.mark)
            return run_steps(self.step, g["steps"], self.mark)
        return run_steps(self.step, g["warm"] + g["steps"], self.mark)[g["warm"]:]

    def body_with_thread_cpu(self, tid, shares, label):
        """self.body(), and the share of its wall time (untimed steps included) that thread `tid` spent on a CPU,
        appended to shares[label]; nothing when there is no such thread or it went away."""
        from overhead_common import thread_run_ns
        c0, t0 = thread_run_ns(tid) if tid else None, time.perf_counter_ns()
        times = self.body()
        c1, t1 = thread_run_ns(tid) if tid else None, time.perf_counter_ns()
        if c0 is not None and c1 is not None:
            shares.setdefault(label, []).append((c1 - c0) / max(1, t1 - t0))
        return times

    def note_sampler_cpu(self, shares):
        """The note on the sampler thread's CPU share per window (median per label), when any was read."""
        if any(shares.values()):
            self.note("the sampler thread's CPU time per window (median share of the window's wall time, its untimed "
                      "steps included): " +
                      ", ".join(f"{k} {100 * statistics.median(v):.2f} %" for k, v in shares.items() if v))
        else:
            self.note("the sampler thread's CPU time: not read (no iscope-system thread found)")

    # -- the runners: window(label) -> timed step times --

    def sessions(self):
        from overhead_common import SessionWindow, find_thread
        settings = dict(self.g["sets"])
        last = {}
        cpu = self.part.setdefault("sampler_cpu_share", {})

        def window(label):
            if settings[label] is None:
                return self.body()
            path = os.path.join(self.tmp, label.replace(" ", "_").replace(",", "").replace("=", "") + ".iscope")
            if os.path.exists(path):
                os.unlink(path)  # the label's latest dump stays for the check at the end
            with SessionWindow(self.isc, path, settings[label]) as w:
                # No such thread when the setting has the system sampler off.
                times = self.body_with_thread_cpu(find_thread("iscope-system"), cpu, label)
            ms = self.part["session_ms"].setdefault(label, {"start": [], "stop": [], "dump_mb": []})
            ms["start"].append(w.start_ms), ms["stop"].append(w.stop_ms), ms["dump_mb"].append(w.dump_mb)
            last[label] = path
            return times

        def finish():
            if cpu:
                self.note_sampler_cpu(cpu)
            for label, path in last.items():
                d = self.dump_summary(path)
                self.check(label, d)
                per = f" ({1e6 * d['mb'] / d['records']:.1f} bytes per record)" if d.get("records") else ""
                cupti = d.get("collectors", {}).get("cupti", "-")[:70]
                self.note(f"'{label}': last window's dump {d.get('mb', 0):.1f} MB, {d.get('records', '?')} records"
                          f"{per}, {d.get('dropped', '?')} dropped; cupti {cupti}")

        return window, finish

    def switch(self):
        from overhead_common import runtime_library
        path = os.path.join(self.tmp, "switch.iscope")
        # Ring mode: the many windows would otherwise stream a dump of hundreds of MB.
        if not self.isc.start(output=path, mode="full", python=False, system=False, cupti_activities="none",
                              buffer_mode="ring", trace_size_mb=64):
            raise RuntimeError("inferscope_py.start() failed")
        lib = runtime_library()
        status = lib.inferscope_cupti_status().decode()
        if not status.startswith("on"):
            self.isc.stop()
            raise RuntimeError(f"GPU collection is not on in the session: {status}")
        seen = set()

        def window(label):
            acts, _, py = label.partition("+")
            rc = lib.inferscope_cupti_set_activities(acts.encode())
            if rc != 0:
                raise RuntimeError(f"inferscope_cupti_set_activities({acts}) = {rc}: "
                                   f"{lib.inferscope_cupti_status().decode()}")
            if py:
                self.isc.trace_python(True, mode="full" if py == "python_full" else "default",
                                      max_depth=1 if py == "python_depth1" else 0)
            else:
                self.isc.trace_python(False)
            if label not in seen:
                seen.add(label)
                self.check(label, {"cupti": lib.inferscope_cupti_status().decode()})
            return self.body()

        def finish():
            lib.inferscope_cupti_set_activities(b"none")
            self.isc.trace_python(False)
            self.isc.stop()
            d = self.dump_summary(path)
            self.check("session", d)
            self.note(f"the session's dump (a ring of the last 64 MB): {d.get('records', '?')} records, "
                      f"{d.get('dropped', '?')} dropped")
            os.unlink(path)

        return window, finish

    def system(self):
        from overhead_common import find_thread, runtime_library
        path = os.path.join(self.tmp, "system.iscope")
        if not self.isc.start(output=path, mode="full", buffer_mode="ring", trace_size_mb=64):
            raise RuntimeError("inferscope_py.start() failed")
        lib = runtime_library()
        if lib.inferscope_system_set_parts(b"none") != 0:
            self.isc.stop()
            raise RuntimeError("the system sampler is not running in the session (inferscope_system_set_parts)")
        sampler = find_thread("iscope-system")
        cpu = self.part.setdefault("sampler_cpu_share", {})

        def window(label):
            spec = label if "tick_us" in label or label == "none" else label + ",tick_us=1000"
            rc = lib.inferscope_system_set_parts(spec.encode())
            if rc != 0:
                raise RuntimeError(f"inferscope_system_set_parts({spec}) = {rc}")
            return self.body_with_thread_cpu(sampler, cpu, label)

        def finish():
            lib.inferscope_system_set_parts(b"all")
            self.isc.stop()
            d = self.dump_summary(path)
            self.check("session", d)
            self.note_sampler_cpu(cpu)
            os.unlink(path)

        return window, finish

    def torch_profiler(self):
        from torch.profiler import ProfilerActivity, profile
        acts = [{"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}[w] for w in self.g["activities"].split(",")]
        with profile(activities=acts, record_shapes=False):  # Kineto's first start is slow: not in a window
            self.body()
        last = []

        def window(label):
            if label == "off":
                return self.body()
            with profile(activities=acts, record_shapes=False) as prof:
                times = self.body()
            last[:] = [prof]
            return times

        def finish():
            if last:
                n = sum(1 for e in last[0].events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
                self.note(f"torch.profiler's last window recorded {n} CUDA events")

        return window, finish

    # -- checks of what the windows recorded --

    def dump_summary(self, path):
        """A dump's size, record counts per kind, drops and collector status lines (a check, not the measurement:
        an unreadable dump is said, not fatal)."""
        try:
            s = self.isc._native._dump_stats(path)
            mb = os.path.getsize(path) / 1e6
            # _read_dump builds a dict per record: the collectors' lines only from a small dump.
            collectors = self.isc._native._read_dump(path)["collectors"] if mb < 16 else {"note": "not read (large)"}
            return {"mb": mb, "complete": s["complete"], "records": s["records"], "dropped": s["dropped"],
                    "kinds": s["kinds"], "collectors": collectors}
        except Exception as e:
            return {"error": f"could not read {path}: {e}"}

    # -- the rounds --

    def run(self):
        g = self.g
        self.build()
        window, finish = {"sessions": self.sessions, "switch": self.switch, "system": self.system,
                          "torch": self.torch_profiler}[g["runner"]]()
        labels = [label for label, _ in g["sets"]]
        orders = st.round_orders(labels, g["rounds"], g["seed"])
        allowance = g["allowance_s"]
        last_round = 0.0
        try:
            for r, order in enumerate(orders):
                elapsed = time.monotonic() - T0
                if r and elapsed + 1.2 * last_round > allowance:
                    self.note(f"stopped after {r} of {g['rounds']} rounds: its share of the time budget "
                              f"({allowance:.0f} s) is spent")
                    break
                t0 = time.monotonic()
                for label in order:
                    times = window(label)
                    self.part["windows"][label]["median"].append(statistics.median(times))
                    self.part["windows"][label]["mean"].append(statistics.mean(times))
                self.part["orders"].append(order)
                self.part["rounds"] = r + 1
                self.save()
                last_round = time.monotonic() - t0
                if r == 0:
                    self.note(f"round 1 took {last_round:.2f} s: {g['rounds']} rounds take about "
                              f"{elapsed + last_round * g['rounds']:.0f} s in all (share {allowance:.0f} s)")
                elif (r + 1) % 10 == 0:
                    print(f"# {g['name']}: {r + 1} rounds, {time.monotonic() - T0:.0f} s", flush=True)
        finally:
            finish()
            self.save()
            shutil.rmtree(self.tmp, ignore_errors=True)


def child_main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    child = Child(spec)
    try:
        child.run()
    except Skip as e:
        child.part["skipped"] = str(e)
    except Exception as e:
        traceback.print_exc()
        why = f"{type(e).__name__}: {e}"
        if child.part["rounds"]:
            child.part["notes"].append(f"stopped by an error after {child.part['rounds']} rounds: {why}")
        else:
            child.part["failed"] = why
    child.save()
    return 0


# --- the parent: groups in turn, then the table -------------------------------------------------------------------


def run_groups(groups, a):
    parts = {}
    work = tempfile.mkdtemp(prefix="iscope-table-")
    for i, g in enumerate(groups):
        name = g["name"]
        left = a.budget_s - (time.monotonic() - T0)
        if left <= 10:
            parts[name] = {"skipped": f"the command's time budget (--budget-s {a.budget_s:.0f}) was spent"}
            continue
        share = allowance_s(groups, i, left)
        spec = dict(g, seed=st.group_seed(a.seed, name), allowance_s=share, part=os.path.join(work, name + ".json"))
        print(f"\n# group {name} ({i + 1} of {len(groups)}): {g['title']}; {g['rounds']} rounds, order seed "
              f"{spec['seed']}; expected {nominal_s(g):.0f} s, share {share:.0f} s", flush=True)
        with open(os.path.join(work, name + ".spec.json"), "w") as f:
            json.dump(spec, f)
        try:
            rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", f.name],
                                timeout=share + 90).returncode
        except subprocess.TimeoutExpired:
            rc = "killed by the time limit"
        try:
            with open(spec["part"]) as f:
                parts[name] = json.load(f)
        except (OSError, ValueError):
            parts[name] = {"failed": f"its process ended ({rc}) before writing any result"}
        if rc != 0 and parts[name].get("rounds"):
            parts[name].setdefault("notes", []).append(f"its process ended with {rc}")
        parts[name]["elapsed_s"] = round(time.monotonic() - T0, 1)
    shutil.rmtree(work, ignore_errors=True)
    return parts


def report(parts, rows, a, title):
    cells = [st.evaluate(r, parts, resamples=a.resamples, seed=a.seed) for r in rows]
    env = next((p["env"] for p in parts.values() if p.get("env", {}).get("device")), {})
    print()
    for name, p in parts.items():
        for n in p.get("notes", []):
            print(f"- {name}: {n}")
    print("\n| group | step and windows | rounds | order seed | no-collection window (median) | host noise |")
    print("|---|---|---:|---:|---:|---:|")
    for name, p in parts.items():
        why = st.unavailable(p, name)
        if why:
            print(f"| {name} | {p.get('title', '')} | - | - | - | {why} |")
            continue
        base = p["windows"][p["baseline"]][p["stat"]]
        print(f"| {name} | {p['title']} | {p['rounds']} | {p['seed']} | {1e3 * statistics.median(base):.3f} ms "
              f"| {100 * st.host_noise(base):.1f} % |")
    print("\nDefinitions:")
    for k, v in DEFINITIONS.items():
        print(f"- {k}: {v}.")
    print(f"\n## {title}\n")
    print(f"{env.get('device', 'no device')}; " + ", ".join(f"{k} {v}" for k, v in env.items() if k != "device") +
          f"; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; seed {a.seed}, {a.resamples} bootstrap resamples\n")
    for line in st.table_lines(cells):
        print(line)
    sys.stdout.flush()
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="", help="write the raw windows of every group and the rows here")
    ap.add_argument("--decompose", action="store_true", help="where full capture's cost goes instead of the table")
    ap.add_argument("--quick", action="store_true", help="a smoke test: few rounds, short windows, no verdicts")
    ap.add_argument("--groups", default="", help="comma list of group names to run (default: all but 'cpu'; "
                                                 "--list shows them)")
    ap.add_argument("--list", action="store_true", help="print the groups and their expected durations, run nothing")
    ap.add_argument("--seed", type=int, default=42, help="the seed of the window orders and of the bootstrap")
    ap.add_argument("--resamples", type=int, default=4000, help=f"bootstrap resamples (>= {st.MIN_RESAMPLES})")
    ap.add_argument("--budget-s", type=float, default=None, help="time for the whole command (default 450 s, "
                                                                 "--quick 180 s): groups share it")
    ap.add_argument("--rounds", type=int, default=0, help="rounds of every group (default: each group's own)")
    ap.add_argument("--long-steps", type=int, default=1000, help="the long run's steps per window")
    ap.add_argument("--long-layers", type=int, default=2,
                    help="the long run's GPT-2 layers (default 2, ~1.5 ms a step, so 30 rounds of three 1,000-step "
                         "windows fit the command's time; 12 is the short groups' step, ~10 minutes alone)")
    ap.add_argument("--torch-batches", default="1", help="batches of the torch.profiler groups (e.g. 1,32)")
    ap.add_argument("--torch-activities", default="cpu,cuda", help="torch.profiler's activities: cpu,cuda or cuda")
    ap.add_argument("--from-json", default="", help="print the table of an earlier --json again, run nothing")
    ap.add_argument("--stat", choices=("median", "mean"), default="",
                    help="with --from-json: each window's figure from this statistic of its timed steps instead of "
                         "the one the run used (the mean counts a step that holds a periodic cost; the median not)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child_main(a.child)
    if a.resamples < st.MIN_RESAMPLES:
        ap.error(f"--resamples must be at least {st.MIN_RESAMPLES}")
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        rows = [Row(**dict(r, budget=Budget(**r["budget"]))) for r in saved["row_specs"]]
        a.seed, a.resamples = saved["seed"], saved["resamples"]
        if a.stat:
            for p in saved["groups"].values():
                p["stat"] = a.stat
        report(saved["groups"], rows, a, saved["title"] + (f" (window figure: the {a.stat})" if a.stat else ""))
        return 0
    if a.budget_s is None:
        a.budget_s = QUICK_BUDGET_S if a.quick else DEFAULT_BUDGET_S
    groups, rows = (decompose_plan if a.decompose else table_plan)(a)
    names = [x for x in a.groups.split(",") if x]
    unknown = set(names) - {g["name"] for g in groups}
    if unknown:
        ap.error(f"unknown group(s) {sorted(unknown)}; these exist: {[g['name'] for g in groups]}")
    groups = [g for g in groups if (g["name"] in names if names else not g.get("optional"))]
    selected = {g["name"] for g in groups}
    rows = [r for r in rows if r.group in selected]
    for g in groups:
        if a.rounds:
            g["rounds"] = a.rounds
    title = ("Where full capture's cost goes" if a.decompose else "Overhead against the budgets") + (
        " (--quick: a smoke test, no verdicts)" if a.quick else "")
    total = sum(nominal_s(g) for g in groups)
    print(f"# {title}: {len(groups)} group(s), each in a process of its own; expected about {total:.0f} s on an H200 "
          f"host (time budget {a.budget_s:.0f} s); seed {a.seed}; command: {' '.join(sys.argv)}")
    for g in groups:
        print(f"#   {g['name']}: {nominal_s(g):.0f} s, {g['rounds']} rounds x {len(g['sets'])} windows "
              f"({'; '.join(f'{label}: {sets_text(s)}' for label, s in g['sets'])})")
    if total > a.budget_s:
        print(f"# the groups' expected time exceeds the budget: later groups get fewer rounds than asked", flush=True)
    if a.list:
        return 0
    parts = run_groups(groups, a)
    cells = report(parts, rows, a, title)
    print(f"\n# took {time.monotonic() - T0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"title": title, "command": sys.argv, "seed": a.seed, "resamples": a.resamples,
                       "budget_s": a.budget_s, "definitions": DEFINITIONS, "groups": parts, "rows": cells,
                       "row_specs": [dataclasses.asdict(r) for r in rows]}, f, indent=1)
        print(f"# raw windows and rows: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
