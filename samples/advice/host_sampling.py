"""host_sampling: a hand-written KV-cache decode loop (HF Llama, fp16) that does top-p sampling in NumPy on the host.

What it does: builds a small Llama with random weights (`LlamaForCausalLM(LlamaConfig(...))`: 8 layers, hidden 1024,
16 heads, vocabulary 32000; fp16 on the GPU; nothing downloaded) and generates with its own loop, the way sampling
code is often written by hand: prefill a batch of 4 random 32-token prompts into a `DynamicCache`, then one forward
per new token, feeding back the sampled tokens. Sampling is temperature 0.8 + nucleus (top-p 0.9). Every call makes
128 new tokens per sequence (no EOS handling), 1 warm-up call + 5 timed calls.

Planted problem (cpu_bound): the sampler runs on the host. Each step does
`probs = torch.softmax(logits / T, -1).cpu().numpy()` and `sample_top_p(probs, 0.9, rng)`, a NumPy function that, for
each row, fully sorts the 32000 probabilities (`np.argsort`), takes the cumulative sum, cuts at top_p, renormalizes
and draws with `rng.choice`. The copy waits for the GPU, the sort costs milliseconds per row, and the next forward
cannot start until the host is done: the GPU idles for most of every step.

Fix (--fixed): sample on the GPU: `torch.softmax`, `torch.sort(descending=True)`, `cumsum`, mask the tail beyond
top_p, and draw one token per row (the exponential-race form of `torch.multinomial`, which needs no host sync). The
sampled ids stay on the device as the next input; nothing is read back until the call ends.

Own timers (last line, JSON): per decode step (`step_ms_p50`, `step_ms_mean`: a call's decode time / tokens),
per call (`call_ms_p50`), `tokens_per_s` (all sequences), and the host sampler's share (`sample_ms_mean`, broken
variant only).

Run: python3 host_sampling.py [--fixed] [--calls N] [--ab ROUNDS] [--device cpu]
`--ab ROUNDS`: both samplers on one model; windows of one 64-token generate call alternate (order flips every
round); AB reports medians of per-window mean decode-step latency. Exit 77 without torch/transformers/numpy/CUDA.
"""
import argparse
import json
import os
import statistics
import sys
import time

EXPECTED = "cpu_bound"
BOTTLENECK = ("top-p sampling on the host every decode step: softmax -> .cpu().numpy() -> np.argsort of the 32000-way "
              "distribution per row -> rng.choice, while the GPU waits")
FIX = ("sample on the GPU (torch.softmax, torch.sort, cumsum, mask, torch.multinomial or the exponential trick) and "
       "keep the token ids on the device")
FIX_WORDS = ["sample on the gpu", "torch.multinomial", "torch.sort", "cumsum"]

BATCH = 4
PROMPT_LEN = 32
NEW_TOKENS = 128
TEMPERATURE = 0.8
TOP_P = 0.9
PROG = os.path.basename(sys.argv[0]) or "host_sampling.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="sample on the GPU")
    ap.add_argument("--calls", type=int, default=5, help="timed generate calls after one warm-up (default 5)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B of both samplers")
    ap.add_argument("--window-tokens", type=int, default=64, help="--ab: new tokens per window (one call)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def need(args):
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError as e:
        print(f"{PROG}: {e.name} is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"{PROG}: transformers is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    return torch


def sample_top_p(probs, top_p, rng):
    """Nucleus sampling of one token per row of `probs` ([batch, vocab] float32 NumPy array)."""
    import numpy as np
    out = []
    for row in probs:
        order = np.argsort(-row)
        sorted_p = row[order]
        cum = np.cumsum(sorted_p)
        cutoff = int(np.searchsorted(cum, top_p)) + 1
        kept = sorted_p[:cutoff] / cum[cutoff - 1]
        out.append(int(order[rng.choice(cutoff, p=kept)]))
    return out


def make_samplers(torch, device, stats):
    import numpy as np
    rng = np.random.default_rng(0)
    gen = torch.Generator(device=device)
    gen.manual_seed(0)

    def host(logits):
        t = time.perf_counter()
        probs = torch.softmax(logits.float() / TEMPERATURE, dim=-1).cpu().numpy()
        ids = sample_top_p(probs, TOP_P, rng)
        nxt = torch.tensor(ids, device=device)[:, None]
        stats["sample_s"] += time.perf_counter() - t
        return nxt

    def gpu(logits):
        probs = torch.softmax(logits.float() / TEMPERATURE, dim=-1)
        sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
        cum = sorted_p.cumsum(dim=-1)
        sorted_p = sorted_p.masked_fill(cum - sorted_p > TOP_P, 0.0)  # keep the smallest prefix reaching top_p
        # torch.multinomial(sorted_p, 1) without its host sync: argmax of p / Exp(1) noise draws index i w.p. p_i.
        noise = torch.empty_like(sorted_p).exponential_(1.0, generator=gen)
        choice = (sorted_p / noise).argmax(dim=-1, keepdim=True)
        return idx.gather(-1, choice)

    return {"broken": host, "fixed": gpu}


def generate(torch, model, prompt, new_tokens, sampler):
    """Prefill + `new_tokens` decode steps; returns (token ids [B, new_tokens] on the device, decode start time)."""
    from transformers import DynamicCache
    cache = DynamicCache()
    out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
    logits = out.logits[:, -1, :]
    t_decode = time.perf_counter()
    tokens = []
    for _ in range(new_tokens):
        nxt = sampler(logits)
        tokens.append(nxt)
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
        logits = out.logits[:, -1, :]
    return torch.cat(tokens, dim=1), t_decode


def main():
    args = parse_args()
    torch = need(args)
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if on_gpu:
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                          num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048)
        dtype = torch.float16
    else:
        cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=4, vocab_size=32000, max_position_embeddings=512)
        dtype = torch.float32
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    prompt = torch.randint(3, cfg.vocab_size, (BATCH, PROMPT_LEN), device=device)
    stats = {"sample_s": 0.0}
    samplers = make_samplers(torch, device, stats)
    print(f"{PROG}: torch {torch.__version__}, {device}, Llama {cfg.num_hidden_layers}x{cfg.hidden_size} {dtype}, "
          f"batch {BATCH}, prompt {PROMPT_LEN}, vocabulary {cfg.vocab_size}, top-p {TOP_P}", flush=True)

    with torch.inference_mode():
        if args.ab:
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):  # round -1 warms both up
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    sync()
                    _, t_dec = generate(torch, model, prompt, args.window_tokens, samplers[name])
                    sync()
                    if r >= 0:
                        window_ms[name].append((time.perf_counter() - t_dec) / args.window_tokens * 1e3)
            b, x = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window_tokens}", flush=True)
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                              "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                              "broken_step_ms": round(b, 3), "fixed_step_ms": round(x, 3), "rounds": args.ab,
                              "window": args.window_tokens}), flush=True)
            return

        variant = "fixed" if args.fixed else "broken"
        sampler = samplers[variant]
        step_ms, call_ms = [], []
        for i in range(1 + args.calls):
            stats["sample_s"] = 0.0
            sync()
            t0 = time.perf_counter()
            tokens, t_dec = generate(torch, model, prompt, NEW_TOKENS, sampler)
            ids = tokens.tolist()  # the caller gets the token ids
            t1 = time.perf_counter()
            if i == 0:
                continue  # warm-up
            call_ms.append((t1 - t0) * 1e3)
            step_ms.append((t1 - t_dec) / NEW_TOKENS * 1e3)
            sample_ms = stats["sample_s"] / NEW_TOKENS * 1e3
            print(f"call {i}: {len(ids)}x{len(ids[0])} tokens in {call_ms[-1]:.1f} ms ({step_ms[-1]:.2f} ms/step)",
                  flush=True)
    print(json.dumps({
        "program": PROG, "variant": variant,
        "step_ms_p50": round(statistics.median(step_ms), 3), "step_ms_mean": round(statistics.fmean(step_ms), 3),
        "call_ms_p50": round(statistics.median(call_ms), 3),
        "tokens_per_s": round(BATCH * NEW_TOKENS * len(call_ms) / (sum(call_ms) / 1e3), 1),
        "sample_ms_mean": round(sample_ms, 3) if variant == "broken" else None,
        "calls": len(call_ms), "batch": BATCH, "new_tokens": NEW_TOKENS,
    }), flush=True)


if __name__ == "__main__":
    main()
