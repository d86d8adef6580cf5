"""sync_bound: .item() after every matmul forces a host-device synchronization; the GPU drains each time.

One kernel per synchronization, long enough (a 1024x1024 fp32 matmul, ~40 us on an H100) to cover the launch
of the copy behind .item(): the GPU's only idle time is after each synchronization, while the host comes back
and launches the next matmul. (With several short kernels between the syncs, as this program had before, a
slow host made the gaps between those kernels, i.e. launch overhead, the larger cost: H100 machine,
2026-11-22.)
"""
from _common import need_cuda, run

torch = need_cuda()
w = torch.randn(1024, 1024, device="cuda")
x = torch.randn(1024, 1024, device="cuda")


def step(i):
    total = 0.0
    for _ in range(40):
        y = x @ w
        total += y[0, 0].item()  # a sync per matmul: the planted bottleneck
        if total > 1e30:  # data-dependent host control flow, as real code has
            total = 0.0


def step_fixed(i):
    """The fix: the running total stays on the GPU and is read once, at the end of the step."""
    total = torch.zeros((), device="cuda")
    for _ in range(40):
        y = x @ w
        total += y[0, 0]
    return total.item()


print("planting sync_bound: 40 x (1024x1024 matmul + .item()) per step")
run("sync_bound", step, fixed=step_fixed)
