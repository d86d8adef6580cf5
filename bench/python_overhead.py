"""Per-call cost of InferScope's Python tracing against cProfile's, measured in one process.

    PYTHONPATH=build/python python3 bench/python_overhead.py [--n 23] [--rounds 11]

A pure-Python benchmark (recursive fib: every call is a traced call) runs in alternating rounds with nothing
on, with InferScope tracing on (a session records; trace_python() switches tracing per round), with cProfile
on, and with InferScope tracing on but the benchmark's file excluded by a filter. Prints the medians, the
overhead per call in ns and the ratio to cProfile's overhead, and checks that every traced call reached the
dump. The budget (docs/benchmarks.md) is CPython 3.12: <= 100 ns and <= 0.5 x cProfile; 3.8-3.11: <= 0.7 x
cProfile. Figures are printed, never asserted.
"""

import argparse
import cProfile
import os
import platform
import statistics
import sys
import tempfile
import time

import inferscope_py as isc


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fib_calls(n):
    a, b = 1, 1  # calls(0) = calls(1) = 1; calls(n) = 1 + calls(n-1) + calls(n-2)
    for _ in range(n - 1):
        a, b = b, 1 + a + b
    return b if n >= 1 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=23, help="fib argument (calls per round = fib_calls(n))")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    n, calls = args.n, fib_calls(args.n)

    def run():
        t0 = time.perf_counter_ns()
        fib(n)
        return time.perf_counter_ns() - t0

    def baseline():
        return run()

    def inferscope():
        isc.trace_python(True)
        try:
            return run()
        finally:
            isc.trace_python(False)

    def inferscope_excluded():
        isc.trace_python(True, exclude=[os.path.abspath(__file__)])
        try:
            return run()
        finally:
            isc.trace_python(False)

    def cprofile():
        p = cProfile.Profile()
        p.enable()
        try:
            return run()
        finally:
            p.disable()

    variants = [("off", baseline), ("inferscope", inferscope), ("cProfile", cprofile),
                ("inferscope, code excluded", inferscope_excluded)]
    times = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "bench.iscope")
        isc.start(output=dump, python=False, thread_buffer_kb=65536)
        for name, fn in variants:  # warm-up: code objects classified, rings touched
            fn()
        for r in range(args.rounds):
            order = variants[r % len(variants):] + variants[: r % len(variants)]  # alternate the order
            for name, fn in order:
                times[name].append(fn())
        isc.stop()
        stats = isc._native._dump_stats(dump)

    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["off"]
    print(f"# Python tracing overhead: Python {platform.python_version()} ({isc.tracing_mechanism}), "
          f"{platform.processor() or platform.machine()}, fib({n}) = {calls} calls per round, "
          f"{args.rounds} alternating rounds, medians")
    print()
    print("| variant | median ms | ns per call | overhead ns per call | x cProfile overhead |")
    print("|---|---:|---:|---:|---:|")
    cprof_ovh = (med["cProfile"] - base) / calls
    for name, _ in variants:
        ovh = (med[name] - base) / calls
        ratio = f"{ovh / cprof_ovh:.2f}" if name != "off" and cprof_ovh > 0 else "-"
        print(f"| {name} | {med[name] / 1e6:.2f} | {med[name] / calls:.1f} | "
              f"{ovh:.1f} | {ratio} |")
    traced = stats["python_calls"].get("main.<locals>.run", 0)
    fib_records = stats["python_calls"].get("fib", 0)
    expected = calls * (args.rounds + 1)
    print()
    print(f"- fib records in the dump: {fib_records} (expected {expected}: every traced call of every "
          f"InferScope round incl. warm-up), dropped {stats['dropped']}, complete {stats['complete']}, "
          f"run() records {traced}")
    ovh = (med["inferscope"] - base) / calls
    budget = (100.0, 0.5) if sys.version_info >= (3, 12) else (None, 0.7)
    verdict = []
    if budget[0] is not None:
        verdict.append(f"{ovh:.1f} ns <= {budget[0]:.0f} ns: {'yes' if ovh <= budget[0] else 'NO'}")
    verdict.append(f"{ovh / cprof_ovh:.2f} x cProfile <= {budget[1]}: {'yes' if ovh / cprof_ovh <= budget[1] else 'NO'}")
    print("- budget: " + "; ".join(verdict))


if __name__ == "__main__":
    main()
