"""pcie_saturation: big pinned host-to-device copies run at the link's peak: the bytes, not the copy method,
are the limit."""
from _common import need_cuda, run

torch = need_cuda()
host = torch.randn(128 * 1024 * 1024).pin_memory()  # 512 MB pinned
w = torch.randn(1024, 1024, device="cuda")


def step(i):
    x = host.to("cuda", non_blocking=True)
    y = x[: 1024 * 1024].view(1024, 1024) @ w
    torch.cuda.synchronize()
    return y


host_half = host.half().pin_memory()


def step_fixed(i):
    """The fix: fewer bytes over the link, fp16 on the host (256 MB), widened on the GPU."""
    x = host_half.to("cuda", non_blocking=True).float()
    y = x[: 1024 * 1024].view(1024, 1024) @ w
    torch.cuda.synchronize()
    return y


print("planting pcie_saturation: 512 MB pinned H2D copy per step, one small matmul")
run("pcie_saturation", step, steps=20, fixed=step_fixed)
