"""A real PyTorch loop of marked steps, to watch on the live page (docs/live.md): a pinned 256 MB host-to-device
copy, six 4096^2 fp16 matmuls and .item() per step; every 100th step sleeps 30 ms inside the step (a planted slow
step). Runs for SECONDS (default 12):

    INFERSCOPE_LIVE_TOKEN=false iscope-run --live 127.0.0.1:18790 -o live.iscope -- python3 samples/live/torch_steps.py 12
    python3 samples/live/check_page.py http://127.0.0.1:18790 600 OUTDIR      # from another shell, meanwhile
"""
import sys, time, torch, inferscope_py as isc
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 12
x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
h = torch.empty(64 * 1024 * 1024, dtype=torch.float32).pin_memory()
d = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device="cuda")
t_end, n = time.time() + secs, 0
while time.time() < t_end:
    with isc.scope("step"):
        d.copy_(h, non_blocking=True)
        y = x
        for _ in range(6):
            y = y @ x
        y[0, 0].item()
        if n % 100 == 99:
            time.sleep(0.03)
    n += 1
print("steps", n, flush=True)
