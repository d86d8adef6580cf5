"""decode_loop: a hand-written KV-cache decode loop on a small Llama whose stopping check reads every token back.

What it does: builds Hugging Face `LlamaForCausalLM` from a config with random weights (hidden 1024, 8 layers,
16 heads, intermediate 2816, vocabulary 32000), fp16, eval, under `torch.inference_mode()`. Each iteration is one
request, batch 1: prefill a 64-token random prompt into a `DynamicCache`, then greedy-decode 48 new tokens, one
forward per token, feeding `past_key_values` back in (no `generate`). 3 warm-up iterations, then 30 timed ones.
It times itself with CUDA events: one recorded before the prefill and one right after each token's argmax. The
events add no synchronization (read once the iteration has ended), so they time both variants the same way. TTFT
is start event -> first token's event, TPOT the gap between consecutive tokens' events. Random weights could
pick EOS (id 2) and stop early, so EOS's row of the LM head is zeroed (its logit is always 0 and never the
argmax). Both variants always make 48 tokens.

Deliberate bottleneck (sync_bound): the loop's stopping check `if next_token.item() == eos: break` runs after
every token. Each `.item()` is a device-to-host copy that blocks the host until the GPU has finished the token.
The host cannot queue token t+1's kernels while token t is still on the GPU, so every token pays the GPU's tail
(LM head, argmax), the copy and the host's restart as dead time. Competing cause: the eager batch-1 forward is
also launch-bound (a few hundred small kernels per token), so the saving from removing the sync is the per-token
tail, not the whole step. Expect a modest saving (a few percent up to a few tens of percent, depending on how
host-bound the step is); `--hidden/--layers` move the balance.

Fix (--fixed): no per-token `.item()`. The next token stays on the GPU and feeds the next forward directly, the
EOS flag is kept on the GPU (`finished |= next_token == eos`) and checked once every 16 tokens, and the tokens
are read back once at the end (trimmed after an EOS, if any).

Suggested fix (--graphs): what a profiler suggests for the launch-bound forward, applied to the plain loop (the
per-token `.item()` stays): a static KV cache (`StaticCache`) and each decode token's forward plus its argmax
compiled with `torch.compile(mode="reduce-overhead", fullgraph=True)`, so the token's few hundred launches become
one CUDA graph replay; the prompt pass stays eager. `--measure --compare graphs` measures it against the plain
loop the same way (the first requests compile, tens of seconds, inside the warm-up).

--measure: both variants in one process (same model and weights), both warmed up, then 7 rounds of alternating
windows of 5 requests each (the order flips every round). Prints the medians over windows of each variant and
the fixed/plain ratios as JSON.

Run: python3 samples/llm/decode_loop.py [--fixed] [--measure] [--iters N] [--rounds R] [--window W]
Last line printed: one JSON object. Exits 77 without torch, transformers or a CUDA device.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

EXPECTED = "sync_bound"
BOTTLENECK = "next_token.item() == eos after every token: a blocking device-to-host read per decoded token"
FIX = "keep the EOS flag on the GPU, check it every 16 tokens, read the tokens back once at the end"

PROMPT_LEN = 64
NEW_TOKENS = 48
CHECK_EVERY = 16
WARMUP = 3
PROG = os.path.basename(sys.argv[0]) or "decode_loop.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="no per-token .item(): EOS checked on the GPU every 16 tokens")
    ap.add_argument("--graphs", action="store_true", help="static KV cache + compiled decode step (CUDA graphs)")
    ap.add_argument("--measure", action="store_true", help="in-process A/B of the plain and the fixed loop")
    ap.add_argument("--compare", choices=("fixed", "graphs"), default="fixed",
                    help="--measure: the variant measured against the plain loop (default fixed)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="same as --measure --rounds ROUNDS")
    ap.add_argument("--iters", type=int, default=30, help="timed requests after the warm-up (default 30)")
    ap.add_argument("--rounds", type=int, default=7, help="--measure: rounds (default 7)")
    ap.add_argument("--window", type=int, default=5, help="--measure: requests per window (default 5)")
    ap.add_argument("--hidden", type=int, default=1024, help="model width (default 1024)")
    ap.add_argument("--layers", type=int, default=8, help="decoder layers (default 8)")
    ap.add_argument("--heads", type=int, default=16, help="attention heads (default 16)")
    ap.add_argument("--intermediate", type=int, default=0, help="MLP width (default 2.75 x hidden)")
    args = ap.parse_args()
    if args.ab:
        args.measure, args.rounds = True, args.ab
    if not args.intermediate:
        args.intermediate = int(args.hidden * 2.75) // 64 * 64
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


def build_model(torch, args):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.heads, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.float16).eval()
    eos = cfg.eos_token_id
    if isinstance(eos, (list, tuple)):
        eos = eos[0]
    if eos is None:
        eos = 2
    with torch.no_grad():
        model.lm_head.weight[eos].zero_()  # logit 0: never the argmax of 32000 random logits
    return model, cfg, int(eos)


def new_cache():
    """An empty DynamicCache, or None (the model then creates one and returns it in past_key_values)."""
    try:
        from transformers import DynamicCache
        return DynamicCache()
    except Exception:
        return None


def decode_item_per_token(torch, model, prompt, eos, start, events):
    """The plain loop: the stopping check reads every token back with .item()."""
    cache = new_cache()
    start.record()
    out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
    cache = out.past_key_values
    next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    events[0].record()
    generated = []
    for t in range(NEW_TOKENS):
        tok = next_token.item()  # device-to-host copy: the host waits for the GPU, every token
        generated.append(tok)
        if tok == eos:
            break
        if t == NEW_TOKENS - 1:
            break
        out = model(input_ids=next_token, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        events[t + 1].record()
    return generated


def decode_check_on_gpu(torch, model, prompt, eos, start, events):
    """The fixed loop: the EOS flag stays on the GPU and is read every CHECK_EVERY tokens; tokens read at the end."""
    cache = new_cache()
    start.record()
    out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
    cache = out.past_key_values
    next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    events[0].record()
    tokens = [next_token]
    finished = next_token[:, 0] == eos
    for t in range(1, NEW_TOKENS):
        if t % CHECK_EVERY == 0 and bool(finished.all()):  # one read-back every CHECK_EVERY tokens
            break
        out = model(input_ids=next_token, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        events[t].record()
        tokens.append(next_token)
        finished |= next_token[:, 0] == eos
    generated = torch.cat(tokens, dim=1)[0].tolist()  # the one read-back of the tokens
    if eos in generated:
        generated = generated[:generated.index(eos) + 1]
    return generated


def make_graph_loop(torch, model, cfg):
    """The suggested fix: a static KV cache, and each decode token's forward and argmax compiled into one CUDA graph
    (mode="reduce-overhead"). The per-token .item() check is the plain loop's, so only the suggestion changes."""
    from transformers import StaticCache
    max_len = PROMPT_LEN + NEW_TOKENS
    try:
        cache = StaticCache(config=cfg, max_cache_len=max_len)  # transformers 5: device and dtype from the first update
    except TypeError:
        cache = StaticCache(config=cfg, max_batch_size=1, max_cache_len=max_len, device="cuda", dtype=torch.float16)

    def decode_one(token, position):
        logits = model(input_ids=token, cache_position=position, past_key_values=cache, use_cache=True).logits
        return logits[:, -1, :].argmax(dim=-1, keepdim=True)

    compiled = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True)
    position = torch.zeros(1, dtype=torch.long, device="cuda")  # filled on the GPU each token: no host copy

    def loop(torch, model, prompt, eos, start, events):
        cache.reset()
        start.record()
        out = model(input_ids=prompt, cache_position=torch.arange(PROMPT_LEN, device="cuda"),
                    past_key_values=cache, use_cache=True)
        next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        events[0].record()
        generated = []
        for t in range(NEW_TOKENS):
            tok = next_token.item()  # the plain loop's stopping check, kept
            generated.append(tok)
            if tok == eos or t == NEW_TOKENS - 1:
                break
            position.fill_(PROMPT_LEN + t)
            next_token = compiled(next_token, position).clone()  # a graph's output is overwritten by its next replay
            events[t + 1].record()
        return generated

    return loop


def run_once(torch, fn, model, prompt, eos, start, events):
    t0 = time.perf_counter()
    with torch.inference_mode():
        generated = fn(torch, model, prompt, eos, start, events)
    t1 = time.perf_counter()  # both loops end with a read-back of the tokens: the GPU is done
    n = len(generated)
    events[n - 1].synchronize()
    ttft = start.elapsed_time(events[0])
    gaps = [events[i - 1].elapsed_time(events[i]) for i in range(1, n)]
    if n != NEW_TOKENS:
        print(f"{PROG}: warning: the request stopped after {n} tokens, not {NEW_TOKENS}", flush=True)
    return {"ttft": ttft, "gaps": gaps, "total": (t1 - t0) * 1e3, "n_new": n}


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
          f"{torch.cuda.get_device_name(0)}; Llama hidden {args.hidden}, {args.layers} layers, {args.heads} heads, "
          f"MLP {args.intermediate}, vocabulary 32000, fp16", flush=True)

    model, cfg, eos = build_model(torch, args)
    prompt = torch.randint(3, cfg.vocab_size, (1, PROMPT_LEN), device="cuda")
    start = torch.cuda.Event(enable_timing=True)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(NEW_TOKENS)]
    loops = {"plain": decode_item_per_token, "fixed": decode_check_on_gpu}
    if args.graphs or (args.measure and args.compare == "graphs"):
        loops["graphs"] = make_graph_loop(torch, model, cfg)

    if args.measure:
        other = args.compare  # reported under "fixed": the variant measured against the plain loop
        t0 = time.perf_counter()
        for name in ("plain", other):
            for _ in range(WARMUP):
                run_once(torch, loops[name], model, prompt, eos, start, events)
        print(f"{PROG}: measuring plain against {other}; warm-up {time.perf_counter() - t0:.1f} s", flush=True)
        windows = {"plain": [], "fixed": []}
        for r in range(args.rounds):
            order = ["plain", other] if r % 2 == 0 else [other, "plain"]
            for name in order:
                runs = [run_once(torch, loops[name], model, prompt, eos, start, events) for _ in range(args.window)]
                windows["plain" if name == "plain" else "fixed"].append(summarize(runs))

        def med(name, key):
            vals = [w[key] for w in windows[name] if w[key] is not None]
            return round(statistics.median(vals), 3) if vals else None

        keys = ("ttft_ms_median", "tpot_ms_median", "tpot_ms_p90", "tokens_per_s", "generate_ms_median")
        res = {name: {k: med(name, k) for k in keys} for name in ("plain", "fixed")}

        def ratio(key):
            a, b = res["plain"][key], res["fixed"][key]
            return round(b / a, 4) if a and b is not None else None

        gen_ratio = ratio("generate_ms_median")
        b, x = res["plain"]["generate_ms_median"], res["fixed"]["generate_ms_median"]
        print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.rounds} "
              f"window={args.window}", flush=True)
        print(json.dumps({
            "tpot_ratio_fixed_over_plain": ratio("tpot_ms_median"),
            "ttft_ratio_fixed_over_plain": ratio("ttft_ms_median"),
            "generate_ratio_fixed_over_plain": gen_ratio,
            "saving_pct": round((1 - gen_ratio) * 100, 1) if gen_ratio is not None else None,
            "plain": res["plain"], "fixed": res["fixed"], "variant": other, "rounds": args.rounds, "window": args.window,
        }), flush=True)
        return

    name = "graphs" if args.graphs else "fixed" if args.fixed else "plain"
    for _ in range(WARMUP):
        run_once(torch, loops[name], model, prompt, eos, start, events)
    runs = [run_once(torch, loops[name], model, prompt, eos, start, events) for _ in range(args.iters)]
    result = summarize(runs)
    result.update({"variant": name, "requests": len(runs), "new_tokens": NEW_TOKENS, "prompt_len": PROMPT_LEN})
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
