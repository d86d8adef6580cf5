"""aiohttp_batcher: an aiohttp text-classification service with a dynamic batcher in front of a GPU encoder (fp16).

What it does: an `aiohttp.web` server on 127.0.0.1 (a free port) exposes POST /v1/classify ({"id", "tokens": [...]}
-> {"id", "label", "score"}). The handler puts (tokens, future) on an asyncio.Queue and awaits the future. A
dynamic batcher, started with `asyncio.create_task` next to the server, takes up to MAX_BATCH=32 requests or
whatever arrived within a MAX_WAIT_MS=8 ms batching window, pads them into one batch, runs one forward pass of a
6-layer BERT-base-sized encoder (random weights, fp16, SDPA attention with a padding mask, mean pooling, 16-way
head) on the GPU, reads the top label and its probability back once, and resolves the futures. The load comes from
2 separate client processes (aiohttp.ClientSession, 32 concurrent connections each, closed loop) that the server
process spawns; requests carry 32-256 random token ids.

Planted problem (wait): the batcher implements the batching window as a fixed sleep:
`first = await queue.get(); await asyncio.sleep(MAX_WAIT_MS / 1000); drain up to MAX_BATCH`. Every batch waits the
full window even when MAX_BATCH requests are already queued (under this load they always are), so the GPU idles
for 8 ms before each ~2 ms forward and request latency is dominated by the sleep.

Fix (--fixed): wait for more requests only while the batch is not full and the window has not expired: take what
is already queued with `get_nowait()`, and otherwise `await asyncio.wait_for(queue.get(), remaining)`. A full
batch launches immediately; a lone request still waits at most the window.

Own timers (last line, JSON): the batcher times each batch step from its first request to the futures being set
(`batch_ms_p50`, `batch_ms_mean`, also as `step_ms_*`; `batch_size_mean`), handlers time each request from arrival
in the handler to its response (`request_ms_p50`, `request_ms_p90`, `request_ms_p99`), `requests`,
`throughput_rps`.

Run: python3 aiohttp_batcher.py [--fixed] [--requests N] [--ab ROUNDS] [--window-requests N] [--device cpu]
`--ab ROUNDS`: one server, one model, both batching strategies; windows of N requests alternate the strategy (a
flag on the batcher, switched while no request is in flight); AB reports medians of per-window mean request
latency. Exit 77 when torch, aiohttp or CUDA is missing.
"""
import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import random
import statistics
import sys
import time

try:
    from aiohttp import web
except ImportError:  # reported (exit 77) in main()
    web = None

EXPECTED = "wait"
BOTTLENECK = ("the dynamic batcher always sleeps the whole 8 ms batching window (asyncio.sleep) before each batch, "
              "even when the batch is already full, so the GPU idles and requests queue behind the sleep")
FIX = ("wait only while the batch is not full and the window has not expired (get_nowait, then "
       "asyncio.wait_for(queue.get(), remaining)); launch a full batch immediately")
FIX_WORDS = ["asyncio.sleep", "batching window", "wait_for", "full batch"]

MAX_BATCH = 32
MAX_WAIT_MS = 8.0
VOCAB = 30522
MAX_LEN = 256
TOKENS_RANGE = (32, 256)
N_LABELS = 16
CLIENT_PROCS = 2
CONCURRENCY = 32  # per client process
PROG = os.path.basename(sys.argv[0]) or "aiohttp_batcher.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="launch full batches without waiting out the window")
    ap.add_argument("--requests", type=int, default=20000, help="measured requests (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=1000, help="warm-up requests, not measured")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B of both batchers")
    ap.add_argument("--window-requests", type=int, default=3000, help="--ab: requests per window")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


# ---------------------------------------------------------------------------------------------------------------
# Load generator: runs in its own process (spawned), no torch, no CUDA.
# ---------------------------------------------------------------------------------------------------------------
def client_process(conn, port, seed):
    asyncio.run(_client_main(conn, port, seed))


async def _client_main(conn, port, seed):
    import aiohttp
    rng = random.Random(seed)
    bodies = [json.dumps({"id": i, "tokens": [rng.randrange(1, VOCAB) for _ in range(rng.randint(*TOKENS_RANGE))]})
              .encode() for i in range(512)]
    url = f"http://127.0.0.1:{port}/v1/classify"
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            if cmd[0] == "stop":
                break
            n = cmd[1]
            sent = 0
            errors = 0

            async def worker():
                nonlocal sent, errors
                while sent < n:
                    body = bodies[sent % len(bodies)]
                    sent += 1
                    try:
                        async with session.post(url, data=body,
                                                headers={"Content-Type": "application/json"}) as resp:
                            await resp.json()
                            if resp.status != 200:
                                errors += 1
                    except aiohttp.ClientError:
                        errors += 1

            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            conn.send(("done", sent, errors))
    conn.close()


# ---------------------------------------------------------------------------------------------------------------
# Server side
# ---------------------------------------------------------------------------------------------------------------
def build_model(torch, device, small):
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads, ff):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ff)
            self.fc2 = nn.Linear(ff, d)

        def forward(self, x, key_mask):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class TextClassifier(nn.Module):
        def __init__(self, d=768, layers=6, heads=12, ff=3072):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, d)
            self.pos = nn.Embedding(MAX_LEN, d)
            self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, N_LABELS)

        def forward(self, ids, lengths):
            t = ids.shape[1]
            valid = torch.arange(t, device=ids.device)[None, :] < lengths[:, None]  # [B, T]
            x = self.tok(ids) + self.pos.weight[:t]
            key_mask = valid[:, None, None, :]
            for blk in self.blocks:
                x = blk(x, key_mask)
            x = self.ln(x)
            pooled = (x * valid[..., None]).sum(1) / lengths[:, None]
            return self.head(pooled)

    if small:
        model = TextClassifier(d=32, layers=1, heads=2, ff=64)
        return model.to(device).eval()
    return TextClassifier().to(device=device, dtype=torch.float16).eval()


class Batcher:
    def __init__(self, torch, model, device, fixed):
        self.torch, self.model, self.device = torch, model, device
        self.fixed = fixed
        self.queue = asyncio.Queue()
        self.window = MAX_WAIT_MS / 1000.0
        self.batch_ms, self.batch_sizes, self.request_ms = [], [], []

    async def run(self):
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            t0 = time.perf_counter()
            if self.fixed:
                deadline = loop.time() + self.window
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(self.queue.get_nowait())
                        continue
                    except asyncio.QueueEmpty:
                        pass
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        batch.append(await asyncio.wait_for(self.queue.get(), remaining))
                    except asyncio.TimeoutError:
                        break
            else:
                await asyncio.sleep(self.window)  # let more requests join the batch
                while len(batch) < MAX_BATCH and not self.queue.empty():
                    batch.append(self.queue.get_nowait())
            try:
                results = self.infer([tokens for tokens, _ in batch])
            except Exception as e:  # noqa: BLE001 - fail the requests, keep serving
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for (_, fut), res in zip(batch, results):
                if not fut.done():
                    fut.set_result(res)
            self.batch_ms.append((time.perf_counter() - t0) * 1e3)
            self.batch_sizes.append(len(batch))

    def infer(self, token_lists):
        torch = self.torch
        longest = max(len(t) for t in token_lists)
        ids = torch.zeros((len(token_lists), longest), dtype=torch.long)
        for i, t in enumerate(token_lists):
            ids[i, :len(t)] = torch.tensor(t)
        lengths = torch.tensor([len(t) for t in token_lists])
        with torch.inference_mode():
            logits = self.model(ids.to(self.device), lengths.to(self.device))
            probs = logits.float().softmax(-1)
            score, label = probs.max(-1)
            return list(zip(label.tolist(), score.tolist()))


async def classify(request):
    t0 = time.perf_counter()
    batcher = request.app["batcher"]
    body = await request.json()
    tokens = body["tokens"][:MAX_LEN]
    fut = asyncio.get_running_loop().create_future()
    await batcher.queue.put((tokens, fut))
    label, score = await fut
    resp = web.json_response({"id": body.get("id"), "label": label, "score": round(score, 5)})
    batcher.request_ms.append((time.perf_counter() - t0) * 1e3)
    return resp


async def drive(clients, n):
    """Has the client processes send n requests in all; returns when every response has arrived."""
    loop = asyncio.get_running_loop()
    share = math.ceil(n / len(clients))
    for conn in clients:
        conn.send(("run", share))
    replies = await asyncio.gather(*(loop.run_in_executor(None, conn.recv) for conn in clients))
    errors = sum(r[2] for r in replies)
    if errors:
        print(f"{PROG}: warning: {errors} failed requests", flush=True)
    return sum(r[1] for r in replies)


async def serve(args, torch, model, device):
    batcher = Batcher(torch, model, device, fixed=args.fixed)
    app = web.Application()
    app["batcher"] = batcher
    app.router.add_post("/v1/classify", classify)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    batcher_task = asyncio.create_task(batcher.run())  # runs beside the server for the server's lifetime

    ctx = mp.get_context("spawn")
    clients, procs = [], []
    for c in range(CLIENT_PROCS):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=client_process, args=(child, port, 100 + c), daemon=True)
        p.start()
        clients.append(parent)
        procs.append(p)
    print(f"{PROG}: serving on 127.0.0.1:{port}, {CLIENT_PROCS} client processes x {CONCURRENCY} connections, "
          f"max batch {MAX_BATCH}, window {MAX_WAIT_MS} ms", flush=True)

    def reset():
        batcher.batch_ms, batcher.batch_sizes, batcher.request_ms = [], [], []

    try:
        if args.ab:
            window_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):  # round -1 warms both variants up
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    batcher.fixed = name == "fixed"
                    reset()
                    await drive(clients, args.window_requests if r >= 0 else args.warmup)
                    if r >= 0:
                        window_ms[name].append(statistics.fmean(batcher.request_ms))
            b, x = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window_requests}", flush=True)
            return {"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                    "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                    "broken_request_ms": round(b, 3), "fixed_request_ms": round(x, 3),
                    "rounds": args.ab, "window": args.window_requests}

        await drive(clients, args.warmup)
        reset()
        t = time.perf_counter()
        n = await drive(clients, args.requests)
        elapsed = time.perf_counter() - t
        req, bms = batcher.request_ms, batcher.batch_ms
        return {
            "program": PROG, "variant": "fixed" if args.fixed else "broken",
            "step_ms_p50": round(statistics.median(bms), 3), "step_ms_mean": round(statistics.fmean(bms), 3),
            "batch_ms_p50": round(statistics.median(bms), 3), "batch_ms_mean": round(statistics.fmean(bms), 3),
            "batch_size_mean": round(statistics.fmean(batcher.batch_sizes), 2), "batches": len(bms),
            "request_ms_p50": round(statistics.median(req), 3), "request_ms_p90": round(percentile(req, 90), 3),
            "request_ms_p99": round(percentile(req, 99), 3), "requests": len(req),
            "throughput_rps": round(n / elapsed, 1),
        }
    finally:
        for conn in clients:
            conn.send(("stop",))
        for p in procs:
            p.join(timeout=5)
        batcher_task.cancel()
        await runner.cleanup()


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: torch is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    try:
        import aiohttp  # noqa: F401
    except ImportError as e:
        print(f"{PROG}: aiohttp is not importable ({e}); nothing to run", flush=True)
        sys.exit(77)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build_model(torch, device, small=device.type != "cuda")
    print(f"{PROG}: torch {torch.__version__}, {device}, encoder "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f}M params", flush=True)
    result = asyncio.run(serve(args, torch, model, device))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
