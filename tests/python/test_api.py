"""inferscope_py's API: scopes (context manager and decorator), marks, sessions, threads, bad arguments."""

import asyncio
import os
import re
import threading
import time

import pytest

import inferscope_py as isc
from conftest import of_kind


def test_scope_nesting_and_timing(record):
    def work():
        with isc.scope("outer"):
            time.sleep(0.01)
            with isc.scope("inner"):
                time.sleep(0.02)
        with isc.scope("after"):
            pass

    d = record(work)
    assert d["complete"] and d["dropped"] == 0
    (outer,), (inner,), (after,) = (of_kind(d, "range", n) for n in ("outer", "inner", "after"))
    assert (outer["depth"], inner["depth"], after["depth"]) == (0, 1, 0)
    assert outer["start"] <= inner["start"] <= inner["end"] <= outer["end"] <= after["start"]
    assert inner["dur_ns"] >= 0.02e9 * 0.95  # the clock converts: a 20 ms sleep lasts at least that long
    assert outer["dur_ns"] >= inner["dur_ns"] + 0.01e9 * 0.95
    assert outer["thread"] == inner["thread"] == after["thread"]


def test_scope_attributes_keep_their_types(record):
    d = record(lambda: isc.scope("a", n=3, x=1.5, ok=True, model="gpt2", neg=-(2**63)).__enter__().__exit__(None, None, None))
    (r,) = of_kind(d, "range", "a")
    assert r["attrs"] == {"n": 3, "x": 1.5, "ok": True, "model": "gpt2", "neg": -(2**63)}
    for k, t in (("n", int), ("x", float), ("ok", bool), ("model", str)):
        assert type(r["attrs"][k]) is t


def test_exception_inside_scope_propagates_and_closes_the_range(record):
    def work():
        with pytest.raises(KeyError):
            with isc.scope("outer"):
                with isc.scope("failing", step=1):
                    raise KeyError("x")
        with isc.scope("next"):
            pass

    d = record(work)
    (failing,) = of_kind(d, "range", "failing")
    (outer,) = of_kind(d, "range", "outer")
    assert failing["attrs"] == {"step": 1, "error": "KeyError"}
    assert outer["attrs"] == {"error": "KeyError"}
    # Depth is restored after the exception: the next range is outermost again.
    assert [r["depth"] for r in of_kind(d, "range", "next")] == [0]


def test_decorator_on_functions_methods_and_recursion(record):
    @isc.scope("fact", kind="recursive")
    def fact(n):
        """factorial"""
        return 1 if n <= 1 else n * fact(n - 1)

    class Model:
        @isc.scope("Model.step")
        def step(self, x):
            return x + 1

        @classmethod
        @isc.scope("Model.make")
        def make(cls):
            return cls()

        @staticmethod
        @isc.scope("Model.helper")
        def helper(v):
            return v * 2

    assert fact.__name__ == "fact" and fact.__doc__ == "factorial" and fact.__wrapped__ is not None

    def work():
        assert fact(4) == 24
        m = Model.make()
        assert m.step(1) == 2 and Model.helper(3) == 6 and m.helper(1) == 2

    d = record(work)
    facts = of_kind(d, "range", "fact")
    assert sorted(r["depth"] for r in facts) == [0, 1, 2, 3]
    assert all(r["attrs"] == {"kind": "recursive"} for r in facts)
    assert len(of_kind(d, "range", "Model.step")) == 1
    assert len(of_kind(d, "range", "Model.make")) == 1
    assert len(of_kind(d, "range", "Model.helper")) == 2


def test_decorator_exception_adds_error(record):
    @isc.scope("boom")
    def boom():
        raise RuntimeError("no")

    def work():
        with pytest.raises(RuntimeError):
            boom()

    (r,) = of_kind(record(work), "range", "boom")
    assert r["attrs"] == {"error": "RuntimeError"}


def test_decorator_on_generators_and_coroutines_spans_the_whole_run(record):
    @isc.scope("gen")
    def gen(n):
        for i in range(n):
            time.sleep(0.002)
            yield i

    @isc.scope("coro")
    async def coro():
        await asyncio.sleep(0.01)
        return 7

    @isc.scope("agen")
    async def agen():
        for i in range(2):
            await asyncio.sleep(0.001)
            yield i

    async def consume():
        return [i async for i in agen()]

    def work():
        assert list(gen(3)) == [0, 1, 2]
        assert asyncio.run(coro()) == 7
        assert asyncio.run(consume()) == [0, 1]

    d = record(work)
    (g,) = of_kind(d, "range", "gen")
    (c,) = of_kind(d, "range", "coro")
    assert len(of_kind(d, "range", "agen")) == 1
    assert g["dur_ns"] >= 3 * 0.002e9 * 0.95
    assert c["dur_ns"] >= 0.01e9 * 0.95


def test_mark_event(record):
    d = record(lambda: isc.mark_event("batch_full", size=32, reason="timeout"))
    (m,) = of_kind(d, "mark", "batch_full")
    assert m["attrs"] == {"size": 32, "reason": "timeout"}


def test_threads_record_into_their_own_buffers(record):
    n_threads, per_thread = 4, 200

    def worker(i):
        isc.set_thread_name(f"worker-{i}")
        for _ in range(per_thread):
            with isc.scope("job", worker=i):
                with isc.scope("part"):
                    pass

    def work():
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    d = record(work)
    jobs = of_kind(d, "range", "job")
    assert len(jobs) == n_threads * per_thread
    by_thread = {}
    for r in jobs:
        by_thread.setdefault(r["thread"], set()).add(r["attrs"]["worker"])
    assert len(by_thread) == n_threads and all(len(v) == 1 for v in by_thread.values())
    assert all(r["depth"] == 1 for r in of_kind(d, "range", "part"))
    names = {t["name"] for t in d["threads"].values()}
    assert {f"worker-{i}" for i in range(n_threads)} <= names


def test_set_thread_name_defaults_to_the_python_thread_name(record):
    def work():
        t = threading.Thread(target=lambda: (isc.set_thread_name(), isc.mark_event("here")), name="py-named")
        t.start()
        t.join()

    d = record(work)
    assert "py-named" in {t["name"] for t in d["threads"].values()}


def test_session_context_manager_and_start_stop_results(tmp_path):
    path = tmp_path / "s.iscope"
    assert not isc.is_active()
    with isc.session(output=str(path), python=False) as out:
        assert out == str(path) and isc.is_active()
        assert isc.start() is False  # one session at a time: the running one goes on
        with isc.scope("inside"):
            pass
    assert not isc.is_active()
    assert isc.stop() is False
    d = isc._native._read_dump(str(path))
    assert d["complete"] and len(of_kind(d, "range", "inside")) == 1


def test_start_accepts_pathlike_output(tmp_path):
    path = tmp_path / "p.iscope"
    assert isc.start(output=path, python=False)
    isc.stop()
    assert path.exists()


def test_start_takes_every_setting_of_the_config_table(tmp_path):
    # `enable` was missing from the binding's own keyword table; the config table has it, so start() does.
    # An int is a number, a tuple a list, and a path the output, as in .inferscope.yaml.
    path = tmp_path / "all.iscope"
    assert isc.start(output=path, enable=True, python=False, system=False, cupti_activities=("kernel", "memcpy"),
                     launch_bound_max_kernel_us=5, step="", log_level="warn")
    isc.stop()
    assert path.exists()


def test_nothing_is_recorded_without_a_session(tmp_path):
    # Ranges and marks made between two sessions reach neither dump, although the thread is bound to a ring
    # by the first session and rebound by the second; those made inside each session are in its dump.
    first, second = tmp_path / "first.iscope", tmp_path / "second.iscope"
    assert isc.start(output=str(first), python=False)
    with isc.scope("inside"):
        isc.mark_event("inside")
    isc.stop()
    assert not isc.is_active()
    with isc.scope("between"):
        isc.mark_event("between")
    assert isc.start(output=str(second), python=False)
    with isc.scope("inside"):
        isc.mark_event("inside")
    isc.stop()
    for path in (first, second):
        d = isc._native._read_dump(str(path))
        assert len(of_kind(d, "range", "inside")) == 1 and len(of_kind(d, "mark", "inside")) == 1, path
        assert not [r for r in d["records"] if r["name"] == "between"], path


def test_ring_mode_flush_ring(tmp_path):
    path = tmp_path / "ring.iscope"
    assert isc.start(output=str(path), buffer_mode="ring", python=False)
    try:
        with isc.scope("in_window"):
            pass
        snap = isc.flush_ring()
    finally:
        isc.stop()
    assert snap and os.path.exists(snap)
    assert len(of_kind(isc._native._read_dump(snap), "range", "in_window")) == 1
    assert isc.flush_ring() is None  # no ring session now


@pytest.mark.parametrize(
    "call, error, text",
    [
        (lambda: isc.scope(1), TypeError, "name must be a str"),
        (lambda: isc.scope(""), ValueError, "must not be empty"),
        (lambda: isc.scope("x", a=[1]), TypeError, "attribute 'a' must be int, float, bool or str"),
        (lambda: isc.scope("x", a=2**64), ValueError, "does not fit in 64 bits"),
        (lambda: isc.scope("x")(42), TypeError, "can only decorate a callable"),
        (lambda: isc.mark_event(None), TypeError, "name must be a str"),
        (lambda: isc.mark_event("m", v=object()), TypeError, "must be int, float, bool or str"),
        (lambda: isc.set_thread_name(3), TypeError, "name must be a str"),
        # start(**config) checks values with the config file's table and says what it says.
        (lambda: isc.start(bogus=1), TypeError, "start() keyword argument: unknown key 'bogus'"),
        (lambda: isc.start(trace_sise_mb=5), TypeError, "unknown key 'trace_sise_mb'; did you mean 'trace_size_mb'?"),
        (lambda: isc.start(trace_size_mb=0), ValueError,
         "start() keyword argument: trace_size_mb: 0 is out of range; allowed: an integer in [1, 65536]"),
        (lambda: isc.start(thread_buffer_kb=100), ValueError, "power of two"),
        (lambda: isc.start(buffer_mode="disk"), ValueError, "buffer_mode: 'disk' is not an allowed value; allowed: one of: stream, ring"),
        (lambda: isc.start(cupti_activities="kernl"), ValueError,
         "cupti_activities: 'kernl' is not a CUPTI preset or activity kind; allowed: default | minimal | full | none"),
        (lambda: isc.start(report="out.txt"), ValueError, "report: 'out.txt' does not end in .md, .html or .json"),
        (lambda: isc.start(launch_bound_max_kernel_us=0.0), ValueError, "allowed: a number in [0.1, 1000000]"),
        (lambda: isc.start(trace_size_mb=1.5), TypeError, "trace_size_mb must be an int, not float"),
        (lambda: isc.start(output=3), TypeError, "output must be a str"),
        (lambda: isc.start(python="yes"), TypeError, "python must be a bool"),
        (lambda: isc.start(python_include=[1]), TypeError, "every item of python_include must be a str"),
        (lambda: isc._native.start("positional"), TypeError, "keyword arguments only"),
        (lambda: isc.trace_python("yes"), TypeError, "enabled must be a bool"),
        (lambda: isc.trace_python(True, mode="all"), ValueError, "mode must be 'default' or 'full'"),
        (lambda: isc.trace_python(True, max_depth=-1), ValueError, "max_depth=-1 is out of range"),
        (lambda: isc.trace_python(True, include=3), TypeError, "include must be a str"),
        (lambda: isc.trace_python(True), RuntimeError, "no session is recording"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, text):
    assert not isc.is_active()
    with pytest.raises(error, match=re.escape(text)):
        call()
    assert not isc.is_active()


def test_start_reports_an_output_it_cannot_open(tmp_path):
    with pytest.raises(RuntimeError, match="could not start recording"):
        isc.start(output=str(tmp_path / "no" / "such" / "dir" / "x.iscope"))


def test_scope_exit_without_enter_is_an_error():
    with pytest.raises(RuntimeError, match="exited without being entered"):
        isc.scope("x").__exit__(None, None, None)


def test_read_dump_rejects_a_file_that_is_not_a_dump(tmp_path):
    bad = tmp_path / "bad.iscope"
    bad.write_bytes(b"not a dump at all")
    with pytest.raises(ValueError, match="bad.iscope"):
        isc._native._read_dump(str(bad))


def test_importing_the_package_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, inferscope_py, inferscope_py.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
