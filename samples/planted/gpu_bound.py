"""gpu_bound (healthy): big fp16 matmuls keep the GPU busy; the host only launches and syncs once."""
from _common import need_cuda, run

HAS_FIX = False  # a busy GPU has no single fix to measure: cheaper math changes the program

torch = need_cuda()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)


def step(i):
    c = a
    for _ in range(8):
        c = torch.matmul(c, b)
        c = c * 0.01
    torch.cuda.synchronize()


print("planting gpu_bound: 8 x 8192^3 fp16 matmuls per step, one sync")
run("gpu_bound", step)
