"""An MLP scorer that calls torch.cuda.empty_cache() after every request (planted: memory_alloc).

Clearing PyTorch's caching allocator "to keep memory low" hands every cached block back to the driver
(cudaFree, which synchronizes the device), so the next request cudaMallocs all its activations again.
Fixed: no empty_cache(); the caching allocator reuses the blocks from the previous request.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "memory_alloc"


def main():
    args = parse(__doc__, steps=40)
    torch = need_cuda()
    nn = torch.nn

    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(4096, 4096), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(4096, 1000)).to("cuda", torch.float16).eval()

    @torch.no_grad()
    def handle_request(batch_size, release):
        x = torch.randn(batch_size, 4096, device="cuda", dtype=torch.float16)
        probs = model(x).float().softmax(dim=-1)
        top = probs.topk(5, dim=-1)
        if release:
            torch.cuda.empty_cache()  # "free GPU memory between requests"
        return top

    sizes = [64, 96, 128]  # small requests of varying size, as a latency-bound server sees them
    if args.ab:
        ab(torch, lambda i: handle_request(sizes[i % 3], True), lambda i: handle_request(sizes[i % 3], False),
           args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        handle_request(sizes[i % 3], release=not args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("empty_cache", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
