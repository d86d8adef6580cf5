"""Tensor-parallel text generation over 2 GPUs where rank 1 also streams the responses, in a pure-Python loop.

Each step takes a batch of 16 requests, runs the newest 256 tokens of each through 8 tensor-parallel MLP blocks
(the first matrix split by columns, the second by rows, one all_reduce per block: Megatron style) and picks the
next token of every request with a vocabulary-parallel head (the two halves' best logits compared through an
all_gather). Rank 1 is the "output rank": before it launches the step's work it streams the batch to the clients,
re-detokenizing each request's last 512 tokens and scanning them for stop tokens and repeated trigrams in a
plain Python loop (postprocess_batch). That is a third of a step of host time that only rank 1 spends, before its
first all_reduce: rank 0 runs its first block and then waits inside NCCL for rank 1 in every step.
Fix: vectorise the postprocessing (the same checks as tensor operations over the [batch, 512] history) and
detokenize incrementally (only the new token of each request), so both ranks reach their all_reduces together.
"""
import random

from _mg_harness import Dist, ab, parse, run_steps

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # Dist() says what is missing and exits 77
    torch = F = None

CAUSE = "straggler"
STRAGGLER_RANK = 1
WHAT_STRAGGLER_DOES = ("pure-Python host work before its collectives: re-detokenizes every request's last 512 "
                       "tokens and scans them for stop tokens and repeated trigrams in a Python loop "
                       "(postprocess_batch), about a third of a step")
HOT_FUNCTIONS = ["postprocess_batch"]
FIX = ("Vectorise rank 1's per-token postprocessing (tensor operations, incremental detokenization) or take it off "
       "the step, so that both ranks reach each all_reduce at the same time.")
FIX_WORDS = ["vectori", "balance", "evenly", "host work", "host-side", "cpu work", "python", "postprocess",
             "off the critical path", "incremental"]

OUTPUT_RANK = 1
SIZES = {  # batch, tokens per request per step, history scanned by the postprocessing, hidden, ffn, blocks, vocab
    "gpu": dict(batch=16, chunk=256, ctx=512, hidden=4096, ffn=16384, blocks=8, vocab=32000),
    "smoke": dict(batch=8, chunk=16, ctx=256, hidden=64, ffn=256, blocks=2, vocab=512),
}
STOP_IDS = (2, 13, 29, 31)  # end-of-text, "\n\n", "###", "</s>" in the toy vocabulary
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def build_vocab(n):
    """A byte-level-BPE-looking vocabulary: pieces of 1-8 letters, most of them starting with a space mark."""
    rng = random.Random(1234)
    vocab = []
    for _ in range(n):
        word = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8)))
        vocab.append(("\u0120" + word) if rng.random() < 0.6 else word)
    return vocab


def postprocess_batch(rows, vocab, stop_ids):
    """Rank 1's streaming pass over the batch, one token at a time: the detokenized text of each request's window,
    where the first stop token is, and how many distinct trigrams repeat (a no-repeat-ngram check)."""
    out = []
    for row in rows:
        pieces = []
        seen = {}
        stop_at = -1
        repeats = 0
        p2 = p1 = -1
        for j, t in enumerate(row):
            piece = vocab[t]
            if piece.startswith("\u0120"):
                piece = " " + piece[1:]
            pieces.append(piece)
            if stop_at < 0 and t in stop_ids:
                stop_at = j
            if j >= 2:
                key = (p2, p1, t)
                c = seen.get(key, 0)
                if c == 1:
                    repeats += 1
                seen[key] = c + 1
            p2, p1 = p1, t
        text = "".join(pieces)
        out.append((len(text), stop_at, repeats))
    return out


class VectorPostprocess:
    """The fix: the same three answers as tensor operations over the history, the text built incrementally."""

    def __init__(self, vocab, stop_ids):
        self.vocab = vocab
        self.piece_len = torch.tensor([len(p) for p in vocab], dtype=torch.int64)
        self.stop_ids = torch.tensor(stop_ids, dtype=torch.int64)
        self.n = len(vocab)

    def __call__(self, history, streams):
        lengths = self.piece_len[history].sum(1)
        is_stop = torch.isin(history, self.stop_ids)
        first = is_stop.int().argmax(1)
        stop_at = torch.where(is_stop.any(1), first, torch.full_like(first, -1))
        codes = (history[:, :-2] * self.n + history[:, 1:-1]) * self.n + history[:, 2:]
        codes, _ = codes.sort(1)
        same = codes[:, 1:] == codes[:, :-1]
        run_start = same & torch.cat([torch.zeros_like(same[:, :1]), ~same[:, :-1]], 1)
        repeats = run_start.sum(1)
        for stream, t in zip(streams, history[:, -1].tolist()):  # incremental: only the newest piece
            piece = self.vocab[t]
            stream.append((" " + piece[1:]) if piece.startswith("\u0120") else piece)
        return list(zip(lengths.tolist(), stop_at.tolist(), repeats.tolist()))


class TPModel:
    """Embedding (replicated), tensor-parallel MLP blocks, vocabulary-parallel greedy head."""

    def __init__(self, d, s, dtype):
        self.d, self.s = d, s
        dev, h, tp = d.device, s["hidden"], d.world
        fs, vs = s["ffn"] // tp, s["vocab"] // tp
        g = torch.Generator(device=dev)
        g.manual_seed(0)  # replicated parameters: the same on every rank
        self.embed = (torch.randn(s["vocab"], h, generator=g, device=dev) * 0.5).to(dtype)
        self.ln = [(torch.ones(h, device=dev, dtype=dtype), torch.zeros(h, device=dev, dtype=dtype))
                   for _ in range(s["blocks"])]
        self.ln_f = (torch.ones(h, device=dev, dtype=dtype), torch.zeros(h, device=dev, dtype=dtype))
        g.manual_seed(1000 + d.rank)  # this rank's shards
        self.w_in = [(torch.randn(h, fs, generator=g, device=dev) / h ** 0.5).to(dtype) for _ in range(s["blocks"])]
        self.w_out = [(torch.randn(fs, h, generator=g, device=dev) / s["ffn"] ** 0.5).to(dtype)
                      for _ in range(s["blocks"])]
        self.w_head = (torch.randn(h, vs, generator=g, device=dev) / h ** 0.5).to(dtype)
        self.vocab_offset = d.rank * vs

    def block(self, x, k):
        h = F.layer_norm(x, (x.shape[-1],), *self.ln[k])
        h = F.gelu(h @ self.w_in[k], approximate="tanh")
        y = h @ self.w_out[k]  # this rank's partial sum of the block's output
        self.d.dist.all_reduce(y)
        return x + y

    def next_tokens(self, ids):
        b, n = ids.shape
        x = self.embed[ids.reshape(-1)]
        for k in range(len(self.w_in)):
            x = self.block(x, k)
        last = F.layer_norm(x.view(b, n, -1)[:, -1], (x.shape[-1],), *self.ln_f)
        best, idx = (last @ self.w_head).float().max(1)
        mine = torch.stack([best, (idx + self.vocab_offset).float()], 1)
        parts = [torch.empty_like(mine) for _ in range(self.d.world)]
        self.d.dist.all_gather(parts, mine)
        both = torch.stack(parts)  # [rank, batch, (logit, id)]
        winner = both[:, :, 0].argmax(0)
        return both[winner, torch.arange(b, device=ids.device), 1].long()


def main():
    args = parse(__doc__, steps=700, window=100, smoke_steps=6, smoke_window=3)
    d = Dist(args.smoke)
    s = SIZES["smoke" if args.smoke else "gpu"]
    dtype = torch.float32 if args.smoke else torch.bfloat16
    model = TPModel(d, s, dtype)
    vocab = build_vocab(s["vocab"])
    stop_ids = frozenset(STOP_IDS)
    vector_post = VectorPostprocess(vocab, STOP_IDS)
    g = torch.Generator()
    g.manual_seed(7)
    state = {"history": torch.randint(0, s["vocab"], (s["batch"], s["ctx"]), generator=g)}  # same on every rank
    streams = [[] for _ in range(s["batch"])]
    if args.smoke and d.rank == OUTPUT_RANK:
        h = state["history"]
        assert postprocess_batch(h.tolist(), vocab, stop_ids) == vector_post(h, [[] for _ in streams]), \
            "the vectorised postprocessing disagrees with the loop"

    def step(fixed):
        def run(i):
            history = state["history"]
            if d.rank == OUTPUT_RANK:  # stream the batch to the clients before the next tokens are computed
                if fixed:
                    vector_post(history, streams)
                else:
                    postprocess_batch(history.tolist(), vocab, stop_ids)
            ids = history[:, -s["chunk"]:].to(d.device)
            with torch.no_grad():
                new = model.next_tokens(ids)
            state["history"] = torch.cat([history[:, 1:], new.cpu()[:, None]], 1)
        return run

    if args.ab:
        ab("straggler_rank", step(False), step(True), args.ab, args.window, d.sync, dist=d)
    else:
        run_steps("straggler_rank", "fixed" if args.fix else "broken", step(args.fix), args.steps, d.sync, d.rank)
    d.close()


if __name__ == "__main__":
    main()
