#!/usr/bin/env python3
"""Pools the --raw files of several `gpt2_overhead.py --mode windows` processes and prints, per session setting,
the median over all rounds of the per-round ratio (window with the setting / window without a session) of the
window means (a whole run's cost: its total time) and of the window medians, each with a 95 % bootstrap interval
of that median (overhead_stats.overhead, the overhead table's), and the figure of each process.

    python3 bench/gpu/long_run_intervals.py run1.json run2.json run3.json
"""
import json
import statistics
import sys

from overhead_stats import overhead, paired_ratios


def main(paths):
    pooled = {}
    per_process = {}
    for path in paths:
        w = json.load(open(path))["windows"]
        off = w["off"]
        for k, v in w.items():
            if k == "off":
                continue
            means = paired_ratios(v["mean"], off["mean"])
            medians = paired_ratios(v["median"], off["median"])
            pooled.setdefault(k, ([], []))
            pooled[k][0].extend(means)
            pooled[k][1].extend(medians)
            per_process.setdefault(k, []).append(statistics.median(means) - 1)
    print("| session settings | rounds | whole run (mean step): median of per-round ratios, 95 % interval "
          "| median step: the same | whole run, per process |")
    print("|---|---:|---|---|---|")
    for k, (means, medians) in pooled.items():
        whole, step = overhead(means), overhead(medians)
        procs = ", ".join(f"{100 * x:+.2f} %" for x in per_process[k])
        print(f"| {k} | {len(means)} | {100 * whole.value:+.2f} % ({100 * whole.lo:+.2f} to {100 * whole.hi:+.2f}) "
              f"| {100 * step.value:+.2f} % ({100 * step.lo:+.2f} to {100 * step.hi:+.2f}) | {procs} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
