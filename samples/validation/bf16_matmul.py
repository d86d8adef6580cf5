"""A chain of large bf16 matrix products (planted: gpu_bound; there is no fix).

Each step multiplies an 8192x8192 activation through four 8192x8192 weights (about 4.4 TFLOP) and reads one
number back. The GPU is busy nearly the whole step; cheaper math would change the program, not fix it, so
--fixed runs the same step and the suite reports the primary finding only.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "gpu_bound"
HAS_FIX = False
N = 8192


def main():
    args = parse(__doc__, steps=30)
    torch = need_cuda()

    torch.manual_seed(0)
    x = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    weights = [torch.randn(N, N, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    scale = N ** -0.5

    def forward(i):
        y = x
        for w in weights:
            y = torch.matmul(y, w).mul_(scale)
        return y[0, 0].item()

    if args.ab:
        ab(torch, forward, forward, args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        forward(i)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("bf16_matmul", "fixed (same)" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
