"""The Python side of `iscope-run --try KNOB=VALUE` (docs/try.md): applies the tried settings inside an unmodified
program and records, as a mark, each time one took effect.

iscope-run passes the knobs in INFERSCOPE_TRY ("num_workers=4;allow_tf32=true"); sitecustomize calls install()
before the program runs. Each knob is applied where it lives:
  - DataLoader arguments (num_workers, pin_memory, persistent_workers, prefetch_factor): at each
    torch.utils.data.DataLoader construction, over whatever the program passed;
  - torch flags (allow_tf32, float32_matmul_precision, cudnn_benchmark, num_threads): once torch is imported, and
    held: the program's own later assignments of the same setting are ignored (the tried run must run the tried
    value), and counted in the mark.
Environment knobs (PYTORCH_CUDA_ALLOC_CONF, CUDA_LAUNCH_BLOCKING, OMP_NUM_THREADS, MKL_NUM_THREADS) are set by
iscope-run itself and need nothing here.

Each application is a mark named "inferscope.try" with the knob, the value and what the program had set (its
attributes): iscope-run reads it from the tried run's dump, and refuses a knob that never took effect.
"""

import importlib.abc
import os
import sys

_DATALOADER_KNOBS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
_TORCH_KNOBS = ("allow_tf32", "float32_matmul_precision", "cudnn_benchmark", "num_threads")


def parse(text):
    """"num_workers=4;allow_tf32=true" -> {"num_workers": 4, "allow_tf32": True}; values typed per knob."""
    out = {}
    for item in filter(None, (text or "").split(";")):
        key, _, value = item.partition("=")
        out[key] = _typed(key, value)
    return out


def _typed(key, value):
    if key in ("num_workers", "prefetch_factor", "num_threads"):
        return int(value)
    if key in ("pin_memory", "persistent_workers", "allow_tf32", "cudnn_benchmark"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return value


def _mark(knob, value, was, **more):
    try:
        import inferscope_py
        inferscope_py.mark_event("inferscope.try", knob=knob, value=str(value), was=str(was), **more)
    except Exception:  # never break the program
        pass


def _patch_dataloader(module, knobs):
    cls = getattr(module, "DataLoader", None)
    if cls is None or getattr(cls.__init__, "_inferscope_try", False):
        return
    import inspect
    original = cls.__init__
    signature = inspect.signature(original)

    def __init__(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            for k, v in knobs.items():
                was = bound.arguments.get(k)
                bound.arguments[k] = v
                _mark(k, v, was, at="DataLoader")
            args, kwargs = bound.args[1:], bound.kwargs
        except TypeError:  # arguments the signature cannot bind: the constructor says what is wrong
            pass
        return original(self, *args, **kwargs)

    __init__._inferscope_try = True
    __init__.__wrapped__ = original
    cls.__init__ = __init__


def _hold_attribute(obj, name, value, knob):
    """Sets obj.name = value and keeps it: later assignments by the program are ignored and counted."""
    cls = type(obj)
    original = cls.__setattr__
    ignored = [0]

    def __setattr__(self, key, v):
        if self is obj and key == name:
            ignored[0] += 1
            if ignored[0] == 1:
                _mark(knob, value, v, held="the program's own assignment ignored")
            return
        original(self, key, v)

    original(obj, name, value)
    cls.__setattr__ = __setattr__


def _hold_setter(module, name, value):
    """Calls module.name(value) and makes the program's later calls of it do nothing."""
    if value is not None:
        getattr(module, name)(value)
    setattr(module, name, lambda *args, **kwargs: None)


def _patch_torch(torch, knobs):
    import importlib
    for sub in ("torch.backends.cuda", "torch.backends.cudnn"):  # torch's own, loaded lazily by some versions
        try:
            importlib.import_module(sub)
        except ImportError:
            pass
    if "allow_tf32" in knobs:
        v = knobs["allow_tf32"]
        was = torch.backends.cuda.matmul.allow_tf32
        _hold_attribute(torch.backends.cuda.matmul, "allow_tf32", v, "allow_tf32")
        torch.backends.cudnn.allow_tf32 = v
        _hold_setter(torch, "set_float32_matmul_precision", None)  # "highest" would turn it off again
        _mark("allow_tf32", v, was, at="torch.backends.cuda.matmul")
    if "float32_matmul_precision" in knobs:
        v = knobs["float32_matmul_precision"]
        was = torch.get_float32_matmul_precision()
        _hold_setter(torch, "set_float32_matmul_precision", v)
        _mark("float32_matmul_precision", v, was, at="torch.set_float32_matmul_precision")
    if "cudnn_benchmark" in knobs:
        v = knobs["cudnn_benchmark"]
        was = torch.backends.cudnn.benchmark
        _hold_attribute(torch.backends.cudnn, "benchmark", v, "cudnn_benchmark")
        _mark("cudnn_benchmark", v, was, at="torch.backends.cudnn")
    if "num_threads" in knobs:
        v = knobs["num_threads"]
        was = torch.get_num_threads()
        _hold_setter(torch, "set_num_threads", v)
        _mark("num_threads", v, was, at="torch.set_num_threads")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function on a module right after it is first executed, whoever imports it."""

    def __init__(self, hooks):
        self.hooks = hooks  # module name -> function(module)

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            try:
                hook(module)
            except Exception as e:  # never break the program; the missing mark says the knob did not apply
                print(f"inferscope: --try could not apply to {name}: {type(e).__name__}: {e}", file=sys.stderr)

        loader.exec_module = exec_module
        return spec


def install(text=None):
    knobs = parse(os.environ.get("INFERSCOPE_TRY", "") if text is None else text)
    loader_knobs = {k: v for k, v in knobs.items() if k in _DATALOADER_KNOBS}
    torch_knobs = {k: v for k, v in knobs.items() if k in _TORCH_KNOBS}
    hooks = {}
    if loader_knobs:
        hooks["torch.utils.data.dataloader"] = lambda m: _patch_dataloader(m, loader_knobs)
    if torch_knobs:
        hooks["torch"] = lambda m: _patch_torch(m, torch_knobs)
    for name, hook in list(hooks.items()):
        if name in sys.modules:  # imported already (by another sitecustomize): apply now
            hook(sys.modules[name])
            del hooks[name]
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))
    return knobs
