"""Spectrogram-tile classifier whose DataLoader workers spend their time opening and reading many small files.

At start the program writes a sharded dataset into a temporary directory: 2048 small .npy shards (a 192 KB
int16 spectrogram tile each) and, beside each one, a small JSON sidecar with its quantisation scale, offset
and label. Every sample is a stack of 12 tiles, so Dataset.__getitem__ opens, reads and parses 24 files
(np.load of the shard, json.load of the sidecar) and then only dequantises a strided subsample of each tile:
the workers' time goes into open/read/close and the parsing of headers, not into arithmetic. With
num_workers=2 the two worker processes deliver a batch (16 samples: 384 files, ~36 MB read) more
slowly than the small CNN on the GPU consumes one, so the main thread's step spends most of its time in
next(loader) waiting on the DataLoader worker processes.
Fix: num_workers=12 (persistent workers), so that enough files are read in parallel to keep up with the GPU.
"""
import json
import os
import random
import shutil
import tempfile
import time
import types

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from _harness import ab, need_cuda, parse, report

try:
    import numpy as np
except ImportError:  # need_cuda("numpy") says so and exits 77
    np = None
try:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)
    Dataset = object
    DataLoader = None

WAITS_ON = ("the DataLoader's 2 worker processes (pt_data_worker), each opening and reading hundreds of small "
            "shard and sidecar files per batch (np.load / json.load in Dataset.__getitem__)")
WAITS_ON_NAMES = ["worker", "dataloader", "pt_data_worker"]
HOT_FUNCTIONS = ["__getitem__", "read_tile", "read_sidecar"]
FIX = "Raise the DataLoader's num_workers from 2 to 12 so that enough worker processes read files in parallel."
FIX_WORDS = ["num_workers", "worker"]

N_SHARDS = 2048
TILE_SHAPE = (192, 512)          # int16: 192 KB per shard file
TILES_PER_ITEM = 12
TILE_STRIDE = (3, 8)             # the model sees a 64 x 64 subsample of every tile
BATCH = 16
N_CLASSES = 50


def write_dataset(root):
    """Writes the shards and their JSON sidecars (the data set a real job would find on disk)."""
    rng = np.random.default_rng(0)
    n = TILE_SHAPE[0] * TILE_SHAPE[1]
    pool = rng.integers(-20000, 20000, size=4 * n, dtype=np.int16)
    for i in range(N_SHARDS):
        off = (i * 7919) % (3 * n)
        np.save(os.path.join(root, f"tile_{i:05d}.npy"), pool[off:off + n].reshape(TILE_SHAPE))
        with open(os.path.join(root, f"tile_{i:05d}.json"), "w") as f:
            json.dump({"shard": i, "scale": 1.0 / 8192 * (1 + (i % 5) / 10), "offset": (i % 7) - 3,
                       "label": i % N_CLASSES, "sample_rate": 16000, "hop": 160}, f)


def read_sidecar(root, i):
    with open(os.path.join(root, f"tile_{i:05d}.json")) as f:
        return json.load(f)


def read_tile(root, i):
    meta = read_sidecar(root, i)
    q = np.load(os.path.join(root, f"tile_{i:05d}.npy"))
    sub = q[::TILE_STRIDE[0], ::TILE_STRIDE[1]].astype(np.float32)
    return (sub - meta["offset"]) * meta["scale"], meta["label"]


class TileStackDataset(Dataset):
    """A sample is TILES_PER_ITEM shards picked pseudo-randomly from the index; the label is the first one's."""

    def __init__(self, root, length=1_000_000):
        self.root = root
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        shards = random.Random(idx).sample(range(N_SHARDS), TILES_PER_ITEM)
        tiles, label = [], 0
        for k, i in enumerate(shards):
            tile, lab = read_tile(self.root, i)
            tiles.append(tile)
            if k == 0:
                label = lab
        return torch.from_numpy(np.stack(tiles)), label


class TileClassifier(nn.Module):
    def __init__(self, cin=TILES_PER_ITEM, n_classes=N_CLASSES):
        super().__init__()

        def block(a, b, stride=1):
            return [nn.Conv2d(a, b, 3, stride, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True)]

        self.net = nn.Sequential(*block(cin, 96), *block(96, 96), *block(96, 192, 2), *block(192, 192),
                                 *block(192, 384, 2), *block(384, 384), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(384, n_classes))

    def forward(self, x):
        return self.net(x)


def make_loader(dataset, workers):
    return DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=workers, persistent_workers=True,
                      prefetch_factor=2)


def classify(model, batch):
    x, _ = batch
    with torch.inference_mode():
        return model(x.cuda()).argmax(1).cpu()


def main():
    args = parse(__doc__, steps=40, window=20)
    need_cuda("numpy")
    root = tempfile.mkdtemp(prefix="iscope-tiles-")
    iters = []
    try:
        write_dataset(root)
        dataset = TileStackDataset(root)
        # The worker processes fork here, before CUDA is initialised.
        broken_it = iter(make_loader(dataset, 2)) if (not args.fixed or args.ab) else None
        fixed_it = iter(make_loader(dataset, 12)) if (args.fixed or args.ab) else None
        iters = [it for it in (broken_it, fixed_it) if it is not None]
        torch.backends.cudnn.benchmark = True
        model = TileClassifier().cuda().eval()

        if args.ab:
            ab(torch, lambda i: classify(model, next(broken_it)), lambda i: classify(model, next(fixed_it)),
               args.ab, args.window)
        else:
            it = fixed_it if args.fixed else broken_it
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                classify(model, next(it))
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("io_dataloader", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        for it in iters:  # stop the persistent workers before their files go away
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
