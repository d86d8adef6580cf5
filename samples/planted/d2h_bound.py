"""d2h_bound: a big device-to-host copy of the output every step into pageable memory."""
from _common import need_cuda, run

torch = need_cuda()
x = torch.randn(64 * 1024 * 1024, device="cuda")  # 256 MB on the device
w = torch.randn(1024, 1024, device="cuda")


def step(i):
    y = x * 1.5  # one cheap kernel
    out = y.cpu()  # 256 MB D2H into pageable memory: the planted bottleneck
    return out


pinned_out = torch.empty(64 * 1024 * 1024, pin_memory=True)


def step_fixed(i):
    """The fix: the result is copied into a pinned host buffer allocated once (no staging through a driver
    buffer)."""
    y = x * 1.5
    pinned_out.copy_(y)
    return pinned_out


print("planting d2h_bound: 256 MB D2H copy (.cpu()) per step after one element-wise kernel")
run("d2h_bound", step, steps=20, fixed=step_fixed)
