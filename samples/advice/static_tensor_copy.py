"""static_tensor_copy: an ALiBi encoder whose constant bias table lives on the CPU and is copied to the GPU every layer.

What it does: a 6-layer transformer encoder (width 1024, 16 heads, fp16, random weights) with ALiBi attention
biases, encoding batches of 8 sequences x 1024 tokens. The ALiBi table (`slope_h * -|i - j|` for 16 heads x
1024 x 1024 positions, fp16, 32 MB) is computed once in the attention module's constructor on the CPU and kept as a
plain attribute. 500 steps; each returns one pooled embedding per sequence to the host.

Planted problem (h2d_bound): the table is a plain tensor attribute, not a registered buffer, so `model.to("cuda")`
left it in pageable host memory, and each attention layer's forward does `self.alibi.to(x.device)`: 6 synchronous
pageable copies of the same 32 MB per step (~200 MB of host-to-device traffic per step for data that never
changes), which take longer than the step's compute.

Fix (--fixed): `self.register_buffer("alibi", table, persistent=False)` so `model.to("cuda")` moves it once, before
the loop; the forward's `.to(x.device)` is then a no-op and no step copies anything but its input.

Own timers (last line, JSON): `step_ms_p50`, `step_ms_mean`, `h2d_mb_per_step` (the bias bytes copied per step).
No DataLoader: the input batch is generated on the GPU.

Run: python3 static_tensor_copy.py [--fixed] [--steps N] [--ab ROUNDS] [--window W] [--device cpu]
`--ab ROUNDS`: both models (same weights) built first; windows of W steps alternate (order flips every round); AB
reports medians of per-window mean step latency. Exit 77 without torch/CUDA.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

EXPECTED = "h2d_bound"
BOTTLENECK = ("a constant 32 MB ALiBi bias table kept in pageable CPU memory (a plain attribute, not a buffer) is "
              "copied to the GPU with .to(device) in every attention layer, every step")
FIX = ("register the table as a buffer (register_buffer(..., persistent=False)) or move it to the GPU once before the "
       "loop, so no step copies it")
FIX_WORDS = ["register_buffer", "once", "before the loop", "keep it on the gpu"]

DIM = 1024
LAYERS = 6
HEADS = 16
BATCH = 8
SEQ = 1024
PROG = os.path.basename(sys.argv[0]) or "static_tensor_copy.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="the bias table is a registered buffer (on the GPU)")
    ap.add_argument("--steps", type=int, default=500, help="steps (default %(default)s; the first 5 are warm-up)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B")
    ap.add_argument("--window", type=int, default=40, help="--ab: steps per window (default %(default)s)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def alibi_table(torch, heads, seq, dtype):
    """[heads, seq, seq] additive attention bias: -slope_h * |i - j| (symmetric ALiBi for an encoder)."""
    slopes = torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)])
    pos = torch.arange(seq)
    dist = (pos[None, :] - pos[:, None]).abs().float()
    return (-slopes[:, None, None] * dist[None]).to(dtype)


def build(torch, dim, layers, heads, seq, dtype, as_buffer):
    import torch.nn as nn
    import torch.nn.functional as F

    class AlibiAttention(nn.Module):
        def __init__(self, table):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            if as_buffer:
                self.register_buffer("alibi", table, persistent=False)
            else:
                self.alibi = table  # computed once at construction

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            bias = self.alibi[:, :t, :t].to(x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])
            return self.out(y.transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self, table):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = AlibiAttention(table)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            table = alibi_table(torch, heads, seq, dtype)
            self.blocks = nn.ModuleList(Block(table) for _ in range(layers))
            self.ln = nn.LayerNorm(dim)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x).mean(dim=1)

    torch.manual_seed(0)
    return Encoder()


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
    dtype = torch.float16 if on_gpu else torch.float32
    dim, layers, heads, batch, seq = (DIM, LAYERS, HEADS, BATCH, SEQ) if on_gpu else (64, 2, 4, 2, 128)

    names = ["broken", "fixed"] if args.ab else ["fixed" if args.fixed else "broken"]
    models = {n: build(torch, dim, layers, heads, seq, dtype, as_buffer=n == "fixed").to(device=device, dtype=dtype)
              .eval() for n in names}
    table_mb = heads * seq * seq * torch.finfo(dtype).bits / 8 / 1e6
    torch.manual_seed(1)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    print(f"{PROG}: torch {torch.__version__}, {device}, {layers} layers x {dim}, {dtype}, batch {batch} x {seq}, "
          f"ALiBi table {table_mb:.0f} MB", flush=True)

    def step(model):
        return model(x).float().cpu()

    with torch.inference_mode():
        if args.ab:
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    sync()
                    t = time.perf_counter()
                    for _ in range(args.window):
                        step(models[name])
                    sync()
                    if r >= 0:
                        window_ms[name].append((time.perf_counter() - t) / args.window * 1e3)
            b, f = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            diff = (step(models["broken"]) - step(models["fixed"])).abs().max().item()
            print(f"AB broken_ms={b:.3f} fixed_ms={f:.3f} saving_pct={(b - f) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window}", flush=True)
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                              "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                              "broken_step_ms": round(b, 3), "fixed_step_ms": round(f, 3),
                              "max_abs_diff": diff, "rounds": args.ab, "window": args.window}), flush=True)
            return

        variant = names[0]
        model = models[variant]
        times = []
        t_prev = time.perf_counter()
        for i in range(args.steps):
            emb = step(model)
            now = time.perf_counter()
            if i >= 5:
                times.append((now - t_prev) * 1e3)
            t_prev = now
    if not math.isfinite(float(emb.abs().max())):
        print(f"{PROG}: warning: non-finite output", flush=True)
    print(json.dumps({
        "program": PROG, "variant": variant,
        "step_ms_p50": round(statistics.median(times), 3), "step_ms_mean": round(statistics.fmean(times), 3),
        "h2d_mb_per_step": round(table_mb * layers, 1) if variant == "broken" else 0.0, "steps": len(times),
    }), flush=True)


if __name__ == "__main__":
    main()
