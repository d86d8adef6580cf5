"""Image preprocessing on the GPU that calls torch.cuda.empty_cache() after every batch (planted: memory_alloc).

A batch of 64 camera frames (1080p, uint8, already on the GPU) is converted to float, normalized, resized to
384x384 and run through a small convolutional stem. Every intermediate is tens to hundreds of MB; with the
allocator's cache emptied after each batch, every one of them is a fresh cudaMalloc, and each cudaFree inside
empty_cache() synchronizes the device.
Fixed: no empty_cache(); the caching allocator hands the same blocks back each batch.
"""
import time

from _harness import ab, need_cuda, parse, report

EXPECTED = "memory_alloc"
BATCH, H, W, OUT = 64, 1080, 1920, 384


def main():
    args = parse(__doc__, steps=20)
    torch = need_cuda()
    nn, F = torch.nn, torch.nn.functional

    torch.manual_seed(0)
    stem = nn.Sequential(nn.Conv2d(3, 32, 7, stride=4, padding=3), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).to(
        "cuda", torch.float16).eval()
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255
    frames = torch.randint(0, 256, (BATCH, H, W, 3), dtype=torch.uint8, device="cuda")

    @torch.no_grad()
    def preprocess(release):
        x = frames.permute(0, 3, 1, 2).float()
        x = (x - mean) / std
        x = F.interpolate(x, size=(OUT, OUT), mode="bilinear", align_corners=False)
        feats = stem(x.half()).flatten(1)
        if release:
            torch.cuda.empty_cache()  # "keep the memory footprint low between batches"
        return feats

    if args.ab:
        ab(torch, lambda i: preprocess(True), lambda i: preprocess(False), args.ab, args.window)
        return
    t0 = time.perf_counter()
    for i in range(args.steps):
        preprocess(release=not args.fixed)
        if i == 0:
            t_first = time.perf_counter()
    torch.cuda.synchronize()
    report("resize_empty_cache", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
