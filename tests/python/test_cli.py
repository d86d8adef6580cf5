"""Unmodified programs: `python -m inferscope_py run`, INFERSCOPE_ENABLE=1 with import, and the sitecustomize
that iscope-run relies on (PYTHONPATH + INFERSCOPE_ENABLE=1 + LD_PRELOAD=libinferscope.so)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import inferscope_py as isc
from conftest import analyze_binary, of_kind

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(isc.__file__)))

SCRIPT = textwrap.dedent(
    """
    import sys

    def work(n):
        return sum(helper(i) for i in range(n))

    def helper(i):
        return i * i

    print("argv", sys.argv)
    print("result", work(10))
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    """
)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSCOPE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = PACKAGE_DIR + (os.pathsep + extra.pop("PYTHONPATH") if "PYTHONPATH" in extra else "")
    if os.environ.get("ISCOPE_ANALYZE"):
        env["INFERSCOPE_ANALYZE"] = os.environ["ISCOPE_ANALYZE"]
    env.update(extra)
    return env


def run(args, cwd, **env):
    return subprocess.run([sys.executable] + args, cwd=cwd, env=clean_env(**env), capture_output=True, text=True,
                          timeout=120)


def library():
    lib = os.environ.get("ISCOPE_LIBRARY")
    if not lib or not os.path.exists(lib):
        pytest.skip("ISCOPE_LIBRARY is not set to libinferscope.so (run through ctest)")
    return lib


def test_run_sets_argv_traces_and_keeps_the_exit_status(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    out = run(["-m", "inferscope_py", "run", "-o", "run.iscope", "script.py", "3", "x"], tmp_path)
    assert out.returncode == 3, out.stderr
    assert "argv ['script.py', '3', 'x']" in out.stdout and "result 285" in out.stdout
    d = isc._native._read_dump(str(tmp_path / "run.iscope"))
    assert d["complete"]
    assert len(of_kind(d, "python_call", "work")) == 1
    assert len(of_kind(d, "python_call", "helper")) == 10
    assert of_kind(d, "python_call", "<module>")  # the script's own top level


def test_run_uncaught_exception_prints_the_traceback_and_exits_1(tmp_path):
    (tmp_path / "bad.py").write_text("def f():\n    return 1 / 0\n\nf()\n")
    out = run(["-m", "inferscope_py", "run", "-o", "bad.iscope", "bad.py"], tmp_path)
    assert out.returncode == 1
    assert "ZeroDivisionError" in out.stderr and 'bad.py", line 2, in f' in out.stderr
    assert "runpy" not in out.stderr and "__main__.py" not in out.stderr  # the runner's frames are hidden
    d = isc._native._read_dump(str(tmp_path / "bad.iscope"))
    assert d["complete"] and of_kind(d, "python_call", "f")


def test_run_module_with_dash_m(tmp_path):
    (tmp_path / "mymod.py").write_text(SCRIPT)
    out = run(["-m", "inferscope_py", "run", "-o", "m.iscope", "--mode", "full", "-m", "mymod", "0"], tmp_path,
              PYTHONPATH=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "argv" in out.stdout
    d = isc._native._read_dump(str(tmp_path / "m.iscope"))
    assert len(of_kind(d, "python_call", "helper")) == 10


def test_run_reports_a_missing_script_before_recording_anything(tmp_path):
    # The session used to start first: a dump of nothing was written beside the message ("inferscope: wrote ...").
    out = run(["-m", "inferscope_py", "run", "nope.py"], tmp_path)
    assert out.returncode == 2 and "cannot open 'nope.py'" in out.stderr
    assert "inferscope: wrote" not in out.stderr
    assert not list(tmp_path.glob("*.iscope")), "a dump was written for a script that does not exist"


def test_run_takes_a_double_dash_before_the_script(tmp_path):
    # `run -- script.py` named the script '--' ("cannot open '--'"), after recording a dump of nothing.
    (tmp_path / "script.py").write_text("import sys\nprint('argv', sys.argv[1:])\n")
    out = run(["-m", "inferscope_py", "run", "-o", "d.iscope", "--", "script.py", "--flag"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "argv ['--flag']" in out.stdout
    assert (tmp_path / "d.iscope").exists()


INFERENCE = textwrap.dedent(
    """
    import threading
    import inferscope_py

    def layer(x):
        return [v * 2 for v in x]

    def model(x):
        for _ in range(3):
            x = layer(x)
        return x

    def spin():  # a daemon thread still running traced code when the interpreter exits
        while True:
            layer([1])

    threading.Thread(target=spin, daemon=True).start()
    with inferscope_py.scope("inference", batch=1):
        model([1, 2, 3])
    print("active", inferscope_py.is_active())
    """
)


@pytest.mark.parametrize("env", [{}, {"INFERSCOPE_BUFFER_MODE": "bogus"}], ids=["unwritable-output", "bad-setting"])
def test_run_that_cannot_start_recording_says_why_in_one_line_and_runs_nothing(tmp_path, env):
    # It used to end in the runner's own traceback (RuntimeError from start()), exit 1.
    (tmp_path / "script.py").write_text("print('the script ran')\n")
    output = str(tmp_path / "no" / "such" / "dir" / "x.iscope") if not env else str(tmp_path / "x.iscope")
    out = run(["-m", "inferscope_py", "run", "-o", output, "script.py"], tmp_path, **env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "the script ran" not in out.stdout
    ours = [line for line in out.stderr.splitlines() if line.startswith("python -m inferscope_py run: ")]
    assert len(ours) == 1, out.stderr
    assert (output if not env else "INFERSCOPE_BUFFER_MODE") in ours[0]
    assert not os.path.exists(output)


@pytest.mark.parametrize("preload", [False, True], ids=["import", "ld_preload"])
def test_enable_from_environment_records_scopes_and_calls_until_exit(tmp_path, preload):
    (tmp_path / "infer.py").write_text(INFERENCE)
    env = dict(INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="env.iscope")
    if preload:
        env["LD_PRELOAD"] = library()
    out = run(["infer.py"], tmp_path, **env)
    assert out.returncode == 0, out.stderr
    assert "active True" in out.stdout
    d = isc._native._read_dump(str(tmp_path / "env.iscope"))
    assert d["complete"], "the dump was not completed at exit"
    (r,) = of_kind(d, "range", "inference")
    assert r["attrs"] == {"batch": 1}
    assert len(of_kind(d, "python_call", "model")) == 1
    inner = [c for c in of_kind(d, "python_call", "layer") if c["thread"] == r["thread"]]
    assert all(r["start"] <= c["start"] <= c["end"] <= r["end"] for c in inner)
    # Once the spinning thread has made `layer` hot (1000 recorded calls), the tracer counts its short calls
    # instead of recording each (python_elided), per thread: the main thread's three are then partly or wholly
    # counted, and the spinning thread's counts never land on the main thread.
    counted = sum(e["calls"] for e in of_kind(d, "python_elided", "layer") if e["thread"] == r["thread"])
    assert len(inner) + counted == 3
    assert d["collectors"]["python"].startswith("on: ")


BEFORE_IMPORT = textwrap.dedent(
    """
    import threading

    go = threading.Event()

    def work():
        return sum(i * i for i in range(1000))

    def early():
        go.wait(30)
        work()

    t = threading.Thread(target=early, name="started-before-import")
    t.start()
    import inferscope_py

    go.set()
    t.join()
    work()
    print("tids", t.native_id, threading.get_native_id())
    """
)


@pytest.mark.parametrize("preload", [False, True], ids=["import", "ld_preload"])
def test_threads_started_before_the_import_carry_their_threading_names(tmp_path, preload):
    (tmp_path / "early.py").write_text(BEFORE_IMPORT)
    env = dict(INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="early.iscope")
    if preload:
        env["LD_PRELOAD"] = library()
    out = run(["early.py"], tmp_path, **env)
    assert out.returncode == 0, out.stderr
    early, main = (int(x) for x in out.stdout.split("tids")[1].split())
    d = isc._native._read_dump(str(tmp_path / "early.iscope"))
    names = {t["os_tid"]: t["name"] for t in d["threads"].values() if not t["channel"]}
    assert names[early] == "started-before-import"
    assert names[main] == "MainThread"


def test_report_at_exit_from_environment(tmp_path):
    (tmp_path / "infer.py").write_text(INFERENCE)
    out = run(["infer.py"], tmp_path, INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="rep.iscope",
              INFERSCOPE_REPORT="report.md", INFERSCOPE_ANALYZE=analyze_binary())
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "rep.iscope").exists()
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# InferScope report")
    assert "\n\nEnd-to-end latency: " in report
    assert "## Timeline Breakdown" in report


def test_report_at_exit_onto_a_fifo_is_refused_and_the_program_exits(tmp_path):
    # Before: the analyzer, spawned at exit, blocked opening the FIFO, and the program never ended.
    (tmp_path / "infer.py").write_text(INFERENCE)
    os.mkfifo(tmp_path / "report.md")
    out = run(["infer.py"], tmp_path, INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="rep.iscope",
              INFERSCOPE_REPORT="report.md", INFERSCOPE_ANALYZE=analyze_binary())  # run() times out at 120 s
    assert out.returncode == 0, out.stderr
    assert "the report was not written: " in out.stderr and "report.md is a FIFO (named pipe) that nothing reads" in out.stderr
    assert (tmp_path / "rep.iscope").exists()  # the dump is kept


@pytest.mark.parametrize("mode", ["default", "full"])
def test_sitecustomize_traces_an_unmodified_script_and_chains(tmp_path, mode):
    lib = library()
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("print('chained sitecustomize ran')\n")
    (tmp_path / "plain.py").write_text(SCRIPT)
    out = run(["plain.py"], tmp_path, PYTHONPATH=str(other), INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="site.iscope",
              INFERSCOPE_PYTHON_MODE=mode, LD_PRELOAD=lib)
    assert out.returncode == 0, out.stderr
    assert "chained sitecustomize ran" in out.stdout
    d = isc._native._read_dump(str(tmp_path / "site.iscope"))
    assert d["complete"]
    assert len(of_kind(d, "python_call", "helper")) == 10
    # Nothing of the tool's own sitecustomize (it chained the other one: _chain_next_sitecustomize), nor of
    # the importlib calls chaining makes, is among the program's calls.
    ours = os.path.join(PACKAGE_DIR, "sitecustomize.py")
    calls = of_kind(d, "python_call")
    assert not [c["name"] for c in calls if c["file"] == ours]
    assert not [c["name"] for c in calls if c["name"] == "module_from_spec"]


HOG = textwrap.dedent(
    """
    import threading
    import time

    def spin(ms):  # CPU time, whatever the machine's load
        end = time.thread_time() + ms / 1000
        while time.thread_time() < end:
            pass

    def step():
        time.sleep(0.01)

    t = threading.Thread(target=spin, args=(48.7,), name="bg-hog")
    t.start()
    for _ in range(10):
        step()
    t.join()
    """
)


def test_an_unmodified_program_reports_its_threads_by_name_with_their_cpu_time_and_none_of_ours(tmp_path):
    """Issue 14's report: a threading.Thread(name="bg-hog") busy 48.7 ms was `python3` with CPU 0.000, and
    _chain_next_sitecustomize was among the program's Python functions."""
    (tmp_path / "hog.py").write_text(HOG)
    out = run(["hog.py"], tmp_path, INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT="hog.iscope", LD_PRELOAD=library())
    assert out.returncode == 0, out.stderr
    rep = subprocess.run([analyze_binary(), "hog.iscope", "-o", "hog.json"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    report = json.loads((tmp_path / "hog.json").read_text())
    threads = {t["name"]: t for t in report["tables"]["threads"]}
    assert "bg-hog" in threads and "MainThread" in threads, sorted(threads)
    hog = threads["bg-hog"]
    if os.path.exists("/proc/self/schedstat"):
        assert hog["cpu_source"] == "schedstat"
        assert 45 <= hog["cpu_ms"] <= 500
    functions = [f["qualname"] for f in report["tables"]["python"]]
    assert "spin" in functions and not [f for f in functions if "sitecustomize" in f], functions


def test_sitecustomize_does_nothing_without_inferscope_enable(tmp_path):
    (tmp_path / "probe.py").write_text("import sys\nprint('loaded', 'inferscope_py' in sys.modules)\n")
    out = run(["probe.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "loaded False" in out.stdout
    assert not list(tmp_path.glob("*.iscope"))


def test_every_tool_and_the_module_print_the_project_version(tmp_path):
    # ISCOPE_VERSION is CMakeLists.txt's project version, passed by ctest: not read through the generated
    # header the tools print, so a header (or a tool) that says something else fails here.
    expected = os.environ.get("ISCOPE_VERSION")
    tools = {name: os.environ.get(var) for name, var in
             (("iscope-run", "ISCOPE_RUN"), ("iscope-analyze", "ISCOPE_ANALYZE"), ("iscope-config", "ISCOPE_CONFIG"),
              ("iscope-diff", "ISCOPE_DIFF"))}
    if not expected or not all(tools.values()):
        pytest.skip("ISCOPE_VERSION, ISCOPE_RUN, ISCOPE_ANALYZE, ISCOPE_CONFIG and ISCOPE_DIFF are set by ctest")
    assert isc.__version__ == expected
    for name, path in tools.items():
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stdout, out.stderr) == (0, f"{name} {expected}\n", ""), name
    out = run(["-m", "inferscope_py", "--version"], tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"inferscope_py {expected}\n", "")


def test_analyze_refuses_an_unknown_output_extension_and_writes_perfetto_for_perfetto_json(tmp_path):
    dump = tmp_path / "small.iscope"
    assert isc.start(output=str(dump), python=False)
    for _ in range(3):
        with isc.scope("step"):
            pass
    isc.stop()
    analyze = analyze_binary()
    out = subprocess.run([analyze, str(dump), "-o", str(tmp_path / "out.txt")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2, out.stderr
    assert "unknown extension .txt" in out.stderr and ".md, .html" in out.stderr and ".perfetto.json" in out.stderr
    assert not (tmp_path / "out.txt").exists()
    out = subprocess.run([analyze, str(dump), "-o", str(tmp_path / "noext")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "no extension" in out.stderr, out.stderr

    trace = tmp_path / "x.perfetto.json"
    out = subprocess.run([analyze, str(dump), "-o", str(trace)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    events = json.loads(trace.read_text())["traceEvents"]  # the Perfetto trace, not the JSON report
    assert len([e for e in events if e.get("ph") == "X" and e.get("name") == "step"]) == 3
