"""Tensor-parallel prefill over 2 GPUs, split into two micro-batches for overlap, with blocking all_reduces.

A prefill server runs each batch of 8192 tokens through 16 tensor-parallel MLP blocks (2048 -> 4096 -> 2048,
column/row split across the 2 GPUs, one all_reduce of the block's partial output). To hide the all_reduces it
splits the batch into two micro-batches, A and B, and interleaves them block by block ("two-batch overlap"): while
A's all_reduce is in flight, B's compute for the same block could run, since it does not depend on it. But the
all_reduces are called the ordinary way, dist.all_reduce(y): the compute stream waits for each one to finish
before it starts the next kernel, so on every GPU the NCCL kernels and the matmuls run strictly one after the
other and each all_reduce (16 MB of bf16, a good third of a block's time) is exposed.
Fix: launch each micro-batch's all_reduce with async_op=True, run the other micro-batch's block meanwhile, and
wait on the handle (work.wait()) only right before that micro-batch's residual add needs the sum.
"""
from _mg_harness import Dist, ab, parse, run_steps

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # Dist() says what is missing and exits 77
    torch = F = None

CAUSE = "no_overlap"
STRAGGLER_RANK = None
WHAT_STRAGGLER_DOES = None
FIX = ("Launch each all_reduce with async_op=True (or on a side stream) and overlap it with the other micro-batch's "
       "compute, waiting on the handle only when the result is needed.")
FIX_WORDS = ["async_op", "async", "overlap", "side stream", "separate stream", "non-blocking", "nonblocking"]

SIZES = {  # tokens per micro-batch, hidden, ffn (whole model), blocks, classes of the head
    "gpu": dict(tokens=4096, seq=256, hidden=2048, ffn=4096, blocks=16, classes=16, vocab=32000),
    "smoke": dict(tokens=256, seq=32, hidden=128, ffn=256, blocks=3, classes=4, vocab=1000),
}


class TPStack:
    def __init__(self, d, s, dtype):
        self.d = d
        dev, h, tp = d.device, s["hidden"], d.world
        fs = s["ffn"] // tp
        g = torch.Generator(device=dev)
        g.manual_seed(0)  # replicated: embedding, norms, head
        self.embed = (torch.randn(s["vocab"], h, generator=g, device=dev) * 0.5).to(dtype)
        self.ln = [(torch.ones(h, device=dev, dtype=dtype), torch.zeros(h, device=dev, dtype=dtype))
                   for _ in range(s["blocks"])]
        self.head = (torch.randn(h, s["classes"], generator=g, device=dev) / h ** 0.5).to(dtype)
        g.manual_seed(1000 + d.rank)  # this rank's shards
        self.w_in = [(torch.randn(h, fs, generator=g, device=dev) / h ** 0.5).to(dtype) for _ in range(s["blocks"])]
        self.w_out = [(torch.randn(fs, h, generator=g, device=dev) / s["ffn"] ** 0.5).to(dtype)
                      for _ in range(s["blocks"])]
        self.seq = s["seq"]

    def partial(self, x, k):
        """This rank's share of block k's output for micro-batch x (to be summed over the ranks)."""
        h = F.layer_norm(x, (x.shape[-1],), *self.ln[k])
        h = F.gelu(h @ self.w_in[k], approximate="tanh")
        return h @ self.w_out[k]

    def forward_blocking(self, xa, xb):
        for k in range(len(self.w_in)):
            ya = self.partial(xa, k)
            self.d.dist.all_reduce(ya)  # the compute stream waits here for the NCCL kernel
            xa = xa + ya
            yb = self.partial(xb, k)  # ...although this does not need A's sum
            self.d.dist.all_reduce(yb)
            xb = xb + yb
        return xa, xb

    def forward_overlapped(self, xa, xb):
        yb = wb = None
        for k in range(len(self.w_in)):
            ya = self.partial(xa, k)
            wa = self.d.dist.all_reduce(ya, async_op=True)  # A's sum travels while...
            if wb is not None:
                wb.wait()
                xb = xb + yb
            yb = self.partial(xb, k)  # ...B's block runs
            wb = self.d.dist.all_reduce(yb, async_op=True)
            wa.wait()  # A's next block needs its sum
            xa = xa + ya
        wb.wait()
        return xa, xb + yb

    def classify(self, ids, overlapped):
        n = ids.shape[0] // 2
        xa, xb = self.embed[ids[:n]], self.embed[ids[n:]]
        xa, xb = (self.forward_overlapped if overlapped else self.forward_blocking)(xa, xb)
        x = torch.cat([xa, xb]).view(-1, self.seq, xa.shape[-1])
        return (x[:, -1] @ self.head).argmax(-1)


def main():
    args = parse(__doc__, steps=1200, window=150, smoke_steps=6, smoke_window=3)
    d = Dist(args.smoke)
    s = SIZES["smoke" if args.smoke else "gpu"]
    dtype = torch.float32 if args.smoke else torch.bfloat16
    model = TPStack(d, s, dtype)
    g = torch.Generator()
    g.manual_seed(7)
    batches = [torch.randint(0, s["vocab"], (2 * s["tokens"],), generator=g) for _ in range(4)]
    if args.smoke:
        with torch.no_grad():
            a = model.classify(batches[0].to(d.device), False)
            b = model.classify(batches[0].to(d.device), True)
        assert torch.equal(a, b), (a, b)

    def step(overlapped):
        def run(i):
            ids = batches[i % len(batches)].to(d.device)
            with torch.no_grad():
                model.classify(ids, overlapped).cpu()
        return run

    if args.ab:
        ab("no_overlap", step(False), step(True), args.ab, args.window, d.sync, dist=d)
    else:
        run_steps("no_overlap", "fixed" if args.fix else "broken", step(args.fix), args.steps, d.sync, d.rank)
    d.close()


if __name__ == "__main__":
    main()
