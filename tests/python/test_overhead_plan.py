"""The overhead table's plans (bench/gpu/overhead_table.py): every row reads windows its group runs, the default
groups fit the command's default time, and a saved run prints again with the other window statistic. No GPU, no
torch: the plans are data, and --from-json reads a run recorded on the H200 (bench/gpu/results).
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "gpu")
sys.path.insert(0, BENCH)

import overhead_table as ot  # noqa: E402



def args(quick=False):
    return argparse.Namespace(quick=quick, long_steps=1000, long_layers=2, torch_batches="1",
                              torch_activities="cpu,cuda")


def plans():
    for quick in (False, True):
        yield "table", quick, ot.table_plan(args(quick))
        yield "decompose", quick, ot.decompose_plan(args(quick))


def test_every_row_reads_windows_its_group_runs():
    checked = 0
    for name, quick, (groups, rows) in plans():
        by_name = {g["name"]: g for g in groups}
        assert len(by_name) == len(groups), f"{name}: two groups share a name"
        for g in groups:
            labels = [label for label, _ in g["sets"]]
            assert len(set(labels)) == len(labels), f"{name}/{g['name']}: a window label twice"
            assert g["baseline"] in labels, f"{name}/{g['name']}: baseline {g['baseline']!r} is not a window"
        for r in rows:
            assert r.group in by_name, f"{name}: row {r.label!r} names no group"
            labels = {label for label, _ in by_name[r.group]["sets"]}
            for term in r.terms:
                assert term in labels, f"{name} (quick={quick}): row {r.label!r} reads {term!r}, not a window of {r.group}"
                checked += 1
            if r.den_group:
                assert r.den_set in {label for label, _ in by_name[r.den_group]["sets"]}
        assert len({r.label for r in rows}) == len(rows), f"{name}: two rows share a label"
    assert checked > 100  # the plans hold many rows: an empty plan must not pass


def test_the_default_table_says_why_full_capture_is_above_the_floor():
    groups, rows = ot.table_plan(args())
    for b in (1, 32):
        g = next(g for g in groups if g["name"] == f"short-b{b}")
        assert not g.get("optional") and "gpu evidence" in dict(g["sets"])
        why = [r for r in rows if r.group == g["name"] and "gpu evidence" in r.terms]
        # CUPTI's part (evidence - floor) and InferScope's (full - evidence): they add up to full - floor.
        assert sorted(tuple(sorted(r.terms.items())) for r in why) == [
            (("floor", -1), ("gpu evidence", 1)), (("full", 1), ("gpu evidence", -1))]


def test_the_default_groups_fit_the_default_time():
    for name, quick, (groups, _) in plans():
        if quick:
            continue
        default = [g for g in groups if not g.get("optional")]
        total = sum(ot.nominal_s(g) for g in default)
        assert total <= ot.DEFAULT_BUDGET_S, f"{name}: its default groups expect {total:.0f} s, over {ot.DEFAULT_BUDGET_S} s"


def test_the_optional_groups_stay_out_of_the_default_run():
    groups, _ = ot.decompose_plan(args())
    optional = {g["name"] for g in groups if g.get("optional")}
    assert {"system-b1", "system-b32", "copies-b1", "copies-b32", "switch-generate", "switch-generate-8",
            "sessions-generate"} <= optional
    groups, _ = ot.table_plan(args())
    assert {"steady-b1", "steady-b32", "generate-steady", "cpu", "long"} <= {g["name"] for g in groups
                                                                             if g.get("optional")}


def config_default(key):
    """A setting's default as docs/configuration.md's table gives it (generated from the settings table)."""
    with open(os.path.join(HERE, "..", "..", "docs", "configuration.md")) as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) > 5 and cells[1] == f"`{key}`":
                return int(cells[4].strip("`"))
    raise AssertionError(f"{key} is not in docs/configuration.md")


def test_the_duty_rows_model_the_defaults_duty_cycle():
    # The model of sampled and adaptive capture takes the defaults' duty cycle: a changed default changes the model.
    assert (ot.WINDOW_STEPS, ot.WINDOW_EVERY_STEPS, ot.BASELINE_STEPS) == (
        config_default("window_steps"), config_default("window_every_steps"), config_default("baseline_steps"))
    # Sampled: a window of 10 steps in every 500, 2 % of a long run in full (twice that when slow steps open a
    # window in every period: the bound row).
    assert abs(ot.SAMPLED_PARTS["full"] - 0.02) < 1e-12 and abs(ot.SAMPLED_BOUND_PARTS["full"] - 0.04) < 1e-12
    # Adaptive, counted by hand from the scheduler's rule (the first periodic window falls due 500 steps after the
    # baseline closes, test_sampling.cpp checks it): 1,000 steps hold the baseline's 100 and one window at steps
    # 600-609, 110 in full, not 100 + 2 % of the other 900.
    assert abs(ot.ADAPTIVE_PARTS["full"] - 0.110) < 1e-12
    assert ot.adaptive_full_steps(2000) == 100 + 3 * 10  # windows at 600, 1100, 1600
    assert ot.adaptive_full_steps(605) == 105 and ot.adaptive_full_steps(50) == 50  # cut at the run's end
    for parts in (ot.SAMPLED_PARTS, ot.SAMPLED_BOUND_PARTS, ot.ADAPTIVE_PARTS):
        assert abs(sum(parts.values()) - 1) < 1e-12
    groups, rows = ot.table_plan(args())
    duty = {g["name"]: g for g in groups if g["name"].startswith("duty-")}
    # Both batch sizes run by default, each window's figure its mean step (a long run's budget is of its whole time).
    assert sorted(duty) == ["duty-b1", "duty-b32"]
    assert all(not g.get("optional") and g["stat"] == "mean" for g in duty.values())
    for name in duty:
        models = [r for r in rows if r.group == name and r.kind == "model"]
        assert [(r.terms, r.budget.kind, r.budget.value) for r in models] == [
            (ot.SAMPLED_PARTS, "at_most", 0.01), (ot.SAMPLED_BOUND_PARTS, "none", 0.0),
            (ot.ADAPTIVE_PARTS, "at_most", 0.02)]


def run_from_json(*extra):
    path = os.path.join(BENCH, "results", "2026-12-02-system-parts.json")  # windows of 12-16 timed steps
    out = subprocess.run([sys.executable, os.path.join(BENCH, "overhead_table.py"), "--from-json", path, *extra],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line.startswith("| ")], out.stdout


def test_from_json_prints_a_saved_run_again_with_either_window_statistic():
    median_rows, median_text = run_from_json()
    mean_rows, mean_text = run_from_json("--stat", "mean")
    assert len(median_rows) == len(mean_rows) > 8
    assert "(window figure: the mean)" in mean_text and "(window figure:" not in median_text
    # The saved run took the median; the mean of the same windows (it counts the step that holds NVML's read)
    # gives other figures for the same rows: the ones docs/benchmarks.md quotes for each.
    row = "| the system sampler, every part (as a recording runs it), batch 1 |"
    median = [r for r in median_rows if r.startswith(row)]
    mean = [r for r in mean_rows if r.startswith(row)]
    assert len(median) == 1 and len(mean) == 1
    assert "-0.49 %" in median[0] and "-2.20 % to +1.09 %" in median[0]
    assert "-0.23 %" in mean[0] and "-2.29 % to +2.30 %" in mean[0]
