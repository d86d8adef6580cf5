"""fp16_gemm_mlp: a bf16 Llama-style encoder stack whose SwiGLU width is not a multiple of 8 (5461).

What it does: a batch-inference step of a Llama-style transformer encoder written by hand: 8 blocks of width 2048
(RMSNorm, fused QKV projection, bidirectional SDPA attention with 16 heads, output projection, RMSNorm, SwiGLU MLP),
random weights, **all weights and activations in bfloat16** (the GEMMs already run on tensor cores in half
precision; nothing here is fp32). Each step encodes a batch of 64 sequences x 128 tokens (8192 tokens, ~6.7 TFLOP)
and reads back one pooled score per sequence. 500 steps (the first few are the warm-up).

Planted problem (gpu_bound): the SwiGLU hidden size is computed the textbook way, `int(2 * 4 * dim / 3)` = 5461,
without rounding up to a multiple (Llama's `multiple_of=256` exists for exactly this). 5461 is odd, so the gate/up
projections produce rows of 5461 bf16 values (10922 bytes, not 16-byte aligned) and the down projection reads them
as its K dimension: cuBLAS cannot use its aligned tensor-core kernels (TMA/16-byte vector loads) for these three
GEMMs, which carry two thirds of the FLOPs, and falls back to much slower alignment-2 kernels. The GPU is busy all
the time; it is just doing the MLP GEMMs inefficiently.

Fix (--fixed): round the hidden size up to a multiple of 256: 5632 (3% more FLOPs, all dimensions aligned). Same
model otherwise (same seed; a different but equally random MLP).

Own timers (last line, JSON): `step_ms_p50`, `step_ms_mean`, `tflops` (achieved, model FLOPs / step time),
`ffn_dim`, `dtype`.

Run: python3 fp16_gemm_mlp.py [--fixed] [--steps N] [--ab ROUNDS] [--window W] [--device cpu]
`--ab ROUNDS`: both models built first; windows of W steps alternate (order flips every round); AB reports medians of
per-window mean step latency. Exit 77 without torch/CUDA.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

EXPECTED = "gpu_bound"
BOTTLENECK = ("SwiGLU hidden size 5461 (= int(8*2048/3)) is not a multiple of 8: the bf16 MLP GEMMs hit slow "
              "unaligned cuBLAS kernels instead of the aligned tensor-core ones")
FIX = "round the MLP hidden size up to a multiple of 64/256 (5632), so every GEMM dimension is 16-byte aligned"
FIX_WORDS = ["multiple of", "align", "5632", "hidden size"]

DIM = 2048
LAYERS = 8
HEADS = 16
BATCH = 64
SEQ = 128
MULTIPLE_OF = 256
PROG = os.path.basename(sys.argv[0]) or "fp16_gemm_mlp.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="MLP hidden size rounded up to a multiple of 256")
    ap.add_argument("--steps", type=int, default=500, help="steps (default %(default)s; the first 5 are warm-up)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B")
    ap.add_argument("--window", type=int, default=40, help="--ab: steps per window (default %(default)s)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def ffn_hidden(dim, round_up):
    hidden = int(2 * 4 * dim / 3)
    if round_up:
        hidden = MULTIPLE_OF * ((hidden + MULTIPLE_OF - 1) // MULTIPLE_OF)
    return hidden


def build(torch, dim, layers, heads, hidden, device, dtype):
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    Norm = getattr(nn, "RMSNorm", None) or RMSNorm  # nn.RMSNorm: torch >= 2.4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.ffn_norm = Norm(dim, eps=1e-6), Norm(dim, eps=1e-6)
            self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)
            self.w1 = nn.Linear(dim, hidden, bias=False)  # gate
            self.w3 = nn.Linear(dim, hidden, bias=False)  # up
            self.w2 = nn.Linear(hidden, dim, bias=False)  # down

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.wqkv(self.attn_norm(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
            h = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = Norm(dim, eps=1e-6)
            self.score = nn.Linear(dim, 1, bias=False)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.score(self.norm(x).mean(dim=1)).squeeze(-1)

    torch.manual_seed(0)
    # Build directly on the device (torch >= 2.0): initializing ~370M parameters on the CPU takes seconds.
    with (device if hasattr(device, "__enter__") else contextlib.nullcontext()):
        model = Encoder()
    for m in model.modules():  # keep activations O(1) through 8 random layers
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=m.in_features ** -0.5 / 2)
    return model.to(device=device, dtype=dtype).eval()


def flops_per_step(dim, layers, hidden, tokens, seq):
    per_token = 2 * (3 * dim * dim + dim * dim + 3 * dim * hidden) + 2 * 2 * seq * dim
    return layers * per_token * tokens


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
    dtype = torch.bfloat16 if on_gpu else torch.float32
    dim, layers, heads, batch, seq = (DIM, LAYERS, HEADS, BATCH, SEQ) if on_gpu else (100, 2, 4, 4, 16)

    models = {}
    for name in (["broken", "fixed"] if args.ab else ["fixed" if args.fixed else "broken"]):
        hidden = ffn_hidden(dim, round_up=name == "fixed")
        models[name] = (build(torch, dim, layers, heads, hidden, device, dtype), hidden)
    torch.manual_seed(1)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    print(f"{PROG}: torch {torch.__version__}, {device}, {layers} blocks x {dim} wide, {dtype}, batch {batch} x "
          f"{seq} tokens, MLP hidden " + ", ".join(f"{n}={h}" for n, (_, h) in models.items()), flush=True)

    def step(model):
        scores = model(x)
        return scores.float().cpu()  # the caller gets one score per sequence

    with torch.inference_mode():
        if args.ab:
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    model = models[name][0]
                    sync()
                    t = time.perf_counter()
                    for _ in range(args.window):
                        step(model)
                    sync()
                    if r >= 0:
                        window_ms[name].append((time.perf_counter() - t) / args.window * 1e3)
            b, f = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            print(f"AB broken_ms={b:.3f} fixed_ms={f:.3f} saving_pct={(b - f) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window}", flush=True)
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                              "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                              "broken_step_ms": round(b, 3), "fixed_step_ms": round(f, 3),
                              "ffn_dim_broken": models["broken"][1], "ffn_dim_fixed": models["fixed"][1],
                              "dtype": str(dtype).replace("torch.", ""), "rounds": args.ab,
                              "window": args.window}), flush=True)
            return

        variant = "fixed" if args.fixed else "broken"
        model, hidden = models[variant]
        times = []
        t_prev = time.perf_counter()
        for i in range(args.steps):
            step(model)
            now = time.perf_counter()
            if i >= 5:
                times.append((now - t_prev) * 1e3)
            t_prev = now
    step_ms = statistics.median(times)
    print(json.dumps({
        "program": PROG, "variant": variant,
        "step_ms_p50": round(step_ms, 3), "step_ms_mean": round(statistics.fmean(times), 3),
        "tflops": round(flops_per_step(dim, layers, hidden, batch * seq, seq) / (step_ms / 1e3) / 1e12, 1),
        "ffn_dim": hidden, "dtype": str(dtype).replace("torch.", ""), "steps": len(times),
    }), flush=True)


if __name__ == "__main__":
    main()
