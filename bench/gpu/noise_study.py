"""How the GPU host's noise behaves, step by step, and which measurement design beats it (issue 42).

The overhead table pairs windows by round; on the H200 hosts the windows without collection of one process spread
by 20-50 %, and with windows of 2 + 20 steps (the design before 2026-12-02) a round's windows by almost as much, so
36 rounds left intervals of several points. This prints, for one process and GPT-2 fp16 batch 1 (the table's
short-b1 step):

- the step time's spread and how fast it moves (the correlation of a step with the next, the 10th, the 100th);
- the thread's CPU time per step beside its wall time (is the noise time on the CPU or time off it?);
- the same with the step's thread pinned to one CPU;
- for windows of w steps paired with the next window (the table's design at w = 20), the spread of the log ratio
  when nothing differs between the two: the noise a paired design pays, and the rounds a 95 % interval of +-1 point
  on the median ratio needs at that spread;
- the cost of switching collection inside one session (CUPTI activity set, Python tracing), the way a design that
  alternates every few steps would switch.

    PYTHONPATH=build-gpu/python python3 bench/gpu/noise_study.py --steps 1500 --json noise.json

Figures only: it asserts nothing.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_libc = ctypes.CDLL(None)
_libc.sched_getcpu.restype = ctypes.c_int


def run(step, n, mark=None):
    """n steps: wall and thread-CPU seconds of each, and the CPU each ended on."""
    wall, cpu, where = [], [], []
    for _ in range(n):
        c0, t0 = time.thread_time(), time.perf_counter()
        if mark:
            with mark.scope("step"):
                step()
        else:
            step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        where.append(_libc.sched_getcpu())
    return {"wall": wall, "cpu": cpu, "cpus": where}


def autocorr(x, lag):
    m = statistics.fmean(x)
    den = sum((v - m) ** 2 for v in x)
    return sum((x[i] - m) * (x[i + lag] - m) for i in range(len(x) - lag)) / den if den else 0.0


def robust_sd(x):
    q = statistics.quantiles(x, n=4)
    return (q[2] - q[0]) / 1.349


def paired_noise(times, w):
    """Windows of w steps, each paired with the next: the log of their medians' ratio, when nothing differs."""
    logs = []
    for i in range(0, len(times) - 2 * w + 1, 2 * w):
        a, b = statistics.median(times[i:i + w]), statistics.median(times[i + w:i + 2 * w])
        logs.append(math.log(b / a))
    if len(logs) < 8:
        return None
    sd = robust_sd(logs)
    # The median of n log ratios has a standard error of about 1.2533 sd / sqrt(n); +-1 point at 95 %:
    rounds = math.ceil((1.96 * 1.2533 * sd / 0.01) ** 2)
    return {"w": w, "pairs": len(logs), "sd_log_ratio": sd, "rounds_for_1pt": rounds,
            "seconds_for_1pt": rounds * 2 * w * statistics.median(times)}


def describe(name, r):
    wall, cpu = r["wall"], r["cpu"]
    q = statistics.quantiles(wall, n=20)
    lw = [math.log(v) for v in wall]
    out = {
        "steps": len(wall), "wall_ms_median": 1e3 * statistics.median(wall), "wall_ms_p5": 1e3 * q[0],
        "wall_ms_p95": 1e3 * q[-1], "cpu_ms_median": 1e3 * statistics.median(cpu),
        "cpu_share_median": statistics.median(c / w for c, w in zip(cpu, wall)),
        "autocorr_log_wall": {lag: autocorr(lw, lag) for lag in (1, 10, 100) if lag < len(lw) // 2},
        "cpus_seen": len(set(r["cpus"])),
        "migrations_per_100_steps": 100 * sum(a != b for a, b in zip(r["cpus"], r["cpus"][1:])) / len(wall),
        "paired_wall": [p for w in (1, 2, 5, 10, 20) if (p := paired_noise(wall, w))],
        "paired_cpu": [p for w in (1, 5, 20) if (p := paired_noise(cpu, w))],
    }
    print(f"## {name}: {out['steps']} steps, wall median {out['wall_ms_median']:.3f} ms "
          f"(p5 {out['wall_ms_p5']:.3f}, p95 {out['wall_ms_p95']:.3f}); thread CPU {out['cpu_ms_median']:.3f} ms "
          f"({100 * out['cpu_share_median']:.0f} % of wall); {out['cpus_seen']} CPUs, "
          f"{out['migrations_per_100_steps']:.1f} migrations per 100 steps")
    print("   autocorrelation of log wall: " + ", ".join(f"lag {k}: {v:.2f}" for k, v in
                                                        out["autocorr_log_wall"].items()))
    print("   | series | window (steps) | pairs | sd of log ratio | rounds for +-1 pt | seconds for +-1 pt |")
    print("   |---|---:|---:|---:|---:|---:|")
    for series in ("paired_wall", "paired_cpu"):
        for p in out[series]:
            print(f"   | {series[7:]} | {p['w']} | {p['pairs']} | {p['sd_log_ratio']:.4f} | {p['rounds_for_1pt']} | "
                  f"{p['seconds_for_1pt']:.0f} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    import torch  # noqa: F401  (torch before inferscope_py: static TLS, as overhead_table.py)
    import overhead_common as oc
    step = oc.build_step(a.batch, 128, "cuda", a.layers)
    for _ in range(30):
        step()
    result = {"device": torch.cuda.get_device_name(0), "cpus": os.cpu_count(), "steps": a.steps}
    print(f"# {result['device']}, {result['cpus']} CPUs, torch {torch.__version__}")

    result["free"] = describe("no session, thread free", run(step, a.steps))
    home = _libc.sched_getcpu()
    all_cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {home})  # this thread only (Linux: pid 0 is the calling thread)
    result["pinned"] = describe(f"no session, thread pinned to CPU {home}", run(step, a.steps))
    os.sched_setaffinity(0, all_cpus)

    # A thread that wakes every 20 ms, as a session's writer does: does it change the step (idle states)?
    stop = threading.Event()
    waker = threading.Thread(target=lambda: [time.sleep(0.02) for _ in iter(stop.is_set, True)], daemon=True)
    waker.start()
    result["waker"] = describe("no session, a thread waking every 20 ms", run(step, a.steps))
    stop.set()
    waker.join()

    try:
        import inferscope_py as isc
    except ImportError as e:
        print(f"skipped: the switching part needs inferscope_py ({e})")
        isc = None
    if isc:
        lib = oc.runtime_library()
        path = "/tmp/noise-study.iscope"
        if not isc.start(output=path, mode="full", python=False, system=False, cupti_activities="none",
                         buffer_mode="ring", trace_size_mb=64):
            raise SystemExit("inferscope_py.start() failed")
        costs = {"set_activities": [], "trace_python": []}
        on = []
        off = []
        for i in range(a.steps):
            full = bool(i % 2)
            t0 = time.perf_counter()
            lib.inferscope_cupti_set_activities(b"default" if full else b"none")
            t1 = time.perf_counter()
            isc.trace_python(full)
            t2 = time.perf_counter()
            costs["set_activities"].append(t1 - t0)
            costs["trace_python"].append(t2 - t1)
            r = run(step, 1, isc)
            (on if full else off).append(r["wall"][0])
        lib.inferscope_cupti_set_activities(b"none")
        isc.trace_python(False)
        isc.stop()
        os.unlink(path)
        logs = [math.log(b / x) for x, b in zip(off, on)]
        med = statistics.median(logs)
        result["switch_every_step"] = {
            "pairs": len(logs), "median_ratio": math.exp(med), "sd_log_ratio": robust_sd(logs),
            "set_activities_ms_median": 1e3 * statistics.median(costs["set_activities"]),
            "trace_python_ms_median": 1e3 * statistics.median(costs["trace_python"]),
            "on_ms_median": 1e3 * statistics.median(on), "off_ms_median": 1e3 * statistics.median(off)}
        s = result["switch_every_step"]
        print(f"## one session, CUPTI default set + Python tracing switched on every other step: {s['pairs']} pairs, "
              f"median ratio {s['median_ratio']:.4f}, sd of log ratio {s['sd_log_ratio']:.4f}; on {s['on_ms_median']:.3f}"
              f" ms, off {s['off_ms_median']:.3f} ms; a switch costs {s['set_activities_ms_median']:.3f} ms (CUPTI) + "
              f"{s['trace_python_ms_median']:.3f} ms (Python)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
