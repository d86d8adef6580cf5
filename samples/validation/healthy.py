"""A well-fed transformer encoder (no planted bottleneck: gpu_bound or no alarm).

Four fp16 nn.TransformerEncoder layers (d_model 1024) over a batch of 32 sequences of 512 tokens: big kernels,
no host synchronization inside the loop, one read-back at the end. Marks each step with inferscope_py.scope
when that binding is importable (the only annotation in this suite besides pageable_h2d.py).
"""
import contextlib
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "gpu_bound"
HAS_FIX = False

try:
    from inferscope_py import scope
except Exception:  # not built here, or another interpreter
    def scope(name):
        return contextlib.nullcontext()


def main():
    args = parse(__doc__, steps=30)
    torch = need_cuda()
    nn = torch.nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to("cuda", torch.float16)
    encoder.eval()
    tokens = torch.randn(32, 512, 1024, device="cuda", dtype=torch.float16)

    @torch.no_grad()
    def encode(i):
        with scope("step"):
            return encoder(tokens).mean(dim=1)

    if args.ab:
        ab(torch, encode, encode, args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        pooled = encode(i)
        if i == 0:
            t_first = time.perf_counter()
    result = pooled.float().norm().item()
    t_end = time.perf_counter()
    report("healthy", "no fix", t0, t_first, t_end, args.steps)
    print(f"healthy: checksum {result:.3f}")


if __name__ == "__main__":
    main()
