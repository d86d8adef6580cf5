"""h2d_bound: a big pageable host-to-device copy every step (not pinned, synchronous)."""
from _common import need_cuda, run

torch = need_cuda()
host = torch.randn(64 * 1024 * 1024)  # 256 MB of fp32 in pageable memory
w = torch.randn(1024, 1024, device="cuda")


def step(i):
    x = host.to("cuda")  # pageable: staged through a driver buffer
    y = x[: 1024 * 1024].view(1024, 1024) @ w
    torch.cuda.synchronize()
    return y


pinned = host.pin_memory()


def step_fixed(i):
    """The fix: the input lives in pinned memory and is copied with non_blocking=True."""
    x = pinned.to("cuda", non_blocking=True)
    y = x[: 1024 * 1024].view(1024, 1024) @ w
    torch.cuda.synchronize()
    return y


print("planting h2d_bound: 256 MB pageable H2D copy per step, one small matmul")
run("h2d_bound", step, steps=20, fixed=step_fixed)
