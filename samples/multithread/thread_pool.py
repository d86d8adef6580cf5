"""Click-through-rate model whose per-request feature hashing is fanned out to a ThreadPoolExecutor.

Each step featurizes 256 requests (26 categorical fields hashed into embedding rows with a hand-written FNV-1a
loop, 13 numeric fields log-scaled and clipped) by submitting chunks to a ThreadPoolExecutor of 8 threads
('featurize_N') and waiting on the futures, then runs a DLRM-style model on the GPU. The featurizer is pure
Python, so the 8 threads take turns on the GIL: the fan-out is no faster than one thread, and the step
waits on the futures for most of its time.
Fix: the same featurize_chunk in a ProcessPoolExecutor of 8 processes, which really runs the chunks in
parallel.
"""
import concurrent.futures as cf
import math
import random
import time
import types

from _harness import ab, need_cuda, parse, report

try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = "the ThreadPoolExecutor threads 'featurize_N' running pure-Python feature hashing (one at a time, GIL)"
WAITS_ON_NAMES = ["featurize", "threadpool", "thread pool"]
HOT_FUNCTIONS = ["fnv1a_bucket", "featurize_chunk"]
FIX = "Run featurize_chunk in a ProcessPoolExecutor (8 processes) instead of a ThreadPoolExecutor."
FIX_WORDS = ["processpoolexecutor", "process"]

BATCH, CHUNK, N_CAT, N_NUM = 256, 32, 26, 13
BUCKETS = 20_011
EMB = 64


def fnv1a_bucket(field, value):
    h = 0x811C9DC5
    for ch in f"{field}={value}".encode():
        h = ((h ^ ch) * 0x01000193) & 0xFFFFFFFF
    return h % BUCKETS


def featurize_chunk(requests):
    cats, nums = [], []
    for req in requests:
        cats.append([fnv1a_bucket(f"c{k}", req[f"c{k}"]) for k in range(N_CAT)])
        nums.append([min(math.log1p(max(req[f"n{k}"], 0.0)), 12.0) for k in range(N_NUM)])
    return cats, nums


def incoming_requests(rng, n):
    """Simulated traffic: ad impressions with categorical ids (strings) and counters."""
    return [{**{f"c{k}": f"{rng.getrandbits(40):010x}" for k in range(N_CAT)},
             **{f"n{k}": rng.expovariate(1 / 50) for k in range(N_NUM)}} for _ in range(n)]


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_CAT * BUCKETS, EMB)  # the 26 tables, one after the other
        self.bottom = nn.Sequential(nn.Linear(N_NUM, 512), nn.ReLU(), nn.Linear(512, EMB), nn.ReLU())
        self.top = nn.Sequential(nn.Linear((N_CAT + 1) * EMB, 4096), nn.ReLU(),
                                 *[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.ReLU())],
                                 nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 1))
        self.register_buffer("field_offset", torch.arange(N_CAT) * BUCKETS)

    def forward(self, cats, nums):
        emb = self.emb(cats + self.field_offset).flatten(1)
        return torch.sigmoid(self.top(torch.cat([emb, self.bottom(nums)], 1)))


def predict(model, pool, requests):
    chunks = [requests[i:i + CHUNK] for i in range(0, len(requests), CHUNK)]
    cats, nums = [], []
    for c, n in pool.map(featurize_chunk, chunks):
        cats += c
        nums += n
    cats = torch.tensor(cats, dtype=torch.long).cuda(non_blocking=True)
    nums = torch.tensor(nums, dtype=torch.float32).cuda(non_blocking=True)
    with torch.inference_mode():
        return model(cats, nums).squeeze(1).cpu()


def main():
    args = parse(__doc__, steps=40, window=25)
    need_cuda()
    rng = random.Random(0)
    traffic = [incoming_requests(rng, BATCH) for _ in range(16)]
    processes = None
    if args.fixed or args.ab:
        # Forked (Linux's default) before CUDA is initialised; all 8 workers start on the first submit.
        processes = cf.ProcessPoolExecutor(max_workers=8)
        list(processes.map(featurize_chunk, [traffic[0][:1]] * 8))
    threads = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="featurize")
    model = CTRModel().cuda().eval()
    try:
        if args.ab:
            ab(torch, lambda i: predict(model, threads, traffic[i % len(traffic)]),
               lambda i: predict(model, processes, traffic[i % len(traffic)]), args.ab, args.window)
        else:
            pool = processes if args.fixed else threads
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                predict(model, pool, traffic[i % len(traffic)])
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("thread_pool", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)
    finally:
        threads.shutdown(wait=True)
        if processes is not None:
            processes.shutdown(wait=True)


if __name__ == "__main__":
    main()
