"""Video frames copied to the GPU from pageable NumPy memory every step (planted: h2d_bound).

Each step uploads a 126 MB float32 batch of frames (32 x 3 x 512 x 640) with `torch.from_numpy(...).to("cuda")`
and runs a cheap downscale + convolution on it. Copies from pageable memory are staged through a driver
buffer and block the host. Marks each step with inferscope_py.scope when that binding is importable.
Fixed: the frames live in a pinned (page-locked) host buffer and are copied with non_blocking=True.
"""
import contextlib
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "h2d_bound"

try:
    from inferscope_py import scope
except Exception:
    def scope(name):
        return contextlib.nullcontext()


def main():
    args = parse(__doc__, steps=25)
    torch = need_cuda("numpy")
    import numpy as np
    F = torch.nn.functional

    torch.manual_seed(0)
    frames = np.random.default_rng(0).random((32, 3, 512, 640), dtype=np.float32)
    pinned = torch.from_numpy(frames).pin_memory() if (args.fixed or args.ab) else None
    conv = torch.nn.Conv2d(3, 16, 5, padding=2).cuda().eval()

    @torch.no_grad()
    def process(fixed):
        with scope("step"):
            if fixed:
                x = pinned.to("cuda", non_blocking=True)
            else:
                x = torch.from_numpy(frames).to("cuda")
            small = F.interpolate(x, scale_factor=0.25, mode="bilinear", align_corners=False)
            return conv(small).amax(dim=(2, 3))

    if args.ab:
        ab(torch, lambda i: process(False), lambda i: process(True), args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        feats = process(args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("pageable_h2d", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
