"""lm_head_misaligned: GPT-2 scoring passes whose LM head has 50257 outputs (not a multiple of 8): a slow GEMM.

What it does: builds Hugging Face `GPT2LMHeadModel(GPT2Config(vocab_size=50257))` (GPT-2 small: 12 layers, width
768) with random weights, fp16, eval. Under `torch.inference_mode()` it runs 60 timed forward passes (after 3
warm-up passes) of batch 32 x sequence 128 random token ids with `use_cache=False`. Each pass returns each
position's next-token prediction (`logits[..., :50257].argmax(-1)`) to the host with `.cpu()`, which also ends
the step. Step time is host wall time per pass (perf_counter around each pass; the `.cpu()` makes it exact).

Deliberate bottleneck (gpu_bound, an unaligned GEMM): the LM head is a [4096 x 768] x [768 x 50257] GEMM, about a
third of the pass's FLOPs. Its output rows are 50257 fp16 values long (100514 bytes, not a multiple of 16), so
cuBLAS cannot use its 16-byte-aligned tensor-core kernels (TMA and vectorized stores need aligned leading
dimensions) and falls back to alignment-1/2 kernels that run several times slower. The whole pass is GPU-bound,
and the head dominates it.

Fix (--fixed): pad the vocabulary (the token embedding and the tied LM head) to 50304 = 64 x 786 rows. The extra
rows are zero and never used (prompts never contain them, and predictions take `logits[..., :50257]`). The
weights of the first 50257 rows are the same, so the predictions match. In a real model this is
`model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)`. Here the padding is done by hand
(new nn.Embedding/nn.Linear, rows copied, head tied to the embedding again) so it does not depend on the
transformers version.

--measure: both models in one process (the padded one is a copy of the plain one), both warmed up, then 7 rounds
of alternating windows of 10 passes each (the order flips every round). Prints the median step ms of each and
the saving as JSON.

Run: python3 samples/llm/lm_head_misaligned.py [--fixed] [--measure] [--steps N] [--rounds R] [--window W]
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

EXPECTED = "gpu_bound"
BOTTLENECK = "LM head GEMM with 50257 outputs (fp16 rows not 16-byte aligned): cuBLAS falls back to slow kernels"
FIX = "pad the vocabulary (embedding + tied LM head) to 50304, a multiple of 64"

BATCH = 32
SEQ = 128
VOCAB = 50257
PADDED_VOCAB = 50304  # 64 * 786
WARMUP = 3
PROG = os.path.basename(sys.argv[0]) or "lm_head_misaligned.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="vocabulary padded to 50304")
    ap.add_argument("--measure", action="store_true", help="in-process A/B of the plain and the padded model")
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


def build_plain(torch):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB)
    return GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.float16).eval()


def pad_vocab(torch, model, new_vocab):
    """Pads the token embedding and the LM head to `new_vocab` rows in place (extra rows zero), keeping the tie.
    Works on the GPT-2 attributes directly (transformer.wte, lm_head): the same in transformers 4.x and 5.x."""
    nn = torch.nn
    emb_w = model.transformer.wte.weight
    head_w = model.lm_head.weight
    tied = head_w.data_ptr() == emb_w.data_ptr()
    old_vocab, dim = emb_w.shape
    emb = nn.Embedding(new_vocab, dim, device=emb_w.device, dtype=emb_w.dtype)
    head = nn.Linear(dim, new_vocab, bias=False, device=head_w.device, dtype=head_w.dtype)
    with torch.no_grad():
        emb.weight.zero_()
        emb.weight[:old_vocab].copy_(emb_w)
        if tied:
            head.weight = emb.weight
        else:
            head.weight.zero_()
            head.weight[:old_vocab].copy_(head_w)
    model.transformer.wte = emb
    model.lm_head = head
    model.config.vocab_size = new_vocab
    print(f"{PROG}: vocabulary padded {old_vocab} -> {model.lm_head.weight.shape[0]} rows (LM head "
          f"{'tied to' if tied else 'separate from'} the embedding)", flush=True)
    return model


def score(torch, model, ids):
    """One scoring pass: every position's next-token prediction, on the host."""
    logits = model(input_ids=ids, use_cache=False).logits
    return logits[..., :VOCAB].argmax(dim=-1).cpu()


def timed_steps(torch, model, batches, n, offset=0):
    times = []
    with torch.inference_mode():
        for i in range(n):
            t = time.perf_counter()
            score(torch, model, batches[(offset + i) % len(batches)])
            times.append((time.perf_counter() - t) * 1e3)
    return times


def main():
    args = parse_args()
    torch = need_cuda()
    import transformers

    random.seed(0)
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    print(f"{PROG}: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name(0)}; GPT-2 small, batch {BATCH} x {SEQ}, fp16", flush=True)

    batches = [torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda") for _ in range(4)]
    model = build_plain(torch)

    if args.measure:
        try:
            twin = copy.deepcopy(model)
        except Exception as e:  # noqa: BLE001
            print(f"{PROG}: deepcopy failed ({type(e).__name__}: {e}); building a second model and loading the "
                  f"weights", flush=True)
            twin = build_plain(torch)
            twin.load_state_dict(model.state_dict(), strict=False)
        padded = pad_vocab(torch, twin, PADDED_VOCAB)
        with torch.inference_mode():  # same weights: same logits over the real vocabulary
            a = model(input_ids=batches[0][:2], use_cache=False).logits.float()
            b = padded(input_ids=batches[0][:2], use_cache=False).logits[..., :VOCAB].float()
            print(f"{PROG}: max |logit difference| plain vs padded: {(a - b).abs().max().item():.4g}", flush=True)
        variants = {"plain": model, "fixed": padded}
        for name in ("plain", "fixed"):
            timed_steps(torch, variants[name], batches, WARMUP)
        windows = {"plain": [], "fixed": []}
        i = 0
        for r in range(args.rounds):
            order = ["plain", "fixed"] if r % 2 == 0 else ["fixed", "plain"]
            for name in order:
                windows[name].append(statistics.median(timed_steps(torch, variants[name], batches, args.window, i)))
                i += args.window
        p = statistics.median(windows["plain"])
        f = statistics.median(windows["fixed"])
        print(f"AB broken_ms={p:.3f} fixed_ms={f:.3f} saving_pct={(p - f) / p * 100:.1f} rounds={args.rounds} "
              f"window={args.window}", flush=True)
        print(json.dumps({
            "plain_step_ms_median": round(p, 3), "fixed_step_ms_median": round(f, 3),
            "ratio_fixed_over_plain": round(f / p, 4), "saving_pct": round((p - f) / p * 100, 1),
            "plain_vocab": VOCAB, "fixed_vocab": PADDED_VOCAB, "rounds": args.rounds, "window": args.window,
        }), flush=True)
        return

    if args.fixed:
        model = pad_vocab(torch, model, PADDED_VOCAB)
    timed_steps(torch, model, batches, WARMUP)
    times = timed_steps(torch, model, batches, args.steps)
    print(json.dumps({
        "step_ms_median": round(statistics.median(times), 3), "step_ms_p90": round(percentile(times, 90), 3),
        "steps": len(times), "variant": "fixed" if args.fixed else "plain",
        "vocab": PADDED_VOCAB if args.fixed else VOCAB, "batch": BATCH, "seq": SEQ,
    }), flush=True)


if __name__ == "__main__":
    main()
