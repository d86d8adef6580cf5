"""The overhead table's statistics (bench/gpu/overhead_stats.py) on synthetic windows: no GPU, no torch.

Every synthetic round has a host level shared by its windows (the drift the pairing must cancel) and noise of its
own per window; the effect is known, so the intervals and verdicts can be checked against the truth.
"""

import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu"))

import overhead_stats as st  # noqa: E402

RESAMPLES = 2000


def windows(effect, rounds=40, noise=0.02, drift=0.2, seed=1):
    """(on, off) window times: round r's host level in [1 - drift, 1 + drift], times that level, times (1 + effect)
    for `on`, each window with its own Gaussian noise of relative size `noise`."""
    rng = random.Random(seed)
    on, off = [], []
    for _ in range(rounds):
        level = rng.uniform(1 - drift, 1 + drift)
        off.append(level * (1 + rng.gauss(0, noise)))
        on.append(level * (1 + effect) * (1 + rng.gauss(0, noise)))
    return on, off


def drifting(factors, rounds, noise, drift, seed):
    """Window times of several settings (name -> factor on the round's host level), each with its own Gaussian
    noise of relative size `noise`; every round's level is drawn in [1 - drift, 1 + drift] and shared by its windows."""
    rng = random.Random(seed)
    out = {k: [] for k in factors}
    for _ in range(rounds):
        level = rng.uniform(1 - drift, 1 + drift)
        for k, f in factors.items():
            out[k].append(level * f * (1 + rng.gauss(0, noise)))
    return out


def overhead_of(effect, **kw):
    on, off = windows(effect, **kw)
    return st.overhead(st.paired_ratios(on, off), resamples=RESAMPLES)


def test_known_effect_is_found_through_the_drift():
    est = overhead_of(0.10, drift=0.3)
    assert est.lo > 0, "the interval excludes 0"
    assert est.lo <= 0.10 <= est.hi, "and contains the true 10 %"
    assert est.hi - est.lo < 0.04, "pairing by round cancels the +-30 % drift"
    assert st.verdict(est, st.Budget("at_most", 0.05)) == "over budget"
    assert st.verdict(est, st.Budget("at_most", 0.20)) == "within budget"


def test_unpaired_windows_would_not_resolve_it():
    # The same data compared without pairing: the drift swamps the effect. What pairing is for.
    on, off = windows(0.03, drift=0.3, noise=0.01)
    shuffled = off[1:] + off[:1]
    paired = st.overhead(st.paired_ratios(on, off), resamples=RESAMPLES)
    unpaired = st.overhead(st.paired_ratios(on, shuffled), resamples=RESAMPLES)
    assert paired.lo > 0
    assert unpaired.hi - unpaired.lo > 5 * (paired.hi - paired.lo)


def test_null_effect_is_not_resolved_against_a_tight_budget():
    est = overhead_of(0.0, noise=0.06, seed=3)
    assert est.lo < 0 < est.hi
    assert st.verdict(est, st.Budget("at_most", 0.02)) == "not resolved"
    assert st.verdict(est, st.Budget("at_most", 0.20)) == "within budget"
    assert st.verdict(est, st.Budget("effect")) == "not resolved (interval includes 0)"


def test_interval_covers_the_truth_about_95_percent_of_the_time():
    covered = 0
    trials = 60
    for seed in range(trials):
        on, off = windows(0.05, rounds=30, noise=0.03, seed=100 + seed)
        est = st.overhead(st.paired_ratios(on, off), resamples=RESAMPLES, seed=seed)
        covered += est.lo <= 0.05 <= est.hi
    # The percentile interval of a median over 30 rounds covers about 0.93-0.95; 60 trials: a margin of 3 sd.
    assert covered >= 0.82 * trials, f"covered {covered} of {trials}"


def test_fewer_than_30_rounds_give_no_verdict():
    est = overhead_of(0.10, rounds=12)
    assert est.n == 12
    assert st.verdict(est, st.Budget("at_most", 0.20)) == "not resolved: 12 rounds < 30"
    assert st.verdict(est, st.Budget("none")) == "no budget (reference)"


def test_verdict_rules_on_intervals():
    e = lambda lo, hi: st.Estimate((lo + hi) / 2, lo, hi, 40)  # noqa: E731
    at_most = st.Budget("at_most", 0.02)
    assert st.verdict(e(0.005, 0.019), at_most) == "within budget"
    assert st.verdict(e(0.021, 0.03), at_most) == "over budget"
    assert st.verdict(e(0.01, 0.03), at_most) == "not resolved"
    assert st.verdict(e(0.01, 0.02), at_most) == "not resolved", "an upper bound at the budget is not below it"
    goal = st.Budget("at_least", 6.0)
    assert st.verdict(e(6.5, 9.0), goal) == "goal met"
    assert st.verdict(e(2.0, 5.0), goal) == "goal not met"
    assert st.verdict(e(4.0, 8.0), goal) == "not resolved"


def test_within_noise_definition():
    e = lambda lo, hi: st.Estimate((lo + hi) / 2, lo, hi, 40)  # noqa: E731
    noise = st.Budget("noise", st.NOISE_HALF_WIDTH)
    assert st.verdict(e(-0.005, 0.008), noise) == "within noise"
    assert st.verdict(e(-0.025, 0.005), noise) == "not resolved", "wider than +-2 %: the windows could not tell"
    assert st.verdict(e(0.003, 0.012), noise) == "over budget (a cost is resolved)"
    assert st.verdict(e(-0.012, -0.003), noise) == "not resolved", "faster with collection is not 'no cost'"


def test_full_capture_above_the_floor_is_a_paired_difference():
    # Full capture costs 4 points above the floor in every round; both ride the same drift.
    w = drifting({"off": 1.0, "floor": 1.03, "full": 1.07}, rounds=40, noise=0.01, drift=0.3, seed=7)
    series = {k: st.paired_ratios(w[k], w["off"]) for k in ("full", "floor")}
    est = st.bootstrap_contrast(series, {"full": 1, "floor": -1}, resamples=RESAMPLES)
    assert est.lo <= 0.04 <= est.hi
    assert st.verdict(est, st.Budget("at_most", 0.02)) == "over budget"
    assert st.verdict(est, st.Budget("at_most", 0.08)) == "within budget"


def test_interaction_of_two_parts():
    # Parts of 2 % and 5 % against the same baseline; together 9 % (an interaction of 2 points), or 7 % (none).
    def run(both):
        w = drifting({"base": 1.0, "a": 1.02, "b": 1.05, "ab": both}, rounds=50, noise=0.005, drift=0.2, seed=11)
        series = {k: st.paired_ratios(w[k], w["base"]) for k in ("a", "b", "ab")}
        return st.bootstrap_contrast(series, {"ab": 1, "a": -1, "b": -1}, const=1.0, resamples=RESAMPLES)

    superadditive, additive = run(1.09), run(1.07)
    assert superadditive.lo > 0 and superadditive.lo <= 0.02 <= superadditive.hi
    assert additive.lo < 0 < additive.hi
    assert st.verdict(superadditive, st.Budget("effect")) == "cost resolved"


def test_multiple_of_two_processes():
    tp, _ = windows(0.30, noise=0.01, seed=5)
    tp_off = windows(0.30, noise=0.01, seed=5)[1]
    full, full_off = windows(0.05, noise=0.01, seed=6)
    est = st.bootstrap_multiple(st.paired_ratios(tp, tp_off), st.paired_ratios(full, full_off), resamples=RESAMPLES)
    assert est.lo <= 6.0 <= est.hi
    zero, zero_off = windows(0.0, noise=0.001, seed=8)
    worst = st.bootstrap_multiple(st.paired_ratios(tp, tp_off), st.paired_ratios(zero, zero_off), resamples=RESAMPLES)
    assert math.isinf(worst.hi), "an overhead indistinguishable from 0 makes the multiple unbounded"


def test_bootstrap_is_reproducible_and_needs_enough_resamples():
    on, off = windows(0.05)
    r = st.paired_ratios(on, off)
    assert st.overhead(r, resamples=RESAMPLES, seed=4) == st.overhead(r, resamples=RESAMPLES, seed=4)
    try:
        st.overhead(r, resamples=500)
    except ValueError as e:
        assert "2000" in str(e)
    else:
        raise AssertionError("500 resamples were accepted")


def test_round_orders_are_seeded_permutations():
    names = ["off", "full", "floor"]
    orders = st.round_orders(names, 300, seed=9)
    assert orders == st.round_orders(names, 300, seed=9)
    assert orders != st.round_orders(names, 300, seed=10)
    assert all(sorted(o) == sorted(names) for o in orders)
    firsts = {n: sum(o[0] == n for o in orders) for n in names}
    assert all(70 <= c <= 130 for c in firsts.values()), f"each setting leads about a third of the rounds: {firsts}"
    assert st.group_seed(42, "short-b1") == st.group_seed(42, "short-b1") != st.group_seed(42, "short-b32")


def test_host_noise_is_iqr_over_median():
    assert st.host_noise([1.0, 2.0, 3.0, 4.0, 5.0]) == (4.0 - 2.0) / 3.0
    assert st.host_noise([7.0]) == 0.0


def part(effect, rounds=40, skipped=None):
    on, off = windows(effect, rounds=rounds)
    p = {"stat": "median", "baseline": "off", "rounds": rounds,
         "windows": {"off": {"median": off}, "full": {"median": on}}}
    if skipped:
        p = {"skipped": skipped}
    return p


def test_rows_render_with_verdicts_and_reasons():
    rows = [st.Row("full capture", "g1", "overhead", {"full": 1}, st.Budget("at_most", 0.20, "<= 20 %")),
            st.Row("graph replay", "g2", "overhead", {"full": 1}, st.Budget("noise", 0.02, "within noise")),
            st.Row("generate", "g3", "overhead", {"full": 1}, st.Budget("at_most", 0.05, "<= 5 %"))]
    parts = {"g1": part(0.10), "g2": part(0.0), "g3": part(0.0, skipped="transformers is not installed")}
    cells = [st.evaluate(r, parts, resamples=RESAMPLES) for r in rows]
    assert cells[0]["verdict"] == "within budget" and cells[0]["rounds"] == 40
    assert cells[2]["status"] == "skipped: transformers is not installed"
    text = "\n".join(st.table_lines(cells))
    assert "| full capture | <= 20 % | +" in text
    assert "| generate | <= 5 % | - | - | - | skipped: transformers is not installed | - |" in text
    assert st.evaluate(rows[0], {}, resamples=RESAMPLES)["status"].startswith("not run")


def test_rows_use_only_complete_rounds():
    p = part(0.10)
    p["windows"]["full"]["median"] = p["windows"]["full"]["median"][:35]  # a run cut short mid-round
    cell = st.evaluate(st.Row("full", "g", "overhead", {"full": 1}), {"g": p}, resamples=RESAMPLES)
    assert cell["rounds"] == 35


def test_a_row_without_windows_says_so_and_the_table_goes_on():
    p = part(0.10)
    p["windows"]["full"]["median"] = []  # a window that never completed
    cell = st.evaluate(st.Row("full", "g", "overhead", {"full": 1}), {"g": p}, resamples=RESAMPLES)
    assert cell["status"].startswith("failed: ")
    assert "| full | - | - | - | - | failed: " in "\n".join(st.table_lines([cell]))


def test_a_model_row_mixes_settings_by_their_share_of_the_steps():
    # Full capture costs 7.5 % and the setting between windows nothing: 2 % of the steps in full cost 0.15 %,
    # printed as per cent (an overhead), and the interval holds it.
    w = drifting({"off": 1.0, "full": 1.075, "between": 1.0}, rounds=60, noise=0.002, drift=0.3, seed=11)
    p = {"stat": "median", "baseline": "off", "rounds": 60, "windows": {k: {"median": v} for k, v in w.items()}}
    row = st.Row("sampled, modelled", "g", "model", {"between": 0.98, "full": 0.02}, st.Budget("at_most", 0.01))
    cell = st.evaluate(row, {"g": p}, resamples=RESAMPLES)
    assert cell["unit"] == "%"
    assert abs(cell["value"] - 0.0015) < 0.0005 and cell["lo"] <= 0.0015 <= cell["hi"]
    assert cell["verdict"] == "within budget"
    # Weights that do not add to 1 are no model of a run: the row says so instead of printing a figure.
    bad = st.evaluate(st.Row("bad", "g", "model", {"between": 0.9, "full": 0.2}), {"g": p}, resamples=RESAMPLES)
    assert "add to 1.1, not 1" in bad["status"]
