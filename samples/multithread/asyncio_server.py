"""Asyncio inference server whose event loop parses and tokenizes every request before a GPU worker thread sees it.

The event loop (the main thread) accepts requests from 256 simulated keep-alive clients. For each one it
decodes the JSON body, validates it and runs a greedy WordPiece tokenizer in pure Python, then groups 32
prepared requests into a batch that a thread named 'gpu-worker' takes from a queue.Queue and runs through a
Transformer encoder. The per-request Python work on the loop takes several times longer than the model, and
it holds the GIL the GPU worker needs for its kernel launches: the worker waits for the loop, in
queue.get() and for the GIL.
Fix: the loop only collects raw bodies and hands each full batch to a ProcessPoolExecutor through
loop.run_in_executor (prepare_batch), so parsing and tokenization run in 6 processes, several batches at once.
"""
import asyncio
import concurrent.futures as cf
import json
import queue
import random
import string
import threading
import time
import types

from _harness import ab, need_cuda, parse, report

try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = "the asyncio event loop (MainThread) parsing and tokenizing each request in pure Python"
WAITS_ON_NAMES = ["mainthread", "main thread", "event loop", "asyncio"]
HOT_FUNCTIONS = ["prepare_request", "wordpiece_encode", "validate_request"]
FIX = "Hand each batch's parsing and tokenization to a ProcessPoolExecutor with loop.run_in_executor."
FIX_WORDS = ["processpoolexecutor", "run_in_executor", "process"]

BATCH, CLIENTS, SEQ = 32, 256, 96
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
VOCAB = {t: i + 4 for i, t in enumerate(SYLLABLES + ["##" + s for s in SYLLABLES] +
                                         ["##" + a + b for a in SYLLABLES[:20] for b in SYLLABLES])}
PUNCT = str.maketrans("", "", string.punctuation)


def validate_request(req):
    for key, kind in (("id", str), ("text", str), ("lang", str), ("max_tokens", int), ("client", dict)):
        if not isinstance(req.get(key), kind):
            raise ValueError(f"bad or missing field {key!r}")
    if req["lang"] not in ("en", "de", "fr") or not 0 < req["max_tokens"] <= 512:
        raise ValueError("unsupported request")


def wordpiece_encode(word):
    ids, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in VOCAB:
                ids.append(VOCAB[piece])
                break
            end -= 1
        else:
            return [3]  # [UNK] for the whole word
        start = end
    return ids


def prepare_request(body):
    req = json.loads(body)
    validate_request(req)
    ids = [1]
    for word in req["text"].lower().translate(PUNCT).split():
        ids += wordpiece_encode(word)
    ids = ids[:SEQ - 1] + [2]
    return ids + [0] * (SEQ - len(ids))


def prepare_batch(bodies):
    return [prepare_request(b) for b in bodies]


def make_bodies(n=512):
    rng = random.Random(0)
    return [json.dumps({"id": f"req-{k}", "lang": "en", "max_tokens": 64, "client": {"tier": "pro"},
                        "text": " ".join("".join(rng.choices(SYLLABLES, k=rng.randint(2, 5))) +
                                         rng.choice(["", "", ",", "."]) for _ in range(55))})
            for k in range(n)]


class InlineServer:
    """Prepares every request on the event loop as it arrives."""

    def __init__(self):
        self.batches = queue.Queue()
        self.pending = []

    async def infer(self, body):
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((prepare_request(body), fut))
        if len(self.pending) == BATCH:
            self.batches.put(self.pending)
            self.pending = []
        return await fut


class PooledServer:
    """The fix: the loop only collects raw bodies; a process pool prepares whole batches."""

    def __init__(self, pool):
        self.pool = pool
        self.batches = queue.Queue()
        self.pending = []
        self.tasks = set()

    async def infer(self, body):
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((body, fut))
        if len(self.pending) == BATCH:
            task = asyncio.create_task(self._prepare(self.pending))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            self.pending = []
        return await fut

    async def _prepare(self, pending):
        rows = await asyncio.get_running_loop().run_in_executor(self.pool, prepare_batch, [b for b, _ in pending])
        self.batches.put([(row, fut) for row, (_, fut) in zip(rows, pending)])


async def client(server, bodies, k):
    while True:
        await server.infer(bodies[k % len(bodies)])
        k += CLIENTS


def resolve(futs, labels):
    for f, label in zip(futs, labels):
        if not f.done():
            f.set_result(label)


class Classifier(nn.Module):
    def __init__(self, d=512, n_layers=4):
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB) + 4, d, padding_idx=0)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True), n_layers,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d, 16)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(1))


def gpu_step(model, server, loop):
    batch = server.batches.get()
    ids = torch.tensor([row for row, _ in batch]).cuda(non_blocking=True)
    with torch.inference_mode():
        labels = model(ids).argmax(1).tolist()
    loop.call_soon_threadsafe(resolve, [f for _, f in batch], labels)


def gpu_worker(args, servers, loop, finished):
    try:
        model = Classifier().cuda().eval()
        if args.ab:
            ab(torch, lambda i: gpu_step(model, servers["inline"], loop),
               lambda i: gpu_step(model, servers["pooled"], loop), args.ab, args.window)
            return
        server = servers["pooled" if args.fixed else "inline"]
        t0 = time.perf_counter()
        t_first = t0
        for i in range(args.steps):
            gpu_step(model, server, loop)
            if i == 0:
                t_first = time.perf_counter()
        torch.cuda.synchronize()
        report("asyncio_server", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)
    finally:
        loop.call_soon_threadsafe(finished.set)


async def serve(args, pool):
    loop = asyncio.get_running_loop()
    servers = {}
    if args.ab or not args.fixed:
        servers["inline"] = InlineServer()
    if args.ab or args.fixed:
        servers["pooled"] = PooledServer(pool)
    bodies = make_bodies()
    clients = [asyncio.create_task(client(s, bodies, k)) for s in servers.values() for k in range(CLIENTS)]
    finished = asyncio.Event()
    worker = threading.Thread(target=gpu_worker, args=(args, servers, loop, finished), name="gpu-worker")
    worker.start()
    await finished.wait()
    for task in clients + [t for s in servers.values() for t in getattr(s, "tasks", ())]:
        task.cancel()
    await asyncio.gather(*clients, return_exceptions=True)
    worker.join(timeout=10)


def main():
    args = parse(__doc__, steps=50, window=30)
    need_cuda()
    pool = None
    if args.fixed or args.ab:
        # Forked before CUDA is initialised and before the loop and the GPU thread exist.
        pool = cf.ProcessPoolExecutor(max_workers=6)
        list(pool.map(prepare_batch, [make_bodies(1)] * 6))
    try:
        asyncio.run(serve(args, pool))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


if __name__ == "__main__":
    main()
