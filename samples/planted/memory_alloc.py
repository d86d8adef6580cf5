"""memory_alloc: the caching allocator is off, so every tensor is a cudaMalloc and every release a cudaFree
(which synchronizes the device); empty_cache() each step on top."""
import os

os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # before torch is imported

from _common import need_cuda, run  # noqa: E402

torch = need_cuda()
w = torch.randn(2048, 2048, device="cuda")


def step(i):
    for _ in range(8):
        x = torch.empty(4096, 4096, device="cuda")  # 64 MB: cudaMalloc
        x.normal_()
        y = x[:2048, :2048] @ w
        del x, y  # cudaFree
    torch.cuda.empty_cache()
    torch.cuda.synchronize()


x_buf = torch.empty(4096, 4096, device="cuda")
y_buf = torch.empty(2048, 2048, device="cuda")


def step_fixed(i):
    """The fix: the buffers are allocated once and reused (the allocator's cache cannot be switched back on inside
    one process, so this is the second suggestion, "allocate once and reuse"); no empty_cache()."""
    for _ in range(8):
        x_buf.normal_()
        torch.matmul(x_buf[:2048, :2048], w, out=y_buf)
    torch.cuda.synchronize()


print("planting memory_alloc: PYTORCH_NO_CUDA_MEMORY_CACHING=1, 8 x 64 MB allocations per step, empty_cache()")
run("memory_alloc", step, fixed=step_fixed)
