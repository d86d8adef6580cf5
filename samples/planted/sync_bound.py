"""sync_bound: .item() after every few ops forces a host-device synchronization; the GPU drains each time."""
from _common import need_cuda, run

torch = need_cuda()
w = torch.randn(512, 512, device="cuda")
x0 = torch.randn(512, 512, device="cuda")


def step(i):
    x = x0
    total = 0.0
    for _ in range(60):
        x = torch.tanh(x @ w)
        total += x[0, 0].item()  # a sync per iteration: the planted bottleneck
        if total > 1e9:  # data-dependent host control flow, as real code has
            total = 0.0


print("planting sync_bound: 60 x (512x512 matmul + .item()) per step")
run("sync_bound", step)
