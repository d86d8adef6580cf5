"""LiDAR detector fed by a multiprocessing pipeline with too few decoder processes.

Producer processes ('decoder-N', multiprocessing.Process) read zlib-compressed point-cloud frames (int16
centimetre coordinates, as sensors store them), decompress and dequantise them, crop them to the region of
interest and scatter the points into a bird's-eye-view pillar grid with NumPy (counts, max height, mean
intensity), then put batches of 8 grids on a bounded multiprocessing.Queue.
The main process takes a batch and runs a small 2-D conv detector on the GPU. Two decoders produce a batch
far more slowly than the detector consumes it, so the step waits in queue.get() for the decoder processes.
Fix: start 8 decoder processes instead of 2 (the host has 16 CPUs).
"""
import multiprocessing as mp
import os
import queue
import tempfile
import time
import zlib

from _harness import ab, need_cuda, parse, report

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77
    np = torch = nn = None

WAITS_ON = "the decoder processes ('decoder-N', multiprocessing.Process) feeding a multiprocessing.Queue"
WAITS_ON_NAMES = ["decoder", "producer", "multiprocessing", "child process"]
HOT_FUNCTIONS = ["decode_frame", "scatter_to_pillars"]
FIX = "Start 8 decoder processes instead of 2 so the queue is refilled faster than the GPU drains it."
FIX_WORDS = ["more producer", "more decoder", "processes", "8 decoder"]

BATCH, GRID, POINTS = 8, 160, 24_000
X_RANGE, Y_RANGE, Z_RANGE = (0.0, 76.8), (-38.4, 38.4), (-3.0, 1.0)  # 0.48 m cells
BROKEN_DECODERS, FIXED_DECODERS = 2, 8


def write_recording(folder, n_frames=16):
    """A short recording: frames of (x, y, z in cm, intensity) int16 points, each zlib-compressed on disk."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(n_frames):
        r = rng.uniform(2, 90, POINTS)
        phi = rng.uniform(-np.pi, np.pi, POINTS)
        pts = np.stack([r * np.cos(phi) * 100, r * np.sin(phi) * 100, rng.normal(-120, 60, POINTS),
                        rng.uniform(0, 255, POINTS)], 1).astype(np.int16)
        paths.append(os.path.join(folder, f"frame{k:03d}.bin.z"))
        with open(paths[-1], "wb") as f:
            f.write(zlib.compress(pts.tobytes(), 6))
    return paths


def decode_frame(path):
    with open(path, "rb") as f:
        raw = np.frombuffer(zlib.decompress(f.read()), np.int16).reshape(-1, 4)
    return raw * np.array([0.01, 0.01, 0.01, 1 / 255], np.float32)  # metres, intensity in [0, 1]


def scatter_to_pillars(pts):
    x, y, z, inten = pts.T
    keep = (x >= X_RANGE[0]) & (x < X_RANGE[1]) & (y >= Y_RANGE[0]) & (y < Y_RANGE[1]) & \
           (z >= Z_RANGE[0]) & (z < Z_RANGE[1])
    x, y, z, inten = x[keep], y[keep], z[keep], inten[keep]
    ix = ((x - X_RANGE[0]) / (X_RANGE[1] - X_RANGE[0]) * GRID).astype(np.int64)
    iy = ((y - Y_RANGE[0]) / (Y_RANGE[1] - Y_RANGE[0]) * GRID).astype(np.int64)
    cell = ix * GRID + iy
    count = np.bincount(cell, minlength=GRID * GRID).astype(np.float32)
    top = np.full(GRID * GRID, Z_RANGE[0], np.float32)
    np.maximum.at(top, cell, z)
    mean_i = np.bincount(cell, weights=inten, minlength=GRID * GRID) / np.maximum(count, 1)
    mean_z = np.bincount(cell, weights=z, minlength=GRID * GRID) / np.maximum(count, 1)
    grid = np.stack([np.log1p(count), top, mean_i, mean_z]).astype(np.float16)  # half the bytes through the pipe
    return grid.reshape(4, GRID, GRID)


def decoder_main(paths, rank, out_q, stop):
    out_q.cancel_join_thread()  # exit even if the main process stopped reading
    k = rank
    while not stop.is_set():
        batch = np.stack([scatter_to_pillars(decode_frame(paths[(k + j) % len(paths)])) for j in range(BATCH)])
        k += BATCH
        while not stop.is_set():
            try:
                out_q.put(batch, timeout=0.1)
                break
            except queue.Full:
                pass


class DecoderPipeline:
    def __init__(self, paths, n, tag):
        self.q = mp.Queue(maxsize=4)
        self.stop = mp.Event()
        self.procs = [mp.Process(target=decoder_main, args=(paths, r, self.q, self.stop), name=f"decoder-{tag}{r}",
                                 daemon=True) for r in range(n)]
        for p in self.procs:
            p.start()

    def get(self):
        return torch.from_numpy(self.q.get())

    def close(self):
        self.stop.set()
        try:
            while True:
                self.q.get_nowait()
        except queue.Empty:
            pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


def make_detector():
    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True))
    return nn.Sequential(block(4, 192, 2), block(192, 192, 1), block(192, 192, 1),
                         block(192, 384, 2), block(384, 384, 1), block(384, 384, 1),
                         block(384, 768, 2), block(768, 768, 1), block(768, 768, 1),
                         nn.Conv2d(768, 2 + 7, 1)).cuda().eval()


def detect(model, grids):
    with torch.inference_mode():
        out = model(grids.cuda().float())
        heat = out[:, :2].sigmoid().flatten(1)
        return heat.topk(50, dim=1).indices.cpu()  # the 50 strongest cells per frame go to tracking


def main():
    args = parse(__doc__, steps=40, window=25)
    need_cuda("numpy")
    with tempfile.TemporaryDirectory() as folder:
        paths = write_recording(folder)
        # The decoders fork before CUDA is initialised.
        pipes = {}
        if args.ab or not args.fixed:
            pipes["few"] = DecoderPipeline(paths, BROKEN_DECODERS, "a")
        if args.ab or args.fixed:
            pipes["many"] = DecoderPipeline(paths, FIXED_DECODERS, "b")
        model = make_detector()
        try:
            if args.ab:
                ab(torch, lambda i: detect(model, pipes["few"].get()), lambda i: detect(model, pipes["many"].get()),
                   args.ab, args.window)
            else:
                pipe = pipes["many" if args.fixed else "few"]
                t0 = time.perf_counter()
                t_first = t0
                for i in range(args.steps):
                    detect(model, pipe.get())
                    if i == 0:
                        t_first = time.perf_counter()
                torch.cuda.synchronize()
                report("mp_pipeline", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                       args.steps)
        finally:
            for p in pipes.values():
                p.close()


if __name__ == "__main__":
    main()
