"""d2h_bound: a big device-to-host copy of the output every step into pageable memory."""
from _common import need_cuda, run

torch = need_cuda()
x = torch.randn(64 * 1024 * 1024, device="cuda")  # 256 MB on the device
w = torch.randn(1024, 1024, device="cuda")


def step(i):
    y = x * 1.5  # one cheap kernel
    out = y.cpu()  # 256 MB D2H into pageable memory: the planted bottleneck
    return out


print("planting d2h_bound: 256 MB D2H copy (.cpu()) per step after one element-wise kernel")
run("d2h_bound", step, steps=20)
