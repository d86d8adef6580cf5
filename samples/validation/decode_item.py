"""Greedy decoding that checks for EOS with `.item()` after every token (planted: sync_bound).

A small randomly initialised GPT-2 (transformers, no download) generates 32 tokens for a batch of prompts,
recomputing the whole sequence each token (no KV cache, as naive generation loops do). After every token the
loop reads the first sequence's token and the "all finished?" flag back with `.item()`: two host-device
synchronizations per token, each followed by the host's Python work before the next forward reaches the GPU.
Fixed: the EOS flags are kept on the GPU and read back once every 8 tokens; the tokens are read at the end.
Competing cause: each token is ~90 kernel launches from eager Python; the A/B also measures that fix alone
(each sequence length's forward captured in a CUDA graph, the per-token .item() calls kept).
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "sync_bound"
BATCH, PROMPT, NEW_TOKENS, CHECK_EVERY = 32, 96, 32, 8


def main():
    args = parse(__doc__, steps=12)
    torch = need_cuda("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_embd=1536, n_head=16, vocab_size=32000, n_positions=512)
    model = GPT2LMHeadModel(cfg).to("cuda", torch.float16).eval()
    eos = cfg.vocab_size - 1
    prompts = torch.randint(0, eos, (BATCH, PROMPT), device="cuda")

    @torch.no_grad()
    def generate(ids):
        streamed = []
        for _ in range(NEW_TOKENS):
            logits = model(input_ids=ids, use_cache=False).logits
            next_ids = logits[:, -1, :].argmax(dim=-1)
            ids = torch.cat([ids, next_ids[:, None]], dim=1)
            streamed.append(next_ids[0].item())  # stream the first sequence token by token
            if (next_ids == eos).all().item():
                break
        return ids, streamed

    @torch.no_grad()
    def generate_fixed(ids):
        finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        for t in range(NEW_TOKENS):
            logits = model(input_ids=ids, use_cache=False).logits
            next_ids = logits[:, -1, :].argmax(dim=-1)
            ids = torch.cat([ids, next_ids[:, None]], dim=1)
            finished |= next_ids == eos
            if (t + 1) % CHECK_EVERY == 0 and finished.all().item():
                break
        return ids, ids[0, PROMPT:].tolist()

    if args.ab:
        graphed = graphed_generate(torch, model, prompts, eos)
        ab(torch, lambda i: generate(prompts), lambda i: generate_fixed(prompts), args.ab, args.window, warmup=1,
           alternatives={"launch_bound": lambda i: graphed()})
        return
    run = generate_fixed if args.fixed else generate
    t0 = time.perf_counter()
    for i in range(args.steps):
        out, text = run(prompts)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("decode_item", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


def graphed_generate(torch, model, prompts, eos):
    """generate() with the same .item() calls, each token's forward replayed from a CUDA graph captured for its
    sequence length (shapes grow by one token per step, so one graph per length)."""
    graphs = []
    with torch.no_grad():
        for t in range(NEW_TOKENS):
            ids = torch.cat([prompts, prompts[:, :t]], dim=1).contiguous()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(input_ids=ids, use_cache=False)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                next_ids = model(input_ids=ids, use_cache=False).logits[:, -1, :].argmax(dim=-1)
            graphs.append((g, ids, next_ids))

    @torch.no_grad()
    def run():
        ids = prompts
        streamed = []
        for g, static_ids, next_ids in graphs:
            static_ids.copy_(ids)
            g.replay()
            ids = torch.cat([ids, next_ids[:, None]], dim=1)
            streamed.append(next_ids[0].item())
            if (next_ids == eos).all().item():
                break
        return ids, streamed
    return run


if __name__ == "__main__":
    main()
