"""Image classification fed by a DataLoader with num_workers=0 and heavy NumPy augmentation (planted: cpu_bound).

Every sample is cropped, flipped, colour-jittered, box-blurred and normalised in NumPy inside
Dataset.__getitem__, on the main thread between GPU steps; the small CNN then takes about a millisecond.
Fixed: the same DataLoader with worker processes (num_workers=4, fork), prefetching and pinned batches.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "cpu_bound"
BATCH = 32


def make_dataset(torch, np):
    class AugmentedImages(torch.utils.data.Dataset):
        def __init__(self, n):
            self.n = n
            rng = np.random.default_rng(0)
            self.raw = rng.random((8, 3, 192, 192), dtype=np.float32)
            self.mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
            self.std = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            rng = np.random.default_rng(i)
            img = self.raw[i % len(self.raw)]
            y0, x0 = rng.integers(0, 32, size=2)
            img = img[:, y0:y0 + 160, x0:x0 + 160]
            if rng.random() < 0.5:
                img = img[:, :, ::-1]
            img = img * rng.uniform(0.8, 1.2, (3, 1, 1)) + rng.uniform(-0.1, 0.1, (3, 1, 1))
            blur = sum(np.roll(np.roll(img, dy, axis=1), dx, axis=2) for dy in (-1, 0, 1) for dx in (-1, 0, 1))
            img = (blur / 9.0 - self.mean) / self.std
            return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), i % 10

    return AugmentedImages(10**6)


def main():
    args = parse(__doc__, steps=25, window=30)
    torch = need_cuda("numpy")
    import numpy as np
    nn = torch.nn
    DataLoader = torch.utils.data.DataLoader

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).cuda().eval()
    dataset = make_dataset(torch, np)

    def loader(fixed):
        if fixed:
            return DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=4, prefetch_factor=2,
                              pin_memory=True, persistent_workers=True)
        return DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=0)

    @torch.no_grad()
    def evaluate(images, labels):
        images = images.cuda(non_blocking=True)
        labels = labels.cuda(non_blocking=True)
        return (model(images).argmax(dim=1) == labels).sum()

    if args.ab:
        it_b, it_f = iter(loader(False)), iter(loader(True))
        ab(torch, lambda i: evaluate(*next(it_b)), lambda i: evaluate(*next(it_f)), args.ab, args.window)
        return
    correct = 0
    t0 = time.perf_counter()
    for i, (images, labels) in enumerate(loader(args.fixed)):
        images = images.cuda(non_blocking=True)
        labels = labels.cuda(non_blocking=True)
        with torch.no_grad():
            correct += (model(images).argmax(dim=1) == labels).sum()
        if i == 0:
            t_first = time.perf_counter()
        if i + 1 >= args.steps:
            break
    torch.cuda.synchronize()
    report("dataloader_cpu", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
