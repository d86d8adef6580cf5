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
