"""iscope-run --try (docs/try.md) on small Python programs: a knob applied in the tried processes only and
measured against the baseline, the result file, and the refusals (a knob that does not apply, a bad knob or value).
torch is replaced by the stand-in in try_torch/ (README there): these machines have no torch."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def iscope_run():
    path = os.environ.get("ISCOPE_RUN")
    if not path or not os.path.exists(path):
        pytest.skip("ISCOPE_RUN is not set to a built iscope-run")
    return path


def write(tmp_path, text):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(text))
    return prog


def run_try(tmp_path, prog, *tries, rounds=2):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "try_torch") + os.pathsep + env.get("PYTHONPATH", "")
    args = [iscope_run()]
    for t in tries:
        args += ["--try", t]
    args += ["--try-rounds", str(rounds), "-o", str(tmp_path / "run.iscope"), "--", sys.executable, str(prog)]
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    result = tmp_path / "run.try.json"
    return p, (json.loads(result.read_text()) if result.exists() else None)


LOADER_PROGRAM = """
    import inferscope_py as isc
    from torch.utils.data import DataLoader
    loader = DataLoader(list(range(30)), batch_size=1, shuffle=False, num_workers=0)
    it = iter(loader)
    for _ in range(30):
        with isc.scope("step"):
            next(it)
"""


def test_num_workers_is_applied_in_the_tried_processes_and_measured(tmp_path):
    p, r = run_try(tmp_path, write(tmp_path, LOADER_PROGRAM), "num_workers=3")
    assert p.returncode == 0, p.stderr
    assert r["refused"] is None
    assert r["pairs"] == 2 and len(r["processes"]) == 4
    # 12 ms of loading per step with no worker, 3 ms with three: the saving is there in every pair.
    assert r["measurable"]
    assert r["saving_low_pct"] > 30
    assert r["tried_ms"] < r["base_ms"]
    assert "measured saving" in p.stderr
    # ABBA: round 1 runs the baseline first, round 2 the tried settings first.
    assert [q["tried"] for q in r["processes"]] == [False, True, True, False]


def test_a_tried_torch_flag_holds_against_the_programs_own_assignment(tmp_path):
    prog = write(tmp_path, """
        import inferscope_py as isc, time, torch
        torch.backends.cuda.matmul.allow_tf32 = False      # the program's own choice, after the import
        for _ in range(20):
            with isc.scope("step"):
                time.sleep(0.002 if torch.backends.cuda.matmul.allow_tf32 else 0.006)
    """)
    from inferscope_py import _try  # the Python side, driven directly: the stand-in shows no fp32 GEMMs
    sys.path.insert(0, os.path.join(HERE, "try_torch"))
    try:
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
        _try.install("allow_tf32=true")
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        assert torch.backends.cuda.matmul.allow_tf32 is True
        torch.set_float32_matmul_precision("highest")  # would turn TF32 off again: held too
    finally:
        sys.path.remove(os.path.join(HERE, "try_torch"))
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_AfterImport"]
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
    # Under iscope-run the knob needs fp32 matrix kernels off tensor cores in the baseline: refused here.
    p, r = run_try(tmp_path, prog, "allow_tf32=true")
    assert p.returncode == 2
    assert "allow_tf32 applies to a Python program whose fp32 matrix kernels run off tensor cores" in r["refused"]
    assert "no fp32 matrix kernels off tensor cores" in p.stderr
    assert len(r["processes"]) == 1  # refused after the first baseline run


def test_a_dataloader_knob_on_a_program_without_one_is_refused(tmp_path):
    prog = write(tmp_path, """
        import inferscope_py as isc, time
        for _ in range(20):
            with isc.scope("step"):
                time.sleep(0.002)
    """)
    p, r = run_try(tmp_path, prog, "num_workers=4")
    assert p.returncode == 2
    assert "no DataLoader fed it" in r["refused"]
    assert "refused" in p.stderr


def test_an_environment_knob_with_no_effect_is_no_measurable_change(tmp_path):
    prog = write(tmp_path, """
        import inferscope_py as isc, time
        for _ in range(25):
            with isc.scope("step"):
                time.sleep(0.003)
    """)
    p, r = run_try(tmp_path, prog, "OMP_NUM_THREADS=2", rounds=3)
    assert p.returncode == 0, p.stderr
    # A sleep does not care: unless the host's noise happens to put every pair on one side of zero, it says so.
    if not r["measurable"]:
        assert "no measurable change" in p.stderr
    assert abs(r["saving_pct"]) < 25


def test_try_rounds_without_a_knob_is_refused(tmp_path):
    prog = write(tmp_path, "raise SystemExit('must not run')\n")
    p = subprocess.run([iscope_run(), "--try-rounds", "3", "--", sys.executable, str(prog)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "--try-rounds without --try" in p.stderr


@pytest.mark.parametrize("spec, words", [
    ("num_workerz=2", "no knob named 'num_workerz'"),
    ("num_workers=many", "'many' is not an integer"),
    ("CUDA_LAUNCH_BLOCKING=1", "'1' is not 0"),
    ("allow_tf32", "--try expects KNOB=VALUE"),
])
def test_a_bad_knob_or_value_is_refused_before_anything_runs(tmp_path, spec, words):
    prog = write(tmp_path, "raise SystemExit('must not run')\n")
    p, r = run_try(tmp_path, prog, spec)
    assert p.returncode == 2
    assert words in p.stderr
    assert r is None
    assert not (tmp_path / "run.try").exists()


def pool_server():
    """samples/try/pool_server, the C++ program whose pool size is the environment variable POOL_THREADS."""
    path = os.path.join(os.environ.get("ISCOPE_BUILD_DIR", ""), "samples", "try", "pool_server")
    if not os.path.exists(path):
        pytest.skip(f"samples/try/pool_server is not built at {path} (INFERSCOPE_BUILD_SAMPLES=OFF?)")
    return path


POOL_DECLARATION = """\
try_knobs:
  - variable: POOL_THREADS
    values: 1..4
    changes: the worker threads that score each batch
"""


def run_pool_try(tmp_path, *tries, declaration=POOL_DECLARATION):
    if declaration is not None:
        (tmp_path / ".inferscope.yaml").write_text(declaration)
    args = [iscope_run()]
    for t in tries:
        args += ["--try", t]
    args += ["--try-rounds", "2", "-o", str(tmp_path / "pool.iscope"), "--", pool_server(), "--steps", "40",
             "--work", "4000"]
    env = {k: v for k, v in os.environ.items() if k != "POOL_THREADS"}  # the baseline runs without it
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    result = tmp_path / "pool.try.json"
    return p, (json.loads(result.read_text()) if result.exists() else None)


def test_a_cpp_programs_declared_variable_reaches_the_tried_processes_only(tmp_path):
    p, r = run_pool_try(tmp_path, "POOL_THREADS=2")
    assert p.returncode == 0, p.stderr
    assert r["refused"] is None, r["refused"]
    assert r["knobs"] == [{"name": "POOL_THREADS", "value": "2", "changes_results": False,
                           "declared_in": str(tmp_path / ".inferscope.yaml") + ":2"}]
    assert r["step"] == "step" and r["pairs"] == 2
    assert all(q["steps"] > 0 for q in r["processes"])
    # The program says on its last line how many threads its pool had: the variable in the tried processes only,
    # in the ABBA order of the result file (baseline, tried, tried, baseline).
    threads = [json.loads(line)["threads"] for line in p.stdout.splitlines() if line.startswith('{"program"')]
    assert threads == [2 if q["tried"] else 1 for q in r["processes"]] == [1, 2, 2, 1]


def test_a_cpp_programs_variable_is_no_knob_until_declared_and_takes_only_its_declared_values(tmp_path):
    p, r = run_pool_try(tmp_path, "POOL_THREADS=2", declaration=None)
    assert p.returncode == 2
    assert "no knob named 'POOL_THREADS'" in p.stderr and "try_knobs" in p.stderr
    assert r is None  # nothing ran
    p, r = run_pool_try(tmp_path, "POOL_THREADS=8")
    assert p.returncode == 2
    assert "'8' is not an integer, 1 to 4" in p.stderr
    assert ".inferscope.yaml:2" in p.stderr
    p, r = run_pool_try(tmp_path, "POOL_THREADS=2", declaration=POOL_DECLARATION + "    colour: blue\n")
    assert p.returncode == 2
    assert "unknown field 'colour'" in p.stderr
