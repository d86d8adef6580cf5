"""Ranking model over 2 GPUs with row-wise sharded embedding tables, whose pooled features are all_reduced one by one.

A recommendation ranker scores 8192 candidates per request batch. Each candidate has 240 sparse features (4 ids
each, pooled by sum); their embedding tables (10000 rows each, 32, 64 or 128 wide) are sharded row-wise over the
2 GPUs, so each rank looks up the ids that fall in its half of the rows (table-batched: one embedding_bag per
width) and holds a partial pooled vector for every feature; the two partials must be summed. The sharded module
returns them as a dict keyed by feature (as a KeyedTensor's to_dict() would) and the output step all_reduces each
feature's [8192, D] tensor separately (sync_per_feature): 240 all_reduces of 1-4 MB per batch, each too small to
reach NVLink's bandwidth and each paying NCCL's launch and latency; the GPUs spend most of the step in (and
between) these collectives before the dense tower (17920 -> 1024 -> 256 -> 1, bf16) runs.
Fix: coalesce: all_reduce the pooled features of all tables as one flat [8192, 17920] buffer (one collective of
590 MB at full bandwidth) and split it afterwards (sync_flat).
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

CAUSE = "communication_bound"
STRAGGLER_RANK = None
WHAT_STRAGGLER_DOES = None
FIX = ("Coalesce the 240 per-feature all_reduces into one all_reduce of a single flat buffer holding every "
       "feature's pooled partial sums, then split it.")
FIX_WORDS = ["coalesc", "fewer", "larger", "bucket", "batch the", "batching", "single all_reduce",
             "one all_reduce", "flat buffer", "flatten", "fuse", "concatenat"]

SIZES = {  # candidates, sparse features, rows per table, ids per feature, widths, dense tower
    "gpu": dict(batch=8192, features=240, rows=10000, bag=4, dims=(32, 64, 128), tower=(1024, 256)),
    "smoke": dict(batch=16, features=12, rows=50, bag=3, dims=(4, 8, 16), tower=(32, 8)),
}


class RowWiseShardedEmbeddings:
    """This rank's rows of every table, stored table-batched: one [tables * local_rows, D] weight per width."""

    def __init__(self, d, s):
        self.d = d
        dev, tp, nf = d.device, d.world, s["features"]
        self.rows = s["rows"]
        self.local_rows = s["rows"] // tp
        self.lo = d.rank * self.local_rows
        per = nf // len(s["dims"])
        # feature j has width dims[j // per]; features are ordered width by width
        self.groups = [(dim, list(range(i * per, (i + 1) * per))) for i, dim in enumerate(s["dims"])]
        self.names = [f"feat_{j:03d}" for _, js in self.groups for j in js]
        g = torch.Generator(device=dev)
        g.manual_seed(3000 + d.rank)
        self.weights = [torch.randn(len(js) * self.local_rows, dim, generator=g, device=dev) * 0.05
                        for dim, js in self.groups]
        self.table_base = [torch.arange(len(js), device=dev)[None, :, None] * self.local_rows for _, js in self.groups]

    def lookup(self, ids):
        """ids: [batch, features, bag] global row ids. Returns this rank's partial pooled features, [batch, sum D]."""
        b = ids.shape[0]
        out, start = [], 0
        for (dim, js), w, base in zip(self.groups, self.weights, self.table_base):
            gid = ids[:, start:start + len(js)]
            start += len(js)
            local = gid - self.lo
            mine = (local >= 0) & (local < self.local_rows)
            flat = (base + local.clamp(0, self.local_rows - 1)).reshape(-1, gid.shape[-1])
            pooled = F.embedding_bag(flat, w, per_sample_weights=mine.to(w.dtype).reshape(flat.shape), mode="sum")
            out.append(pooled.view(b, len(js) * dim))
        return torch.cat(out, 1)

    def to_dict(self, pooled):
        """The per-feature view (KeyedTensor.to_dict()): name -> [batch, D] slice of the pooled buffer."""
        feats, col = {}, 0
        names = iter(self.names)
        for dim, js in self.groups:
            for _ in js:
                feats[next(names)] = pooled[:, col:col + dim]
                col += dim
        return feats

    def sync_per_feature(self, pooled):
        """Sum the ranks' partials feature by feature: one all_reduce per feature."""
        feats = self.to_dict(pooled)
        for name, t in feats.items():
            t = t.contiguous()
            self.d.dist.all_reduce(t)
            feats[name] = t
        return torch.cat([feats[n] for n in self.names], 1)

    def sync_flat(self, pooled):
        """The fix: one all_reduce of the whole flat buffer."""
        self.d.dist.all_reduce(pooled)
        return pooled


class Ranker:
    def __init__(self, d, s, dtype):
        self.d, self.dtype = d, dtype
        self.emb = RowWiseShardedEmbeddings(d, s)
        dev = d.device
        width = sum(dim * len(js) for dim, js in self.emb.groups)
        dims = [width, *s["tower"], 1]
        g = torch.Generator(device=dev)
        g.manual_seed(0)  # the dense tower is replicated
        self.tower = [((torch.randn(i, o, generator=g, device=dev) / i ** 0.5).to(dtype),
                       torch.zeros(o, device=dev, dtype=dtype)) for i, o in zip(dims[:-1], dims[1:])]

    def scores(self, ids, fixed):
        partial = self.emb.lookup(ids)
        x = self.emb.sync_flat(partial) if fixed else self.emb.sync_per_feature(partial)
        x = x.to(self.dtype)
        for k, (w, bias) in enumerate(self.tower):
            x = torch.addmm(bias, x, w)
            if k < len(self.tower) - 1:
                x = F.relu(x)
        return torch.sigmoid(x.float()[:, 0])


def main():
    args = parse(__doc__, steps=600, window=60, smoke_steps=6, smoke_window=3)
    d = Dist(args.smoke)
    s = SIZES["smoke" if args.smoke else "gpu"]
    dtype = torch.float32 if args.smoke else torch.bfloat16
    model = Ranker(d, s, dtype)
    g = torch.Generator()
    g.manual_seed(7)  # the same request batches on every rank
    batches = [torch.randint(0, s["rows"], (s["batch"], s["features"], s["bag"]), generator=g).to(d.device)
               for _ in range(4)]
    if args.smoke:
        with torch.no_grad():
            a = model.scores(batches[0], False)
            b = model.scores(batches[0], True)
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a, b)

    def step(fixed):
        def run(i):
            with torch.no_grad():
                model.scores(batches[i % len(batches)], fixed).cpu()
        return run

    if args.ab:
        ab("rowwise_embeddings", step(False), step(True), args.ab, args.window, d.sync, dist=d)
    else:
        run_steps("rowwise_embeddings", "fixed" if args.fix else "broken", step(args.fix), args.steps, d.sync,
                  d.rank)
    d.close()


if __name__ == "__main__":
    main()
