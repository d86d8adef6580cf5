"""Batch-1 GPT-2 forward passes in a plain loop (planted: launch_bound).

A randomly initialised 6-layer GPT-2 (transformers, fp16) scores one 64-token request per step and returns the
next token id to the caller. Each forward issues a few hundred small kernels from Python; at batch 1 the GPU
finishes each long before the host has launched the next. The first iteration is the warm-up (context, cuBLAS).
Fixed: the forward is captured once in a CUDA graph on a static input buffer and replayed every step.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "launch_bound"
SEQ = 64


def main():
    args = parse(__doc__, steps=40)
    torch = need_cuda("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=32000, n_positions=256)
    model = GPT2LMHeadModel(cfg).to("cuda", torch.float16).eval()
    requests = [torch.randint(0, cfg.vocab_size, (1, SEQ), device="cuda") for _ in range(8)]

    @torch.no_grad()
    def score(ids):
        logits = model(input_ids=ids, use_cache=False).logits
        return logits[0, -1].argmax().item()

    graph = None
    if args.fixed or args.ab:
        static_ids = requests[0].clone()
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(input_ids=static_ids, use_cache=False)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_logits = model(input_ids=static_ids, use_cache=False).logits

    def score_fixed(ids):
        static_ids.copy_(ids)
        graph.replay()
        return static_logits[0, -1].argmax().item()

    if args.ab:
        ab(torch, lambda i: score(requests[i % 8]), lambda i: score_fixed(requests[i % 8]), args.ab, args.window)
        return
    run = score_fixed if args.fixed else score
    t0 = time.perf_counter()
    for i in range(args.steps):
        token = run(requests[i % len(requests)])
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("hf_forward", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
