#!/usr/bin/env python3
"""Writes the hand-planted torch.profiler (Kineto) fixtures in tests/fixtures/ for test_analyze_kineto.

Each trace is laid out the way `prof.export_chrome_trace()` writes one (PyTorch 2.x, with_stack=True,
schedule(wait=1, warmup=1, active=5)): the header members, then "traceEvents" with one pretty-printed event
each, Kineto's metadata, flow ("ac2g") events and trailing spans, then "traceName". Timings are planted so that
one bottleneck dominates:

  kineto_sync_bound.json       a decode loop: per token a 200 us GEMM, then .item() (cudaMemcpyAsync DtoH +
                               cudaStreamSynchronize) and 100 us of sampling on the host: the GPU waits on the sync
  kineto_launch_bound.json.gz  a small MLP: 100 elementwise kernels of 3 us per step, launched every 15 us
  kineto_generate.json.gz      HF-style generate: per step 6 tokens, each a call of nn.Module GPT2LMHeadModel
                               (5 kernels), an argmax and an .item(); the planted times give TTFT 179 us, TPOT
                               89 us and 6 tokens in 624 us (generate_loop's comments)

Deterministic output (gzip mtime 0): rerun and commit when the layout changes.
  python3 tests/analyze/make_kineto_fixtures.py
"""
import gzip
import json
import pathlib

PID = 4011
TID = 4011
BASE_TS = 1959123456789.100  # µs; Kineto writes ts relative to baseTimeNanoseconds
OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures"

HEADER = {
    "schemaVersion": 1,
    "deviceProperties": [{
        "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929216512,
        "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
        "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472,
    }],
    "cupti_version": 26,
    "cuda_runtime_version": 13000,
    "with_stack": 1,
    "cuda_driver_version": 13000,
    "trace_id": "5D8F0E9A2B7C4E61A3F0C2D1B9E8A7F6",
    "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1759000000000000000,
}


class Trace:
    def __init__(self):
        self.events = []
        self.ext = 100       # "External id"
        self.corr = 1000     # CUPTI correlation id
        self.py_id = 0
        self.ev_idx = 0

    def _x(self, cat, name, ts, dur, pid=PID, tid=TID, args=None):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                            "ts": round(BASE_TS + ts, 3), "dur": round(float(dur), 3), "args": args or {}})

    def op(self, name, ts, dur, cat="cpu_op"):
        self.ext += 1
        self.ev_idx += 1
        args = {"External id": self.ext, "Record function id": 0, "Ev Idx": self.ev_idx}
        if cat == "cpu_op":
            args = {"External id": self.ext, "Sequence number": 0, "Fwd thread id": 0, **args}
        self._x(cat, name, ts, dur, args=args)

    def py(self, name, ts, dur):
        self.py_id += 1
        self._x("python_function", name, ts, dur,
                args={"Python parent id": None, "Python id": self.py_id, "Python thread": 0, "Ev Idx": self.ev_idx})

    def runtime(self, name, ts, dur, cbid, gpu=None):
        """A CUDA runtime call; gpu = (cat, name, ts, dur, extra args) for the work it launches."""
        self.corr += 1
        self._x("cuda_runtime", name, ts, dur, args={"External id": self.ext, "cbid": cbid, "correlation": self.corr})
        if gpu is None:
            return
        cat, gname, gts, gdur, extra = gpu
        args = {"External id": self.ext, "device": 0, "context": 1, "stream": 7, "correlation": self.corr, **extra}
        self._x(cat, gname, gts, gdur, pid=0, tid=7, args=args)
        self.events.append({"ph": "s", "id": self.corr, "pid": PID, "tid": TID, "ts": round(BASE_TS + ts, 3),
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": self.corr, "pid": 0, "tid": 7, "ts": round(BASE_TS + gts, 3),
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    def step(self, n, ts, dur, gpu_start, gpu_dur):
        self.op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")
        self._x("gpu_user_annotation", f"ProfilerStep#{n}", gpu_start, gpu_dur, pid=0, tid=7,
                args={"External id": self.ext, "device": 0, "stream": 7})

    def text(self, end_ts):
        tail = [
            {"name": "process_name", "ph": "M", "ts": BASE_TS, "pid": PID, "tid": 0, "args": {"name": "python3"}},
            {"name": "process_labels", "ph": "M", "ts": BASE_TS, "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
            {"name": "process_name", "ph": "M", "ts": BASE_TS, "pid": 0, "tid": 0, "args": {"name": "python3"}},
            {"name": "process_labels", "ph": "M", "ts": BASE_TS, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
            {"name": "thread_name", "ph": "M", "ts": BASE_TS, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
            {"name": "thread_name", "ph": "M", "ts": BASE_TS, "pid": PID, "tid": TID,
             "args": {"name": f"thread {TID} (python3)"}},
            {"ph": "X", "cat": "Trace", "ts": BASE_TS - 50, "dur": end_ts + 100, "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
            {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": BASE_TS},
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": round(BASE_TS + end_ts + 60, 3)},
        ]
        lines = ["{"]
        lines += [f'  "{k}": {json.dumps(v)},' for k, v in HEADER.items()]
        lines.append('  "traceEvents": [')
        lines.append(",\n".join(layout(e) for e in self.events + tail))
        lines.append("],")
        lines.append('  "traceName": "/tmp/traces/run.pt.trace.json"')
        lines.append("}")
        return "\n".join(lines) + "\n"


def value(v):
    return f"{v:.3f}" if isinstance(v, float) else json.dumps(v)


def layout(e):
    """One event as Kineto's ChromeTraceLogger lays it out: identity, then times, then an args block."""
    times = {k: e[k] for k in ("ts", "dur") if k in e and e["ph"] == "X"}
    head = {k: v for k, v in e.items() if k != "args" and k not in times}
    text = "  {\n    " + ", ".join(f'"{k}": {value(v)}' for k, v in head.items())
    if times:
        text += ",\n    " + ", ".join(f'"{k}": {value(v)}' for k, v in times.items())
    if "args" in e:
        inner = ", ".join(f'"{k}": {value(v)}' for k, v in e["args"].items())
        text += ',\n    "args": {\n      ' + inner + "\n    }"
    return text + "\n  }"


def sync_bound():
    t = Trace()
    ts = 0.0
    for n in range(2, 7):  # wait=1, warmup=1, active=5: ProfilerStep#2..#6 are in the trace
        start = ts
        t.step(n, start, 4 * 370 + 10, start + 30, 4 * 370 - 40)
        t.py("decode.py(58): generate", start + 2, 4 * 370 + 6)
        tok = start + 5
        for _ in range(4):
            t.py("decode.py(31): decode_token", tok, 365)
            t.op("aten::mm", tok + 5, 25)
            t.runtime("cudaLaunchKernel", tok + 15, 7, 211,
                      ("kernel", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", tok + 25, 200,
                       {"registers per thread": 168, "shared memory": 0, "blocks per SM": 0.97, "warps per SM": 7.76,
                        "grid": [128, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 12}))
            t.py("torch/_tensor.py(1118): item", tok + 33, 228)
            t.op("aten::item", tok + 35, 225)
            t.op("aten::_local_scalar_dense", tok + 36, 223)
            t.runtime("cudaMemcpyAsync", tok + 40, 8, 41,
                      ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", tok + 226, 2,
                       {"bytes": 4, "memory bandwidth (GB/s)": 0.002}))
            t.runtime("cudaStreamSynchronize", tok + 50, 206, 131)
            t.py("decode.py(44): sample", tok + 262, 100)
            tok += 370
        ts = start + 4 * 370 + 20
    return t.text(ts)


def launch_bound():
    t = Trace()
    ts = 0.0
    kernels = 100
    for n in range(2, 7):
        start = ts
        step_len = 40 + kernels * 15 + 10
        t.step(n, start, step_len, start + 12, step_len - 20)
        t.py("mlp.py(63): train_step", start + 2, step_len - 4)
        t.op("aten::copy_", start + 4, 30)
        t.runtime("cudaMemcpyAsync", start + 8, 9, 41,
                  ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", start + 12, 5,
                   {"bytes": 65536, "memory bandwidth (GB/s)": 13.1}))
        t.py("mlp.py(22): forward", start + 38, kernels * 15 + 4)
        op = start + 40
        for k in range(kernels):
            t.op("aten::add" if k % 2 else "aten::relu", op, 14)
            t.runtime("cudaLaunchKernel", op + 4, 6, 211,
                      ("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                                 "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
                       op + 8, 3,
                       {"registers per thread": 20, "shared memory": 0, "blocks per SM": 0.12, "warps per SM": 0.48,
                        "grid": [16, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 1}))
            op += 15
        ts = start + step_len + 15
    return t.text(ts)


def token(t, tok, prefill):
    """One generated token at `tok`: the model's call (5 kernels, 30 us each in the prompt pass, 8 us after), an
    argmax and an .item() (a 4-byte DtoH copy and a stream sync). Returns (its GPU work's end, the next token's start)."""
    t.py("nn.Module: GPT2LMHeadModel_0", tok, 60)
    t.py("transformers/models/gpt2/modeling_gpt2.py(1062): forward", tok + 1, 58)
    dur = 30 if prefill else 8
    gpu = tok
    for k in range(5):
        launch = tok + 5 + 10 * k
        start = max(launch + 8, gpu)
        t.op("aten::addmm", launch - 1, 8)
        t.runtime("cudaLaunchKernel", launch, 6, 211,
                  ("kernel", "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64", start, dur,
                   {"registers per thread": 90, "shared memory": 0, "grid": [8, 1, 1], "block": [128, 1, 1]}))
        gpu = start + dur
    t.op("aten::argmax", tok + 61, 8)
    start = max(tok + 70, gpu)
    t.runtime("cudaLaunchKernel", tok + 62, 6, 211,
              ("kernel", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half, "
                         "at::native::ArgMaxOps<c10::Half>, unsigned int, long, 4> >", start, 4,
               {"registers per thread": 32, "shared memory": 16, "grid": [1, 1, 1], "block": [512, 1, 1]}))
    gpu = start + 4
    t.py("torch/_tensor.py(1118): item", tok + 69, 10 + max(gpu + 2 + 3 - (tok + 76), 3))
    t.runtime("cudaMemcpyAsync", tok + 70, 5, 41,
              ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", gpu, 2, {"bytes": 8, "memory bandwidth (GB/s)": 0.004}))
    gpu += 2
    sync_end = max(gpu + 3, tok + 79)
    t.runtime("cudaStreamSynchronize", tok + 76, sync_end - (tok + 76), 131)
    return gpu, sync_end + 10


def generate_loop():
    """Token i is done when its copy has landed (the last GPU work it launched): the prompt pass's is at 169 us
    after its start, a later token's 76 us after. So TTFT = 10 + 169 = 179 us from the step's start, every later
    token follows the one before by 89 us (the next token starts 10 us after the sync returns), and the sixth
    token is done 10 + 182 + 4 x 89 + 76 = 624 us after the step's start: 6 / 624 us = 9615 tokens/s."""
    t = Trace()
    ts = 0.0
    for n in range(2, 7):
        start = ts
        tok = start + 10
        ends = []
        for i in range(6):
            done, tok = token(t, tok, prefill=(i == 0))
            ends.append(done)
        end = tok
        t.step(n, start, end - start, start + 20, ends[-1] - start - 20)
        t.py("transformers/generation/utils.py(2310): generate", start + 2, end - start - 4)
        ts = end + 20
    return t.text(ts)


def main():
    (OUT / "kineto_sync_bound.json").write_text(sync_bound())
    with open(OUT / "kineto_launch_bound.json.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            gz.write(launch_bound().encode())
    with open(OUT / "kineto_generate.json.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            gz.write(generate_loop().encode())


if __name__ == "__main__":
    main()
