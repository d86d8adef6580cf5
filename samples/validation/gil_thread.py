"""An inference loop sharing the interpreter with a busy pure-Python "metrics" thread (planted: cpu_contention).

The background thread aggregates statistics in a tight Python loop and never blocks, so it holds the GIL
except when the interpreter forces a switch (every 5 ms). The inference thread drops the GIL whenever it
waits on the GPU (`.cpu()` at the end of each request) and then waits up to a switch interval to get it back.
Fixed: the metrics thread does its work in short bursts and sleeps between them (here: it is idle).
"""
import threading
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "cpu_contention"


def metrics_worker(active, stop):
    histogram = {}
    while not stop.is_set():
        if not active.wait(timeout=0.1):
            continue
        for k in range(20000):  # pure Python: holds the GIL
            b = (k * 2654435761) % 64
            histogram[b] = histogram.get(b, 0) + 1


def main():
    args = parse(__doc__, steps=40)
    torch = need_cuda()
    nn = torch.nn

    torch.manual_seed(0)
    blocks = []
    for _ in range(8):
        blocks += [nn.Linear(1024, 1024), nn.ReLU()]
    model = nn.Sequential(*blocks).cuda().eval()
    x = torch.randn(256, 1024, device="cuda")

    @torch.no_grad()
    def classify(batch):
        return model(batch).argmax(dim=-1).cpu()

    active, stop = threading.Event(), threading.Event()
    if not args.fixed or args.ab:
        active.set()
    worker = threading.Thread(target=metrics_worker, args=(active, stop), name="metrics", daemon=True)
    worker.start()

    def broken(i):
        active.set()
        return classify(x)

    def fixed(i):
        active.clear()
        return classify(x)

    try:
        if args.ab:
            ab(torch, broken, fixed, args.ab, args.window)
            return
        t0 = time.perf_counter()
        for i in range(args.steps):
            classify(x)
            if i == 0:
                t_first = time.perf_counter()
        torch.cuda.synchronize()
        report("gil_thread", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)
    finally:
        stop.set()
        active.set()
        worker.join()


if __name__ == "__main__":
    main()
