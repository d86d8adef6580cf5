"""blocking_handler: an aiohttp service whose bulk-ingest handler blocks the event loop that also serves scoring.

What it does: one `aiohttp.web` server on 127.0.0.1 (a free port) with two endpoints:
  POST /v1/score   {"features": [16 floats]} -> {"score": ..} -- a light request: a small MLP on the GPU (fp16,
                   batch 1), the score read back with `.tolist()`;
  POST /v1/ingest  a ~1.9 MB JSON document of 6,000 event records -> a summary -- parses the body, validates and
                   normalizes every record in pure Python (whitespace/case folding, ISO timestamps, tag sets, clamped
                   and L2-normalized feature vectors) and aggregates per-tag counts and a mean feature vector.
An in-process load generator (aiohttp.ClientSession on the same event loop) runs 8 /v1/score clients (each sends a
request, reads the answer, pauses ~10 ms, repeats) and 2 /v1/ingest clients that each post a document every 500 ms.

Planted problem (cpu_bound): the ingest handler does the parse + validation synchronously inside the coroutine
(`payload = json.loads(body); summary = normalize(payload)`), ~50-150 ms of pure Python per document during which
the event loop cannot run anything else: score requests that arrive meanwhile wait, so their p90/p99 latency grows
to the length of an ingest even though each needs well under a millisecond of work, and the GPU idles.

Fix (--fixed): run the CPU-bound part off the event loop in a process pool
(`await loop.run_in_executor(process_pool, parse_and_normalize, body)`); only the raw bytes go to the worker and a
small summary comes back. The work is pure Python and holds the GIL, so a thread (`asyncio.to_thread`) would keep
stealing the interpreter from the event loop every switch interval; `--ab` measures that variant too and prints it
as `AB_ALT name=to_thread`.

Own timers (last line, JSON): per-request latency as the in-process clients see it (send -> whole response read;
a handler-side timer would miss the time a request waits for the blocked loop to even read it), over all requests (`request_ms_p50`, `request_ms_p90`, `request_ms_p99`) and per endpoint (`endpoints`); the step
is a /v1/score request (`step_ms_p50`, `step_ms_mean`); `blocking_ms_mean` is the parse+normalize time per document
(measured where it runs).

Run: python3 blocking_handler.py [--fixed] [--seconds S] [--ab ROUNDS] [--window-s S] [--device cpu]
`--ab ROUNDS`: one server; windows of load alternate the ingest mode (inline / process pool / to_thread, order
rotated every round); AB reports medians of the per-window mean /v1/score latency. Exit 77 without
torch/aiohttp/CUDA.
"""
import argparse
import asyncio
import concurrent.futures
import datetime
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

EXPECTED = "cpu_bound"
BOTTLENECK = ("the /v1/ingest handler parses and normalizes a 1.9 MB JSON document in pure Python synchronously "
              "inside the coroutine, blocking the event loop so /v1/score requests queue behind it")
FIX = ("move the parse+normalize off the event loop: await loop.run_in_executor(ProcessPoolExecutor(), "
       "parse_and_normalize, body) (a thread keeps contending for the GIL)")
FIX_WORDS = ["run_in_executor", "event loop", "process pool", "to_thread"]

N_FEATURES = 16
RECORDS_PER_DOC = 6000
SCORE_CLIENTS = 8
SCORE_THINK_S = 0.010  # mean pause between a score client's requests (exponential)
INGEST_CLIENTS = 2
INGEST_PERIOD_S = 0.5
PROG = os.path.basename(sys.argv[0]) or "blocking_handler.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="ingest work in a process pool")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured load duration (default %(default)s)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B of the ingest modes")
    ap.add_argument("--window-s", type=float, default=2.0, help="--ab: seconds of load per window")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (smoke run)")
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
# The ingest work: plain Python, importable by process-pool workers (no torch at module level).
# ---------------------------------------------------------------------------------------------------------------
REQUIRED = ("id", "user", "ts", "text", "tags", "features")


def normalize(payload):
    accepted, rejected = 0, 0
    tag_counts = {}
    users = set()
    feat_sum = [0.0] * N_FEATURES
    for rec in payload.get("records", ()):
        if not isinstance(rec, dict) or any(k not in rec for k in REQUIRED):
            rejected += 1
            continue
        try:
            ts = datetime.datetime.fromisoformat(rec["ts"])
        except (TypeError, ValueError):
            rejected += 1
            continue
        feats = rec["features"]
        if not isinstance(feats, list) or len(feats) != N_FEATURES:
            rejected += 1
            continue
        text = " ".join(str(rec["text"]).split()).lower()
        if not text:
            rejected += 1
            continue
        tags = sorted({str(t).strip().lower() for t in rec["tags"] if str(t).strip()})
        clamped = [min(max(float(x), -5.0), 5.0) for x in feats]
        norm = math.sqrt(sum(x * x for x in clamped)) or 1.0
        for i, x in enumerate(clamped):
            feat_sum[i] += x / norm
        for t in tags:
            tag_counts[t] = tag_counts.get(t, 0) + 1
        users.add(str(rec["user"]).strip().lower())
        accepted += 1
        _ = ts.timestamp(), len(text)
    top_tags = sorted(tag_counts.items(), key=lambda kv: -kv[1])[:5]
    return {"accepted": accepted, "rejected": rejected, "users": len(users), "top_tags": top_tags,
            "mean_feature_0": feat_sum[0] / max(accepted, 1)}


def parse_and_normalize(body):
    """bytes -> (summary, seconds spent)."""
    t = time.perf_counter()
    summary = normalize(json.loads(body))
    return summary, time.perf_counter() - t


def make_document(rng, doc_id):
    words = ["alpha", "Beta", "gamma", "DELTA", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
    tags = ["news", "Sports", "tech ", "finance", "  travel", "food", "music", "science"]
    base = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    records = []
    for i in range(RECORDS_PER_DOC):
        records.append({
            "id": f"{doc_id}-{i}",
            "user": f"User{rng.randrange(5000)} ",
            "ts": (base + datetime.timedelta(seconds=rng.randrange(10 ** 7))).isoformat(),
            "text": "  ".join(rng.choice(words) for _ in range(rng.randint(4, 12))),
            "tags": rng.sample(tags, rng.randint(1, 3)),
            "features": [round(rng.gauss(0, 2), 4) for _ in range(N_FEATURES)],
        })
        if i % 997 == 0:
            records[-1]["features"] = records[-1]["features"][:-1]  # a few malformed records
    return json.dumps({"doc_id": doc_id, "records": records}).encode()


# ---------------------------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------------------------
class Service:
    def __init__(self, torch, device, mode, pool):
        import torch.nn as nn
        self.torch, self.device = torch, device
        self.mode = mode  # "inline" (broken), "process" (fixed), "thread" (the other fix)
        self.pool = pool
        dtype = torch.float16 if device.type == "cuda" else torch.float32
        self.model = nn.Sequential(nn.Linear(N_FEATURES, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                                   nn.Linear(512, 1)).to(device=device, dtype=dtype).eval()
        self.dtype = dtype
        self.reset()

    def reset(self):
        self.blocking_s = []

    async def score(self, request):
        body = await request.json()
        x = self.torch.tensor(body["features"], dtype=self.dtype).to(self.device)
        with self.torch.inference_mode():
            s = self.model(x[None]).float().sigmoid().tolist()[0][0]
        return web.json_response({"score": s})

    async def ingest(self, request):
        body = await request.read()
        if self.mode == "process":
            summary, spent = await asyncio.get_running_loop().run_in_executor(self.pool, parse_and_normalize, body)
        elif self.mode == "thread":
            summary, spent = await asyncio.to_thread(parse_and_normalize, body)
        else:
            t = time.perf_counter()
            payload = json.loads(body)
            summary = normalize(payload)
            spent = time.perf_counter() - t
        self.blocking_s.append(spent)
        return web.json_response(summary)


async def load(port, seconds, docs, seed):
    """In-process load: closed-loop score clients and periodic ingest clients, for `seconds`. Returns each
    endpoint's request latencies (ms) as the clients saw them: send -> whole response read."""
    import aiohttp
    rng = random.Random(seed)
    score_bodies = [json.dumps({"features": [rng.gauss(0, 1) for _ in range(N_FEATURES)]}).encode()
                    for _ in range(64)]
    hdr = {"Content-Type": "application/json"}
    base = f"http://127.0.0.1:{port}"
    stop_at = time.perf_counter() + seconds
    errors = 0
    lat = {"score": [], "ingest": []}

    async def score_client(session, k):
        nonlocal errors
        think = random.Random(seed * 100 + k)
        i = k
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            async with session.post(base + "/v1/score", data=score_bodies[i % len(score_bodies)], headers=hdr) as r:
                await r.read()
                errors += r.status != 200
            lat["score"].append((time.perf_counter() - t0) * 1e3)
            i += 1
            await asyncio.sleep(think.expovariate(1.0 / SCORE_THINK_S))

    async def ingest_client(session, k):
        nonlocal errors
        next_t = time.perf_counter() + k * INGEST_PERIOD_S / INGEST_CLIENTS
        await asyncio.sleep(max(0.0, next_t - time.perf_counter()))
        i = k
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            async with session.post(base + "/v1/ingest", data=docs[i % len(docs)], headers=hdr) as r:
                await r.read()
                errors += r.status != 200
            lat["ingest"].append((time.perf_counter() - t0) * 1e3)
            i += 1
            next_t += INGEST_PERIOD_S
            await asyncio.sleep(max(0.0, next_t - time.perf_counter()))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(score_client(session, k) for k in range(SCORE_CLIENTS)),
                             *(ingest_client(session, k) for k in range(INGEST_CLIENTS)))
    if errors:
        print(f"{PROG}: warning: {errors} failed requests", flush=True)
    return lat


def summarize(lat):
    out = {}
    for ep, v in lat.items():
        if v:
            out[ep] = {"count": len(v), "p50": round(statistics.median(v), 3), "p90": round(percentile(v, 90), 3),
                       "p99": round(percentile(v, 99), 3), "mean": round(statistics.fmean(v), 3)}
    return out


async def serve(args, torch, device, pool, docs):
    svc = Service(torch, device, "process" if args.fixed else "inline", pool)
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/v1/score", svc.score)
    app.router.add_post("/v1/ingest", svc.ingest)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"{PROG}: serving on 127.0.0.1:{port}; {SCORE_CLIENTS} score clients, {INGEST_CLIENTS} ingest clients "
          f"(a {len(docs[0]) / 1e6:.1f} MB document every {INGEST_PERIOD_S * 1e3:.0f} ms each)", flush=True)
    try:
        if args.ab:
            modes = {"broken": "inline", "fixed": "process", "to_thread": "thread"}
            names = list(modes)
            window_ms = {n: [] for n in names}
            for r in range(-1, args.ab):  # round -1: a short warm-up of every mode
                k = r % len(names)
                order = names[k:] + names[:k]
                if r % 2:
                    order.reverse()
                for name in order:
                    svc.mode = modes[name]
                    svc.reset()
                    lat = await load(port, args.window_s if r >= 0 else 1.0, docs, seed=r + 10)
                    if r >= 0:
                        window_ms[name].append(statistics.fmean(lat["score"]))
            b, x = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            a = statistics.median(window_ms["to_thread"])
            print(f"AB broken_ms={b:.3f} fixed_ms={x:.3f} saving_pct={(b - x) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window_s}s", flush=True)
            print(f"AB_ALT name=to_thread fixed_ms={a:.3f} saving_pct={(b - a) / b * 100:.1f}", flush=True)
            return {"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                    "step_ms_mean": round(statistics.fmean(window_ms["broken"]), 3),
                    "broken_score_ms": round(b, 3), "fixed_score_ms": round(x, 3), "to_thread_score_ms": round(a, 3),
                    "rounds": args.ab, "window_s": args.window_s}

        await load(port, 1.0, docs, seed=1)  # warm-up
        svc.reset()
        lat = await load(port, args.seconds, docs, seed=2)
        everything = lat["score"] + lat["ingest"]
        score = lat["score"]
        return {
            "program": PROG, "variant": "fixed" if args.fixed else "broken",
            "step_ms_p50": round(statistics.median(score), 3), "step_ms_mean": round(statistics.fmean(score), 3),
            "request_ms_p50": round(statistics.median(everything), 3),
            "request_ms_p90": round(percentile(everything, 90), 3),
            "request_ms_p99": round(percentile(everything, 99), 3),
            "endpoints": summarize(lat),
            "blocking_ms_mean": round(statistics.fmean(svc.blocking_s) * 1e3, 3) if svc.blocking_s else None,
            "requests": len(everything), "seconds": args.seconds,
        }
    finally:
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
    rng = random.Random(0)
    docs = [make_document(rng, d) for d in range(3)]
    pool = None
    if args.fixed or args.ab:
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=INGEST_CLIENTS,
                                                      mp_context=mp.get_context("spawn"))
        list(pool.map(parse_and_normalize, [docs[0]] * INGEST_CLIENTS))  # start the workers now
    try:
        result = asyncio.run(serve(args, torch, device, pool, docs))
    finally:
        if pool is not None:
            pool.shutdown()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
