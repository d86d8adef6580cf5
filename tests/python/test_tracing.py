"""Python call tracing: every call becomes a python_call record; filters, depth, generators, async, threads,
exceptions, switching at run time, and the summary tool. Runs the C profile hook on CPython < 3.12 and
sys.monitoring on >= 3.12 (the same assertions hold for both)."""

import asyncio
import cProfile
import functools
import json
import os
import subprocess
import sys
import threading

import pytest

import inferscope_py as isc
from conftest import analyze_binary, of_kind


def leaf(x):
    return x + 1


def middle(x):
    return leaf(x) + leaf(x)


def top(x):
    return middle(x) * 2


class Widget:
    def method(self):
        return leaf(1)


def calls(d, name):
    return of_kind(d, "python_call", name)


def test_mechanism_matches_the_interpreter():
    expected = "sys.monitoring" if sys.version_info >= (3, 12) else "C profile hook"
    assert isc.tracing_mechanism.startswith(expected)


def test_every_call_is_recorded_with_depth_name_file_and_line(record):
    d = record(lambda: top(1), trace=True)
    (t,) = calls(d, "top")
    (m,) = calls(d, "middle")
    leaves = calls(d, "leaf")
    assert len(leaves) == 2
    assert m["depth"] == t["depth"] + 1 and all(r["depth"] == t["depth"] + 2 for r in leaves)
    assert t["start"] <= m["start"] <= leaves[0]["start"] <= leaves[1]["end"] <= m["end"] <= t["end"]
    assert t["file"] == __file__ and t["line"] == top.__code__.co_firstlineno
    (w,) = calls(record(lambda: Widget().method(), trace=True), "Widget.method")  # qualified names
    assert w["line"] == Widget.method.__code__.co_firstlineno


def test_python_calls_nest_inside_scopes_on_the_same_thread(record):
    def work():
        with isc.scope("step"):
            top(1)

    d = record(work, trace=True)
    (step,) = of_kind(d, "range", "step")
    (t,) = calls(d, "top")
    assert step["thread"] == t["thread"] and step["start"] <= t["start"] <= t["end"] <= step["end"]


def test_exceptions_unwind_the_stack(record):
    def raiser():
        raise ValueError("x")

    def catcher():
        try:
            raiser()
        except ValueError:
            pass
        return leaf(0)

    d = record(lambda: catcher(), trace=True)
    (c,) = calls(d, "test_exceptions_unwind_the_stack.<locals>.catcher")
    (r,) = calls(d, "test_exceptions_unwind_the_stack.<locals>.raiser")
    (lf,) = calls(d, "leaf")
    assert r["depth"] == lf["depth"] == c["depth"] + 1  # the stack stayed consistent after the unwind
    assert c["start"] <= r["start"] <= r["end"] <= lf["start"] <= c["end"]


def counter(n):
    for i in range(n):
        leaf(i)
        yield i


def test_generators_record_each_resumption(record):
    def work():
        for _ in counter(3):
            leaf(0)

    d = record(work, trace=True)
    gen = calls(d, "counter")
    assert len(gen) == 4  # three yields and the final return
    depth = gen[0]["depth"]
    assert all(r["depth"] == depth for r in gen)
    leaves = calls(d, "leaf")
    assert len([r for r in leaves if r["depth"] == depth + 1]) == 3  # leaf(i) inside each resumption
    assert len([r for r in leaves if r["depth"] == depth]) == 3  # the loop body's leaf(0), beside the generator
    for a, b in zip(gen, gen[1:]):
        assert a["end"] <= b["start"]


async def child(i):
    await asyncio.sleep(0.001)
    return leaf(i)


async def parent():
    return sum(await asyncio.gather(*(child(i) for i in range(3))))


def test_coroutines_are_traced(record):
    d = record(lambda: asyncio.run(parent()), trace=True)
    kids = calls(d, "child")
    # Each coroutine runs twice: up to its await, then after it.
    assert len(kids) == 6
    assert len(calls(d, "parent")) >= 2
    assert not calls(d, "BaseEventLoop.run_until_complete")  # asyncio itself is stdlib: not traced by default


@pytest.mark.skipif(sys.version_info < (3, 11), reason="coroutine records need PyFrame_GetGenerator (CPython 3.11)")
def test_each_coroutine_run_names_its_object_and_its_first_run(record):
    d = record(lambda: asyncio.run(parent()), trace=True)
    kids = calls(d, "child")
    runs = of_kind(d, "python_coroutine", "child")
    # One coroutine record right after each run of child, with the run's start.
    assert len(runs) == len(kids) == 6
    assert sorted(r["start"] for r in runs) == sorted(k["start"] for k in kids)
    objects = {r["object"] for r in runs}
    assert len(objects) == 3  # three coroutines, two runs each
    for o in objects:
        mine = sorted((r for r in runs if r["object"] == o), key=lambda r: r["start"])
        assert [r["first"] for r in mine] == [True, False]  # its first run, then the resumption after the await
        assert [r["last"] for r in mine] == [False, True]  # suspended at the await, then returned
    # parent is one coroutine too; plain functions get no coroutine record.
    assert len({r["object"] for r in of_kind(d, "python_coroutine", "parent")}) == 1
    assert not of_kind(d, "python_coroutine", "leaf")


async def fails():
    await asyncio.sleep(0)
    raise ValueError("no")


async def catches():
    try:
        await fails()
    except ValueError:
        return 1


@pytest.mark.skipif(sys.version_info < (3, 11), reason="coroutine records need PyFrame_GetGenerator (CPython 3.11)")
def test_a_coroutine_that_raises_ends_its_life_too(record):
    d = record(lambda: asyncio.run(catches()), trace=True)
    runs = sorted(of_kind(d, "python_coroutine", "fails"), key=lambda r: r["start"])
    assert [(r["first"], r["last"]) for r in runs] == [(True, False), (False, True)]


def tiny(x):
    return x + 1


def test_short_calls_of_a_hot_function_are_counted_not_recorded_one_by_one(record):
    def work():
        for i in range(5000):
            tiny(i)

    d = record(work, trace=True)
    recorded = calls(d, "tiny")
    counted = of_kind(d, "python_elided", "tiny")
    # The first 1000 calls are recorded one by one; after that the short ones are counted, 4096 to a record, the
    # rest written when tracing stops.
    assert len(recorded) >= 1000
    assert counted, "a tiny function called 5000 times was recorded call by call"
    assert len(recorded) + sum(c["calls"] for c in counted) == 5000
    assert all(c["total_ns"] > 0 and c["start"] <= c["end"] for c in counted)


def tiny_elsewhere(x):
    return x - 1


def test_short_calls_are_counted_per_thread_and_each_count_names_its_own_thread(record):
    # The counts used to be one per function for the whole process, written by whichever thread reached 4096: a
    # thread's calls landed on another thread, and a range's calls could not be told from a busy thread's.
    done = threading.Event()

    def spin():
        for i in range(6000):
            tiny_elsewhere(i)
        done.set()

    def work():
        threading.Thread(target=spin, name="spinner").start()
        done.wait()
        for i in range(5):  # hot already: the spinning thread made it so
            tiny_elsewhere(i)

    d = record(work, trace=True)
    main = {c["thread"] for c in calls(d, "test_short_calls_are_counted_per_thread_and_each_count_names_its_own_thread.<locals>.work")}
    assert len(main) == 1
    (main,) = main
    per_thread = {}
    for c in calls(d, "tiny_elsewhere"):
        per_thread[c["thread"]] = per_thread.get(c["thread"], 0) + 1
    for c in of_kind(d, "python_elided", "tiny_elsewhere"):
        per_thread[c["thread"]] = per_thread.get(c["thread"], 0) + c["calls"]
    assert per_thread.pop(main) == 5
    assert list(per_thread.values()) == [6000]


def test_a_coroutines_runs_and_wait_points_are_never_counted_in_aggregate(record):
    async def ping():
        return 1

    async def many():
        for _ in range(1500):
            await ping()

    d = record(lambda: asyncio.run(many()), trace=True)
    assert len(calls(d, "test_a_coroutines_runs_and_wait_points_are_never_counted_in_aggregate.<locals>.ping")) == 1500
    assert not of_kind(d, "python_elided", "test_a_coroutines_runs_and_wait_points_are_never_counted_in_aggregate.<locals>.ping")


def test_threads_started_before_and_after_tracing_are_traced(record):
    go = threading.Event()
    seen = {}

    def early():
        go.wait()
        seen["early"] = threading.get_ident()
        middle(1)

    def late():
        seen["late"] = threading.get_ident()
        middle(2)

    t_early = threading.Thread(target=early)
    t_early.start()  # exists before tracing starts

    def work():
        t_late = threading.Thread(target=late)
        t_late.start()
        go.set()
        t_late.join()
        t_early.join()

    d = record(work, trace=True)
    threads = {r["thread"] for r in calls(d, "middle")}
    assert len(threads) == 2
    os_tids = {d["threads"][str(t)]["os_tid"] for t in threads}
    assert len(os_tids) == 2


def test_default_mode_skips_the_standard_library_full_mode_keeps_it(record):
    def work():
        json.dumps({"a": [1, 2, 3]})
        leaf(1)

    default = record(work, trace=True)
    assert calls(default, "leaf") and not calls(default, "dumps")
    full = record(work, trace=True, mode="full")
    (dumps,) = calls(full, "dumps")
    assert dumps["file"].endswith("json/__init__.py")
    assert calls(full, "JSONEncoder.encode")


def test_default_mode_keeps_the_calls_where_threads_hand_work_over(record):
    import queue

    q = queue.Queue()
    ready = threading.Event()

    def producer():
        ready.wait()
        q.put(leaf(1))

    def work():
        t = threading.Thread(target=producer, name="producer")
        t.start()
        ready.set()
        q.get(timeout=5)
        t.join()

    d = record(work, trace=True)
    # include/inferscope/wait_points.hpp: waits and wake-ups in the standard library are traced by default ...
    (get,) = calls(d, "Queue.get")
    assert get["file"].endswith("queue.py")
    (put,) = calls(d, "Queue.put")
    assert put["thread"] != get["thread"]
    assert calls(d, "Event.wait") and calls(d, "Event.set") and calls(d, "Thread.join")
    assert put["end"] <= get["end"]  # the put that woke the get ended before it returned
    # ... the rest of it is not (Thread.start, Condition.__enter__, Queue._put ...)
    assert not calls(d, "Thread.start") and not calls(d, "Queue._put") and not calls(d, "Queue._qsize")


def test_default_mode_keeps_forward_in_installed_packages(record, tmp_path, monkeypatch):
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "fakenn.py").write_text(
        "class Layer:\n"
        "    def forward(self, x):\n"
        "        return self.helper(x)\n"
        "    def helper(self, x):\n"
        "        return x\n"
    )
    monkeypatch.syspath_prepend(str(lib))
    import fakenn

    d = record(lambda: fakenn.Layer().forward(1), trace=True)
    assert len(calls(d, "Layer.forward")) == 1
    assert not calls(d, "Layer.helper")


def test_include_and_exclude_by_module_and_path(record, tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def outer():\n    from mypkg.sub import inner\n    return inner.f()\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "inner.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mypkg

    def work():
        mypkg.outer()
        leaf(1)

    only_pkg = record(work, trace=True, include="mypkg")
    assert calls(only_pkg, "outer") and calls(only_pkg, "f") and not calls(only_pkg, "leaf")

    no_sub = record(work, trace=True, exclude=["mypkg.sub"])
    assert calls(no_sub, "outer") and calls(no_sub, "leaf") and not calls(no_sub, "f")

    by_path = record(work, trace=True, include=[str(pkg / "sub") + "/"])
    assert calls(by_path, "f") and not calls(by_path, "outer") and not calls(by_path, "leaf")

    # A module prefix matches whole components only: "mypk" is not "mypkg".
    assert not calls(record(work, trace=True, include="mypk"), "outer")


def test_the_profilers_own_code_is_never_traced_even_when_an_include_covers_it(record):
    """A project directory holding the virtual environment covers inferscope_py too: its wrappers (the scope
    decorator's generator wrapper here) must not appear among the user's calls, in any mode."""
    package = os.path.dirname(os.path.abspath(isc.__file__))

    @isc.scope("gen")
    def numbers():
        yield leaf(1)

    def work():
        assert list(numbers()) == [2]

    for mode in ("default", "full"):
        d = record(work, trace=True, mode=mode, include=[os.path.dirname(package) + "/", os.path.dirname(__file__) + "/"])
        traced = of_kind(d, "python_call")
        assert calls(d, "leaf") and calls(d, "test_the_profilers_own_code_is_never_traced_even_when_an_include_covers_it.<locals>.numbers")
        assert not [c["name"] for c in traced if c["file"].startswith(package + "/")], mode


def top_then_leaf():
    top(1)
    leaf(5)


def test_max_depth_limits_recorded_nesting(record):
    d = record(functools.partial(top, 1), trace=True, max_depth=2)  # partial: top is the outermost call
    assert calls(d, "top") and calls(d, "middle") and not calls(d, "leaf")
    # The calls beyond the limit still return in order: a later shallow call is recorded at its depth.
    d = record(top_then_leaf, trace=True, max_depth=2)
    assert [r["depth"] for r in calls(d, "top")] == [1]
    assert not calls(d, "middle")
    assert [r["depth"] for r in calls(d, "leaf")] == [1]


def test_switching_tracing_at_run_time_in_one_session(record):
    def work():
        assert isc.trace_python(True) is False
        top(1)
        assert isc.trace_python(False) is True
        for _ in range(10):
            top(1)
        isc.trace_python(True)
        middle(1)
        isc.trace_python(False)

    d = record(work)
    assert len(calls(d, "top")) == 1
    assert len(calls(d, "middle")) == 2


def test_hot_path_reads_code_and_frame_directly(record):
    # The extension checks its direct reads of a code object's extra slot (and, on 3.11, of a frame's code)
    # against the API once; on the interpreters we support they agree, so the hot path skips the API calls.
    d = record(lambda: top(2), trace=True)
    assert len(calls(d, "top")) == 1 and len(calls(d, "leaf")) == 2
    state = isc._native._tracer_state()
    assert state["direct_code_extra"] is True
    if sys.version_info[:2] == (3, 11):
        assert state["direct_frame_code"] == 1
    else:
        assert state["direct_frame_code"] == -1


def test_session_config_turns_tracing_on_at_start(tmp_path):
    path = tmp_path / "cfg.iscope"
    assert isc.start(output=str(path), python_mode="full", python_exclude="json")
    try:
        state = isc._native._tracer_state()
        assert state["enabled"] and state["mode"] == "full" and state["exclude"] == ["json"]
        json.dumps([1])
        top(1)
    finally:
        isc.stop()
    assert not isc._native._tracer_state()["enabled"]
    d = isc._native._read_dump(str(path))
    assert calls(d, "top") and not calls(d, "dumps")
    assert d["collectors"]["python"].startswith("on: ")


def test_session_with_python_off_does_not_trace(record):
    d = record(lambda: top(1), config=dict(python=True, python_mode="off"))
    assert not calls(d, "top")
    assert d["collectors"]["python"].startswith("off")


def test_another_profiler_is_reported_not_overridden(record):
    prof = cProfile.Profile()

    def work():
        prof.enable()
        try:
            with pytest.raises(RuntimeError) as e:
                isc.trace_python(True)
        finally:
            prof.disable()
        assert "PROFILER_ID" in str(e.value) or "another profiler" in str(e.value)

    record(work)


def cprofiled_names(prof):
    import pstats

    return {f[2] for f in pstats.Stats(prof).stats}


def only_cprofile_sees_this():
    return leaf(41)


MONITORING = sys.version_info >= (3, 12)


@pytest.mark.parametrize("ours_first", [False, True])
def test_trace_python_refuses_while_cprofile_holds_the_hook_and_cprofile_keeps_collecting(record, ours_first):
    # Issue 18: with our hooks already in (ours_first), trace_python(True) re-armed every thread and took the
    # hook back from cProfile, returning True; trace_python(False) then unhooked cProfile too.
    if ours_first and MONITORING:
        pytest.skip("3.12+: cProfile itself refuses to start while another tool holds PROFILER_ID")
    prof = cProfile.Profile()

    def work():
        if ours_first:
            assert isc.trace_python(True) is False
        prof.enable()
        try:
            with pytest.raises(RuntimeError, match="another profiler|PROFILER_ID") as e:
                isc.trace_python(True)
            assert "cProfile" in str(e.value)
            if not MONITORING:
                assert sys.getprofile() is prof
            else:
                assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) == "cProfile"
            isc.trace_python(False)  # must leave cProfile's hook in place as well
            only_cprofile_sees_this()
        finally:
            prof.disable()

    d = record(work)
    assert {"only_cprofile_sees_this", "leaf"} <= cprofiled_names(prof)
    assert not calls(d, "only_cprofile_sees_this")


@pytest.mark.skipif(MONITORING, reason="3.12+: sys.setprofile has its own tool id and coexists with ours")
def test_trace_python_refuses_while_another_thread_has_sys_setprofile(record):
    seen, ready, done = [], threading.Event(), threading.Event()

    def other_profiler(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    def worker():
        sys.setprofile(other_profiler)
        ready.set()
        assert done.wait(10)
        only_cprofile_sees_this()
        sys.setprofile(None)

    def work():
        t = threading.Thread(target=worker)
        t.start()
        try:
            assert ready.wait(10)
            with pytest.raises(RuntimeError, match=r"another profiler holds the profile hook on thread \d+"):
                isc.trace_python(True)
        finally:
            done.set()
            t.join(10)

    record(work)
    assert "only_cprofile_sees_this" in seen


@pytest.mark.skipif(not MONITORING, reason="< 3.12: sys.setprofile and our C profile hook share one slot")
def test_sys_setprofile_coexists_with_tracing_on_sys_monitoring(record):
    seen = []

    def other_profiler(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    def work():
        sys.setprofile(other_profiler)
        try:
            isc.trace_python(True)
            only_cprofile_sees_this()
        finally:
            sys.setprofile(None)

    d = record(work)
    assert "only_cprofile_sees_this" in seen and calls(d, "only_cprofile_sees_this")


def test_cprofile_sees_every_call_after_tracing_stops(record):
    def work():
        isc.trace_python(True)
        json.dumps([1])  # excluded code: sys.monitoring disables its events for our tool id
        top(1)
        isc.trace_python(False)

    record(work)
    prof = cProfile.Profile()
    prof.enable()
    json.dumps([1])
    prof.disable()
    import pstats

    names = {f[2] for f in pstats.Stats(prof).stats}
    assert "dumps" in names and "encode" in names


def test_summary_lists_python_functions_by_qualified_name(record, tmp_path):
    analyze = analyze_binary()
    record(lambda: (top(1), Widget().method()), trace=True)
    out = subprocess.run([analyze, str(tmp_path / "test.iscope"), "--summary"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("## Python functions", 1)[1]
    # Names are code spans, as in the Markdown report (a hostile name cannot break the table).
    rows = {line.split("|")[1].strip().strip("`"): line for line in section.splitlines() if line.startswith("| ")}
    assert rows["leaf"].split("|")[2].strip() == "3"
    assert "Widget.method" in rows and "top" in rows


def test_many_calls_reach_the_dump_without_drops(record):
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    d = record(lambda: fib(20), trace=True, config=dict(thread_buffer_kb=16384))
    assert d["dropped"] == 0
    name = "test_many_calls_reach_the_dump_without_drops.<locals>.fib"
    # Every call is there: recorded one by one, or (the short ones after the first 1000) counted in aggregate.
    assert len(calls(d, name)) + sum(c["calls"] for c in of_kind(d, "python_elided", name)) == 21891


def test_a_forked_child_unhooks_tracing(record):
    import os

    def work():
        isc.trace_python(True)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, b"1" if isc._native._tracer_state()["enabled"] else b"0")
            os._exit(0)
        os.close(w)
        child_enabled = os.read(r, 1)
        os.close(r)
        os.waitpid(pid, 0)
        assert child_enabled == b"0"
        assert isc._native._tracer_state()["enabled"]  # the parent goes on tracing
        leaf(1)

    assert calls(record(work), "leaf")


def hook_installed():
    if sys.version_info >= (3, 12):
        return sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is not None
    return sys.getprofile() is not None


def test_switching_tracing_off_removes_the_hook_and_records_no_more_calls(tmp_path):
    # What "tracing costs nothing once off" means, checked without timing: the hook is installed while on
    # (so the checks below can see one), gone once off, and calls made after that are not recorded.
    path = tmp_path / "off.iscope"
    assert isc.start(output=str(path), python=False)
    try:
        isc.trace_python(True)
        assert isc._native._tracer_state()["enabled"] and hook_installed()
        middle(1)
        isc.trace_python(False)
        assert not isc._native._tracer_state()["enabled"]
        assert not hook_installed()
        top(1)
    finally:
        isc.trace_python(False)
        isc.stop()
    d = isc._native._read_dump(str(path))
    assert len(calls(d, "middle")) == 1 and len(calls(d, "leaf")) == 2
    assert not calls(d, "top")
