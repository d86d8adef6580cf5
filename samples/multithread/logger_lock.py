"""Embedding service whose step logs through a slow shared logging handler that a chatty audit thread keeps busy.

The process ships its logs to a log collector through a custom logging.Handler whose emit() makes a blocking
upload (simulated with a sleep of a round trip plus the payload's size over the uplink, as
logging.handlers.HTTPHandler blocks in its POST). logging holds the handler's lock for the whole emit(). A
background thread named 'audit' flushes its buffered audit events every 20 ms as one large JSON record through
the same handler, which keeps the lock about 10 ms each time; when the step thread logs its 'batch done' line
it queues behind the audit thread on the handler lock.
Fix: the standard one: loggers write to a logging.handlers.QueueHandler and a QueueListener thread drives the
slow handler, so logging from the step is a queue put.
"""
import json
import logging
import logging.handlers
import queue
import threading
import time

from _harness import ab, need_cuda, parse, report

try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77
    torch = nn = None

WAITS_ON = "the logging handler's lock, held by thread 'audit' while its records are posted to the collector"
WAITS_ON_NAMES = ["audit", "lock", "logging", "handler"]
HOT_FUNCTIONS = ["post_to_log_collector", "emit"]
FIX = "Log through a logging.handlers.QueueHandler and let a QueueListener thread drive the slow handler."
FIX_WORDS = ["queuehandler", "queuelistener", "queue"]

BATCH, DIM = 1024, 1024
COLLECTOR_RTT_S, UPLINK_BYTES_PER_S = 0.0004, 2e6   # the log collector: a round trip, then the upload
AUDIT_EVENTS, AUDIT_PERIOD_S = 256, 0.020            # the audit buffer is flushed every 20 ms

log = logging.getLogger("embed.serve")
audit_log = logging.getLogger("embed.audit")


def post_to_log_collector(payload):
    # Stands in for a synchronous HTTP POST to the collector: the thread blocks for the round trip and upload.
    time.sleep(COLLECTOR_RTT_S + len(payload) / UPLINK_BYTES_PER_S)
    return len(payload)


class CollectorHandler(logging.Handler):
    def emit(self, record):
        try:
            post_to_log_collector(self.format(record).encode())
        except Exception:
            self.handleError(record)


def audit_loop(stop):
    """Audit trail: access checks buffered in memory and flushed as one record on a fixed schedule."""
    n = 0
    next_flush = time.monotonic()
    while not stop.wait(max(0.0, next_flush - time.monotonic())):
        next_flush = max(next_flush + AUDIT_PERIOD_S, time.monotonic())
        events = [{"tenant": (n + k) % 97, "key": f"{(n + k) * 2654435761 % 2**32:08x}", "scope": "embed",
                   "decision": "allow"} for k in range(AUDIT_EVENTS)]
        n += AUDIT_EVENTS
        audit_log.info("audit flush %s", json.dumps(events))


def configure_logging(direct, queued):
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(queued if queued is not None else direct)


def make_model():
    return nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, 4 * DIM), nn.GELU(),
                         nn.Linear(4 * DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM)).cuda().eval()


def embed_batch(model, x, step):
    log.debug("batch %d start size=%d", step, BATCH)
    with torch.inference_mode():
        emb = nn.functional.normalize(model(x), dim=1)
        norms = emb.norm(dim=1).cpu()
    log.info("batch %d done mean_norm=%.3f", step, norms.mean().item())
    return emb


def main():
    args = parse(__doc__, steps=50, window=30)
    need_cuda()
    fmt = logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    direct = CollectorHandler()
    direct.setFormatter(fmt)
    listener = None
    queued = None
    if args.fixed or args.ab:
        shipped = CollectorHandler()
        shipped.setFormatter(fmt)
        records = queue.SimpleQueue()
        queued = logging.handlers.QueueHandler(records)
        listener = logging.handlers.QueueListener(records, shipped)
        listener.start()
    configure_logging(direct, queued if args.fixed else None)

    model = make_model()
    x = torch.randn(BATCH, DIM, device="cuda")
    stop = threading.Event()
    audit = threading.Thread(target=audit_loop, args=(stop,), name="audit", daemon=True)
    audit.start()
    try:
        if args.ab:
            # Both handler set-ups exist up front; a window switches which one the root logger uses.
            mode = {"queued": None}

            def step(i, use_queue):
                if mode["queued"] is not use_queue:
                    configure_logging(direct, queued if use_queue else None)
                    mode["queued"] = use_queue
                return embed_batch(model, x, i)

            ab(torch, lambda i: step(i, False), lambda i: step(i, True), args.ab, args.window)
        else:
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                embed_batch(model, x, i)
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("logger_lock", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        stop.set()
        audit.join(timeout=5)
        if listener is not None:
            listener.stop()


if __name__ == "__main__":
    main()
