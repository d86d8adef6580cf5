"""Image classifier fed by a torch DataLoader whose two worker processes cannot keep up with the augmentation.

The decoded photos sit in an in-memory cache; every sample is augmented in NumPy inside Dataset.__getitem__
(bilinear random resized crop, flip, colour jitter, a 5-tap blur, normalisation): over a millisecond of CPU
per image, about 50 ms per batch of 32. With num_workers=2 the workers deliver a batch several times more
slowly than the conv net consumes it, so the step sits in next(loader) waiting for a worker process most of
the time while the GPU idles.
Fix: num_workers=12 (the host has 16 CPUs): enough worker processes that a batch is ready whenever the GPU asks.
"""
import math
import os
import time

from _harness import ab, need_cuda, parse, report

# One BLAS thread per process: the parallelism comes from the worker processes (before NumPy is imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
except ImportError:  # need_cuda() says what is missing and exits 77
    np = torch = nn = DataLoader = None
    Dataset = object

WAITS_ON = "DataLoader worker processes (num_workers=2) running the NumPy augmentation in __getitem__"
WAITS_ON_NAMES = ["worker", "dataloader", "pt_data_worker"]
HOT_FUNCTIONS = ["augment_photo", "random_resized_crop", "blur_5tap"]
FIX = "Raise the DataLoader's num_workers from 2 to 12 so the augmentation runs in enough worker processes."
FIX_WORDS = ["num_workers", "more workers", "worker processes"]

BATCH = 32
STORED = 160     # side of the cached (decoded) photos
CROP = 112       # side of the network input
CACHED = 256
BROKEN_WORKERS, FIXED_WORKERS = 2, 12


def random_resized_crop(img, rng, out):
    h, w, _ = img.shape
    area = rng.uniform(0.35, 1.0) * h * w
    aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
    ch = min(h, int(round(math.sqrt(area / aspect))))
    cw = min(w, int(round(math.sqrt(area * aspect))))
    y0, x0 = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    # Bilinear resampling by hand: the crop box is random per sample, so the sampling grid is too.
    ys = y0 + (np.arange(out) + 0.5) * ch / out - 0.5
    xs = x0 + (np.arange(out) + 0.5) * cw / out - 0.5
    y_lo = np.clip(np.floor(ys).astype(np.int64), 0, h - 1)
    x_lo = np.clip(np.floor(xs).astype(np.int64), 0, w - 1)
    y_hi, x_hi = np.minimum(y_lo + 1, h - 1), np.minimum(x_lo + 1, w - 1)
    wy = (ys - y_lo).astype(np.float32)[:, None, None]
    wx = (xs - x_lo).astype(np.float32)[None, :, None]
    f = img.astype(np.float32)
    top = f[y_lo][:, x_lo] * (1 - wx) + f[y_lo][:, x_hi] * wx
    bottom = f[y_hi][:, x_lo] * (1 - wx) + f[y_hi][:, x_hi] * wx
    return top * (1 - wy) + bottom * wy


def blur_5tap(x):
    k = (1 / 16, 4 / 16, 6 / 16, 4 / 16, 1 / 16)
    p = np.pad(x, ((2, 2), (2, 2), (0, 0)), mode="reflect")
    n, m = x.shape[0], x.shape[1]
    v = sum(k[i] * p[i:i + n] for i in range(5))
    return sum(k[i] * v[:, i:i + m] for i in range(5))


def augment_photo(img, rng, mean, std):
    x = random_resized_crop(img, rng, CROP)
    if rng.random() < 0.5:
        x = x[:, ::-1]
    # Colour jitter: brightness, contrast, saturation.
    x = x * rng.uniform(0.75, 1.25)
    x = (x - x.mean()) * rng.uniform(0.75, 1.25) + x.mean()
    gray = x @ np.array([0.299, 0.587, 0.114], np.float32)
    x = gray[..., None] + (x - gray[..., None]) * rng.uniform(0.6, 1.4)
    if rng.random() < 0.5:
        x = blur_5tap(x)
    np.clip(x, 0, 255, out=x)
    return np.ascontiguousarray(((x - mean) / std).transpose(2, 0, 1), dtype=np.float32)


def decoded_photo_cache(n=CACHED):
    """The decoded catalogue photos kept in memory (synthesised here: smooth patterns plus sensor noise)."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:STORED, 0:STORED]
    photos = np.empty((n, STORED, STORED, 3), np.uint8)
    for k in range(n):
        base = (np.sin(xx / rng.uniform(5, 30)) + np.cos(yy / rng.uniform(5, 30))) * 60 + 128
        photos[k] = (base[..., None] + rng.normal(0, 20, (STORED, STORED, 3))).clip(0, 255)
    return photos


class ProductPhotos(Dataset):
    """Catalogue photos with their category label, a fresh augmentation of a cached photo per index."""

    def __init__(self, photos, n=200_000):
        self.photos = photos
        self.n = n
        self.mean = np.array([123.7, 116.3, 103.5], np.float32)
        self.std = np.array([58.4, 57.1, 57.4], np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.default_rng(idx)
        img = self.photos[idx % len(self.photos)]
        return torch.from_numpy(augment_photo(img, rng, self.mean, self.std)), idx % 1000


def make_loader(photos, num_workers):
    return DataLoader(ProductPhotos(photos), batch_size=BATCH, shuffle=False, num_workers=num_workers,
                      pin_memory=True, persistent_workers=True, prefetch_factor=2)


def make_model():
    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True))
    return nn.Sequential(block(3, 128, 2), block(128, 128, 1), block(128, 256, 2), block(256, 256, 1),
                         block(256, 512, 2), block(512, 512, 1), block(512, 1024, 2), block(1024, 1024, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000)).cuda().eval()


def classify(model, images):
    with torch.inference_mode():
        logits = model(images.cuda(non_blocking=True))
        return logits.argmax(1).cpu()  # the predicted categories go back to the caller


def main():
    args = parse(__doc__, steps=40, window=30)
    need_cuda("numpy")
    torch.backends.cudnn.benchmark = True
    model = make_model()
    photos = decoded_photo_cache()

    if args.ab:
        # Both loaders (and their persistent workers) exist before the first window.
        broken_batches = iter(make_loader(photos, BROKEN_WORKERS))
        fixed_batches = iter(make_loader(photos, FIXED_WORKERS))
        ab(torch, lambda i: classify(model, next(broken_batches)[0]),
           lambda i: classify(model, next(fixed_batches)[0]), args.ab, args.window)
        return

    variant = "fixed" if args.fixed else "broken"
    loader = make_loader(photos, FIXED_WORKERS if args.fixed else BROKEN_WORKERS)
    t0 = time.perf_counter()
    t_first = t0
    for i, (images, labels) in enumerate(loader):
        classify(model, images)
        if i == 0:
            t_first = time.perf_counter()
        if i + 1 == args.steps:
            break
    torch.cuda.synchronize()
    report("dataloader_few_workers", variant, t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
