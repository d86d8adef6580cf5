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
        hooks.append(module.register_forward_pre_hook(_pre_hook(name)))
        hooks.append(_register_post_hook(module, _post_hook(name)))
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


def _register_post_hook(module, hook):
    # always_call (torch >= 2.1) runs the hook even when forward raises, so the range closes with the error;
    # on older torch an unclosed range is closed by its parent's post-hook.
    try:
        return module.register_forward_hook(hook, always_call=True)
    except TypeError:
        return module.register_forward_hook(hook)
