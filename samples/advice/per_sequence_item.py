"""per_sequence_item: batched greedy decode (64 sequences, fp16) that reads each sequence's token with `.item()`.

What it does: a compact GPT-style decoder written by hand in the gpt-fast manner (12 layers, width 768, 12 heads,
vocabulary 32000, learned positions, a preallocated static KV cache indexed by `input_pos`; random weights, fp16).
It serves a static batch of 64 sequences: prefill 16 random prompt tokens each, then 256 greedy decode steps. After
every step the host loop does the per-sequence bookkeeping a serving loop needs: append the token to that
sequence's output list, add its log-probability to the sequence score, stop the sequence at EOS or its length
limit. 1 warm-up call, then 8 timed calls.

Planted problem (sync_bound): the bookkeeping loops over the 64 sequences and reads each value separately,
`tok = next_tokens[i].item()` and `logprob[i].item()`: 128 blocking device-to-host copies per step, each a full
round trip (launch a copy, synchronize the stream, return to Python). The first waits for the step's kernels; the
other 127 are pure synchronization overhead, and the host cannot queue the next step while it does them.

Fix (--fixed): one transfer per step: `next_tokens.tolist()` and `logprob.tolist()` (the second finds the stream
already synchronized), then the same Python loop over plain lists.

Competing fix, measured by --ab as `AB_ALT name=cuda_graph`: keep the per-sequence `.item()` calls but capture the
decode step (forward, log-softmax, argmax, gather, next input and position) in a CUDA graph
(`torch.cuda.CUDAGraph`, static buffers) so the step's ~170 kernels launch as one graph; the comparison tells
whether the syncs or the launches dominate.

Own timers (last line, JSON): per decode step (`step_ms_p50`, `step_ms_mean`; a call's decode time / steps), per call
(`call_ms_p50`), `tokens_per_s`, `syncs_per_step`.

Run: python3 per_sequence_item.py [--fixed] [--calls N] [--ab ROUNDS] [--device cpu]
`--ab ROUNDS`: one model and cache; windows of one 128-step call rotate between broken, fixed and cuda_graph (order
rotated every round); AB reports medians of per-window mean decode-step latency. Exit 77 without torch/CUDA.
"""
import argparse
import json
import os
import statistics
import sys
import time

EXPECTED = "sync_bound"
BOTTLENECK = ("per-sequence .item() calls in the decode loop: 64 sequences x (token + logprob) = 128 blocking "
              "device-to-host copies per step")
FIX = "read the step's tokens and log-probs once per step (next_tokens.tolist(), logprob.tolist()), then loop on the host"
FIX_WORDS = [".tolist()", "once per step", ".item()", "per sequence"]

BATCH = 64
PROMPT_LEN = 16
NEW_TOKENS = 256
VOCAB = 32000
EOS = 2
DIM, LAYERS, HEADS = 768, 12, 12
MAX_SEQ = 288  # >= PROMPT_LEN + NEW_TOKENS + 1, a multiple of 16
PROG = os.path.basename(sys.argv[0]) or "per_sequence_item.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="one .tolist() per step")
    ap.add_argument("--calls", type=int, default=8, help="timed calls after one warm-up (default 8)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B (+ the CUDA-graph variant)")
    ap.add_argument("--window-steps", type=int, default=128, help="--ab: decode steps per window (one call)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def build(torch, device, dtype, small):
    import torch.nn as nn
    import torch.nn.functional as F
    dim, layers, heads = (64, 2, 4) if small else (DIM, LAYERS, HEADS)
    head_dim = dim // heads

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)
            self.register_buffer("k_cache", torch.zeros(BATCH, heads, MAX_SEQ, head_dim), persistent=False)
            self.register_buffer("v_cache", torch.zeros(BATCH, heads, MAX_SEQ, head_dim), persistent=False)

        def forward(self, x, input_pos, mask):
            b, t, _ = x.shape
            q, k, v = self.wqkv(x).view(b, t, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
            self.k_cache.index_copy_(2, input_pos, k)
            self.v_cache.index_copy_(2, input_pos, v)
            y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
            return self.wo(y.transpose(1, 2).reshape(b, t, dim))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = Attention()
            self.w1, self.w2 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

        def forward(self, x, input_pos, mask):
            x = x + self.attn(self.ln1(x), input_pos, mask)
            return x + self.w2(F.gelu(self.w1(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, dim)
            self.pos = nn.Embedding(MAX_SEQ, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(dim)
            self.lm_head = nn.Linear(dim, VOCAB, bias=False)
            self.register_buffer("causal", torch.tril(torch.ones(MAX_SEQ, MAX_SEQ, dtype=torch.bool)),
                                 persistent=False)

        def forward(self, idx, input_pos):
            mask = self.causal[input_pos][None, None]  # [1, 1, t, MAX_SEQ]
            x = self.tok(idx) + self.pos(input_pos)
            for blk in self.blocks:
                x = blk(x, input_pos, mask)
            return self.lm_head(self.ln_f(x[:, -1]))  # logits of the last position only

    return Decoder().to(device=device, dtype=dtype).eval()


class Runner:
    """Prefill + decode with the three ways of doing the per-step host work."""

    def __init__(self, torch, model, device):
        self.torch, self.model, self.device = torch, model, device
        self.prompt = torch.randint(3, VOCAB, (BATCH, PROMPT_LEN), device=device)
        self.prompt_pos = torch.arange(PROMPT_LEN, device=device)
        # static buffers for the graphed step
        self.cur_tok = torch.zeros(BATCH, 1, dtype=torch.long, device=device)
        self.cur_pos = torch.zeros(1, dtype=torch.long, device=device)
        self.out_tok = torch.zeros(BATCH, dtype=torch.long, device=device)
        self.out_lp = torch.zeros(BATCH, dtype=torch.float32, device=device)
        self.graph = None

    def step(self, tok, pos):
        logits = self.model(tok, pos).float()
        logprobs = self.torch.log_softmax(logits, dim=-1)
        nxt = logprobs.argmax(dim=-1)
        lp = logprobs.gather(-1, nxt[:, None]).squeeze(-1)
        return nxt, lp

    def _graph_body(self):
        nxt, lp = self.step(self.cur_tok, self.cur_pos)
        self.out_tok.copy_(nxt)
        self.out_lp.copy_(lp)
        self.cur_tok.copy_(nxt[:, None])
        self.cur_pos.add_(1)

    def capture(self):
        torch = self.torch
        self.cur_pos.fill_(PROMPT_LEN)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._graph_body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._graph_body()
        torch.cuda.synchronize()

    def run(self, mode, steps):
        """One call: prefill (first token), then `steps` decode steps. Returns (outputs, scores, decode start)."""
        torch = self.torch
        outputs = [[] for _ in range(BATCH)]
        scores = [0.0] * BATCH
        finished = [False] * BATCH
        limit = steps + 1

        def record(nxt, lp):
            if mode == "fixed":
                toks, lps = nxt.tolist(), lp.tolist()
                for i in range(BATCH):
                    if finished[i]:
                        continue
                    outputs[i].append(toks[i])
                    scores[i] += lps[i]
                    if toks[i] == EOS or len(outputs[i]) >= limit:
                        finished[i] = True
            else:
                for i in range(BATCH):
                    if finished[i]:
                        continue
                    tok = nxt[i].item()
                    outputs[i].append(tok)
                    scores[i] += lp[i].item()
                    if tok == EOS or len(outputs[i]) >= limit:
                        finished[i] = True

        nxt, lp = self.step(self.prompt, self.prompt_pos)
        record(nxt, lp)
        pos = torch.tensor([PROMPT_LEN], device=self.device)
        if mode == "cuda_graph":
            self.cur_tok.copy_(nxt[:, None])
            self.cur_pos.fill_(PROMPT_LEN)
        t_decode = time.perf_counter()
        for _ in range(steps):
            if mode == "cuda_graph":
                self.graph.replay()
                nxt, lp = self.out_tok, self.out_lp
            else:
                nxt, lp = self.step(nxt[:, None], pos)
                pos = pos + 1
            record(nxt, lp)
        return outputs, scores, t_decode


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
    torch.manual_seed(0)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    model = build(torch, device, torch.float16 if on_gpu else torch.float32, small=not on_gpu)
    runner = Runner(torch, model, device)
    print(f"{PROG}: torch {torch.__version__}, {device}, decoder {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
          f"params, batch {BATCH}, prompt {PROMPT_LEN}", flush=True)

    with torch.no_grad():
        if args.ab:
            names = ["broken", "fixed"]
            if on_gpu:
                runner.capture()
                names.append("cuda_graph")
            window_ms = {n: [] for n in names}
            for r in range(-1, args.ab):  # round -1 warms every variant up
                k = r % len(names)
                order = names[k:] + names[:k]
                if r % 2:
                    order.reverse()
                for name in order:
                    sync()
                    _, _, t_dec = runner.run(name, args.window_steps)
                    sync()
                    if r >= 0:
                        window_ms[name].append((time.perf_counter() - t_dec) / args.window_steps * 1e3)
            med = {n: statistics.median(v) for n, v in window_ms.items()}
            b, x = med["broken"], med["fixed"]
            print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window_steps}", flush=True)
            if "cuda_graph" in med:
                g = med["cuda_graph"]
                print(f"AB_ALT name=cuda_graph fixed_ms={g:.3f} saving_pct={(b - g) / b * 100:.1f}", flush=True)
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                              "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                              **{f"{n}_step_ms": round(v, 3) for n, v in med.items()},
                              "rounds": args.ab, "window": args.window_steps}), flush=True)
            return
        variant = "fixed" if args.fixed else "broken"
        step_ms, call_ms = [], []
        for i in range(1 + args.calls):
            sync()
            t0 = time.perf_counter()
            outputs, scores, t_dec = runner.run(variant, NEW_TOKENS)
            t1 = time.perf_counter()
            if i == 0:
                continue
            call_ms.append((t1 - t0) * 1e3)
            step_ms.append((t1 - t_dec) / NEW_TOKENS * 1e3)
            print(f"call {i}: {BATCH} sequences x {len(outputs[0])} tokens in {call_ms[-1]:.1f} ms "
                  f"({step_ms[-1]:.2f} ms/step), best score {max(scores):.1f}", flush=True)
    print(json.dumps({
        "program": PROG, "variant": variant,
        "step_ms_p50": round(statistics.median(step_ms), 3), "step_ms_mean": round(statistics.fmean(step_ms), 3),
        "call_ms_p50": round(statistics.median(call_ms), 3),
        "tokens_per_s": round(BATCH * NEW_TOKENS * len(call_ms) / (sum(call_ms) / 1e3), 1),
        "syncs_per_step": 2 if args.fixed else 2 * BATCH, "calls": len(call_ms), "batch": BATCH,
        "new_tokens": NEW_TOKENS,
    }), flush=True)


if __name__ == "__main__":
    main()
