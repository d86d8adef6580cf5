"""hf_generate_streamer: top-level `model.generate` with a streamer and a blocklist stopping criterion (GPT-2, fp16).

What it does: a plain script, the way many people try a model out. It builds Hugging Face
`GPT2LMHeadModel(GPT2Config())` (GPT-2 small, random weights, nothing downloaded) in fp16 on the GPU and, in a
`for` loop at module level (no main()), calls `model.generate(...)` greedily: batch 1, a 64-token random prompt,
exactly 48 new tokens (EOS can never win: its embedding row, tied to the LM head, is zeroed, and
`min_new_tokens == max_new_tokens`). A streamer passed to generate stamps the host clock for every new token, and
a custom `StoppingCriteria` enforces a content blocklist: generation stops as soon as the generated text contains
one of 8000 blocklisted token phrases (2-4 tokens each, "pre-tokenized" so no tokenizer is needed).

Planted problem (cpu_bound): the blocklist criterion is written the obvious way. Every decode step, generate calls
it with the whole sequence so far; it copies all generated ids to the host (`.tolist()`) and rescans the entire
generated sequence for every phrase in pure Python. The scan grows with every token (O(tokens x phrases) per step,
O(tokens^2 x phrases) per call) and runs while the GPU sits idle: the next decode step cannot be launched until
the criterion returns.

Fix (--fixed): the incremental criterion. A new token can only complete a phrase that ends at that token, so the
phrases are indexed by their last token once, the criterion reads only the newest token of each row
(`input_ids[:, -1]`), appends it to a short per-row history and checks just the phrases ending in that token:
constant work per step. It stops on exactly the same tokens as the rescanning version.

Own timers (last line, JSON): per-call latency (`call_ms_p50`, `call_ms_mean`, also as `step_ms_*`), TTFT (call
start -> first streamed new token, `ttft_ms_p50`), TPOT (gaps between streamed tokens, `tpot_ms_p50`,
`tpot_ms_p90`), `tokens_per_s`, and the time spent inside the stopping criterion per token
(`stop_check_ms_per_token`).

Run: python3 hf_generate_streamer.py [--fixed] [--calls N] [--ab ROUNDS] [--window W] [--device cpu]
`--ab ROUNDS`: both criteria built first, then windows of W generate calls alternate between them (order flips
every round); prints `AB broken_ms=.. fixed_ms=.. ...` with the medians of the per-window mean call latency.
Exit 77 when torch, transformers or CUDA is missing (CUDA not needed with --device cpu).
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

EXPECTED = "cpu_bound"
BOTTLENECK = ("custom StoppingCriteria copies all generated ids to the host and rescans them for 8000 blocklisted "
              "phrases in pure Python on every decode step (growing per token) while the GPU idles")
FIX = ("make the stopping criterion incremental: index the phrases by their last token and check only the phrases "
       "that end in the newest token (input_ids[:, -1])")
FIX_WORDS = ["stopping criteria", "incremental", "newest token", "blocklist"]

PROMPT_LEN = 64
NEW_TOKENS = 48
BLOCKLIST_SIZE = 8000
WARMUP_CALLS = 2
PROG = os.path.basename(sys.argv[0]) or "hf_generate_streamer.py"

ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
ap.add_argument("--fixed", action="store_true", help="incremental blocklist check")
ap.add_argument("--calls", type=int, default=8, help="timed generate calls after %d warm-up calls" % WARMUP_CALLS)
ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B of both criteria")
ap.add_argument("--window", type=int, default=2, help="--ab: generate calls per window (default %(default)s)")
ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a tiny smoke run")
args = ap.parse_args()

try:
    import torch
except ImportError as e:
    print(f"{PROG}: torch is not importable ({e}); nothing to run", flush=True)
    sys.exit(77)
try:
    from transformers import GPT2Config, GPT2LMHeadModel, StoppingCriteria, StoppingCriteriaList
    from transformers.generation.streamers import BaseStreamer
except ImportError as e:
    print(f"{PROG}: transformers is not importable ({e}); nothing to run", flush=True)
    sys.exit(77)
if args.device == "cuda" and not torch.cuda.is_available():
    print(f"{PROG}: no CUDA device; nothing to run", flush=True)
    sys.exit(77)

device = torch.device(args.device)
on_gpu = device.type == "cuda"
random.seed(0)
torch.manual_seed(0)


def sync():
    if on_gpu:
        torch.cuda.synchronize()


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class TokenTimer(BaseStreamer):
    """Stamps the host clock for every new token generate() streams. generate() first puts the prompt ids, then
    each new token (already copied to the host with `.cpu()`, so the stamp comes after the token exists)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.prompt_seen = False
        self.stamps = []

    def put(self, value):
        if not self.prompt_seen and value.numel() > 1:  # the prompt (batch 1: a new token is one id)
            self.prompt_seen = True
            return
        self.stamps.append(time.perf_counter())

    def end(self):
        pass


class BlocklistCriteria(StoppingCriteria):
    """Stops a row as soon as its generated tokens contain a blocklisted phrase (the straightforward version)."""

    def __init__(self, phrases, prompt_len):
        self.phrases = [list(p) for p in phrases]
        self.prompt_len = prompt_len
        self.elapsed = 0.0

    @staticmethod
    def _contains(seq, phrase):
        n = len(phrase)
        for i in range(len(seq) - n + 1):
            if seq[i:i + n] == phrase:
                return True
        return False

    def __call__(self, input_ids, scores, **kwargs):
        t = time.perf_counter()
        generated = input_ids[:, self.prompt_len:].tolist()
        done = [any(self._contains(row, p) for p in self.phrases) for row in generated]
        self.elapsed += time.perf_counter() - t
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class IncrementalBlocklistCriteria(StoppingCriteria):
    """Same decisions, constant work per step: only phrases ending in the newest token can have just appeared."""

    def __init__(self, phrases, prompt_len):
        self.by_last = {}
        for p in phrases:
            self.by_last.setdefault(p[-1], []).append(tuple(p))
        self.keep = max(len(p) for p in phrases)
        self.prompt_len = prompt_len
        self.history = []
        self.elapsed = 0.0

    def reset(self):
        self.history = []

    def __call__(self, input_ids, scores, **kwargs):
        t = time.perf_counter()
        newest = input_ids[:, -1].tolist()
        if len(self.history) != len(newest):
            self.history = [[] for _ in newest]
        done = []
        for row, tok in zip(self.history, newest):
            row.append(tok)
            del row[:-self.keep]
            hit = False
            for p in self.by_last.get(tok, ()):
                if len(p) <= len(row) and tuple(row[-len(p):]) == p:
                    hit = True
                    break
            done.append(hit)
        self.elapsed += time.perf_counter() - t
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


# ---- model and inputs --------------------------------------------------------------------------------------------
if on_gpu:
    cfg = GPT2Config()  # GPT-2 small: 12 layers, 768 wide, vocabulary 50257
    dtype = torch.float16
else:
    cfg = GPT2Config(n_layer=2, n_embd=128, n_head=4)  # smoke size
    dtype = torch.float32
model = GPT2LMHeadModel(cfg).to(device=device, dtype=dtype).eval()
with torch.no_grad():
    model.transformer.wte.weight[cfg.eos_token_id].zero_()  # tied to lm_head: EOS logit is exactly 0, never argmax
prompt = torch.randint(0, cfg.eos_token_id, (1, PROMPT_LEN), device=device)
attention_mask = torch.ones_like(prompt)

rng = random.Random(1234)
blocklist = [[rng.randrange(cfg.eos_token_id) for _ in range(rng.randint(2, 4))] for _ in range(BLOCKLIST_SIZE)]
criteria = {"broken": BlocklistCriteria(blocklist, PROMPT_LEN),
            "fixed": IncrementalBlocklistCriteria(blocklist, PROMPT_LEN)}
timer = TokenTimer()
gen_kwargs = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1,
                  pad_token_id=cfg.eos_token_id)
variant = "fixed" if args.fixed else "broken"
print(f"{PROG}: torch {torch.__version__}, {device}, GPT-2 {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
      f"params {dtype}, prompt {PROMPT_LEN}, {NEW_TOKENS} new tokens, blocklist {BLOCKLIST_SIZE} phrases", flush=True)

if args.ab:
    # Both criteria exist; warm both up, then alternate windows of generate calls.
    window_ms = {"broken": [], "fixed": []}
    for r in range(-1, args.ab):
        order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
        for name in order:
            crit = criteria[name]
            sync()
            t_win = time.perf_counter()
            for _ in range(args.window):
                if hasattr(crit, "reset"):
                    crit.reset()
                timer.reset()
                with torch.inference_mode():
                    out = model.generate(prompt, attention_mask=attention_mask, streamer=timer,
                                         stopping_criteria=StoppingCriteriaList([crit]), **gen_kwargs)
            sync()
            if r >= 0:  # round -1 is the warm-up of both variants
                window_ms[name].append((time.perf_counter() - t_win) / args.window * 1e3)
    b = statistics.median(window_ms["broken"])
    x = statistics.median(window_ms["fixed"])
    print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
          f"window={args.window}", flush=True)
    print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                      "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                      "broken_call_ms": round(b, 3), "fixed_call_ms": round(x, 3),
                      "rounds": args.ab, "window": args.window}), flush=True)
    sys.exit(0)

# ---- the plain run: a top-level loop of generate calls -----------------------------------------------------------
crit = criteria[variant]
stopping = StoppingCriteriaList([crit])
call_ms, ttft_ms, tpot_ms, new_tokens, check_s = [], [], [], 0, 0.0
for i in range(WARMUP_CALLS + args.calls):
    if hasattr(crit, "reset"):
        crit.reset()
    crit.elapsed = 0.0
    timer.reset()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=attention_mask, streamer=timer, stopping_criteria=stopping,
                             **gen_kwargs)
    sync()
    t1 = time.perf_counter()
    n_new = out.shape[1] - PROMPT_LEN
    if n_new != NEW_TOKENS:
        print(f"{PROG}: warning: call {i} made {n_new} tokens, not {NEW_TOKENS}", flush=True)
    if i < WARMUP_CALLS:
        continue
    call_ms.append((t1 - t0) * 1e3)
    if timer.stamps:
        ttft_ms.append((timer.stamps[0] - t0) * 1e3)
        tpot_ms.extend((b - a) * 1e3 for a, b in zip(timer.stamps, timer.stamps[1:]))
    new_tokens += n_new
    check_s += crit.elapsed
    print(f"call {i - WARMUP_CALLS}: {n_new} tokens in {call_ms[-1]:.1f} ms", flush=True)

print(json.dumps({
    "program": PROG, "variant": variant,
    "step_ms_p50": round(statistics.median(call_ms), 3), "step_ms_mean": round(statistics.fmean(call_ms), 3),
    "call_ms_p50": round(statistics.median(call_ms), 3), "call_ms_mean": round(statistics.fmean(call_ms), 3),
    "ttft_ms_p50": round(statistics.median(ttft_ms), 3) if ttft_ms else None,
    "tpot_ms_p50": round(statistics.median(tpot_ms), 3) if tpot_ms else None,
    "tpot_ms_p90": round(percentile(tpot_ms, 90), 3) if tpot_ms else None,
    "tokens_per_s": round(new_tokens / (sum(call_ms) / 1e3), 1),
    "stop_check_ms_per_token": round(check_s * 1e3 / max(new_tokens, 1), 3),
    "calls": len(call_ms), "new_tokens": NEW_TOKENS, "prompt_len": PROMPT_LEN, "blocklist": BLOCKLIST_SIZE,
}), flush=True)
