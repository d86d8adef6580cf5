"""Dynamic-batching server whose batcher thread polls for requests with time.sleep instead of being woken.

Clients (a 'frontend' thread, 32 requests kept in flight) append requests to a list; a thread named
'batcher' forms batches of 32 for the model thread. The batcher checks the list, and while there are fewer
than 32 requests it sleeps 10 ms and looks again (a partial batch goes out after 50 ms). Requests that
arrive right after a check sit there until the next one, so the model thread, done with its batch in a few
milliseconds, waits in queue.get() for the batcher's next wake-up.
Fix: the batcher waits on a threading.Condition that submit() notifies once a batch is full (with the same
50 ms timeout for partial batches), so batches are formed the moment their last request arrives.
"""
import collections
import queue
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

WAITS_ON = "thread 'batcher', which sleeps 10 ms between checks for new requests"
WAITS_ON_NAMES = ["batcher"]
HOT_FUNCTIONS = ["poll_for_batch"]
FIX = "Have the batcher wait on a threading.Condition notified by submit() instead of polling with time.sleep."
FIX_WORDS = ["condition", "notify", "poll", "sleep"]

MAX_BATCH, IN_FLIGHT, SEQ, DIM = 32, 32, 128, 512
POLL_S, MAX_WAIT_S = 0.010, 0.050

Request = collections.namedtuple("Request", "rid arrived tokens")


class PollingBatcher:
    def __init__(self, name):
        self.incoming = collections.deque()
        self.ready = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def submit(self, req):
        self.incoming.append(req)

    def _run(self):
        while not self.stop.is_set():
            batch = self.next_batch()
            if batch:
                self.ready.put(batch)

    def next_batch(self):
        return self.poll_for_batch()

    def poll_for_batch(self):
        while len(self.incoming) < MAX_BATCH:
            if self.incoming and time.monotonic() - self.incoming[0].arrived > MAX_WAIT_S:
                break
            time.sleep(POLL_S)
            if self.stop.is_set():
                return None
        return [self.incoming.popleft() for _ in range(min(MAX_BATCH, len(self.incoming)))]


class NotifiedBatcher(PollingBatcher):
    """The fix: submit() wakes the batcher as soon as a batch is full."""

    def __init__(self, name):
        self.cond = threading.Condition()
        super().__init__(name)

    def submit(self, req):
        with self.cond:
            self.incoming.append(req)
            if len(self.incoming) >= MAX_BATCH:
                self.cond.notify()

    def next_batch(self):
        with self.cond:
            while len(self.incoming) < MAX_BATCH and not self.stop.is_set():
                if self.incoming:
                    remaining = self.incoming[0].arrived + MAX_WAIT_S - time.monotonic()
                    if remaining <= 0:
                        break
                    self.cond.wait(remaining)
                else:
                    self.cond.wait(0.1)
            return [self.incoming.popleft() for _ in range(min(MAX_BATCH, len(self.incoming)))]


def frontend_loop(batcher, finished, stop, vocab):
    """Keeps IN_FLIGHT requests outstanding: a new request for every one answered."""
    rid = 0
    g = torch.Generator().manual_seed(0)

    def new_request():
        nonlocal rid
        rid += 1
        return Request(rid, time.monotonic(), torch.randint(0, vocab, (SEQ,), generator=g))

    for _ in range(IN_FLIGHT):
        batcher.submit(new_request())
    while not stop.is_set():
        try:
            done = finished.get(timeout=0.1)
        except queue.Empty:
            continue
        for _ in done:
            batcher.submit(new_request())


class Service:
    def __init__(self, batcher_cls, name, vocab):
        self.batcher = batcher_cls(name)
        self.finished = queue.Queue()
        self.stop = threading.Event()
        self.frontend = threading.Thread(target=frontend_loop, args=(self.batcher, self.finished, self.stop, vocab),
                                         name=f"frontend-{name}", daemon=True)
        self.frontend.start()

    def close(self):
        self.stop.set()
        self.batcher.stop.set()
        if isinstance(self.batcher, NotifiedBatcher):
            with self.batcher.cond:
                self.batcher.cond.notify_all()
        self.frontend.join(timeout=5)
        self.batcher.thread.join(timeout=5)


class Ranker(nn.Module):
    def __init__(self, vocab=32000, d=DIM, n_layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True), n_layers,
                                             enable_nested_tensor=False)
        self.score = nn.Linear(d, 1)

    def forward(self, tokens):
        return self.score(self.encoder(self.embed(tokens))[:, 0]).squeeze(1)


def model_step(model, service):
    batch = service.batcher.ready.get()
    tokens = torch.stack([r.tokens for r in batch]).cuda(non_blocking=True)
    with torch.inference_mode():
        scores = model(tokens).cpu()
    service.finished.put(batch)  # the answers go back; the clients send their next requests
    return scores


def main():
    args = parse(__doc__, steps=50, window=25)
    need_cuda()
    model = Ranker().cuda().eval()
    services = {}
    if args.ab or not args.fixed:
        services["poll"] = Service(PollingBatcher, "batcher", 32000)
    if args.ab or args.fixed:
        services["notify"] = Service(NotifiedBatcher, "batcher-notified", 32000)
    try:
        if args.ab:
            ab(torch, lambda i: model_step(model, services["poll"]), lambda i: model_step(model, services["notify"]),
               args.ab, args.window)
        else:
            service = services["notify" if args.fixed else "poll"]
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                model_step(model, service)
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("batcher_poll", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)
    finally:
        for s in services.values():
            s.close()


if __name__ == "__main__":
    main()
