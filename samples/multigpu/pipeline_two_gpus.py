"""Two-stage pipeline-parallel model in one process, cuda:0 then cuda:1, run one micro-batch at a time via the host.

A model too big for one GPU is cut in two: stage 1 (the embedding and 4 MLP blocks, 4096 -> 16384 -> 4096) lives
on cuda:0, stage 2 (4 more blocks and the vocabulary head) on cuda:1. Each step takes 64 sequences of 256 tokens
as 8 micro-batches of 8. For every micro-batch the loop runs stage 1, moves the activations (2048 x 4096 bf16,
16 MB) to cuda:1 with h.cpu().to("cuda:1"), a detour through pageable host memory (a synchronous device-to-host
copy, then a synchronous host-to-device copy, both staged by the driver), runs stage 2 and takes the micro-batch's
predictions back with .cpu() before it starts the next micro-batch. So the micro-batches go strictly one after
another: at any moment one GPU computes (or both wait for a PCIe copy) while the other is idle.
Fix: copy the activations straight from GPU to GPU (h.to("cuda:1", non_blocking=True): a peer copy over NVLink)
and keep the predictions on cuda:1 until the end of the step, so the host queues all micro-batches at once and
cuda:0 computes micro-batch i+1 while cuda:1 computes micro-batch i (micro-batch pipelining).
"""
from _mg_harness import ab, cuda_sync, need_gpus, need_torch, parse, run_steps

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # need_torch() says what is missing and exits 77
    torch = F = None

CAUSE = "pipeline_p2p"
STRAGGLER_RANK = None
WHAT_STRAGGLER_DOES = None
FIX = ("Copy the activations directly between the GPUs (peer-to-peer over NVLink, non_blocking) instead of through "
       "pageable host memory, and pipeline the micro-batches so that both GPUs compute at the same time.")
FIX_WORDS = ["peer", "p2p", "nvlink", "device-to-device", "direct copy", "non_blocking", "pipelin", "micro-batch",
             "microbatch", "overlap"]

SIZES = {  # micro-batches per step, sequences per micro-batch, tokens per sequence, hidden, ffn, blocks per stage
    "gpu": dict(micro=8, seqs=8, seq=256, hidden=4096, ffn=16384, blocks=4, vocab=32000),
    "smoke": dict(micro=4, seqs=2, seq=16, hidden=64, ffn=256, blocks=2, vocab=500),
}


class Stage:
    def __init__(self, device, s, dtype, seed, first, last):
        self.device = device
        self.seq = s["seq"]
        h = s["hidden"]
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        self.embed = (torch.randn(s["vocab"], h, generator=g, device=device) * 0.5).to(dtype) if first else None
        self.ln = [(torch.ones(h, device=device, dtype=dtype), torch.zeros(h, device=device, dtype=dtype))
                   for _ in range(s["blocks"])]
        self.w_in = [(torch.randn(h, s["ffn"], generator=g, device=device) / h ** 0.5).to(dtype)
                     for _ in range(s["blocks"])]
        self.w_out = [(torch.randn(s["ffn"], h, generator=g, device=device) / s["ffn"] ** 0.5).to(dtype)
                      for _ in range(s["blocks"])]
        self.head = (torch.randn(h, s["vocab"], generator=g, device=device) / h ** 0.5).to(dtype) if last else None

    def __call__(self, x):
        """Stage 1: token ids [seqs, seq] -> hidden [seqs * seq, hidden]. Stage 2: hidden -> next token per sequence."""
        if self.embed is not None:
            x = self.embed[x.reshape(-1)]
        for ln, w_in, w_out in zip(self.ln, self.w_in, self.w_out):
            h = F.layer_norm(x, (x.shape[-1],), *ln)
            x = x + F.gelu(h @ w_in, approximate="tanh") @ w_out
        if self.head is not None:
            return (x.view(-1, self.seq, x.shape[-1])[:, -1] @ self.head).argmax(-1)
        return x


def run_sequential(stage1, stage2, ids):
    """The broken loop: one micro-batch at a time, activations through host memory, predictions fetched each time."""
    preds = []
    for mb in ids:
        h = stage1(mb)
        h = h.cpu().to(stage2.device)  # device -> pageable host -> device
        preds.append(stage2(h).cpu())  # waits for cuda:1 before the next micro-batch starts on cuda:0
    return torch.cat(preds)


def run_pipelined(stage1, stage2, ids):
    """The fix: queue every micro-batch; peer copies; one fetch at the end. While cuda:1 runs stage 2 of micro-batch
    i, cuda:0 runs stage 1 of micro-batch i+1 (PyTorch orders a cross-device copy after both devices' queued work)."""
    preds = []
    for mb in ids:
        h = stage1(mb)
        h = h.to(stage2.device, non_blocking=True)  # cuda:0 -> cuda:1 directly
        preds.append(stage2(h))
    return torch.cat(preds).cpu()


def main():
    args = parse(__doc__, steps=100, window=12, smoke_steps=6, smoke_window=3)
    need_torch()
    s = SIZES["smoke" if args.smoke else "gpu"]
    if args.smoke:
        torch.set_num_threads(1)
        dev0 = dev1 = torch.device("cpu")  # two CPU "devices": the same logic, no overlap to gain
        dtype = torch.float32
    else:
        need_gpus(torch, 2)
        dev0, dev1 = torch.device("cuda", 0), torch.device("cuda", 1)
        dtype = torch.bfloat16
    stage1 = Stage(dev0, s, dtype, seed=1, first=True, last=False)
    stage2 = Stage(dev1, s, dtype, seed=2, first=False, last=True)
    sync = cuda_sync(torch, [dev0, dev1])
    g = torch.Generator()
    g.manual_seed(7)
    batches = [torch.randint(0, s["vocab"], (s["micro"], s["seqs"], s["seq"]), generator=g) for _ in range(4)]
    if args.smoke:
        with torch.no_grad():
            ids = batches[0].to(dev0)
            assert torch.equal(run_sequential(stage1, stage2, ids), run_pipelined(stage1, stage2, ids))

    def step(fixed):
        def run(i):
            ids = batches[i % len(batches)].to(dev0)
            with torch.no_grad():
                (run_pipelined if fixed else run_sequential)(stage1, stage2, ids)
        return run

    if args.ab:
        ab("pipeline_two_gpus", step(False), step(True), args.ab, args.window, sync)
    else:
        run_steps("pipeline_two_gpus", "fixed" if args.fix else "broken", step(args.fix), args.steps, sync)


if __name__ == "__main__":
    main()
