#!/usr/bin/env python3
"""Records small torch.profiler (Kineto) traces of three planted programs, for tests/fixtures/.

Run on the GPU machine (no network needed: every model is randomly initialised):

    python3 scripts/record-kineto-traces.py --out /tmp/kineto-traces \
        [--iscope-analyze build/tools/iscope-analyze/iscope-analyze [--iscope-run build/tools/iscope-run/iscope-run]]

Writes <out>/<name>.json.gz for each program, recorded with schedule(wait=1, warmup=1, active=5),
with_stack=True and CPU + CUDA activities, exported by prof.export_chrome_trace in on_trace_ready:

    kineto_real_sync_bound    GPT-2-shaped decoder (transformers GPT2Config when installed, else plain torch),
                              greedy decode without a KV cache, .item() on every token, then ~1 ms of host
                              post-processing (detokenising, stop checks): the GPU drains during each sync and
                              stays idle until the next token is launched
    kineto_real_launch_bound  a small MLP (8 x Linear(64, 64) + ReLU, batch 8) run 20 times per step:
                              hundreds of tiny kernels, the host launch path is the limit
    kineto_real_gpu_bound     bf16 8192 x 8192 matmuls, 8 per step: the GPU is busy

Each file should stay under ~2 MB; the script prints sizes, steps and kernel counts, and warns when one is
larger. With --iscope-analyze it also prints the findings digest of each trace. Exit status 77 when there is
no torch or no CUDA device (nothing recorded).
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

WAIT, WARMUP, ACTIVE = 1, 1, 5
MAX_BYTES = 2 * 1024 * 1024

try:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
except ImportError:  # the script must explain itself on a machine without torch
    torch = None


# ---- the programs: each returns (setup() -> state, step(state)) ----------------------------------------------

def gpt2_like_decoder(device):
    """A 2-layer GPT-2-shaped model (width 2048) with random weights; transformers when it is installed.
    No KV cache: each token re-runs the whole sequence, so the GPU work of a token (a few ms) outlasts its
    launches and the GPU is still busy when .item() waits."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        GPT2LMHeadModel = None
    if GPT2LMHeadModel is not None:
        cfg = GPT2Config(n_layer=2, n_head=16, n_embd=2048, n_positions=256, vocab_size=2048,
                         bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(cfg).to(device).eval()

        def forward(ids, past):
            seq = ids if past is None else torch.cat([past, ids], dim=1)
            return model(input_ids=seq, use_cache=False).logits, seq
        return forward, cfg.vocab_size

    vocab, width = 2048, 2048
    emb = torch.nn.Embedding(vocab, width).to(device)
    blocks = torch.nn.Sequential(*[torch.nn.TransformerEncoderLayer(width, 16, 4 * width, batch_first=True)
                                   for _ in range(2)]).to(device).eval()
    head = torch.nn.Linear(width, vocab).to(device)

    def forward(ids, past):  # no KV cache: re-run the growing sequence, as a naive decoder would
        seq = ids if past is None else torch.cat([past, ids], dim=1)
        return head(blocks(emb(seq))), seq
    return forward, vocab


def sync_bound(device):
    forward, vocab = gpt2_like_decoder(device)
    prompt = torch.randint(0, vocab, (16, 64), device=device)

    def step(_):
        ids, past, text = prompt, None, []
        for _ in range(6):
            logits, past = forward(ids, past)
            ids = logits[:, -1].argmax(-1, keepdim=True)
            token = ids[0, 0].item()  # one host-device synchronization per token
            text.append(postprocess(token))
        return text
    return (lambda: None), step


def postprocess(token):
    """About 1 ms of host work per token, as detokenising and stop checks would take."""
    acc = 0
    for i in range(20000):
        acc = (acc + i * token) % 1000003
    return chr(32 + acc % 90)


def launch_bound(device):
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    mlp = torch.nn.Sequential(*layers).to(device).eval()
    x = torch.randn(8, 64, device=device)

    def step(_):
        y = x
        for _ in range(20):
            y = mlp(y)
        return y
    return (lambda: None), step


def gpu_bound(device):
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def step(_):
        c = a
        for _ in range(8):
            c = torch.matmul(c, b) * 1e-3  # scaled so that values stay finite
        torch.cuda.synchronize()  # the step ends when its GPU work does
        return c
    return (lambda: None), step


PROGRAMS = {
    "kineto_real_sync_bound": sync_bound,
    "kineto_real_launch_bound": launch_bound,
    "kineto_real_gpu_bound": gpu_bound,
}


# ---- recording -------------------------------------------------------------------------------------------------

def record(name, make, device, out_dir):
    setup, step = make(device)
    state = setup()
    with torch.inference_mode():
        for _ in range(3):  # untraced warm-up: CUDA context, cuBLAS handles, allocator
            step(state)
        torch.cuda.synchronize()

        tmp = tempfile.mkdtemp(prefix="kineto-")
        plain = os.path.join(tmp, name + ".json")

        def on_ready(prof):
            prof.export_chrome_trace(plain)

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
                     on_trace_ready=on_ready, with_stack=True) as prof:
            for _ in range(WAIT + WARMUP + ACTIVE):
                step(state)
                prof.step()
        torch.cuda.synchronize()
    if not os.path.exists(plain):
        raise SystemExit(f"{name}: the profiler wrote no trace (on_trace_ready was not called)")
    target = os.path.join(out_dir, name + ".json.gz")
    with open(plain, "rb") as src, gzip.open(target, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def run_plain(name, device):
    """The same program without torch.profiler (warm-up, then the profiled number of steps), for iscope-run: the
    comparison of the two recorders' verdicts on one program."""
    setup, step = PROGRAMS[name](device)
    state = setup()
    with torch.inference_mode():
        for _ in range(3 + WAIT + WARMUP + ACTIVE):
            step(state)
        torch.cuda.synchronize()


def own_dump_findings(name, iscope_run, iscope_analyze, out_dir):
    """Runs `name` under iscope-run (no torch.profiler) and returns iscope-analyze's findings digest of its dump."""
    dump = os.path.join(out_dir, name + ".iscope")
    r = subprocess.run([iscope_run, "-q", "-o", dump, "--", sys.executable, os.path.abspath(__file__), "--plain", name],
                       capture_output=True, text=True)
    if r.returncode or not os.path.exists(dump):
        return f"(iscope-run exited {r.returncode}: {r.stderr.strip()[-300:]})"
    r = subprocess.run([iscope_analyze, dump, "--findings"], capture_output=True, text=True)
    os.remove(dump)
    return r.stdout.rstrip() or f"(no findings; iscope-analyze exited {r.returncode})"


def describe(path):
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    events = trace.get("traceEvents", [])
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    size = os.path.getsize(path)
    print(f"{path}: {size / 1e6:.2f} MB, {len(events)} events, {steps} ProfilerStep ranges, {kernels} kernels")
    if size > MAX_BYTES:
        print(f"  warning: larger than {MAX_BYTES / 1e6:.1f} MB: too big for tests/fixtures as it is", file=sys.stderr)
    return size <= MAX_BYTES


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="folder for <name>.json.gz (required)")
    ap.add_argument("--only", choices=sorted(PROGRAMS), action="append", help="record only this program (repeatable)")
    ap.add_argument("--iscope-analyze", help="path of iscope-analyze: print each trace's findings digest")
    ap.add_argument("--iscope-run", help="path of iscope-run: also record each program without torch.profiler "
                    "under iscope-run and print its own dump's findings digest beside the trace's (needs --iscope-analyze)")
    ap.add_argument("--plain", choices=sorted(PROGRAMS), help=argparse.SUPPRESS)  # the program alone, for --iscope-run
    args = ap.parse_args()
    if not args.out and not args.plain:
        ap.error("--out is required")
    if torch is None:
        print("record-kineto-traces: torch is not installed: nothing recorded", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("record-kineto-traces: no CUDA device: nothing recorded", file=sys.stderr)
        return 77
    if args.plain:
        torch.manual_seed(0)
        run_plain(args.plain, torch.device("cuda"))
        return 0
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    device = torch.device("cuda")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    small = True
    for name in args.only or PROGRAMS:
        t0 = time.time()
        path = record(name, PROGRAMS[name], device, args.out)
        print(f"{name}: recorded in {time.time() - t0:.1f} s")
        small &= describe(path)
        if args.iscope_analyze:
            r = subprocess.run([args.iscope_analyze, path, "--findings"], capture_output=True, text=True)
            print(r.stdout.rstrip() or "(no findings)")
            if r.returncode:
                print(f"  iscope-analyze exited {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
            if args.iscope_run:
                print("  own dump (iscope-run, no torch.profiler):")
                print("  " + own_dump_findings(name, args.iscope_run, args.iscope_analyze, args.out).replace("\n", "\n  "))
    return 0 if small else 1


if __name__ == "__main__":
    sys.exit(main())
