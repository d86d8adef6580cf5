"""A GPT-2 scorer that copies the full logits back to the host every step (planted: d2h_bound).

A 2-layer random GPT-2 (transformers, fp16) scores 8 sequences of 256 tokens; the loop then does
`logits.float().cpu()` (262 MB) and picks each sequence's next token on the host.
Fixed: the argmax runs on the GPU and only the 8 token ids are copied back.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "d2h_bound"


def main():
    args = parse(__doc__, steps=20)
    torch = need_cuda("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=512, n_head=8, vocab_size=32000, n_positions=512)
    model = GPT2LMHeadModel(cfg).to("cuda", torch.float16).eval()
    ids = torch.randint(0, cfg.vocab_size, (8, 256), device="cuda")

    @torch.no_grad()
    def next_tokens(fixed):
        logits = model(input_ids=ids, use_cache=False).logits
        if fixed:
            return logits[:, -1, :].argmax(dim=-1).cpu()
        host_logits = logits.float().cpu()
        return host_logits[:, -1, :].argmax(dim=-1)

    if args.ab:
        ab(torch, lambda i: next_tokens(False), lambda i: next_tokens(True), args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        next_tokens(args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("d2h_results", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
