"""A serving loop that sleeps 5 ms after each request to pace itself (planted: a voluntary wait).

Each request runs a small CNN and returns the predicted classes; then the loop sleeps 5 ms ("poll the request
queue every 5 ms"). The thread is idle by choice, not starved of CPU: the honest diagnosis is a wait, not
contention. Fixed: no sleep (block on the request source instead of polling).
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "wait"


def main():
    args = parse(__doc__, steps=40)
    torch = need_cuda()
    nn = torch.nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, 10)).cuda().eval()
    images = torch.randn(64, 3, 64, 64, device="cuda")

    @torch.no_grad()
    def serve_one(poll):
        preds = model(images).argmax(dim=1).cpu()
        if poll:
            time.sleep(0.005)  # poll interval before looking for the next request
        return preds

    if args.ab:
        ab(torch, lambda i: serve_one(True), lambda i: serve_one(False), args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        serve_one(poll=not args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("sleep_wait", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
