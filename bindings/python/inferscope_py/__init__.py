"""InferScope for Python: ranges, marks and tracing of every Python call, into the same dump as C++ and GPU.

    import inferscope_py as isc

    with isc.session(output="run.iscope"):          # or INFERSCOPE_ENABLE=1 in the environment
        with isc.scope("inference", batch=8):        # a range with attributes
            out = model(x)
        isc.mark_event("batch_done", size=8)          # an instant event

    @isc.scope("preprocess")                          # every call is a range (functions and methods)
    def preprocess(req): ...

    isc.trace_python(True, mode="full")               # switch Python call tracing at run time

Python tracing uses sys.monitoring on CPython >= 3.12 and the C profile hook before; docs/python.md says
what is traced by default and how to change it. `python -m inferscope_py run script.py` profiles an
unmodified script.
"""

import atexit as _atexit
import functools as _functools
import inspect as _inspect
import os as _os
import threading as _threading

from . import _native
from ._native import (
    flush_ring,
    is_active,
    mark_event,
    output_path,
    stop,
    trace_python,
)

__all__ = [
    "scope",
    "mark_event",
    "start",
    "stop",
    "session",
    "is_active",
    "output_path",
    "set_thread_name",
    "flush_ring",
    "trace_python",
]

#: The InferScope version (CMakeLists.txt's project version, compiled into _native): what every tool's
#: --version prints.
__version__ = _native.__version__

#: "sys.monitoring (tool id 2, PROFILER_ID)" or "C profile hook (all threads)"
tracing_mechanism = _native.tracing_mechanism


class scope(_native.Scope):
    """scope(name, **attrs): a range named `name` while a with-block runs, or around every call of a decorated
    function, method, generator or coroutine. Attribute values are int, float, bool or str. An exception
    leaving the range adds an ``error`` attribute (the exception's type name) and propagates."""

    __slots__ = ()

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"scope({self.name!r}) can only decorate a callable, not {type(func).__name__}")
        name, attrs = self.name, self.attrs
        if _inspect.iscoroutinefunction(func):

            @_functools.wraps(func)
            async def scoped_coroutine(*args, **kwargs):
                with _native.Scope(name, **attrs):
                    return await func(*args, **kwargs)

            return scoped_coroutine
        if _inspect.isasyncgenfunction(func):

            @_functools.wraps(func)
            async def scoped_async_gen(*args, **kwargs):
                with _native.Scope(name, **attrs):
                    async for item in func(*args, **kwargs):
                        yield item

            return scoped_async_gen
        if _inspect.isgeneratorfunction(func):

            @_functools.wraps(func)
            def scoped_generator(*args, **kwargs):
                with _native.Scope(name, **attrs):
                    return (yield from func(*args, **kwargs))

            return scoped_generator
        wrapper = _native.ScopedCall(self, func)
        try:
            _functools.update_wrapper(wrapper, func)
        except AttributeError:  # callables without __name__ etc.
            pass
        return wrapper


def start(**config):
    """Starts recording. Keywords are the settings of docs/configuration.md (output="run.iscope",
    buffer_mode="ring", python_mode="full", ...); unknown keys raise TypeError, bad values ValueError.
    Returns False when a session is already recording (e.g. started by INFERSCOPE_ENABLE=1): that one goes on."""
    return _native.start(**config)


class session:
    """with session(**config) as path: records for the duration of the block (see start()). A session that
    was already recording when the block began is left running."""

    def __init__(self, **config):
        self._config = config
        self._started = False

    def __enter__(self):
        self._started = _native.start(**self._config)
        return _native.output_path()

    def __exit__(self, *exc):
        if self._started:
            _native.stop()
        return False


def set_thread_name(name=None):
    """Names the calling thread in the dump; without a name, uses threading.current_thread().name."""
    if name is None:
        name = _threading.current_thread().name
    _native.set_thread_name(name)


_native._setup(_os.path.dirname(_os.path.abspath(__file__)))
# Unhook tracing and complete the dump while the interpreter is still alive (the runtime's own C atexit
# handler runs after finalization, too late for anything Python).
_atexit.register(_native._atexit)


def _after_fork_child():
    # A forked child records nothing unless follow_children gave it a session of its own; the parent's hooks go
    # either way. A recording child often ends in os._exit (multiprocessing's fork and forkserver workers),
    # which skips atexit: its dump is completed first.
    if _native._after_fork_child() and not getattr(_os._exit, "_inferscope", False):
        real_exit = _os._exit

        @_functools.wraps(real_exit)
        def _exit(status):
            _native._finish_before_exit()
            real_exit(status)

        _exit._inferscope = True
        _os._exit = _exit


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_child)
