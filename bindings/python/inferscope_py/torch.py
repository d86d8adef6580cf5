"""Model-layer ranges for PyTorch modules.

    import inferscope_py.torch as isc_torch
    handle = isc_torch.annotate(model)     # every submodule's forward is a range named by its path
    model(x)                               # ranges "GPT2LMHeadModel", "transformer", "transformer.h.3.attn", ...
    handle.remove()

The ranges nest like the modules do and like ISCOPE ranges on the same thread, so the analyzer can attribute
kernels launched inside a forward to the layer that launched them. This module never imports torch itself: it
uses the hooks every torch.nn.Module has, so importing inferscope_py stays cheap.
"""

from . import _native

__all__ = ["annotate", "AnnotationHandle"]


class AnnotationHandle:
    """What annotate() returns: remove() takes every hook out again (also usable as a context manager)."""

    def __init__(self, hooks, names):
        self._hooks = hooks
        #: module path -> range name, in the order of model.named_modules()
        self.names = names

    def remove(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def __len__(self):
        return len(self.names)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def annotate(model, *, root=None, prefix="", leaves=True, max_depth=None):
    """Wraps each submodule's forward of `model` in a range named by its path in the model.

    root:      name of the range for `model` itself (default: its class name)
    prefix:    prepended to every name ("encoder." gives "encoder.layer.0.attn")
    leaves:    also annotate modules without children (Linear, LayerNorm, ...); False keeps only containers
    max_depth: only modules at most this many dots deep (0 = just the root)

    Returns an AnnotationHandle; handle.remove() undoes it.
    """
    if not hasattr(model, "named_modules") or not hasattr(model, "register_forward_pre_hook"):
        raise TypeError(f"annotate() needs a torch.nn.Module, not {type(model).__name__}")
    if max_depth is not None and (not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 0):
        raise ValueError(f"annotate(): max_depth must be an int >= 0, not {max_depth!r}")
    if not isinstance(prefix, str):
        raise TypeError(f"annotate(): prefix must be a str, not {type(prefix).__name__}")
    hooks, names = [], {}
    for path, module in model.named_modules():
        if max_depth is not None and path and path.count(".") + 1 > max_depth:
            continue
        if path and not leaves and next(iter(module.children()), None) is None:
            continue
        name = prefix + (path if path else (root or type(model).__name__))
        names[path] = name
        if _has_always_call(module):
            hooks.append(module.register_forward_pre_hook(_pre_hook(name)))
            hooks.append(module.register_forward_hook(_post_hook(name), always_call=True))
        else:
            hooks.append(_WrappedForward(module, name))
    return AnnotationHandle(hooks, names)


def _pre_hook(name):
    begin = _native._layer_begin

    def pre(module, args):
        begin(name)

    return pre


def _post_hook(name):
    end = _native._layer_end

    def post(module, args, output):
        end(name)

    return post


def _has_always_call(module):
    # register_forward_hook(always_call=True) (torch >= 2.1) runs the hook even when forward raises, so the
    # range closes with the error.
    import inspect

    try:
        return "always_call" in inspect.signature(module.register_forward_hook).parameters
    except (TypeError, ValueError):
        return False


class _WrappedForward:
    """Older torch has no always_call: a forward that raises would skip its post-hook and leave its range, and
    every range opened after it, open. So the module's forward is wrapped instead (an instance attribute, which
    nn.Module.__call__ finds first), ending the range in a finally with the exception's type; remove() puts the
    instance back as it was."""

    def __init__(self, module, name):
        self._module = module
        self._had_own = "forward" in module.__dict__
        self._own = module.__dict__.get("forward")
        inner = module.forward
        begin, end = _native._layer_begin, _native._layer_end

        def forward(*args, **kwargs):
            begin(name)
            try:
                out = inner(*args, **kwargs)
            except BaseException as e:
                end(name, type(e))
                raise
            end(name)
            return out

        module.forward = forward

    def remove(self):
        if self._module is None:
            return
        if self._had_own:
            self._module.forward = self._own
        else:
            self._module.__dict__.pop("forward", None)
        self._module = None
