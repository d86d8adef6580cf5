"""fp32_gemm: an fp32 MLP ranking tower run with PyTorch's default fp32 matmul precision (no TF32).

What it does: a deep MLP scorer kept in fp32 end to end (as many ranking/recommendation towers are, for numerics):
8 Linear(4096, 4096) + GELU blocks with a residual connection and a final Linear(4096, 1), random weights; each step
scores a batch of 2048 candidate feature vectors (~550 GFLOP of matmul per step) and reads the scores back. 800 steps.

Planted problem (gpu_bound): PyTorch's default for fp32 matmuls on CUDA is full fp32 precision
(`torch.backends.cuda.matmul.allow_tf32 = False`), so every GEMM runs on the FP32 CUDA cores instead of the tensor
cores: the GPU is busy the whole time, at a fraction of the throughput it could reach.

Fix (--fixed): a setting, no model change: `torch.backends.cuda.matmul.allow_tf32 = True` (equivalently
`torch.set_float32_matmul_precision("high")`), so the fp32 GEMMs use TF32 tensor cores (10-bit mantissa inputs,
fp32 accumulation). The program reports how much the scores move: `max_abs_diff` between the two settings on the
same batch (computed once after the loop in every mode).

Own timers (last line, JSON): `step_ms_p50`, `step_ms_mean`, `tflops` (achieved), `allow_tf32`, `max_abs_diff`
(and `max_abs_score`, for scale).

Run: python3 fp32_gemm.py [--fixed] [--steps N] [--ab ROUNDS] [--window W] [--device cpu]
`--ab ROUNDS`: one model; windows of W steps alternate with the flag off and on (order flips every round); AB reports
medians of per-window mean step latency. Exit 77 without torch/CUDA.
"""
import argparse
import json
import os
import statistics
import sys
import time

EXPECTED = "gpu_bound"
BOTTLENECK = ("fp32 GEMMs with the default full-fp32 matmul precision: the large Linear layers run on FP32 CUDA "
              "cores, not tensor cores")
FIX = ('torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision("high")): TF32 tensor '
       'cores for fp32 matmuls')
FIX_WORDS = ["allow_tf32", "tf32", "set_float32_matmul_precision", "tensor cores"]

DIM = 4096
LAYERS = 8
BATCH = 2048
PROG = os.path.basename(sys.argv[0]) or "fp32_gemm.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="torch.backends.cuda.matmul.allow_tf32 = True")
    ap.add_argument("--steps", type=int, default=800, help="steps (default %(default)s; the first 5 are warm-up)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B (the flag toggled)")
    ap.add_argument("--window", type=int, default=40, help="--ab: steps per window (default %(default)s)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def build(torch, dim, layers, device):
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            return x + torch.nn.functional.gelu(self.fc(self.norm(x)))

    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*(Block() for _ in range(layers)))
            self.head = nn.Linear(dim, 1)

        def forward(self, x):
            return self.head(self.blocks(x)).squeeze(-1)

    torch.manual_seed(0)
    return Tower().to(device).eval()  # fp32


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: torch is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    dim, layers, batch = (DIM, LAYERS, BATCH) if on_gpu else (256, 2, 64)
    model = build(torch, dim, layers, device)
    torch.manual_seed(1)
    x = torch.randn(batch, dim, device=device)
    flops = 2 * batch * dim * dim * layers + 2 * batch * dim

    def set_tf32(on):
        torch.backends.cuda.matmul.allow_tf32 = on

    def step():
        return model(x).cpu()  # the caller gets the scores

    set_tf32(bool(args.fixed))
    print(f"{PROG}: torch {torch.__version__}, {device}, {layers} x Linear({dim}, {dim}) fp32, batch {batch}, "
          f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}", flush=True)

    with torch.inference_mode():
        if args.ab:
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    set_tf32(name == "fixed")
                    sync()
                    t = time.perf_counter()
                    for _ in range(args.window if r >= 0 else 5):
                        step()
                    sync()
                    if r >= 0:
                        window_ms[name].append((time.perf_counter() - t) / args.window * 1e3)
        else:
            times = []
            t_prev = time.perf_counter()
            for i in range(args.steps):
                step()
                now = time.perf_counter()
                if i >= 5:
                    times.append((now - t_prev) * 1e3)
                t_prev = now
        # How much TF32 moves the scores: the same batch under both settings.
        flag = torch.backends.cuda.matmul.allow_tf32
        set_tf32(False)
        ref = step()
        set_tf32(True)
        diff = (step() - ref).abs().max().item()
        set_tf32(flag)

    if args.ab:
        b, f = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
        print(f"AB broken_ms={b:.3f} fixed_ms={f:.3f} saving_pct={(b - f) / b * 100:.1f} rounds={args.ab} "
              f"window={args.window}", flush=True)
        print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                          "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                          "broken_step_ms": round(b, 3), "fixed_step_ms": round(f, 3), "max_abs_diff": diff,
                          "max_abs_score": ref.abs().max().item(), "rounds": args.ab, "window": args.window}),
              flush=True)
        return
    step_ms = statistics.median(times)
    print(json.dumps({
        "program": PROG, "variant": "fixed" if args.fixed else "broken",
        "step_ms_p50": round(step_ms, 3), "step_ms_mean": round(statistics.fmean(times), 3),
        "tflops": round(flops / (step_ms / 1e3) / 1e12, 1), "allow_tf32": bool(args.fixed),
        "max_abs_diff": diff, "max_abs_score": ref.abs().max().item(), "steps": len(times),
    }), flush=True)


if __name__ == "__main__":
    main()
