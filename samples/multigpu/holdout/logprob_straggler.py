"""Tensor-parallel prompt scoring over 2 GPUs where rank 0 alone recomputes every token's logprob in fp32.

A perplexity / reward-filtering service scores batches of 8 documents x 128 tokens: it runs them through 10
tensor-parallel SwiGLU blocks (4096 -> 2 x 14336 -> 4096, gate/up split by columns, down by rows, one all_reduce
per block) and returns the log-probability the model gives each document's next tokens. The LM head is
vocabulary-parallel (each rank holds half of the 32000 columns, in bf16), but the logprobs are computed only on
rank 0, the "output rank", which keeps its own fp32 copy of the whole head "for exact logprobs": after the forward
it multiplies all 1024 hidden states by the full [4096, 32000] fp32 head (an fp32 GEMM, no TF32: about 270 GFLOP
on the FP32 units) and takes a full-vocabulary log_softmax (exact_token_logprobs). Rank 1 has nothing to do
meanwhile; it starts the next batch at once and waits inside its first all_reduce until rank 0 gets there.
Fix: compute the logprobs vocabulary-parallel on both ranks: each rank's bf16 head shard gives a local logsumexp
and the target token's logit where it owns it, and one small all_gather of those [2, 1024] statistics combines them
(sharded_token_logprobs); both ranks do half of a cheaper head, at the same time.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the parent folder's harness
from _mg_harness import Dist, ab, parse, run_steps  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # Dist() says what is missing and exits 77
    torch = F = None

CAUSE = "straggler"
STRAGGLER_RANK = 0
WHAT_STRAGGLER_DOES = ("extra GPU work that only rank 0 runs after the forward: recomputes the logits of all 1024 "
                       "scored tokens with its own full-vocabulary fp32 copy of the LM head (an fp32 GEMM "
                       "[1024 x 4096] x [4096 x 32000] without TF32) and a full log_softmax "
                       "(exact_token_logprobs), roughly half of a step; rank 1 waits in its next all_reduce")
HOT_FUNCTIONS = ["exact_token_logprobs"]
FIX = ("Compute the token logprobs vocabulary-parallel on both ranks (each rank's bf16 head shard gives a local "
       "logsumexp and the target's logit, combined with one small all_gather), so rank 0 no longer runs the whole "
       "head alone in fp32.")
FIX_WORDS = ["balance", "evenly", "distribute", "spread", "shard", "every rank", "all ranks",
             "both ranks", "other rank", "imbalance", "vocab-parallel", "vocabulary-parallel", "tf32", "bf16",
             "lower precision"]

OUTPUT_RANK = 0
SIZES = {  # documents, tokens per document, hidden, ffn (whole model), blocks, vocabulary
    "gpu": dict(batch=8, seq=128, hidden=4096, ffn=14336, blocks=10, vocab=32000),
    "smoke": dict(batch=2, seq=16, hidden=64, ffn=128, blocks=2, vocab=256),
}


def head_shard(s, r, world, device, dtype):
    """Rank r's columns of the LM head (any rank can rebuild any shard: the output rank builds all of them)."""
    g = torch.Generator(device=device)
    g.manual_seed(2000 + r)
    h = s["hidden"]
    return (torch.randn(h, s["vocab"] // world, generator=g, device=device) / h ** 0.5).to(dtype)


class TPScorer:
    def __init__(self, d, s, dtype):
        self.d, self.s = d, s
        dev, h, tp = d.device, s["hidden"], d.world
        fs = s["ffn"] // tp
        g = torch.Generator(device=dev)
        g.manual_seed(0)  # replicated: embedding and norms
        self.embed = (torch.randn(s["vocab"], h, generator=g, device=dev) * 0.5).to(dtype)
        self.norms = [torch.ones(h, device=dev, dtype=dtype) for _ in range(s["blocks"] + 1)]
        g.manual_seed(1000 + d.rank)  # this rank's shards of the blocks
        self.w_gate_up = [(torch.randn(h, 2 * fs, generator=g, device=dev) / h ** 0.5).to(dtype)
                          for _ in range(s["blocks"])]
        self.w_down = [(torch.randn(fs, h, generator=g, device=dev) / s["ffn"] ** 0.5).to(dtype)
                       for _ in range(s["blocks"])]
        self.vshard = s["vocab"] // tp
        self.vocab_offset = d.rank * self.vshard
        self.w_head = head_shard(s, d.rank, tp, dev, dtype)
        self.w_head_fp32 = None
        if d.rank == OUTPUT_RANK:  # the whole head, upcast once at load time
            self.w_head_fp32 = torch.cat([head_shard(s, r, tp, dev, dtype).float() for r in range(tp)], 1)

    @staticmethod
    def rms_norm(x, w, eps=1e-6):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    def block(self, x, k):
        h = self.rms_norm(x, self.norms[k])
        gate, up = (h @ self.w_gate_up[k]).chunk(2, dim=-1)
        y = (F.silu(gate) * up) @ self.w_down[k]  # this rank's partial sum
        self.d.dist.all_reduce(y)
        return x + y

    def hidden_states(self, ids):
        x = self.embed[ids.reshape(-1)]
        for k in range(len(self.w_down)):
            x = self.block(x, k)
        return self.rms_norm(x, self.norms[-1])  # [tokens, hidden]

    def exact_token_logprobs(self, hn, targets):
        """Rank 0 alone: full-vocabulary fp32 logits and log_softmax, then each target's entry."""
        logits = hn.float() @ self.w_head_fp32  # [tokens, vocab] fp32, on the FP32 units
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, targets[:, None])[:, 0]

    def sharded_token_logprobs(self, hn, targets):
        """Every rank: its head shard's logsumexp and the targets it owns, combined through one small all_gather."""
        logits = (hn @ self.w_head).float()  # [tokens, vocab / tp]
        lse = torch.logsumexp(logits, dim=-1)
        local = targets - self.vocab_offset
        mine = (local >= 0) & (local < self.vshard)
        tgt = logits.gather(1, local.clamp(0, self.vshard - 1)[:, None])[:, 0]
        tgt = torch.where(mine, tgt, torch.full_like(tgt, float("-inf")))
        stats = torch.stack([lse, tgt])  # [2, tokens]
        parts = [torch.empty_like(stats) for _ in range(self.d.world)]
        self.d.dist.all_gather(parts, stats)
        both = torch.stack(parts)  # [rank, 2, tokens]
        return both[:, 1].max(0).values - torch.logsumexp(both[:, 0], dim=0)

    def score(self, ids, fixed):
        """Sum of the logprobs of each document's tokens 1..n given the tokens before (rank 0 returns them)."""
        b = ids.shape[0]
        hn = self.hidden_states(ids[:, :-1])
        targets = ids[:, 1:].reshape(-1)
        if fixed:
            lp = self.sharded_token_logprobs(hn, targets)
        elif self.d.rank == OUTPUT_RANK:
            lp = self.exact_token_logprobs(hn, targets)
        else:
            return None
        return lp.view(b, -1).sum(1) if self.d.rank == OUTPUT_RANK else None


def main():
    args = parse(__doc__, steps=800, window=100, smoke_steps=6, smoke_window=3)
    d = Dist(args.smoke)
    s = SIZES["smoke" if args.smoke else "gpu"]
    dtype = torch.float32 if args.smoke else torch.bfloat16
    torch.set_float32_matmul_precision("highest")  # exact fp32 (PyTorch's default): no TF32
    model = TPScorer(d, s, dtype)
    g = torch.Generator()
    g.manual_seed(7)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1), generator=g) for _ in range(4)]
    if args.smoke:
        with torch.no_grad():
            a = model.score(batches[0].to(d.device), False)
            b = model.score(batches[0].to(d.device), True)
        if d.rank == OUTPUT_RANK:
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-3), (a, b)

    def step(fixed):
        def run(i):
            ids = batches[i % len(batches)].to(d.device)
            with torch.no_grad():
                scores = model.score(ids, fixed)
            if scores is not None:
                scores.cpu()  # back to the client
        return run

    if args.ab:
        ab("logprob_straggler", step(False), step(True), args.ab, args.window, d.sync, dist=d)
    else:
        run_steps("logprob_straggler", "fixed" if args.fix else "broken", step(args.fix), args.steps, d.sync,
                  d.rank)
    d.close()


if __name__ == "__main__":
    main()
