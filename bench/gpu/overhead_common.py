"""The steps and windows the overhead benchmarks share (gpt2_overhead.py, overhead_table.py): the timed step of each
model, the steps of one window, a window inside a session of its own, and libinferscope's run-time switches.

Imports torch and transformers only inside the step builders, so a caller can say plainly why a step cannot be built.
"""
import ctypes
import os
import statistics
import time


def runtime_library(path="libinferscope.so.0"):
    """libinferscope's C entry points that switch collection at run time (lib/collect/cupti/cupti_collector.hpp,
    lib/collect/system/sampler_parts.hpp).
    The default name finds the library inferscope_py already loaded (dlopen matches its soname)."""
    lib = ctypes.CDLL(path)
    lib.inferscope_cupti_set_activities.argtypes = [ctypes.c_char_p]
    lib.inferscope_cupti_set_activities.restype = ctypes.c_int
    lib.inferscope_cupti_status.restype = ctypes.c_char_p
    lib.inferscope_cupti_set_flush_period.argtypes = [ctypes.c_uint32]
    lib.inferscope_cupti_set_flush_period.restype = ctypes.c_int
    lib.inferscope_cupti_set_buffer_policy.argtypes = [ctypes.c_uint32, ctypes.c_int]
    lib.inferscope_cupti_set_buffer_policy.restype = ctypes.c_int
    lib.inferscope_system_set_parts.argtypes = [ctypes.c_char_p]
    lib.inferscope_system_set_parts.restype = ctypes.c_int
    return lib


def find_thread(name):
    """The OS thread id of this process's first thread named `name`, or None when there is none."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return int(tid)
        except OSError:
            continue
    return None


def thread_run_ns(tid):
    """A thread's CPU time so far (ns, its schedstat's first field), or None once it is gone."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def gpt2_model(device, layers=12):
    """transformers' GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=768, n_head=12)), random weights, fp16."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=768, n_head=12)
    return GPT2LMHeadModel(cfg).to(device=device, dtype=torch.float16).eval(), cfg


def build_step(batch, seq, device, layers=12):
    """GPT-2's forward over `batch` x `seq` random tokens, no_grad, synchronised: the launch-bound step every GPT-2
    figure in docs/benchmarks.md times (219 kernels per step with 12 layers)."""
    import torch

    model, cfg = gpt2_model(device, layers)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)

    def step():
        """Runs one step; returns when the forward call returned (the host had issued all the work)."""
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
        issued = time.perf_counter()
        torch.cuda.synchronize()
        return issued

    return step


def build_generate_call(batch, prompt, device, new_tokens):
    """One Hugging Face generate() call per step: greedy, exactly `new_tokens` tokens (EOS suppressed until then, so
    random weights cannot end a call early). Returns call(n=new_tokens)."""
    import torch

    model, cfg = gpt2_model(device)
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)

    def call(n=new_tokens):
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, pad_token_id=cfg.eos_token_id)
        issued = time.perf_counter()
        torch.cuda.synchronize()
        call.tokens_made = out.shape[-1] - prompt  # what the last call generated, for the caller's check
        return issued

    return call


def build_graph_step(batch, layers, width, device):
    """A CUDA graph of `2 * layers` small kernels (Linear + ReLU, fp16), captured once and replayed per step: what a
    serving engine's captured decode step looks like to the collector (one graph launch per step)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())])
    model = model.to(device=device, dtype=torch.float16).eval()
    x = torch.randn(batch, width, device=device, dtype=torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as torch.cuda.graphs asks
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        model(x)

    def step():
        graph.replay()
        issued = time.perf_counter()
        torch.cuda.synchronize()
        return issued

    return step


def build_cpu_step(batch):
    """A step of pure Python work, about `batch` ms on a 2-core VM (a tokenizer-like loop): no GPU, so what a
    session costs the program's own thread (ranges, the writer, the live page's server) shows on any machine."""
    words = [f"w{i % 97}" for i in range(2000)]

    def step():
        n = 0
        for _ in range(max(1, batch) * 10):
            for w in words:
                n += len(w) * 3 % 7
            n += sum(len(w) for w in words[:200])
        return time.perf_counter()

    return step


def session_settings(spec):
    """'key=value,key=value' (docs/configuration.md) as keyword arguments of inferscope_py.start()."""
    return {key: {"true": True, "false": False}.get(v, v)
            for key, v in (kv.split("=", 1) for kv in spec.split(",") if "=" in kv)}


def run_steps(step, n, isc=None):
    """n steps, each timed; inside scope("step") when `isc` is given (adaptive and sampled sessions count steps by
    it; marked in every window alike, so the mark's own cost cancels)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        if isc:
            with isc.scope("step"):
                step()
        else:
            step()
        times.append(time.perf_counter() - t0)
    return times


class WindowStats:
    """Per session setting: each window's median and mean timed step, and every step position's times."""

    def __init__(self, n):
        self.n, self.med, self.mean, self.at = n, [], [], [[] for _ in range(n)]

    def add(self, times, warm):
        timed = times[warm:]
        self.med.append(statistics.median(timed))
        self.mean.append(statistics.mean(timed))
        for i, t in enumerate(times):
            self.at[i].append(t)


class SessionWindow:
    """A window inside a session of its own: `inferscope_py.start(output=path, **settings)` before the window's
    first step, `stop()` after its last, neither timed. Keeps how long each took and the dump's size."""

    def __init__(self, isc, path, settings):
        self.isc, self.path, self.settings = isc, path, settings
        self.start_ms = self.stop_ms = self.dump_mb = None

    def __enter__(self):
        t0 = time.perf_counter()
        if not self.isc.start(output=self.path, **self.settings):
            raise RuntimeError("inferscope_py.start() failed: a session is already recording (do not run this under "
                               "iscope-run or INFERSCOPE_ENABLE=1: the benchmark starts its own sessions)")
        self.start_ms = (time.perf_counter() - t0) * 1e3
        return self

    def __exit__(self, *exc):
        t0 = time.perf_counter()
        self.isc.stop()
        self.stop_ms = (time.perf_counter() - t0) * 1e3
        if os.path.exists(self.path):
            self.dump_mb = os.path.getsize(self.path) / 1e6
        return False


def start_before_cuda(isc, path):
    """A session started before CUDA's first call, as under iscope-run: CUPTI then sees every CUDA graph instantiated
    later and may trace their replays at graph level (docs/gpu-collector.md). Stop it with isc.stop()."""
    if not isc.start(output=path, python=False, system=False):
        raise RuntimeError("inferscope_py.start() failed before CUDA was initialised")
