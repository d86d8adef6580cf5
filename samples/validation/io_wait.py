"""A consumer waiting on a queue.Queue fed by one slow reader thread (planted: an I/O-like wait).

A reader thread "fetches" records one at a time (4 ms of latency each, modelled by a sleep: a network or disk
read) into a small queue; the inference loop takes one record per step from the queue and runs an fp16 MLP on
it (about a millisecond). The loop spends most of each step blocked in Queue.get: a wait, neither CPU work nor
contention. Fixed: eight reader threads keep several reads in flight, so records are ready ahead of time.
"""
import queue
import threading
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "wait"
LATENCY_S = 0.004


def start_readers(pool, n_readers, stop):
    q = queue.Queue(maxsize=2 * n_readers)

    def reader(k):
        i = k
        while not stop.is_set():
            time.sleep(LATENCY_S)  # the read's latency
            record = pool[i % len(pool)]
            i += n_readers
            while not stop.is_set():
                try:
                    q.put(record, timeout=0.1)
                    break
                except queue.Full:
                    pass

    for k in range(n_readers):
        threading.Thread(target=reader, args=(k,), name=f"reader-{k}", daemon=True).start()
    return q


def main():
    args = parse(__doc__, steps=40, window=20)
    torch = need_cuda("numpy")
    import numpy as np
    nn = torch.nn

    torch.manual_seed(0)
    layers = [nn.Linear(256, 4096), nn.GELU()]
    for _ in range(6):
        layers += [nn.Linear(4096, 4096), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(4096, 16)).to("cuda", torch.float16).eval()
    pool = [np.random.default_rng(k).standard_normal((2048, 256)).astype(np.float16) for k in range(16)]
    stop = threading.Event()

    @torch.no_grad()
    def infer(q):
        record = q.get()
        x = torch.from_numpy(record).to("cuda")
        return model(x).argmax(dim=-1).cpu()

    try:
        if args.ab:
            q_slow, q_fast = start_readers(pool, 1, stop), start_readers(pool, 8, stop)
            ab(torch, lambda i: infer(q_slow), lambda i: infer(q_fast), args.ab, args.window)
            return
        q = start_readers(pool, 8 if args.fixed else 1, stop)
        t0 = time.perf_counter()
        for i in range(args.steps):
            infer(q)
            if i == 0:
                t_first = time.perf_counter()
        torch.cuda.synchronize()
        report("io_wait", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)
    finally:
        stop.set()


if __name__ == "__main__":
    main()
