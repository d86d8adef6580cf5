"""Issue 18 under iscope-run: Python sees the signal behaviour it would see without us, a signal sent to a forked
child stops only that child, and --follow-children records os.fork and multiprocessing (fork, spawn,
forkserver) children into dumps the analyzer reads."""

import glob
import os
import subprocess
import sys
import textwrap

import pytest

import inferscope_py as isc
from conftest import analyze_binary

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(isc.__file__)))


def iscope_run_binary():
    build = os.environ.get("ISCOPE_BUILD_DIR")
    path = os.path.join(build, "tools", "iscope-run", "iscope-run") if build else ""
    if not os.access(path, os.X_OK):
        pytest.skip("ISCOPE_BUILD_DIR has no tools/iscope-run/iscope-run (run through ctest)")
    return path


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSCOPE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = PACKAGE_DIR
    if os.environ.get("ISCOPE_ANALYZE"):
        env["INFERSCOPE_ANALYZE"] = os.environ["ISCOPE_ANALYZE"]
    if os.environ.get("ISCOPE_LIBRARY"):
        env["INFERSCOPE_LIBRARY"] = os.environ["ISCOPE_LIBRARY"]
    return env


def python(tmp_path, script, *iscope_args, recorded=True):
    """Runs `script` with Python, under iscope-run (-o run.iscope) when `recorded`; 60 s at most."""
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    cmd = [sys.executable, "script.py"]
    if recorded:
        cmd = [iscope_run_binary(), "-q", "-o", "run.iscope", *iscope_args, "--"] + cmd
    return subprocess.run(cmd, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)


SIGNALS_SEEN = """
    import signal
    print("SIGINT", signal.getsignal(signal.SIGINT))
    print("SIGTERM default", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    print("SIGUSR2 default", signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2):   # the round trip a library does
        old = signal.signal(sig, lambda *a: None)
        signal.signal(sig, old)
        print(sig, "restored", signal.getsignal(sig) == old)
"""


@pytest.mark.parametrize("mode", ["stream", "ring"])
def test_signal_handlers_look_exactly_as_without_us(tmp_path, mode):
    plain = python(tmp_path, SIGNALS_SEEN, recorded=False)
    assert plain.returncode == 0, plain.stderr
    recorded = python(tmp_path, SIGNALS_SEEN, "--buffer-mode", mode)
    assert recorded.returncode == 0, recorded.stderr
    assert "TypeError" not in recorded.stderr
    assert recorded.stdout == plain.stdout
    assert "SIGINT <built-in function default_int_handler>" in recorded.stdout
    assert "SIGTERM default True" in recorded.stdout and "SIGUSR2 default True" in recorded.stdout
    assert isc._native._read_dump(str(tmp_path / "run.iscope"))["complete"]


def test_ctrl_c_raises_keyboard_interrupt_and_finally_runs(tmp_path):
    out = python(tmp_path, """
        import os, signal, time
        try:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
                print("no KeyboardInterrupt")
            finally:
                print("finally ran")
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["finally", "ran", "KeyboardInterrupt"]
    assert isc._native._read_dump(str(tmp_path / "run.iscope"))["complete"]


def test_sigterm_still_completes_the_dump_and_ends_the_program_as_without_us(tmp_path):
    out = python(tmp_path, """
        import os, signal, time
        def work():
            return sum(range(1000))
        for _ in range(100):
            work()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("survived")
    """)
    assert out.returncode == 128 + 15, out.stderr
    assert "survived" not in out.stdout
    d = isc._native._read_dump(str(tmp_path / "run.iscope"))
    assert d["complete"]
    assert any(r["kind"] == "python_call" and r["name"] == "work" for r in d["records"])


def test_terminating_a_multiprocessing_child_leaves_the_parent_running(tmp_path):
    # Process.terminate() is what Pool.terminate() and DataLoader shutdown do.
    out = python(tmp_path, """
        import multiprocessing as mp, time
        def sleeper():
            time.sleep(60)
        def work():
            return sum(range(1000))
        if __name__ == "__main__":
            p = mp.get_context("fork").Process(target=sleeper)
            p.start()
            time.sleep(0.3)
            p.terminate()
            p.join(10)
            print("child exitcode", p.exitcode)
            for _ in range(50):
                work()
            print("parent done")
    """)
    assert out.returncode == 0, out.stderr
    assert "child exitcode -15" in out.stdout and "parent done" in out.stdout
    d = isc._native._read_dump(str(tmp_path / "run.iscope"))
    assert d["complete"] and d["dropped"] == 0
    assert sum(1 for r in d["records"] if r["kind"] == "python_call" and r["name"] == "work") == 50


CHILDREN = """
    import multiprocessing as mp, os, sys
    def child_task(tag):
        return sum(range(10000)) + len(tag)
    if __name__ == "__main__":
        for ctx in ("fork", "spawn", "forkserver"):
            p = mp.get_context(ctx).Process(target=child_task, args=(ctx,))
            p.start()
            p.join(30)
            print(ctx, p.exitcode)
        pid = os.fork()
        if pid == 0:
            child_task("os.fork")
            os._exit(0)
        print("os.fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def child_dumps(tmp_path):
    """{pid: dump} of every child dump that holds a child_task call."""
    found = {}
    for path in glob.glob(str(tmp_path / "run.*.iscope")):
        d = isc._native._read_dump(path)
        if any(r["kind"] == "python_call" and r["name"] == "child_task" for r in d["records"]):
            found[path] = d
    return found


def test_follow_children_records_os_fork_and_every_multiprocessing_start_method(tmp_path):
    out = python(tmp_path, CHILDREN, "--follow-children")
    assert out.returncode == 0, out.stderr
    assert "TypeError" not in out.stderr
    assert out.stdout.split() == ["fork", "0", "spawn", "0", "forkserver", "0", "os.fork", "0"]
    found = child_dumps(tmp_path)
    assert len(found) == 4, sorted(found)
    root = isc._native._read_dump(str(tmp_path / "run.iscope"))
    assert root["complete"]
    root_pid = root["process"]["pid"]
    for path, d in found.items():
        assert d["complete"], path
        assert path.endswith(f"run.{d['process']['pid']}.iscope")
        assert d["process"]["ppid"] != d["process"]["pid"]
        summary = subprocess.run([analyze_binary(), path, "--summary"], capture_output=True, text=True, timeout=60)
        assert summary.returncode == 0, summary.stderr
    # The fork and os.fork children are the root's own; forkserver's and spawn's come through helpers.
    assert sum(1 for d in found.values() if d["process"]["ppid"] == root_pid) >= 2


def test_without_follow_children_no_child_records(tmp_path):
    out = python(tmp_path, CHILDREN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fork", "0", "spawn", "0", "forkserver", "0", "os.fork", "0"]
    assert glob.glob(str(tmp_path / "run.*.iscope")) == []
    assert isc._native._read_dump(str(tmp_path / "run.iscope"))["complete"]


def test_exec_keeps_what_python_recorded_before_it(tmp_path):
    out = python(tmp_path, """
        import os, sys
        def before_exec():
            return sum(range(1000))
        for _ in range(20):
            before_exec()
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-c", "print('after exec')"])
    """)
    assert out.returncode == 0, out.stderr
    assert "after exec" in out.stdout
    before = isc._native._read_dump(str(tmp_path / "run.pre-exec1.iscope"))
    assert before["complete"]
    assert sum(1 for r in before["records"] if r["kind"] == "python_call" and r["name"] == "before_exec") == 20
    assert isc._native._read_dump(str(tmp_path / "run.iscope"))["complete"]
