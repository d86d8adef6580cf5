"""launch_bound: hundreds of tiny element-wise kernels per step; the host's launch rate limits the GPU."""
from _common import need_cuda, run

torch = need_cuda()
x0 = torch.randn(256, device="cuda")


def step(i):
    x = x0
    for _ in range(400):
        x = x * 1.0001 + 0.0001
    torch.cuda.synchronize()


graph = None


def step_fixed(i):
    """The fix: the 800 launches captured once in a CUDA graph and replayed, one launch per step."""
    global graph
    if graph is None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x = x0
            for _ in range(400):
                x = x * 1.0001 + 0.0001
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            x = x0
            for _ in range(400):
                x = x * 1.0001 + 0.0001
    graph.replay()
    torch.cuda.synchronize()


print("planting launch_bound: 800 tiny kernels (256-element mul/add) per step, one sync at the end")
run("launch_bound", step, fixed=step_fixed)
