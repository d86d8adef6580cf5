"""Tensor-parallel passage encoder over 2 GPUs whose every block all_reduces 64 MB of fp32 for a few matmuls.

A re-ranking service scores a batch of 32 passages x 256 tokens against a query. Its encoder keeps the residual
stream in fp32 (for score stability) and is a deep stack of narrow bottleneck MLP blocks (2048 -> 1024 -> 2048),
split across the 2 GPUs Megatron style: each rank computes half of the bottleneck, folds half of the residual into
its partial output (one addmm) and the ranks sum their partial outputs with one all_reduce per block. The
all_reduced tensor is the whole fp32 residual stream, [8192, 2048] = 64 MB (about 0.2 ms over NVLink), while each
rank's compute is about 35 GFLOP per block (under 0.1 ms in TF32 on an H100): the step is mostly NCCL moving bytes,
with the GPUs' compute units idle, and every block's input depends on the previous all_reduce, so there is nothing
to overlap the transfers with.
Fix: communicate less: all_reduce the blocks' partial outputs in bf16 (half the bytes; the fp32 residual is kept
and the bf16 sum is added to it), measured by the A/B.
"""
from _mg_harness import Dist, ab, parse, run_steps

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # Dist() says what is missing and exits 77
    torch = F = None

CAUSE = "communication_bound"
STRAGGLER_RANK = None
WHAT_STRAGGLER_DOES = None
FIX = ("Reduce the bytes each block communicates: all_reduce the partial outputs in bf16 instead of fp32 (or fewer, "
       "smaller collectives, e.g. only what the next block needs), keeping the fp32 residual locally.")
FIX_WORDS = ["bf16", "bfloat16", "fp16", "half precision", "lower precision", "compress", "quantiz",
             "fewer collectives", "bucket", "communication volume", "fewer bytes"]

SIZES = {  # passages, tokens per passage, hidden, bottleneck width (whole model), blocks, vocabulary
    "gpu": dict(batch=32, seq=256, hidden=2048, ffn=1024, blocks=12, vocab=32000),
    "smoke": dict(batch=4, seq=64, hidden=256, ffn=64, blocks=3, vocab=1000),
}


class Encoder:
    def __init__(self, d, s, comm_dtype):
        self.d, self.s, self.comm = d, s, comm_dtype
        dev, h, tp = d.device, s["hidden"], d.world
        fs = s["ffn"] // tp
        g = torch.Generator(device=dev)
        g.manual_seed(0)  # replicated: embedding and query
        self.embed = torch.randn(s["vocab"], h, generator=g, device=dev)
        self.query = torch.randn(h, generator=g, device=dev) / h ** 0.5
        g.manual_seed(1000 + d.rank)  # this rank's shards
        self.w_in = [torch.randn(h, fs, generator=g, device=dev) / h ** 0.5 for _ in range(s["blocks"])]
        self.w_out = [torch.randn(fs, h, generator=g, device=dev) / (s["ffn"] * s["blocks"]) ** 0.5
                      for _ in range(s["blocks"])]
        self.w_out_low = [w.to(torch.bfloat16) for w in self.w_out]
        self.residual_share = 1.0 / tp  # each rank folds this much of the residual into its partial output

    def block_fp32(self, x, k):
        a = F.gelu(x @ self.w_in[k], approximate="tanh")
        y = torch.addmm(x, a, self.w_out[k], beta=self.residual_share)  # x/tp + a @ w_out: fp32 [tokens, hidden]
        self.d.dist.all_reduce(y)  # 64 MB of fp32 per block
        return y

    def block_low(self, x, k):
        a = F.gelu(x @ self.w_in[k], approximate="tanh")
        y = (a.to(torch.bfloat16) @ self.w_out_low[k]).to(self.comm)  # the partial output, in bf16
        self.d.dist.all_reduce(y)  # half the bytes
        return x + y  # the residual stays fp32

    def scores(self, ids, fixed):
        b, n = ids.shape
        x = self.embed[ids.reshape(-1)]
        block = self.block_low if fixed else self.block_fp32
        for k in range(len(self.w_in)):
            x = block(x, k)
        pooled = x.view(b, n, -1).mean(1)
        return pooled @ self.query


def main():
    args = parse(__doc__, steps=2000, window=200, smoke_steps=6, smoke_window=3)
    d = Dist(args.smoke)
    s = SIZES["smoke" if args.smoke else "gpu"]
    # gloo (the smoke test) has no bf16 all_reduce; fp16 halves the bytes the same way there.
    comm = torch.float16 if args.smoke else torch.bfloat16
    torch.set_float32_matmul_precision("high")  # TF32 matmuls for the fp32 encoder
    model = Encoder(d, s, comm)
    g = torch.Generator()
    g.manual_seed(7)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g) for _ in range(4)]
    if args.smoke:
        with torch.no_grad():
            a = model.scores(batches[0].to(d.device), False)
            b = model.scores(batches[0].to(d.device), True)
        assert torch.allclose(a, b, rtol=0.05, atol=0.05), (a, b)

    def step(fixed):
        def run(i):
            ids = batches[i % len(batches)].to(d.device)
            with torch.no_grad():
                model.scores(ids, fixed).cpu()
        return run

    if args.ab:
        ab("comm_bound", step(False), step(True), args.ab, args.window, d.sync, dist=d)
    else:
        run_steps("comm_bound", "fixed" if args.fix else "broken", step(args.fix), args.steps, d.sync, d.rank)
    d.close()


if __name__ == "__main__":
    main()
