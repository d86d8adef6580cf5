"""An MLP scorer that calls torch.cuda.empty_cache() after every request (planted: memory_alloc).

Clearing PyTorch's caching allocator "to keep memory low" hands every cached block back to the driver
(cudaFree, which synchronizes the device), so the next request cudaMallocs all its activations again.
Fixed: no empty_cache(); the caching allocator reuses the blocks from the previous request.
Competing cause: each request is ~20 small kernels, so launches cost as much as the GPU work; the A/B also
measures that fix alone (the model captured in one CUDA graph per request size, empty_cache() still called).
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
        graphed = graphed_requests(torch, model, sizes)
        ab(torch, lambda i: handle_request(sizes[i % 3], True), lambda i: handle_request(sizes[i % 3], False),
           args.ab, args.window, alternatives={"launch_bound": lambda i: graphed(sizes[i % 3])})
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        handle_request(sizes[i % 3], release=not args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("empty_cache", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


def graphed_requests(torch, model, sizes):
    """handle_request with its launches collapsed: one CUDA graph per request size, empty_cache() kept."""
    graphs = {}
    with torch.no_grad():
        for bs in sizes:
            x = torch.randn(bs, 4096, device="cuda", dtype=torch.float16)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(x).float().softmax(dim=-1).topk(5, dim=-1)  # warm-up on a side stream, as capture requires
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                top = model(x).float().softmax(dim=-1).topk(5, dim=-1)
            graphs[bs] = (g, x, top)

    def run(bs):
        g, x, top = graphs[bs]
        x.normal_()
        g.replay()
        torch.cuda.empty_cache()
        return top
    return run


if __name__ == "__main__":
    main()
