"""dataloader_bound: batch image classification fed by a DataLoader whose per-sample preprocessing runs in the main process.

What it does: an offline inference job. A `torch.utils.data.Dataset` produces 224x224 images the way an image
pipeline does, in NumPy: "decode" a 300x400 RGB uint8 image (synthesized from a per-sample seed, standing in for the
JPEG decoder), resize the short side to 256 with bilinear interpolation, center-crop 224, horizontal flip for odd
indices, scale to [0, 1], normalize with the ImageNet mean/std and transpose HWC -> CHW (float32), a few ms per
sample. A `torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=0)` batches it, and each batch goes
through a ResNet-18-style convolutional network (random weights, fp16, channels_last) on the GPU; the top-1 classes
are read back. 96 batches (3072 images).

Planted problem (cpu_bound): `num_workers=0`, so the main process decodes and augments all 32 samples of a batch
(~100 ms) before the GPU gets the batch, and the GPU (a few ms per batch) then waits for the next one.

Fix (--fixed): a constructor argument, no code change to the loop: `DataLoader(..., num_workers=8,
persistent_workers=True)`; 8 worker processes preprocess batches in parallel and ahead of the loop.

Own timers (last line, JSON): per batch, loop-to-loop (`step_ms_p50`, `step_ms_mean`), the time the loop waited for
the next batch (`data_wait_ms_mean`), `images_per_s`, `num_workers`.

Run: python3 dataloader_bound.py [--fixed] [--batches N] [--num-workers N] [--ab ROUNDS] [--window N] [--device cpu]
`--ab ROUNDS`: two DataLoaders over the same dataset (num_workers=0 and num_workers=8, persistent workers) are built
first; each window is one epoch of W batches from one of them (order flips every round); AB reports medians of
per-window median batch latency (the median steady step, as --try measures it; the per-window means, which
count each epoch's start, are printed beside). Exit 77 without torch/numpy/CUDA.
"""
import argparse
import json
import os
import statistics
import sys
import time

EXPECTED = "cpu_bound"
BOTTLENECK = ("DataLoader(num_workers=0): the main process decodes/resizes/normalizes every image of the batch in "
              "NumPy (~100 ms a batch) while the GPU waits")
FIX = "DataLoader(..., num_workers=8, persistent_workers=True): preprocess in worker processes, ahead of the GPU"
FIX_WORDS = ["num_workers", "dataloader", "worker processes", "prefetch"]

BATCH = 32
FIXED_WORKERS = 8
PROG = os.path.basename(sys.argv[0]) or "dataloader_bound.py"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help=f"num_workers={FIXED_WORKERS}")
    ap.add_argument("--num-workers", type=int, default=None, help="override num_workers")
    ap.add_argument("--batches", type=int, default=96, help="batches (default %(default)s; the first is warm-up)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS", help="in-process A/B of the two DataLoaders")
    ap.add_argument("--window", type=int, default=16, help="--ab: batches per window (one epoch)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tiny smoke run)")
    return ap.parse_args()


try:
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset
except ImportError as _e:
    np = torch = None
    Dataset = object
    _IMPORT_ERROR = _e
else:
    _IMPORT_ERROR = None

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def resize_bilinear(img, out_h, out_w):
    """HWC uint8 -> HWC float32, bilinear (align_corners=False), vectorized NumPy."""
    h, w, _ = img.shape
    ys = (np.arange(out_h, dtype=np.float32) + 0.5) * (h / out_h) - 0.5
    xs = (np.arange(out_w, dtype=np.float32) + 0.5) * (w / out_w) - 0.5
    ys, xs = np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)
    y0, x0 = np.floor(ys).astype(np.int64), np.floor(xs).astype(np.int64)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy = (ys - y0).astype(np.float32)[:, None, None]
    wx = (xs - x0).astype(np.float32)[None, :, None]
    f = img.astype(np.float32)
    top = f[y0][:, x0] * (1 - wx) + f[y0][:, x1] * wx
    bottom = f[y1][:, x0] * (1 - wx) + f[y1][:, x1] * wx
    return top * (1 - wy) + bottom * wy


class SyntheticImages(Dataset):
    def __init__(self, n, seed=0, size=(300, 400), crop=224, short_side=256):
        self.n, self.seed, self.size, self.crop, self.short = n, seed, size, crop, short_side
        self.mean = np.array(MEAN, dtype=np.float32)
        self.std = np.array(STD, dtype=np.float32)

    def __len__(self):
        return self.n

    def decode(self, i):
        rng = np.random.default_rng(self.seed + i)
        h, w = self.size
        base = rng.integers(0, 256, size=(h // 8, w // 8, 3), dtype=np.uint8)  # low-frequency content
        img = np.repeat(np.repeat(base, 8, axis=0), 8, axis=1)
        noise = rng.integers(0, 16, size=img.shape, dtype=np.uint8)
        return img + noise

    def __getitem__(self, i):
        img = self.decode(i)
        h, w, _ = img.shape
        scale = self.short / min(h, w)
        img = resize_bilinear(img, round(h * scale), round(w * scale))
        h, w, _ = img.shape
        top, left = (h - self.crop) // 2, (w - self.crop) // 2
        img = img[top:top + self.crop, left:left + self.crop]
        if i % 2:
            img = img[:, ::-1]
        img = (img / 255.0 - self.mean) / self.std
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1), dtype=np.float32)), i % 1000


def build_model(device, dtype, width=64):
    import torch.nn as nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = width
    for i, mult in enumerate((1, 2, 4, 8)):
        cout = width * mult
        layers += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    model = nn.Sequential(*layers).to(device=device, dtype=dtype).eval()
    return model.to(memory_format=torch.channels_last)


def make_loader(dataset, num_workers):
    return DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=num_workers,
                      persistent_workers=num_workers > 0)


def main():
    args = parse_args()
    if _IMPORT_ERROR is not None:
        print(f"{PROG}: {_IMPORT_ERROR.name} is not importable ({_IMPORT_ERROR}); nothing to run", flush=True)
        sys.exit(77)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device; nothing to run", flush=True)
        sys.exit(77)
    torch.manual_seed(0)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    model = build_model(device, torch.float16 if on_gpu else torch.float32, width=64 if on_gpu else 8)
    dtype = next(model.parameters()).dtype

    def infer(images):
        x = images.to(device, non_blocking=True).to(dtype=dtype, memory_format=torch.channels_last)
        return model(x).argmax(dim=1).tolist()

    print(f"{PROG}: torch {torch.__version__}, {device}, ResNet-18-style {dtype}, batch {BATCH}, "
          f"{os.cpu_count()} CPUs", flush=True)

    with torch.inference_mode():
        if args.ab:
            dataset = SyntheticImages(args.window * BATCH)
            loaders = {"broken": make_loader(dataset, 0), "fixed": make_loader(dataset, FIXED_WORKERS)}
            # Per window, the median of its batches' loop-to-loop times: the statistic --try and the report give
            # (the median steady step). Each window is a new epoch, so its first batches wait for the workers to
            # refill their queues; the window's mean counts that start, which a long epoch pays once: it is printed
            # beside (mean_*), not compared.
            window_ms = {"broken": [], "fixed": []}
            window_mean_ms = {"broken": [], "fixed": []}
            for r in range(-1, args.ab):  # round -1: warm-up (starts the persistent workers)
                order = ["broken", "fixed"] if r % 2 == 0 else ["fixed", "broken"]
                for name in order:
                    sync()
                    t = t_prev = time.perf_counter()
                    batch_ms = []
                    for images, _ in loaders[name]:
                        infer(images)
                        now = time.perf_counter()
                        batch_ms.append((now - t_prev) * 1e3)
                        t_prev = now
                    if r >= 0:
                        window_ms[name].append(statistics.median(batch_ms))
                        window_mean_ms[name].append((time.perf_counter() - t) / len(batch_ms) * 1e3)
            b, f = statistics.median(window_ms["broken"]), statistics.median(window_ms["fixed"])
            mb, mf = statistics.median(window_mean_ms["broken"]), statistics.median(window_mean_ms["fixed"])
            print(f"AB broken_ms={b:.3f} fixed_ms={f:.3f} saving_pct={(b - f) / b * 100:.1f} rounds={args.ab} "
                  f"window={args.window} mean_broken_ms={mb:.3f} mean_fixed_ms={mf:.3f} "
                  f"mean_saving_pct={(mb - mf) / mb * 100:.1f}", flush=True)
            print(json.dumps({"program": PROG, "variant": "ab", "step_ms_p50": round(b, 3),
                              "step_ms_mean": round(statistics.fmean(window_mean_ms["broken"]), 3),
                              "broken_batch_ms": round(b, 3), "fixed_batch_ms": round(f, 3),
                              "window_mean_ms": {"broken": round(mb, 3), "fixed": round(mf, 3)},
                              "num_workers": {"broken": 0, "fixed": FIXED_WORKERS}, "rounds": args.ab,
                              "window": args.window}), flush=True)
            return

        num_workers = args.num_workers if args.num_workers is not None else (FIXED_WORKERS if args.fixed else 0)
        loader = make_loader(SyntheticImages(args.batches * BATCH), num_workers)
        step_ms, wait_ms = [], []
        t_prev = time.perf_counter()
        for i, (images, labels) in enumerate(loader):
            t_got = time.perf_counter()
            infer(images)
            now = time.perf_counter()
            if i > 0:
                step_ms.append((now - t_prev) * 1e3)
                wait_ms.append((t_got - t_prev) * 1e3)
            t_prev = now
    print(json.dumps({
        "program": PROG, "variant": "fixed" if num_workers > 0 else "broken",
        "step_ms_p50": round(statistics.median(step_ms), 3), "step_ms_mean": round(statistics.fmean(step_ms), 3),
        "data_wait_ms_mean": round(statistics.fmean(wait_ms), 3),
        "images_per_s": round(BATCH * len(step_ms) / (sum(step_ms) / 1e3), 1),
        "num_workers": num_workers, "batches": len(step_ms) + 1,
    }), flush=True)


if __name__ == "__main__":
    main()
