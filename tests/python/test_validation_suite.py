"""The second bottleneck suite (samples/validation/, scripts/validate-unseen.sh) stays runnable without a GPU:
every program compiles, declares a known EXPECTED category, answers --help without torch, takes --fixed,
--steps and --ab, and exits 77 with a message where torch or a CUDA device is missing."""

import ast
import glob
import os
import py_compile
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = os.path.join(ROOT, "samples", "validation")
PROGRAMS = sorted(p for p in glob.glob(os.path.join(SUITE, "*.py")) if not os.path.basename(p).startswith("_"))
KNOWN = {"cpu_bound", "launch_bound", "sync_bound", "h2d_bound", "d2h_bound", "gpu_bound", "memory_alloc",
         "cpu_contention", "pcie_saturation", "wait"}
# Runs a program with `import torch` failing, whatever this interpreter has installed.
NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
            "sys.path.insert(0, __import__('os').path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")


def run(args, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=120, env=e)


def test_suite_is_there():
    assert len(PROGRAMS) >= 10, PROGRAMS
    assert os.path.isfile(os.path.join(SUITE, "cpp", "cuda_graph_app.cu"))


@pytest.mark.parametrize("path", PROGRAMS, ids=os.path.basename)
def test_program_declares_expected_and_compiles(path, tmp_path):
    py_compile.compile(path, cfile=str(tmp_path / "x.pyc"), doraise=True)
    tree = ast.parse(open(path).read())
    consts = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and t.id in ("EXPECTED", "HAS_FIX")}
    assert consts.get("EXPECTED") in KNOWN, consts
    # torch is imported inside main(), never at module level (so --help works where torch is absent)
    top = [a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
           for a in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module or "")])]
    assert not [m for m in top if m.split(".")[0] in ("torch", "numpy", "transformers")], top


@pytest.mark.parametrize("path", PROGRAMS, ids=os.path.basename)
def test_program_help_and_no_torch(path):
    r = run(["-c", NO_TORCH, path, "--help"])
    assert r.returncode == 0, r.stdout + r.stderr
    for flag in ("--fixed", "--steps", "--ab"):
        assert flag in r.stdout, r.stdout
    for args in (["--steps", "2"], ["--fixed", "--steps", "2"], ["--ab", "1"]):
        r = run(["-c", NO_TORCH, path] + args)
        assert r.returncode == 77, (args, r.returncode, r.stdout + r.stderr)
        assert "nothing to run" in r.stdout, r.stdout


@pytest.mark.parametrize("path", PROGRAMS, ids=os.path.basename)
def test_program_without_cuda_device(path):
    # Plain run with no visible device: 77 whether torch is installed here or not.
    r = run([path, "--steps", "2"], CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 77, r.stdout + r.stderr
    assert "nothing to run" in r.stdout, r.stdout


def test_driver_script_parses():
    r = subprocess.run(["bash", "-n", os.path.join(ROOT, "scripts", "validate-unseen.sh")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---- the first suite (samples/planted/): fixed variants and the A/B shared with this suite ----------------------

PLANTED_DIR = os.path.join(ROOT, "samples", "planted")
PLANTED = sorted(p for p in glob.glob(os.path.join(PLANTED_DIR, "*.py")) if not os.path.basename(p).startswith("_"))


def _has_fix(tree):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "HAS_FIX" for t in n.targets):
            return ast.literal_eval(n.value)
    return True


@pytest.mark.parametrize("path", PLANTED, ids=os.path.basename)
def test_planted_program_passes_its_fix_to_run(path, tmp_path):
    py_compile.compile(path, cfile=str(tmp_path / "x.pyc"), doraise=True)
    tree = ast.parse(open(path).read())
    runs = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "run"]
    assert runs, "the program never calls run()"
    gives_fix = any(k.arg == "fixed" for c in runs for k in c.keywords)
    assert gives_fix == _has_fix(tree), "a program with a fix passes fixed= to run(); one without says HAS_FIX = False"


@pytest.mark.parametrize("path", PLANTED, ids=os.path.basename)
def test_planted_program_without_torch(path):
    for args in (["--ab", "1"], ["--fixed"], []):
        r = run(["-c", NO_TORCH, path] + args)
        assert r.returncode == 77, (args, r.returncode, r.stdout + r.stderr)
        assert "nothing to plant" in r.stdout, r.stdout


class _FakeCuda:
    @staticmethod
    def synchronize():
        pass


class _FakeTorch:
    cuda = _FakeCuda


def test_ab_measures_competing_fixes_in_the_same_rotation(capsys):
    sys.path.insert(0, SUITE)
    try:
        from _harness import ab
    finally:
        sys.path.remove(SUITE)
    import time as _t
    calls = {"broken": 0, "fixed": 0, "graph": 0}

    def variant(name, seconds):
        def f(i):
            calls[name] += 1
            _t.sleep(seconds)
        return f
    ab(_FakeTorch, variant("broken", 0.004), variant("fixed", 0.002), rounds=3, window=2, warmup=1,
       alternatives={"launch_bound": variant("graph", 0.001)})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("AB broken_ms=") and "saving_pct=" in out[0], out
    assert out[1].startswith("AB_ALT category=launch_bound fixed_ms="), out
    saving = float(out[0].split("saving_pct=")[1].split()[0])
    alt = float(out[1].split("saving_pct=")[1])
    assert 20 < saving < 80 and alt > saving, out  # 4 -> 2 ms, 4 -> 1 ms
    assert calls == {"broken": 1 + 3 * 2, "fixed": 1 + 3 * 2, "graph": 1 + 3 * 2}


def _sh(script):
    lib = os.path.join(ROOT, "scripts", "lib", "savings.sh")
    return subprocess.run(["bash", "-c", f". '{lib}'; {script}"], capture_output=True, text=True)


def test_savings_helpers_on_canned_inputs(tmp_path):
    report = tmp_path / "r.json"
    report.write_text('{"end_to_end_ms": 10.0, "findings": ['
                      '{"category": "launch_bound", "suggestions": [{"impact_ms": 5.0, "estimated": true}]},'
                      '{"category": "memory_alloc", "suggestions": [{"impact_ms": 0, "estimated": false},'
                      ' {"impact_ms": 1.5, "estimated": true}]},'
                      '{"category": "warmup", "suggestions": [{"impact_ms": 0, "estimated": false}]}]}')
    r = _sh(f"preds_of {sys.executable} '{report}'")
    assert r.stdout.strip() == "launch_bound=5.00=50.0,memory_alloc=1.50=15.0,warmup=n/a=n/a", r.stdout + r.stderr
    assert _sh("pred_for memory_alloc 'launch_bound=5.00=50.0,memory_alloc=1.50=15.0'").stdout.strip() == "15.0"
    assert _sh("pred_for sync_bound 'launch_bound=5.00=50.0'").stdout.strip() == "n/a"
    log = tmp_path / "ab.log"
    log.write_text("warming up\nAB broken_ms=4.0 fixed_ms=1.0 saving_pct=75.0 rounds=3 window=2\n")
    assert _sh(f"ab_saving '{log}'").stdout.strip() == "75.0"
    assert _sh(f"ab_saving '{tmp_path / 'none.log'}'").stdout.strip() == ""
    assert _sh(f"has_fix {sys.executable} '{os.path.join(PLANTED_DIR, 'gpu_bound.py')}'").stdout.strip() == "False"
    assert _sh(f"has_fix {sys.executable} '{os.path.join(PLANTED_DIR, 'sync_bound.py')}'").stdout.strip() == "True"


def test_planted_driver_script_parses():
    r = subprocess.run(["bash", "-n", os.path.join(ROOT, "scripts", "planted-bottlenecks.sh")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
