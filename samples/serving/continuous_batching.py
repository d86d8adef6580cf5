"""continuous_batching: a small continuous-batching engine over Hugging Face GPT-2 (fp16) serving a Poisson trace.

What it does: builds `GPT2LMHeadModel(GPT2Config())` (GPT-2 small, random weights, fp16) and replays a seeded
arrival trace of 96 requests (exponential inter-arrival times, 40 requests/s on average; prompt lengths 16-128,
output lengths 16-64 tokens, greedy decoding, no EOS: each request makes exactly its output length). The engine
loop runs on the main thread: `while` there is work, admit the requests that have arrived, then `engine.step()`.
One step decodes one token for every running request (a left-padded batch: a 2-D attention mask and per-row
position ids), retires the finished ones and prefills newly arrived ones (one prefill per request; its first token
is its TTFT), so the batch changes from step to step. The plain run replays the trace 3 times (the first pass is
the warm-up).

Planted problem (launch_bound): every request owns its KV cache (a list of per-layer key/value tensors, the way
`model(...)` returns them for a single request), and the scheduler collates them into one padded batch cache
*every decode step*: for each of the 12 layers it left-pads every request's keys and values (`F.pad`) and
concatenates them, runs the forward, then appends the step's new key/value back to each request's own tensors with
`torch.cat`. That is ~50 small copy kernels per request per step (a few thousand per step at batch 30-40), each
dispatched from Python, so the step time grows with the batch size while the GPU mostly waits for the host.

Fix (--fixed): keep one batched KV cache (a `DynamicCache` the model appends to in place) for the running batch and
touch it only when the batch changes: newly prefilled requests are left-padded and concatenated into it once, and
finished requests are dropped with one index_select per layer (trimming leading columns that became all padding).
Decode steps then do no cache copies of their own.

Own timers (last line, JSON): engine step time (`step_ms_p50`, `step_ms_mean`), `batch_size_mean`,
`tokens_per_step_mean`, per-request TTFT (`ttft_ms_p50`), TPOT (`tpot_ms_p50`) and latency arrival -> last token
(`request_ms_p50`, `request_ms_p90`).

Run: python3 continuous_batching.py [--fixed] [--passes N] [--ab ROUNDS] [--device cpu]
`--ab ROUNDS`: both engines are built first; each window replays the whole trace on one engine (order flips every
round); AB reports the medians of the per-window mean request latency (arrival -> last token), since the step
time alone is not comparable between engines whose batches differ. Exit 77 without torch/transformers/CUDA.
"""
import argparse
import collections
import json
import os
import random
import statistics
import sys
import time

EXPECTED = "launch_bound"
BOTTLENECK = ("the scheduler re-collates every request's own KV cache into a padded batch cache every decode step "
              "(F.pad + torch.cat per request per layer, then torch.cat back): thousands of small copy kernels")
FIX = ("keep one batched KV cache for the running batch and only merge/select rows when requests join or leave; "
       "decode steps append in place")
FIX_WORDS = ["kv cache", "batched", "persistent", "only when the batch changes"]

N_REQUESTS = 96
ARRIVAL_RATE = 40.0  # requests per second
PROMPT_RANGE = (16, 128)
OUTPUT_RANGE = (16, 64)
MAX_BATCH = 64
MAX_PREFILLS_PER_STEP = 8
PROG = os.path.basename(sys.argv[0]) or "continuous_batching.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="persistent batched KV cache")
    ap.add_argument("--passes", type=int, default=3, help="trace replays; the first is the warm-up (default 3)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B, one trace replay a window")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def need(args):
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
    if args.device == "cuda" and not torch.cuda.is_available():
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


def make_trace(vocab, seed=0):
    """(arrival offset s, prompt ids, output length) for each request, arrival-ordered."""
    rng = random.Random(seed)
    t, trace = 0.0, []
    for _ in range(N_REQUESTS):
        t += rng.expovariate(ARRIVAL_RATE)
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(*PROMPT_RANGE))]
        trace.append((t, prompt, rng.randint(*OUTPUT_RANGE)))
    return trace


def cache_layers(cache):
    """[(keys, values)] per layer of a DynamicCache: transformers >= 4.56 keeps them in `cache.layers`, older
    versions in `key_cache` / `value_cache`."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


class Request:
    __slots__ = ("rid", "prompt", "max_new", "t_arrive", "t_first", "t_done", "out", "length", "kv")

    def __init__(self, rid, prompt, max_new, t_arrive):
        self.rid, self.prompt, self.max_new, self.t_arrive = rid, prompt, max_new, t_arrive
        self.t_first = self.t_done = None
        self.out = []
        self.length = 0  # tokens held in the KV cache
        self.kv = None  # per-layer (key, value) of this request alone (the per-request-cache engine)


class Engine:
    """Continuous batching: decode the running batch, retire finished requests, prefill new arrivals."""

    def __init__(self, torch, model, device, per_request_cache):
        from transformers import DynamicCache
        import torch.nn.functional as F
        self.torch, self.F, self.DynamicCache = torch, F, DynamicCache
        self.model, self.device = model, device
        self.per_request_cache = per_request_cache
        self.waiting = collections.deque()
        self.running = []
        self.cache = None  # batched engine: one DynamicCache for `running`, rows left-padded to cache_len
        self.cache_len = 0
        self.step_ms, self.step_batch, self.step_tokens = [], [], []
        self.done = []

    def add(self, req):
        self.waiting.append(req)

    def has_work(self):
        return bool(self.waiting or self.running)

    # -- one engine step ------------------------------------------------------------------------------------------
    def step(self):
        t0 = time.perf_counter()
        tokens = 0
        batch = len(self.running)
        if self.running:
            tokens += self._decode()
        finished = [r for r in self.running if len(r.out) >= r.max_new]
        if finished:
            self._retire(finished)
        admitted = []
        while self.waiting and len(self.running) + len(admitted) < MAX_BATCH \
                and len(admitted) < MAX_PREFILLS_PER_STEP:
            req = self.waiting.popleft()
            admitted.append(self._prefill(req))
            tokens += len(req.prompt)
        if admitted:
            self._join(admitted)
        self.step_ms.append((time.perf_counter() - t0) * 1e3)
        self.step_batch.append(batch)
        self.step_tokens.append(tokens)

    def _prefill(self, req):
        torch = self.torch
        cache = self.DynamicCache()
        ids = torch.tensor([req.prompt], device=self.device)
        out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
        first = out.logits[:, -1].argmax(-1).tolist()[0]
        req.t_first = time.perf_counter()
        req.out.append(first)
        req.length = len(req.prompt)
        return req, cache_layers(cache)  # per layer: [1, heads, prompt_len, head_dim]

    def _mask_and_positions(self, cache_len):
        """2-D padding mask over cache_len past columns + the new token, and each row's position id."""
        torch = self.torch
        pads = torch.tensor([cache_len - r.length for r in self.running], device=self.device)
        cols = torch.arange(cache_len + 1, device=self.device)
        mask = (cols[None, :] >= pads[:, None]).long()
        positions = torch.tensor([[r.length] for r in self.running], device=self.device)
        return mask, positions

    def _decode(self):
        torch, F = self.torch, self.F
        ids = torch.tensor([[r.out[-1]] for r in self.running], device=self.device)
        if self.per_request_cache:
            # Collate each request's own cache into one left-padded batch cache for this step.
            cache_len = max(r.length for r in self.running)
            cache = self.DynamicCache()
            for layer in range(len(self.running[0].kv)):
                keys = torch.cat([F.pad(r.kv[layer][0], (0, 0, cache_len - r.length, 0)) for r in self.running])
                values = torch.cat([F.pad(r.kv[layer][1], (0, 0, cache_len - r.length, 0)) for r in self.running])
                cache.update(keys, values, layer)
        else:
            cache_len, cache = self.cache_len, self.cache
        mask, positions = self._mask_and_positions(cache_len)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                         use_cache=True)
        next_tokens = out.logits[:, -1].argmax(-1).tolist()
        if self.per_request_cache:
            # Hand this step's key/value back to every request's own cache.
            for layer, (k, v) in enumerate(cache_layers(cache)):
                k_new, v_new = k[:, :, -1:], v[:, :, -1:]
                for i, r in enumerate(self.running):
                    rk, rv = r.kv[layer]
                    r.kv[layer] = (torch.cat([rk, k_new[i:i + 1]], dim=2), torch.cat([rv, v_new[i:i + 1]], dim=2))
        else:
            self.cache_len += 1
        now = time.perf_counter()
        for r, tok in zip(self.running, next_tokens):
            r.out.append(tok)
            r.length += 1
            if len(r.out) >= r.max_new:
                r.t_done = now
        return len(next_tokens)

    def _rebuild(self, layers):
        cache = self.DynamicCache()
        for layer, (k, v) in enumerate(layers):
            cache.update(k, v, layer)
        return cache

    def _retire(self, finished):
        gone = set(id(r) for r in finished)
        keep = [i for i, r in enumerate(self.running) if id(r) not in gone]
        self.running = [self.running[i] for i in keep]
        self.done.extend(finished)
        for r in finished:
            r.kv = None
        if self.per_request_cache:
            return
        if not self.running:
            self.cache, self.cache_len = None, 0
            return
        trim = min(self.cache_len - r.length for r in self.running)  # leading columns now padding in every row
        idx = self.torch.tensor(keep, device=self.device)
        layers = [(k.index_select(0, idx)[:, :, trim:], v.index_select(0, idx)[:, :, trim:])
                  for k, v in cache_layers(self.cache)]
        self.cache = self._rebuild(layers)
        self.cache_len -= trim

    def _join(self, admitted):
        torch, F = self.torch, self.F
        reqs = [r for r, _ in admitted]
        if self.per_request_cache:
            for r, kv in admitted:
                r.kv = list(kv)
            self.running.extend(reqs)
            return
        new_len = max([r.length for r in reqs] + [self.cache_len])
        n_layers = len(admitted[0][1])
        running_layers = cache_layers(self.cache) if self.cache is not None else None
        layers = []
        for layer in range(n_layers):
            ks, vs = [], []
            if running_layers is not None:
                k, v = running_layers[layer]
                ks.append(F.pad(k, (0, 0, new_len - self.cache_len, 0)))
                vs.append(F.pad(v, (0, 0, new_len - self.cache_len, 0)))
            for r, kv in admitted:
                ks.append(F.pad(kv[layer][0], (0, 0, new_len - r.length, 0)))
                vs.append(F.pad(kv[layer][1], (0, 0, new_len - r.length, 0)))
            layers.append((torch.cat(ks), torch.cat(vs)))
        self.cache = self._rebuild(layers)
        self.cache_len = new_len
        self.running.extend(reqs)


def replay(torch, engine, trace, sync):
    """Feeds the trace to the engine in real time on this thread; returns the finished requests."""
    pending = collections.deque(trace)
    engine.done = []
    t_start = time.perf_counter()
    rid = 0
    while pending or engine.has_work():
        now = time.perf_counter()
        while pending and t_start + pending[0][0] <= now:
            arrival, prompt, max_new = pending.popleft()
            engine.add(Request(rid, prompt, max_new, t_start + arrival))
            rid += 1
        if not engine.has_work():
            time.sleep(max(0.0, t_start + pending[0][0] - time.perf_counter()))
            continue
        engine.step()
    sync()
    return engine.done


def request_stats(done):
    lat = [(r.t_done - r.t_arrive) * 1e3 for r in done]
    ttft = [(r.t_first - r.t_arrive) * 1e3 for r in done]
    tpot = [(r.t_done - r.t_first) * 1e3 / (len(r.out) - 1) for r in done if len(r.out) > 1]
    return lat, ttft, tpot


def main():
    args = parse_args()
    torch = need(args)
    from transformers import GPT2Config, GPT2LMHeadModel

    random.seed(0)
    torch.manual_seed(0)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if on_gpu:
        cfg, dtype = GPT2Config(), torch.float16  # GPT-2 small
    else:
        cfg, dtype = GPT2Config(n_layer=2, n_embd=128, n_head=4), torch.float32
    model = GPT2LMHeadModel(cfg).to(device=device, dtype=dtype).eval()
    trace = make_trace(cfg.eos_token_id)
    print(f"{PROG}: torch {torch.__version__}, {device}, GPT-2 {cfg.n_layer} layers {dtype}, {len(trace)} requests "
          f"at {ARRIVAL_RATE:.0f}/s, prompts {PROMPT_RANGE}, outputs {OUTPUT_RANGE}", flush=True)

    with torch.inference_mode():
        if args.ab:
            engines = {"broken": Engine(torch, model, device, per_request_cache=True),
                       "fixed": Engine(torch, model, device, per_request_cache=False)}
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):  # round -1 warms both engines up
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    done = replay(torch, engines[name], trace, sync)
                    if r >= 0:
                        window_ms[name].append(statistics.fmean(request_stats(done)[0]))
            b, x = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
                  f"window=1", flush=True)
            steps = engines["broken"].step_ms
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(statistics.median(steps), 3),
                              "step_ms_mean": round(statistics.fmean(steps), 3),
                              "broken_request_ms": round(b, 3), "fixed_request_ms": round(x, 3),
                              "rounds": args.ab, "window": "one trace replay"}), flush=True)
            return

        variant = "fixed" if args.fixed else "broken"
        engine = Engine(torch, model, device, per_request_cache=not args.fixed)
        done_all, n_warm_steps = [], 0
        for p in range(args.passes):
            t = time.perf_counter()
            done = replay(torch, engine, trace, sync)
            print(f"pass {p}{' (warm-up)' if p == 0 else ''}: {len(done)} requests in "
                  f"{time.perf_counter() - t:.2f} s, {len(engine.step_ms) - n_warm_steps} steps", flush=True)
            if p == 0:
                n_warm_steps = len(engine.step_ms)
            else:
                done_all.extend(done)
    steps = engine.step_ms[n_warm_steps:] if args.passes > 1 else engine.step_ms
    batches = engine.step_batch[n_warm_steps:] if args.passes > 1 else engine.step_batch
    tokens = engine.step_tokens[n_warm_steps:] if args.passes > 1 else engine.step_tokens
    lat, ttft, tpot = request_stats(done_all or engine.done)
    print(json.dumps({
        "program": PROG, "variant": variant,
        "step_ms_p50": round(statistics.median(steps), 3), "step_ms_mean": round(statistics.fmean(steps), 3),
        "steps": len(steps), "batch_size_mean": round(statistics.fmean(batches), 2),
        "tokens_per_step_mean": round(statistics.fmean(tokens), 2),
        "ttft_ms_p50": round(statistics.median(ttft), 3), "tpot_ms_p50": round(statistics.median(tpot), 3),
        "request_ms_p50": round(statistics.median(lat), 3), "request_ms_p90": round(percentile(lat, 90), 3),
        "requests": len(lat), "passes": args.passes,
    }), flush=True)


if __name__ == "__main__":
    main()
