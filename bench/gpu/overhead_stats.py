"""The statistics of the overhead table (bench/gpu/overhead_table.py): window orders, paired ratios, bootstrap
intervals, verdicts against budgets, and the Markdown table. Standard library only, no GPU, no torch, so that
tests/python/test_overhead_stats.py checks every rule here on synthetic data.

The protocol (docs/benchmarks.md, "How the figures are measured"):
- one process alternates windows with collection on and off; the order of a round's windows is drawn anew for
  every round from a fixed seed;
- a window's figure is the median of its steps' times (the mean where a setting pays in a minority of steps, as a
  long run's adaptive capture does in its first 100 steps);
- a setting's overhead is the median over rounds of (its window / the no-collection window of the same round) - 1:
  pairing by round cancels the host's drift, which on the GPU hosts is larger than the effects measured;
- its 95 % interval is a percentile bootstrap over rounds (a resample draws whole rounds, so every series of a
  contrast is resampled with the same round indices), with a fixed seed;
- a verdict only when the interval lies wholly on one side of the budget.
"""
import math
import random
import statistics
import zlib
from dataclasses import dataclass, field

MIN_ROUNDS = 30  # fewer rounds: no verdict (DESIGN.md: "many rounds (>= 30)")
MIN_RESAMPLES = 2000
LEVEL = 0.95
# "Within noise" (the CUDA-graph replay's budget): the 95 % interval of the overhead contains 0 and lies inside
# +-NOISE_HALF_WIDTH. An interval wholly above 0 is a resolved cost, however small; one wider than that band says
# the windows could not tell.
NOISE_HALF_WIDTH = 0.02


def group_seed(seed, name):
    """The order seed of one row group: the command's seed and the group's name (crc32, stable across runs and
    Python versions, unlike hash())."""
    return seed * 1000003 + zlib.crc32(name.encode()) % 1000003


def round_orders(names, rounds, seed):
    """The window order of each round: a fresh shuffle of `names` per round, reproducible from `seed`."""
    rng = random.Random(seed)
    orders = []
    for _ in range(rounds):
        order = list(names)
        rng.shuffle(order)
        orders.append(order)
    return orders


def paired_ratios(on, off):
    """Round by round: window with the setting / the no-collection window of the same round."""
    if len(on) != len(off):
        raise ValueError(f"paired_ratios: {len(on)} windows against {len(off)}")
    if any(b <= 0 for b in off):
        raise ValueError("paired_ratios: a no-collection window took no time")
    return [a / b for a, b in zip(on, off)]


@dataclass(frozen=True)
class Estimate:
    value: float  # the statistic on all rounds
    lo: float  # 95 % percentile bootstrap interval
    hi: float
    n: int  # rounds


def _percentiles(samples, level):
    s = sorted(samples)
    k = len(s)
    lo = s[max(0, int(math.floor((1 - level) / 2 * k)))]
    hi = s[min(k - 1, int(math.ceil((1 + level) / 2 * k)) - 1)]
    return lo, hi


def bootstrap_contrast(series, weights, const=0.0, resamples=4000, seed=0, level=LEVEL):
    """const + sum(w * median(series[k])) over the rounds, with its percentile bootstrap interval.

    `series`: name -> per-round values (paired ratios), all of one length; a resample draws rounds with
    replacement and uses the same draw for every series, since a round's windows share the host's state.
    One setting's overhead is {name: 1} with const -1; full capture above the floor is {full: 1, floor: -1};
    an interaction of two parts is {both: 1, a: -1, b: -1} with const +1 (all against the same baseline)."""
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"bootstrap_contrast: {resamples} resamples, at least {MIN_RESAMPLES} are needed")
    lengths = {len(series[k]) for k in weights}
    if len(lengths) != 1:
        raise ValueError(f"bootstrap_contrast: series of different lengths {sorted(lengths)}")
    n = lengths.pop()
    if n == 0:
        raise ValueError("bootstrap_contrast: no rounds")

    def stat(idx):
        return const + sum(w * statistics.median([series[k][i] for i in idx]) for k, w in weights.items())

    rng = random.Random(seed)
    boots = [stat([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]
    lo, hi = _percentiles(boots, level)
    return Estimate(stat(range(n)), lo, hi, n)


def overhead(series, resamples=4000, seed=0):
    """median(ratios) - 1 with its interval."""
    return bootstrap_contrast({"x": series}, {"x": 1.0}, const=-1.0, resamples=resamples, seed=seed)


def bootstrap_multiple(num, den, resamples=4000, seed=0, level=LEVEL):
    """(median(num) - 1) / (median(den) - 1): how many times one overhead is another, for two series measured in
    different processes (resampled independently: their rounds are not paired). A denominator at or below zero
    gives an unbounded multiple (inf)."""
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"bootstrap_multiple: {resamples} resamples, at least {MIN_RESAMPLES} are needed")

    def q(a, b):
        d = statistics.median(b) - 1
        return math.inf if d <= 0 else (statistics.median(a) - 1) / d

    rng = random.Random(seed)
    boots = [q(rng.choices(num, k=len(num)), rng.choices(den, k=len(den))) for _ in range(resamples)]
    lo, hi = _percentiles(boots, level)
    return Estimate(q(num, den), lo, hi, min(len(num), len(den)))


def host_noise(windows):
    """The spread of the no-collection windows: interquartile range / median (0 for fewer than two)."""
    if len(windows) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(windows, n=4, method="inclusive")
    return (q3 - q1) / statistics.median(windows)


# --- budgets and verdicts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    kind: str  # "at_most", "at_least", "noise", "effect" (decomposition parts: is the interval clear of 0?), "none"
    value: float = 0.0
    text: str = "-"


def verdict(est, budget, min_rounds=MIN_ROUNDS):
    """A verdict only where the interval excludes the budget; fewer than `min_rounds` rounds give none."""
    if budget.kind == "none":
        return "no budget (reference)"
    if est.n < min_rounds:
        return f"not resolved: {est.n} rounds < {min_rounds}"
    if budget.kind == "at_most":
        if est.hi < budget.value:
            return "within budget"
        if est.lo > budget.value:
            return "over budget"
        return "not resolved"
    if budget.kind == "at_least":
        if est.lo > budget.value:
            return "goal met"
        if est.hi < budget.value:
            return "goal not met"
        return "not resolved"
    if budget.kind == "noise":
        if est.lo > 0:
            return "over budget (a cost is resolved)"
        if est.lo <= 0 <= est.hi and -budget.value <= est.lo and est.hi <= budget.value:
            return "within noise"
        return "not resolved"
    if budget.kind == "effect":
        if est.lo > 0:
            return "cost resolved"
        if est.hi < 0:
            return "saving resolved"
        return "not resolved (interval includes 0)"
    raise ValueError(f"unknown budget kind {budget.kind!r}")


# --- rows -------------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: a statistic of one row group's windows against its baseline windows.

    kind "overhead": terms {setting: 1}, the setting's overhead (median ratio - 1);
    kind "contrast": const + sum(w * median ratio) over `terms` (points: a difference of overheads);
    kind "model": sum(w * median ratio) - 1 over `terms` whose weights add to 1 (per cent: an overhead modelled
    as a mix of settings, each weighted by its share of the steps);
    kind "multiple": overhead of `terms`' one setting in `group` / overhead of `den_set` in `den_group`."""

    label: str
    group: str
    kind: str
    terms: dict
    budget: Budget = field(default_factory=lambda: Budget("none"))
    const: float = 0.0
    den_group: str = ""
    den_set: str = ""


def _series(part, names):
    """Per setting, the paired ratios of its windows to the baseline's, over the rounds all of them completed."""
    stat = part["stat"]
    wins = part["windows"]
    base = wins[part["baseline"]][stat]
    n = min([len(base)] + [len(wins[k][stat]) for k in names])
    return {k: paired_ratios(wins[k][stat][:n], base[:n]) for k in names}


def unavailable(part, name):
    """Why a group's rows cannot be computed ("" when they can)."""
    if part is None:
        return f"not run (group {name} was not selected)"
    if part.get("skipped"):
        return "skipped: " + part["skipped"]
    if part.get("failed"):
        return "failed: " + part["failed"]
    if not part.get("rounds"):
        return "failed: no complete round"
    return ""


def evaluate(row, parts, resamples=4000, seed=0):
    """The row's cells (dict): value, lo, hi, rounds, verdict, noise, unit; `status` set instead when the row
    could not be measured (its group skipped or failed)."""
    part = parts.get(row.group)
    why = unavailable(part, row.group)
    if not why and row.kind == "multiple":
        why = unavailable(parts.get(row.den_group), row.den_group)
    if why:
        return {"label": row.label, "budget": row.budget.text, "status": why}
    try:
        est, unit = _estimate(row, part, parts, resamples, seed)
    except ValueError as e:  # e.g. a series without a single window: said in the row, the table goes on
        return {"label": row.label, "budget": row.budget.text, "status": f"failed: {e}"}
    base = part["windows"][part["baseline"]][part["stat"]]
    return {"label": row.label, "budget": row.budget.text, "value": est.value, "lo": est.lo, "hi": est.hi,
            "rounds": est.n, "verdict": verdict(est, row.budget), "noise": host_noise(base), "unit": unit,
            "group": row.group}


def _estimate(row, part, parts, resamples, seed):
    if row.kind == "multiple":
        (name,) = row.terms
        num = _series(part, [name])[name]
        den_part = parts[row.den_group]
        den = _series(den_part, [row.den_set])[row.den_set]
        est = bootstrap_multiple(num, den, resamples=resamples, seed=seed)
        unit = "x"
    else:
        if row.kind == "model" and abs(sum(row.terms.values()) - 1) > 1e-9:
            raise ValueError(f"a model's weights add to {sum(row.terms.values()):g}, not 1")
        series = _series(part, list(row.terms))
        const = -1.0 if row.kind in ("overhead", "model") else row.const
        est = bootstrap_contrast(series, row.terms, const=const, resamples=resamples, seed=seed)
        unit = "%" if row.kind in ("overhead", "model") else "points"
    return est, unit


# --- the table --------------------------------------------------------------------------------------------------


def fmt(x, unit):
    if x is None:
        return "-"
    if unit == "x":
        return "inf" if math.isinf(x) else f"{x:.1f}x"
    if unit == "points":
        return f"{100 * x:+.2f} pts"
    return f"{100 * x:+.2f} %"


def table_lines(cells):
    """The Markdown table: row, budget, median, 95 % interval, rounds, verdict, host noise."""
    lines = ["| row | budget | median | 95 % interval | rounds | verdict "
             "| host noise (IQR/median of no-collection windows) |",
             "|---|---|---:|---|---:|---|---:|"]
    for c in cells:
        if "status" in c:
            lines.append(f"| {c['label']} | {c['budget']} | - | - | - | {c['status']} | - |")
            continue
        u = c["unit"]
        lines.append(f"| {c['label']} | {c['budget']} | {fmt(c['value'], u)} | {fmt(c['lo'], u)} to {fmt(c['hi'], u)} "
                     f"| {c['rounds']} | {c['verdict']} | {100 * c['noise']:.1f} % |")
    return lines
