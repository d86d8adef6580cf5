"""Candidate ranker whose requests are parsed and validated by a pure-Python frontend thread.

A threading.Thread named 'frontend' takes raw JSON request bodies (about 15 KB each: a user, a context and 48
candidate items with prices, categories, tags and a feature vector), decodes them with json.loads, validates
and normalises every field in Python (type checks, price strings to floats, clamping, category paths and tags
hashed into buckets, feature vectors checked for length and finiteness) and puts one normalised request at a
time on a queue.Queue. The main thread takes 16 requests from the queue and scores their candidates with a
small Transformer on the GPU. The frontend needs several times longer per batch than the model, and being
Python it also holds the GIL the main thread needs to launch its kernels, so the step spends most of its time
in queue.get() waiting on the frontend thread.
Fix: parse and normalise whole batches in a multiprocessing.Pool of 8 processes with several batches in flight.
"""
import collections
import json
import math
import multiprocessing as mp
import os
import queue
import random
import threading
import time
import types
import zlib

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from _harness import ab, need_cuda, parse, report

try:
    import numpy as np
except ImportError:  # need_cuda("numpy") says so and exits 77
    np = None
try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = ("thread 'frontend' decoding JSON request bodies and validating/normalising every field in pure "
            "Python (and holding the GIL)")
WAITS_ON_NAMES = ["frontend"]
HOT_FUNCTIONS = ["parse_request", "normalize_item", "normalize_request"]
FIX = ("Parse and normalise the requests in a multiprocessing.Pool of worker processes, several batches in "
       "flight, instead of on one frontend thread.")
FIX_WORDS = ["process", "multiprocessing", "pool"]

BATCH, ITEMS, N_FEATURES, N_TAGS = 16, 48, 16, 4
DENSE = N_FEATURES + 4                  # the feature vector plus price, rating, age and stock
CAT_BUCKETS, TAG_BUCKETS = 50_000, 20_000
N_PAYLOADS = 96
WORDS = ["steel", "oak", "linen", "cotton", "glass", "ceramic", "copper", "wool", "bamboo", "leather", "nylon",
         "marble", "walnut", "silk", "velvet", "canvas", "rubber", "cedar", "brass", "denim"]
CATEGORIES = ["Home", "Kitchen", "Garden", "Outdoor", "Office", "Toys", "Sports", "Beauty", "Tools", "Audio"]


def make_payload(n):
    """One incoming request body, as the clients send it (strings where a client sends strings)."""
    rng = random.Random(n)
    items = []
    for j in range(ITEMS):
        items.append({
            "item_id": f"SKU-{rng.randrange(10 ** 7):07d}",
            "title": " ".join(rng.choice(WORDS).title() for _ in range(rng.randint(3, 7))),
            "price": f"{rng.uniform(0.5, 900):.2f}",
            "currency": rng.choice(["USD", "usd", "EUR", " eur"]),
            "rating": rng.choice([None, round(rng.uniform(0, 5), 1), str(round(rng.uniform(0, 5), 1))]),
            "category": " / ".join(rng.choice(CATEGORIES) for _ in range(rng.randint(2, 4))),
            "tags": [rng.choice(WORDS).upper() if rng.random() < 0.3 else rng.choice(WORDS)
                     for _ in range(rng.randint(2, 8))],
            "in_stock": rng.choice([True, False, "yes", "no", 1, 0]),
            "listed_days": rng.randint(0, 2000),
            "features": [round(rng.gauss(0, 2), 4) for _ in range(N_FEATURES)],
        })
    body = {"request_id": f"req-{n:08d}", "model": "ranker-v3", "api_version": "2024-06-01",
            "user": {"id": f"u{rng.randrange(10 ** 6)}", "locale": rng.choice(["en-US", "de-DE", "fr-FR"]),
                     "segments": [rng.choice(WORDS) for _ in range(5)]},
            "context": {"page": "home", "device": rng.choice(["ios", "android", "web"]), "ts": 1718000000 + n},
            "items": items}
    return json.dumps(body).encode()


def bucket(text, buckets):
    return zlib.crc32(text.encode()) % buckets + 1


def as_float(value, lo, hi, default=0.0):
    if value is None:
        return default
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return default
        value = float(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    value = float(value)
    if not math.isfinite(value):
        return default
    return min(max(value, lo), hi)


def as_bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "true", "1", "y")
    return bool(value)


def normalize_item(item):
    for key in ("item_id", "price", "category", "features"):
        if key not in item:
            raise ValueError(f"item without {key}")
    currency = str(item.get("currency", "USD")).strip().upper()
    price = as_float(item["price"], 0.0, 1e5) * (1.08 if currency == "EUR" else 1.0)
    feats = item["features"]
    if not isinstance(feats, list) or len(feats) != N_FEATURES:
        raise ValueError("bad feature vector")
    dense = [as_float(v, -10.0, 10.0) for v in feats]
    dense.append(math.log1p(price))
    dense.append(as_float(item.get("rating"), 0.0, 5.0, 2.5) / 5.0)
    dense.append(min(int(item.get("listed_days", 0)), 3650) / 3650.0)
    dense.append(1.0 if as_bool(item.get("in_stock", True)) else 0.0)
    path = [p.strip().lower() for p in item["category"].split("/") if p.strip()]
    cats = [bucket("/".join(path[:k + 1]), CAT_BUCKETS) for k in range(len(path))][:3]
    cats += [0] * (3 - len(cats))
    tags = sorted({t.strip().lower() for t in item.get("tags", []) if isinstance(t, str) and t.strip()})
    tag_ids = [bucket(t, TAG_BUCKETS) for t in tags][:N_TAGS]
    tag_ids += [0] * (N_TAGS - len(tag_ids))
    title_id = bucket(" ".join(item.get("title", "").lower().split()), CAT_BUCKETS)
    return dense, cats + tag_ids + [title_id]


def normalize_request(body):
    if body.get("api_version") != "2024-06-01" or not isinstance(body.get("items"), list):
        raise ValueError("unsupported request")
    items = body["items"][:ITEMS]
    dense, ids = [], []
    for item in items:
        d, i = normalize_item(item)
        dense.append(d)
        ids.append(i)
    while len(dense) < ITEMS:
        dense.append([0.0] * DENSE)
        ids.append([0] * 8)
    return body["request_id"], np.asarray(dense, dtype=np.float32), np.asarray(ids, dtype=np.int64)


def parse_request(raw):
    return normalize_request(json.loads(raw))


def prepare_batch(raws):
    """The fix's unit of work, in a pool process: a whole batch, returned as two arrays."""
    reqs = [parse_request(r) for r in raws]
    return np.stack([r[1] for r in reqs]), np.stack([r[2] for r in reqs])


class Incoming:
    """The request bodies as they arrive (a fixed set of recorded payloads, replayed)."""

    def __init__(self):
        self.payloads = [make_payload(n) for n in range(N_PAYLOADS)]
        self.n = 0

    def next(self):
        raw = self.payloads[self.n % N_PAYLOADS]
        self.n += 1
        return raw


def frontend_loop(incoming, out_q, stop):
    while not stop.is_set():
        req = parse_request(incoming.next())
        while not stop.is_set():
            try:
                out_q.put(req, timeout=0.1)
                break
            except queue.Full:
                pass


def take_batch(q):
    reqs = [q.get() for _ in range(BATCH)]
    return np.stack([r[1] for r in reqs]), np.stack([r[2] for r in reqs])


class PoolFrontend:
    """The fix: prepare_batch in worker processes, a bounded number of batches in flight."""

    def __init__(self, incoming, processes=8, in_flight=12):
        self.incoming = incoming
        self.pool = mp.Pool(processes)
        self.pending = collections.deque(self._submit() for _ in range(in_flight))

    def _submit(self):
        return self.pool.apply_async(prepare_batch, ([self.incoming.next() for _ in range(BATCH)],))

    def get(self):
        batch = self.pending.popleft().get(timeout=60)
        self.pending.append(self._submit())
        return batch

    def close(self):
        self.pool.terminate()
        self.pool.join()


class Ranker(nn.Module):
    def __init__(self, d=256, n_layers=4):
        super().__init__()
        self.cat = nn.EmbeddingBag(CAT_BUCKETS + 1, d, mode="sum", padding_idx=0)
        self.tag = nn.EmbeddingBag(TAG_BUCKETS + 1, d, mode="mean", padding_idx=0)
        self.dense = nn.Sequential(nn.Linear(DENSE, d), nn.GELU(), nn.Linear(d, d))
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))

    def forward(self, dense, ids):
        b, n, _ = dense.shape
        flat = ids.view(b * n, -1)
        cats = torch.cat([flat[:, :3], flat[:, 3 + N_TAGS:]], 1)
        x = self.dense(dense) + (self.cat(cats) + self.tag(flat[:, 3:3 + N_TAGS])).view(b, n, -1)
        return self.head(self.encoder(x)).squeeze(-1)


def score(model, batch):
    dense, ids = batch
    with torch.inference_mode():
        scores = model(torch.from_numpy(dense).cuda(), torch.from_numpy(ids).cuda())
        return scores.topk(10, dim=1).indices.cpu()


def main():
    args = parse(__doc__, steps=40, window=20)
    need_cuda("numpy")
    incoming = Incoming()
    # The pool forks before CUDA is initialised and before any thread exists.
    pool = PoolFrontend(incoming) if (args.fixed or args.ab) else None
    model = Ranker().cuda().eval()
    stop = threading.Event()
    parsed = queue.Queue(maxsize=2 * BATCH)
    frontend = None
    if not args.fixed or args.ab:
        frontend = threading.Thread(target=frontend_loop, args=(Incoming(), parsed, stop), name="frontend",
                                    daemon=True)
        frontend.start()

    try:
        if args.ab:
            ab(torch, lambda i: score(model, take_batch(parsed)), lambda i: score(model, pool.get()),
               args.ab, args.window)
        else:
            next_batch = pool.get if args.fixed else (lambda: take_batch(parsed))
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                score(model, next_batch())
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("json_frontend", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        stop.set()
        if frontend is not None:
            frontend.join(timeout=5)
        if pool is not None:
            pool.close()


if __name__ == "__main__":
    main()
