"""gpt2_generate: batch-1 greedy `model.generate` on GPT-2 (124M, random weights, fp16): launch-bound decoding.

What it does: builds Hugging Face `GPT2LMHeadModel(GPT2Config())` (12 layers, width 768, vocabulary 50257) with
random weights (nothing is downloaded), fp16, eval, and under `torch.inference_mode()` calls `model.generate` with
greedy decoding of 32 new tokens from a 64-token random prompt, batch 1: 3 warm-up calls, then 40 timed calls.
It times itself with a streamer passed to `generate`: generate hands the streamer each new token as
`next_tokens.cpu()` (a blocking copy, so the token exists when the streamer sees it) and the streamer stamps
time.perf_counter(). TTFT is call start -> first new token, TPOT the gap between consecutive new tokens. The model
never stops early: EOS is removed from the generation config and its logit is pinned to 0 (random weights), so
every call makes exactly 32 tokens.

Deliberate bottleneck (launch_bound): each decode step is the eager HF forward at batch 1 with a DynamicCache,
a few hundred small kernels launched one at a time from Python, plus generate's per-token bookkeeping. The GPU
finishes each kernel long before the host launches the next one, so the GPU sits idle most of the time.

Fix (--fixed): a static KV cache (`generation_config.cache_implementation = "static"`), so every decode step has
the same shapes, and the decode step compiled with torch.compile mode="reduce-overhead" (Inductor fuses the
elementwise work, CUDA graphs replay the whole step in one launch). With transformers >= 4.47, `generate`
compiles the decode step itself once the cache is static (the documented way). If that path is missing or
fails, the program falls back to `model.forward = torch.compile(model.forward, mode="reduce-overhead",
fullgraph=True)` and says which path it used. The prefill (the first token) stays eager, so TTFT hardly moves and
TPOT should drop several times over. The first fixed calls compile (tens of seconds, once per process). They are
the warm-up and are not timed.

--measure: both variants in one process (two model objects with the same weights), both warmed up first, then
7 rounds of alternating windows of 6 generate calls each (the order flips every round). Prints the per-variant
medians over windows and the fixed/plain ratios of TPOT, TTFT and the whole call as JSON.

Run: python3 samples/llm/gpt2_generate.py [--fixed] [--measure] [--calls N] [--rounds R] [--window W]
Last line printed: one JSON object. Exits 77 without torch, transformers or a CUDA device.
"""
import argparse
import copy
import json
import os
import random
import statistics
import sys
import time

EXPECTED = "launch_bound"
BOTTLENECK = "eager batch-1 decode in model.generate: hundreds of small kernel launches per token, GPU idle"
FIX = 'generation_config.cache_implementation="static" + torch.compile(mode="reduce-overhead") of the decode step'

PROMPT_LEN = 64
NEW_TOKENS = 32
WARMUP = 3
PROG = os.path.basename(sys.argv[0]) or "gpt2_generate.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="static KV cache + compiled decode step")
    ap.add_argument("--measure", action="store_true", help="in-process A/B of the plain and the fixed variant")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="same as --measure --rounds ROUNDS")
    ap.add_argument("--calls", type=int, default=40, help="timed generate calls after the warm-up (default 40)")
    ap.add_argument("--rounds", type=int, default=7, help="--measure: rounds (default 7)")
    ap.add_argument("--window", type=int, default=6, help="--measure: generate calls per window (default 6)")
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
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"{PROG}: transformers is not importable ({e}); nothing to run", flush=True)
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


def make_clock(torch):
    """A generate() streamer that stamps the host clock each time generate hands it tokens."""
    try:
        from transformers.generation.streamers import BaseStreamer
    except Exception:  # duck typing is all generate() needs (put/end)
        BaseStreamer = object

    class TokenClock(BaseStreamer):
        def __init__(self):
            self.stamps = []

        def put(self, value):
            # generate() passes `tokens.cpu()`: the copy already waited for the token. Only if a version passes a
            # CUDA tensor does the clock synchronize itself, so a stamp never comes before its token exists.
            if getattr(value, "is_cuda", False):
                torch.cuda.synchronize()
            self.stamps.append(time.perf_counter())

        def end(self):
            pass

    return TokenClock()


def build_model(torch):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 12 heads, vocabulary 50257
    model = GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.float16).eval()
    eos = cfg.eos_token_id
    # Random weights could pick EOS and end a call early: no EOS in the generation config, and its logit pinned
    # to 0 (the LM head is tied to the token embedding; prompts never contain the EOS id), so every call makes
    # exactly NEW_TOKENS tokens in both variants.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    with torch.no_grad():
        model.transformer.wte.weight[eos].zero_()
        model.lm_head.weight[eos].zero_()
    return model, cfg


def generate_once(torch, model, prompt, mask, clock, grad_ctx):
    """One timed generate call: returns TTFT (ms), the inter-token gaps (ms), the whole call (ms), tokens made."""
    clock.stamps = []
    t0 = time.perf_counter()  # the previous call ended synchronized: the GPU is idle here
    with grad_ctx():
        out = model.generate(prompt, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                             num_beams=1, streamer=clock)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    seq = out.sequences if hasattr(out, "sequences") else out
    n_new = int(seq.shape[1]) - prompt.shape[1]
    tok = clock.stamps[-n_new:] if n_new > 0 else []  # the first put() is the prompt
    ttft = (tok[0] - t0) * 1e3 if tok else float("nan")
    gaps = [(b - a) * 1e3 for a, b in zip(tok, tok[1:])]
    if n_new != NEW_TOKENS:
        print(f"{PROG}: warning: generate made {n_new} tokens, not {NEW_TOKENS}", flush=True)
    return {"ttft": ttft, "gaps": gaps, "total": (t1 - t0) * 1e3, "n_new": n_new}


def _undo_fixed(model):
    if "forward" in model.__dict__:  # a compiled forward set on the instance
        del model.__dict__["forward"]
    if hasattr(model, "_cache"):  # the static cache generate() keeps between calls
        del model._cache
    if hasattr(model, "_compiled_call"):
        del model._compiled_call


def setup_fixed(torch, model, prompt, mask, clock):
    """Static cache + compiled decode step, warmed up. Tries generate's own compilation first, then a compiled
    model.forward (under inference_mode, then under no_grad). Returns (description of the path, grad context)."""
    attempts = [("generate auto-compile", torch.inference_mode, None),
                ("manual torch.compile(model.forward, fullgraph=True)", torch.inference_mode, True),
                ("manual torch.compile(model.forward, fullgraph=False), no_grad", torch.no_grad, False)]
    last = None
    for name, grad_ctx, fullgraph in attempts:
        model.generation_config.cache_implementation = "static"
        manual = fullgraph is not None
        if manual:
            # keep generate from compiling a second time on top of the compiled forward
            model.generation_config.disable_compile = True
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=fullgraph)
        elif not hasattr(model, "get_compiled_call"):
            print(f"{PROG}: this transformers has no automatic compilation in generate; compiling by hand",
                  flush=True)
            continue
        try:
            t = time.perf_counter()
            for _ in range(WARMUP):
                generate_once(torch, model, prompt, mask, clock, grad_ctx)
            if not manual and not hasattr(model, "_compiled_call"):
                raise RuntimeError("generate did not compile the decode step (no _compiled_call after warm-up)")
            print(f"{PROG}: fixed path: {name}; static cache; warm-up incl. compilation "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
            return name, grad_ctx
        except Exception as e:  # noqa: BLE001 - report and try the next path
            last = e
            print(f"{PROG}: fixed path '{name}' failed: {type(e).__name__}: {str(e)[:400]}", flush=True)
            _undo_fixed(model)
            try:
                torch._dynamo.reset()
            except Exception:
                pass
    raise RuntimeError(f"no fixed path worked; last error: {last!r}")


def summarize(runs):
    gaps = [g for r in runs for g in r["gaps"]]
    total_s = sum(r["total"] for r in runs) / 1e3
    tokens = sum(r["n_new"] for r in runs)
    return {
        "ttft_ms_median": round(statistics.median(r["ttft"] for r in runs), 3),
        "tpot_ms_median": round(statistics.median(gaps), 3) if gaps else None,
        "tpot_ms_p90": round(percentile(gaps, 90), 3) if gaps else None,
        "tokens_per_s": round(tokens / total_s, 1) if total_s > 0 else None,
        "generate_ms_median": round(statistics.median(r["total"] for r in runs), 3),
    }


def main():
    args = parse_args()
    torch = need_cuda()
    import transformers

    random.seed(0)
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    print(f"{PROG}: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name(0)}", flush=True)

    model, cfg = build_model(torch)
    prompt = torch.randint(0, cfg.eos_token_id, (1, PROMPT_LEN), device="cuda")
    mask = torch.ones_like(prompt)
    clock = make_clock(torch)

    if args.measure:
        measure(torch, args, model, prompt, mask, clock)
        return

    variant = "fixed" if args.fixed else "plain"
    path = "eager, DynamicCache"
    grad_ctx = torch.inference_mode
    if args.fixed:
        path, grad_ctx = setup_fixed(torch, model, prompt, mask, clock)
    else:
        for _ in range(WARMUP):
            generate_once(torch, model, prompt, mask, clock, grad_ctx)
    runs = [generate_once(torch, model, prompt, mask, clock, grad_ctx) for _ in range(args.calls)]
    result = summarize(runs)
    result.update({"variant": variant, "path": path, "calls": len(runs), "new_tokens": NEW_TOKENS,
                   "prompt_len": PROMPT_LEN})
    print(json.dumps(result), flush=True)


def measure(torch, args, plain, prompt, mask, clock):
    try:
        fixed = copy.deepcopy(plain)  # same weights, its own generation config
    except Exception as e:  # noqa: BLE001
        print(f"{PROG}: deepcopy failed ({type(e).__name__}: {e}); building a second model and loading the weights",
              flush=True)
        fixed, _ = build_model(torch)
        fixed.load_state_dict(plain.state_dict(), strict=False)
    path, fixed_ctx = setup_fixed(torch, fixed, prompt, mask, clock)
    plain_ctx = torch.inference_mode
    for _ in range(WARMUP):
        generate_once(torch, plain, prompt, mask, clock, plain_ctx)

    variants = {"plain": (plain, plain_ctx), "fixed": (fixed, fixed_ctx)}
    windows = {"plain": [], "fixed": []}
    for r in range(args.rounds):
        order = ["plain", "fixed"] if r % 2 == 0 else ["fixed", "plain"]
        for name in order:
            model, ctx = variants[name]
            runs = [generate_once(torch, model, prompt, mask, clock, ctx) for _ in range(args.window)]
            windows[name].append(summarize(runs))

    def med(name, key):
        vals = [w[key] for w in windows[name] if w[key] is not None]
        return round(statistics.median(vals), 3) if vals else None

    keys = ("ttft_ms_median", "tpot_ms_median", "tpot_ms_p90", "tokens_per_s", "generate_ms_median")
    res = {name: {k: med(name, k) for k in keys} for name in ("plain", "fixed")}

    def ratio(key):
        a, b = res["plain"][key], res["fixed"][key]
        return round(b / a, 4) if a and b is not None else None

    gen_ratio = ratio("generate_ms_median")
    out = {
        "tpot_ratio_fixed_over_plain": ratio("tpot_ms_median"),
        "ttft_ratio_fixed_over_plain": ratio("ttft_ms_median"),
        "generate_ratio_fixed_over_plain": gen_ratio,
        "saving_pct": round((1 - gen_ratio) * 100, 1) if gen_ratio is not None else None,
        "plain": res["plain"], "fixed": res["fixed"], "fixed_path": path,
        "rounds": args.rounds, "window": args.window,
    }
    b, x = res["plain"]["generate_ms_median"], res["fixed"]["generate_ms_median"]
    print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.rounds} "
          f"window={args.window}", flush=True)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
