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


def run_threads(*targets):
    ts = [threading.Thread(target=t) for t in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in ts)


def ranges_by_name(d):
    return {r["name"]: r for r in of_kind(d, "range")}


@pytest.mark.parametrize("open_inside", [False, True])
def test_scope_exited_on_another_thread_is_ignored_and_depths_stay_right(record, open_inside):
    # Issue 18: enter on A, exit on B. The exit is ignored and counted (a legal program must not start raising
    # under the profiler); A gets its depth level back itself. open_inside: A still has a scope open inside the
    # orphan when B exits it, so the level comes back only when that one closes.
    handoff = isc.scope("handoff")
    entered, exited = threading.Event(), threading.Event()
    before = isc._native._scope_stats()["cross_thread_exits"]

    def a():
        handoff.__enter__()
        if open_inside:
            with isc.scope("a_inside"):
                entered.set()
                assert exited.wait(10)
        else:
            entered.set()
            assert exited.wait(10)
        with isc.scope("a_outer"):
            with isc.scope("a_inner"):
                pass

    def b():
        assert entered.wait(10)
        with isc.scope("b_around"):
            assert handoff.__exit__(None, None, None) is False  # no exception, nothing suppressed
            with isc.scope("b_nested"):
                pass
        exited.set()
        with isc.scope("b_outer"):
            with isc.scope("b_inner"):
                pass

    def work():
        run_threads(a, b)
        with isc.scope("main_after"):
            pass

    d = record(work)
    r = ranges_by_name(d)
    assert "handoff" not in r  # not recorded: its start is on A's ring, which only A writes
    depths = {n: r[n]["depth"] for n in r}
    expected = {"a_outer": 0, "a_inner": 1, "b_around": 0, "b_nested": 1, "b_outer": 0, "b_inner": 1, "main_after": 0}
    if open_inside:
        expected["a_inside"] = 1  # inside the orphan, recorded where it was
    assert depths == expected
    assert r["a_outer"]["thread"] == r["a_inner"]["thread"] != r["b_outer"]["thread"] == r["b_inner"]["thread"]
    stats = isc._native._scope_stats()
    assert stats["cross_thread_exits"] == before + 1 and stats["depths_pending"] == 0
    tids = {t["os_tid"] for t in d["threads"].values()}
    assert re.fullmatch(r"scope 'handoff' entered on thread (\d+), exited on thread (\d+)", stats["last"])
    a_tid, b_tid = map(int, re.findall(r"\d+", stats["last"]))
    assert a_tid != b_tid and {a_tid, b_tid} <= tids
    assert d["collectors"]["python_scopes"].startswith(f"{before + 1} scope exit(s) on another thread")


def test_one_scope_object_used_on_two_threads_at_once(record):
    # A module-level `with step:` on several threads: each thread's exit ends its own entry, even when the
    # other thread entered last (a single LIFO stack per object gave B's entry to A's exit).
    step = isc.scope("step")
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    before = isc._native._scope_stats()["cross_thread_exits"]

    def a():
        with step:
            a_in.set()
            assert b_in.wait(10)
        a_out.set()
        with isc.scope("a_next"):
            pass

    def b():
        assert a_in.wait(10)
        with step:
            b_in.set()
            assert a_out.wait(10)
            with isc.scope("b_inside"):
                pass
        with isc.scope("b_next"):
            pass

    d = record(lambda: run_threads(a, b))
    steps = of_kind(d, "range", "step")
    assert len(steps) == 2 and {s["depth"] for s in steps} == {0} and len({s["thread"] for s in steps}) == 2
    r = ranges_by_name(d)
    assert (r["a_next"]["depth"], r["b_inside"]["depth"], r["b_next"]["depth"]) == (0, 1, 0)
    assert isc._native._scope_stats()["cross_thread_exits"] == before


def test_set_thread_name_defaults_to_the_python_thread_name(record):
    def work():
        t = threading.Thread(target=lambda: (isc.set_thread_name(), isc.mark_event("here")), name="py-named")
        t.start()
        t.join()

    d = record(work)
    assert "py-named" in {t["name"] for t in d["threads"].values()}


def names_by_os_tid(d):
    return {t["os_tid"]: t["name"] for t in d["threads"].values() if not t["channel"]}


def test_threads_carry_their_threading_names_without_a_call(record):
    ids = {}

    def hog():
        ids["bg-hog"] = threading.get_native_id()
        isc.mark_event("hogging")

    def work():
        ids["main"] = threading.get_native_id()
        isc.mark_event("main")
        run_named(hog, "bg-hog")

    names = names_by_os_tid(record(work))
    assert names[ids["bg-hog"]] == "bg-hog"
    assert names[ids["main"]] == threading.main_thread().name


def run_named(target, name):
    t = threading.Thread(target=target, name=name)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    return t


def test_a_thread_started_before_the_session_carries_its_name(record):
    go = threading.Event()
    early = threading.Thread(target=lambda: (go.wait(30), isc.mark_event("late work")), name="early-bird")
    early.start()

    def work():
        go.set()
        early.join(timeout=30)

    names = names_by_os_tid(record(work))
    assert names[early.native_id] == "early-bird"


def test_renames_while_a_thread_runs_are_kept(record):
    renamed, go = threading.Event(), threading.Event()

    def renames_itself():
        isc.mark_event("before")
        threading.current_thread().name = "renamed-by-itself"

    def renamed_by_main():
        isc.mark_event("before")
        renamed.set()
        go.wait(30)

    def work():
        a = run_named(renames_itself, "first-name")
        b = threading.Thread(target=renamed_by_main, name="first-name")
        b.start()
        renamed.wait(30)
        b.name = "renamed-by-main"
        go.set()
        b.join(timeout=30)
        ids.extend([a.native_id, b.native_id])

    ids = []
    names = names_by_os_tid(record(work))
    assert [names[i] for i in ids] == ["renamed-by-itself", "renamed-by-main"]


def test_a_rename_of_a_thread_alive_at_stop_reaches_the_dump(record):
    recorded, done = threading.Event(), threading.Event()

    def worker():
        isc.mark_event("working")
        recorded.set()
        done.wait(30)

    t = threading.Thread(target=worker, name="old-name")

    def work():
        t.start()
        recorded.wait(30)
        t.name = "name-at-stop"

    try:
        names = names_by_os_tid(record(work))
    finally:
        done.set()
        t.join(timeout=30)
    assert names[t.native_id] == "name-at-stop"


def test_a_name_the_thread_gives_itself_wins_over_its_threading_name(record):
    def own():
        isc.set_thread_name("own-choice")
        isc.mark_event("mine")

    def work():
        ids.append(run_named(own, "threading-name").native_id)

    ids = []
    assert names_by_os_tid(record(work))[ids[0]] == "own-choice"


def test_threads_threading_did_not_start_keep_the_kernel_name(record):
    import _thread

    done, seen = threading.Event(), []

    def foreign():
        seen.append((threading.get_native_id(), threading.current_thread().name))  # makes a _DummyThread
        isc.mark_event("foreign")
        done.set()

    def start_foreign():
        _thread.start_new_thread(foreign, ())
        done.wait(30)

    first = names_by_os_tid(record(start_foreign))
    ((tid, dummy_name),) = seen
    assert dummy_name.startswith("Dummy-") and first[tid] != dummy_name
    # threading keeps the dummy among its live threads: a later session's start does not name after it either
    assert dummy_name not in {t["name"] for t in record(lambda: None)["threads"].values()}


def test_naming_leaves_threads_as_they_were(record):
    """The wrapped Thread._bootstrap_inner runs a subclass's run(), hands its exception to excepthook, joins."""
    assert type(threading.Thread._bootstrap_inner).__name__ == "thread_bootstrap"
    seen = []

    class Worker(threading.Thread):
        def run(self):
            seen.append(threading.current_thread() is self)
            raise ValueError("from the thread")

    def work():
        w = Worker(name="sub")
        w.start()
        w.join(timeout=30)
        seen.append(w.is_alive())

    old_hook = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_type)
    try:
        record(work)
    finally:
        threading.excepthook = old_hook
    assert seen == [True, ValueError, False]


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


def test_sampled_mode_traces_python_inside_windows_only_and_flush_ring_writes_the_ring(tmp_path):
    # scope("step") drives the windows; Python tracing is switched on and off by the runtime around them.
    path = tmp_path / "sampled.iscope"

    def traced():
        return sum(range(50))

    assert isc.start(output=str(path), mode="sampled", window_steps=3, window_every_steps=10, python=True,
                     cupti=False, system=False, slow_step_factor=0)
    try:
        for i in range(60):
            with isc.scope("step"):
                traced()
            time.sleep(0.003)  # the runtime switches tracing between steps, on a thread of its own
            if i == 29:
                snap = isc.flush_ring()
    finally:
        isc.stop()
    assert snap and snap.endswith(".flush1.iscope") and os.path.exists(snap)
    d = isc._native._read_dump(str(path))
    assert d["complete"]
    steps = of_kind(d, "range", "step")
    calls = [r for r in of_kind(d, "python_call") if r["name"].endswith("traced")]
    # Five windows (after steps 9, 19, ... 49) of three steps: the steps outside them were sampled out.
    assert 15 <= len(steps) < 30, len(steps)
    assert 0 < len(calls) <= len(steps), (len(calls), len(steps))
    assert len(of_kind(isc._native._read_dump(snap), "range", "step")) < len(steps)


def test_adaptive_mode_traces_python_from_the_start_for_the_baseline_then_switches_it_off(tmp_path):
    # The baseline: every step from the first, Python calls included (tracing on from the start); when it closes the
    # runtime switches tracing off (no periodic window falls due in this run).
    path = tmp_path / "adaptive.iscope"

    def traced():
        return sum(range(50))

    assert isc.start(output=str(path), mode="adaptive", baseline_steps=8, window_steps=3, window_every_steps=1000,
                     python=True, cupti=False, system=False, slow_step_factor=0)
    try:
        assert isc._native._tracer_state()["enabled"]
        for i in range(60):
            with isc.scope("step"):
                traced()
            time.sleep(0.003)
        deadline = time.monotonic() + 10  # the writer closes the baseline, its switch thread turns tracing off
        while isc._native._tracer_state()["enabled"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not isc._native._tracer_state()["enabled"]
    finally:
        isc.stop()
    d = isc._native._read_dump(str(path))
    assert d["complete"]
    steps = sorted(of_kind(d, "range", "step"), key=lambda r: r["start"])
    calls = sorted((r for r in of_kind(d, "python_call") if r["name"].endswith("traced")), key=lambda r: r["start"])
    # Steps 0-7 whole, and what ended while the writer switched: never all 60 (the rest was sampled out).
    assert 8 <= len(steps) < 60, len(steps)
    assert len(calls) >= 8, len(calls)
    assert calls[0]["start"] >= steps[0]["start"] and calls[0]["end"] <= steps[0]["end"]  # the first step's call


def test_sampled_mode_refuses_a_window_as_long_as_its_period():
    with pytest.raises(ValueError, match="window_steps = 20 .* must be smaller than window_every_steps = 10"):
        isc.start(mode="sampled", window_steps=20, window_every_steps=10)


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


LONE = "\ud800"  # a lone surrogate: a valid str that UTF-8 cannot encode


@pytest.mark.parametrize(
    "call, note",
    [
        (lambda: isc.scope(LONE), "scope(): name"),
        (lambda: isc.scope("x", a=LONE), "scope() attribute values"),
        (lambda: isc.scope("x", **{LONE: 1}), "scope() attribute names"),
        (lambda: isc.mark_event(LONE), "mark_event(): name"),
        (lambda: isc.mark_event("m", a=LONE), "mark_event() attribute values"),
        (lambda: isc.set_thread_name(LONE), "set_thread_name(): name"),
        (lambda: isc._native._layer_begin(LONE), "_layer_begin: name"),
        (lambda: isc._native._layer_end(LONE), "_layer_end(): name"),
        (lambda: isc.start(output=LONE + ".iscope"), "start(): output"),
        (lambda: isc.start(python_include=["a", LONE]), "start(): python_include"),
        (lambda: isc.start(python_exclude=LONE), "start(): python_exclude"),
        (lambda: isc.trace_python(True, include=[LONE]), "trace_python(): include"),
        (lambda: isc._native._read_dump(LONE), "_read_dump(): path"),
        (lambda: isc._native._dump_stats(LONE), "_dump_stats(): path"),
    ],
)
def test_a_name_utf8_cannot_encode_raises_unicode_encode_error(call, note):
    # Before issue 18 some of these left the UnicodeEncodeError set behind a normal return: SystemError.
    with pytest.raises(UnicodeEncodeError) as e:
        call()
    if hasattr(e.value, "__notes__"):  # 3.11+: the note names the argument
        assert any(note in n for n in e.value.__notes__), e.value.__notes__
    assert not isc.is_active()


def test_bad_names_inside_a_session_leave_it_recording(record):
    def work():
        with isc.scope("outer"):
            with pytest.raises(UnicodeEncodeError):
                isc.scope(LONE)
            with pytest.raises(UnicodeEncodeError):
                isc.mark_event(LONE)
            with isc.scope("inner"):
                pass

    d = record(work)
    assert [(r["name"], r["depth"]) for r in of_kind(d, "range")] == [("inner", 1), ("outer", 0)]


def test_trace_python_mode_utf8_cannot_encode_is_a_value_error():
    with pytest.raises(ValueError, match="mode must be 'default' or 'full'"):
        isc.trace_python(True, mode=LONE)


def test_an_output_path_with_undecodable_bytes_round_trips(tmp_path):
    # os.fsdecode gives b"\xff" as "\udcff" (surrogateescape): that str names the same file again.
    path = os.path.join(str(tmp_path), os.fsdecode(b"run-\xff.iscope"))
    assert isc.start(output=path, python=False)
    try:
        with isc.scope("s"):
            pass
        assert isc.output_path() == path
    finally:
        isc.stop()
    assert os.path.exists(os.fsencode(path)) and os.fsencode(path).endswith(b"run-\xff.iscope")
    assert [r["name"] for r in of_kind(isc._native._read_dump(path), "range")] == ["s"]
    assert isc._native._dump_stats(path)["complete"]


def test_scope_cannot_be_reinitialised_while_entered(record):
    def work():
        s = isc.scope("a")
        with s:
            with pytest.raises(RuntimeError, match="re-initialised while it is entered"):
                s.__init__("b")
        with isc.scope("after"):
            pass

    d = record(work)
    assert [(r["name"], r["depth"]) for r in of_kind(d, "range")] == [("a", 0), ("after", 0)]


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


@pytest.mark.parametrize("buffer_mode", ["stream", "ring"])
def test_a_relative_output_stays_where_it_was_named_when_the_program_changes_directory(tmp_path, monkeypatch, buffer_mode):
    started, moved = tmp_path / "started", tmp_path / "moved"
    started.mkdir()
    moved.mkdir()
    monkeypatch.chdir(started)
    assert isc.start(output="rel.iscope", buffer_mode=buffer_mode, python=False)
    try:
        os.chdir(moved)
        with isc.scope("after_chdir"):
            pass
    finally:
        stopped = isc.stop()
    assert stopped
    assert sorted(os.listdir(started)) == ["rel.iscope"]  # no temporary, no lock file
    assert os.listdir(moved) == []
    assert isc.output_path() == str(started / "rel.iscope")
    assert [r["name"] for r in of_kind(isc._native._read_dump(str(started / "rel.iscope")), "range")] == ["after_chdir"]


# Issue 25, item 9: a keyword given to start() wins; every setting not given comes from INFERSCOPE_* and
# .inferscope.yaml, so an operator redirects or reconfigures a program without changing it. start() used to read
# neither: the dump went to ./inferscope-<pid>.iscope whatever the environment said.
def _started_output(**config):
    config.setdefault("mode", "full")  # flush_ring() tells ring from stream in full capture (adaptive has a ring)
    assert isc.start(python=False, system=False, **config)
    try:
        return isc.output_path(), isc.flush_ring()  # flush_ring: a path in ring mode, None in stream mode
    finally:
        isc.stop()


def test_start_takes_the_output_from_inferscope_output_when_no_keyword_gives_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERSCOPE_OUTPUT", str(tmp_path / "from-env.iscope"))
    path, _ = _started_output()
    assert path == str(tmp_path / "from-env.iscope")
    assert sorted(p.name for p in tmp_path.glob("*.iscope")) == ["from-env.iscope"]


def test_an_output_keyword_wins_over_inferscope_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERSCOPE_OUTPUT", str(tmp_path / "from-env.iscope"))
    path, _ = _started_output(output=tmp_path / "from-code.iscope")
    assert path == str(tmp_path / "from-code.iscope")
    assert sorted(p.name for p in tmp_path.glob("*.iscope")) == ["from-code.iscope"]


def test_a_keyword_equal_to_the_default_still_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERSCOPE_BUFFER_MODE", "ring")
    _, snapshot = _started_output(output=tmp_path / "ring.iscope")
    assert snapshot  # ring mode from the environment
    _, snapshot = _started_output(output=tmp_path / "stream.iscope", buffer_mode="stream")
    assert snapshot is None  # the keyword's stream mode


def test_the_yaml_output_applies_when_no_variable_sets_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERSCOPE_OUTPUT", raising=False)
    (tmp_path / ".inferscope.yaml").write_text("output: from-yaml.iscope\n")
    path, _ = _started_output()
    assert path == str(tmp_path / "from-yaml.iscope")
    monkeypatch.setenv("INFERSCOPE_OUTPUT", str(tmp_path / "from-env.iscope"))
    path, _ = _started_output()
    assert path == str(tmp_path / "from-env.iscope")


def test_a_bad_environment_value_raises_the_message_the_tools_give(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("INFERSCOPE_BUFFER_MODE", "bogus")
    tool = os.environ.get("ISCOPE_CONFIG")
    if not tool or not os.access(tool, os.X_OK):
        pytest.skip("ISCOPE_CONFIG is not set to the iscope-config binary (run through ctest)")
    shown = subprocess.run([tool, "show"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 1
    problem = shown.stderr.splitlines()[0]
    assert problem.startswith("environment variable INFERSCOPE_BUFFER_MODE: buffer_mode: 'bogus'")
    with pytest.raises(ValueError) as raised:
        isc.start(output=tmp_path / "x.iscope", python=False)
    assert str(raised.value) == problem
    assert not isc.is_active()
    assert not (tmp_path / "x.iscope").exists()
