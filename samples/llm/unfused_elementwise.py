"""unfused_elementwise: a transformer encoder with hand-written GELU and LayerNorm, each a chain of small kernels.

What it does: a 12-layer pre-norm transformer encoder written in plain PyTorch (hidden 1024, 16 heads, MLP 4096,
vocabulary 32000, learned positions), random weights, fp16, eval. Under `torch.inference_mode()` it runs 60
timed forward passes (after 3 warm-up passes) of batch 8 x sequence 256 random token ids. Each pass mean-pools
the last hidden states and returns the [8, 1024] embeddings to the host with `.cpu()`, which also ends the step.
Step time is host wall time per pass.

Deliberate bottleneck (gpu_bound, unfused elementwise chains): the MLP's GELU is the tanh formula written out,
0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))): 8 separate elementwise kernels over the [8, 256, 4096]
activation, each reading and writing ~17-34 MB. Each LayerNorm (two per block, one at the end) is written out as
mean, subtract, square, mean, add eps, sqrt, divide, scale, shift: 9 kernels per norm. Per layer that is 26
memory-bound kernels around 4 GEMMs and one flash-attention call, and they take about as much GPU time as the
GEMMs do.

Fix (--fixed): the same weights through `torch.nn.functional.gelu(x, approximate="tanh")` (one kernel) and
`torch.nn.functional.layer_norm` (one kernel, what nn.LayerNorm calls). The results are the same up to fp16
rounding.

--measure: the same model in one process, switched between the hand-written and the fused ops, both warmed up,
then 7 rounds of alternating windows of 10 passes each (the order flips every round). Prints the median step ms
of each and the saving as JSON.

Run: python3 samples/llm/unfused_elementwise.py [--fixed] [--measure] [--steps N] [--rounds R] [--window W]
Last line printed: one JSON object. Exits 77 without torch or a CUDA device.
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
import time

EXPECTED = "gpu_bound"
BOTTLENECK = "hand-written GELU (8 kernels) and LayerNorm (9 kernels) over fp16 activations: memory-bound chains"
FIX = "torch.nn.functional.gelu(approximate='tanh') and torch.nn.functional.layer_norm (fused kernels)"

BATCH = 8
SEQ = 256
HIDDEN = 1024
HEADS = 16
FFN = 4096
LAYERS = 12
VOCAB = 32000
WARMUP = 3
PROG = os.path.basename(sys.argv[0]) or "unfused_elementwise.py"
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="F.gelu(approximate='tanh') and F.layer_norm")
    ap.add_argument("--measure", action="store_true", help="in-process A/B of the hand-written and the fused ops")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="same as --measure --rounds ROUNDS")
    ap.add_argument("--steps", type=int, default=60, help="timed passes after the warm-up (default 60)")
    ap.add_argument("--rounds", type=int, default=7, help="--measure: rounds (default 7)")
    ap.add_argument("--window", type=int, default=10, help="--measure: passes per window (default 10)")
    args = ap.parse_args()
    if args.ab:
        args.measure, args.rounds = True, args.ab
    return args


def need_cuda():
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: torch is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    return torch


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def build_model(torch):
    nn = torch.nn
    F = torch.nn.functional

    def gelu_by_hand(x):
        """The tanh GELU written out: pow, mul, add, mul, tanh, add, mul, mul -- 8 kernels."""
        inner = SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3))
        return 0.5 * x * (1.0 + torch.tanh(inner))

    def layer_norm_by_hand(x, weight, bias, eps=1e-5):
        """LayerNorm written out: mean, sub, mul, mean, add, sqrt, div, mul, add -- 9 kernels."""
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered / torch.sqrt(var + eps) * weight + bias

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1_weight = nn.Parameter(torch.ones(HIDDEN))
            self.ln1_bias = nn.Parameter(torch.zeros(HIDDEN))
            self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
            self.proj = nn.Linear(HIDDEN, HIDDEN)
            self.ln2_weight = nn.Parameter(torch.ones(HIDDEN))
            self.ln2_bias = nn.Parameter(torch.zeros(HIDDEN))
            self.fc1 = nn.Linear(HIDDEN, FFN)
            self.fc2 = nn.Linear(FFN, HIDDEN)

        def forward(self, x, fused):
            norm = (lambda t, w, b: F.layer_norm(t, (HIDDEN,), w, b, 1e-5)) if fused else layer_norm_by_hand
            act = (lambda t: F.gelu(t, approximate="tanh")) if fused else gelu_by_hand
            b, s, _ = x.shape
            h = norm(x, self.ln1_weight, self.ln1_bias)
            q, k, v = self.qkv(h).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, HIDDEN))
            h = norm(x, self.ln2_weight, self.ln2_bias)
            return x + self.fc2(act(self.fc1(h)))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, HIDDEN)
            self.pos = nn.Embedding(SEQ, HIDDEN)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.lnf_weight = nn.Parameter(torch.ones(HIDDEN))
            self.lnf_bias = nn.Parameter(torch.zeros(HIDDEN))
            self.fused = False  # False: the hand-written ops; True: the fused ones (same weights)
            with torch.no_grad():
                self.tok.weight.normal_(0.0, 0.02)
                self.pos.weight.normal_(0.0, 0.02)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            x = self.tok(ids) + self.pos(positions)
            for block in self.blocks:
                x = block(x, self.fused)
            if self.fused:
                return F.layer_norm(x, (HIDDEN,), self.lnf_weight, self.lnf_bias, 1e-5)
            return layer_norm_by_hand(x, self.lnf_weight, self.lnf_bias)

    return Encoder().to(device="cuda", dtype=torch.float16).eval()


def embed(torch, model, ids):
    """One pass: mean-pooled sentence embeddings, on the host."""
    return model(ids).mean(dim=1).float().cpu()


def timed_steps(torch, model, batches, n, offset=0):
    times = []
    with torch.inference_mode():
        for i in range(n):
            t = time.perf_counter()
            embed(torch, model, batches[(offset + i) % len(batches)])
            times.append((time.perf_counter() - t) * 1e3)
    return times


def main():
    args = parse_args()
    torch = need_cuda()

    random.seed(0)
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    print(f"{PROG}: torch {torch.__version__}, {torch.cuda.get_device_name(0)}; encoder {LAYERS} x {HIDDEN} "
          f"(MLP {FFN}), batch {BATCH} x {SEQ}, fp16", flush=True)

    model = build_model(torch)
    batches = [torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda") for _ in range(4)]

    if args.measure:
        with torch.inference_mode():  # same weights: the two paths agree up to fp16 rounding
            model.fused = False
            a = model(batches[0]).float()
            model.fused = True
            b = model(batches[0]).float()
            print(f"{PROG}: max |difference| hand-written vs fused: {(a - b).abs().max().item():.4g}", flush=True)
        for fused in (False, True):
            model.fused = fused
            timed_steps(torch, model, batches, WARMUP)
        windows = {"plain": [], "fixed": []}
        i = 0
        for r in range(args.rounds):
            order = ["plain", "fixed"] if r % 2 == 0 else ["fixed", "plain"]
            for name in order:
                model.fused = name == "fixed"
                windows[name].append(statistics.median(timed_steps(torch, model, batches, args.window, i)))
                i += args.window
        p = statistics.median(windows["plain"])
        f = statistics.median(windows["fixed"])
        print(f"AB broken_ms={p:.3f} fixed_ms={f:.3f} saving_pct={(p - f) / p * 100:.1f} rounds={args.rounds} "
              f"window={args.window}", flush=True)
        print(json.dumps({
            "plain_step_ms_median": round(p, 3), "fixed_step_ms_median": round(f, 3),
            "ratio_fixed_over_plain": round(f / p, 4), "saving_pct": round((p - f) / p * 100, 1),
            "rounds": args.rounds, "window": args.window,
        }), flush=True)
        return

    model.fused = args.fixed
    timed_steps(torch, model, batches, WARMUP)
    times = timed_steps(torch, model, batches, args.steps)
    print(json.dumps({
        "step_ms_median": round(statistics.median(times), 3), "step_ms_p90": round(percentile(times, 90), 3),
        "steps": len(times), "variant": "fixed" if args.fixed else "plain", "batch": BATCH, "seq": SEQ,
    }), flush=True)


if __name__ == "__main__":
    main()
