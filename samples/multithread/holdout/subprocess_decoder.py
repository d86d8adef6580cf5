"""Video segmentation whose frames come from a decoder child process through a pipe.

The program starts a decoder with subprocess.Popen([sys.executable, "-c", DECODER_SRC], stdout=PIPE): the child
process holds a short compressed clip (zlib-compressed, row-delta-coded YUV 4:2:0 frames at 1280x720) and, for
every frame, inflates it, undoes the delta coding (cumulative sums), upsamples the chroma, converts YUV to RGB
in float32, downscales 2x2 to 640x360 and writes the raw RGB bytes to its stdout. The parent reads exactly one
frame (691,200 bytes) per step with readinto() on the pipe, builds a tensor and runs a small segmentation CNN on
the GPU. Decoding a frame in Python/NumPy takes several times longer than the model, and the pipe holds less
than one frame, so the step spends most of its time blocked in the pipe read, waiting on the decoder child
process.
Fix: run 4 decoder subprocesses, each decoding every 4th frame, and read from them round-robin.
"""
import os
import subprocess
import sys
import time
import types

from _harness import ab, need_cuda, parse, report

try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = ("the decoder child process (subprocess.Popen running DECODER_SRC) decoding frames in NumPy and "
            "writing them to the stdout pipe the step reads")
WAITS_ON_NAMES = ["child process", "subprocess", "decoder"]
HOT_FUNCTIONS = ["decode_frame", "yuv420_to_rgb", "undo_delta"]
FIX = "Run 4 decoder subprocesses, each decoding every 4th frame, and read their pipes round-robin."
FIX_WORDS = ["process", "decoder", "parallel"]

OUT_W, OUT_H = 640, 360
FRAME_BYTES = OUT_W * OUT_H * 3
N_CLASSES = 19

# The decoder, run as `python -c DECODER_SRC FIRST STRIDE`: decodes frames FIRST, FIRST+STRIDE, ... forever.
DECODER_SRC = r'''
import os
import sys
import zlib

import numpy as np

W, H = 1280, 720
GOP = 6


def encode_clip():
    """The compressed clip the decoder serves (made here, standing in for a file the decoder would open)."""
    rng = np.random.default_rng(1234)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    clip = []
    for k in range(GOP):
        y = 128 + 60 * np.sin(xx / (37.0 + 3 * k)) * np.cos(yy / 53.0) + rng.normal(0, 6, (H, W))
        u = 128 + 40 * np.sin(xx[::2, ::2] / 91.0 + k) + rng.normal(0, 3, (H // 2, W // 2))
        v = 128 + 40 * np.cos(yy[::2, ::2] / 71.0 - k) + rng.normal(0, 3, (H // 2, W // 2))
        planes = []
        for p in (y, u, v):
            q = np.clip(p, 0, 255).astype(np.uint8)
            d = np.diff(q.astype(np.int16), axis=1, prepend=0).astype(np.uint8)  # row deltas, mod 256
            planes.append(d.tobytes())
        clip.append(zlib.compress(b"".join(planes), 1))
    return clip


def undo_delta(raw, h, w):
    d = np.frombuffer(raw, dtype=np.uint8).reshape(h, w)
    return np.cumsum(d, axis=1, dtype=np.uint8)  # wraps mod 256, as the encoder's deltas did


def yuv420_to_rgb(y, u, v, gain):
    yf = (y.astype(np.float32) - 16.0) * (1.164 * gain)
    uf = np.repeat(np.repeat(u.astype(np.float32) - 128.0, 2, axis=0), 2, axis=1)
    vf = np.repeat(np.repeat(v.astype(np.float32) - 128.0, 2, axis=0), 2, axis=1)
    rgb = np.empty((H, W, 3), dtype=np.float32)
    rgb[..., 0] = yf + 1.596 * vf
    rgb[..., 1] = yf - 0.392 * uf - 0.813 * vf
    rgb[..., 2] = yf + 2.017 * uf
    return np.clip(rgb, 0.0, 255.0, out=rgb)


def decode_frame(packet, n):
    raw = zlib.decompress(packet)
    ny, nc = H * W, (H // 2) * (W // 2)
    y = undo_delta(raw[:ny], H, W)
    u = undo_delta(raw[ny:ny + nc], H // 2, W // 2)
    v = undo_delta(raw[ny + nc:], H // 2, W // 2)
    rgb = yuv420_to_rgb(y, u, v, 1.0 + 0.01 * (n % 7))
    small = rgb[0::2, 0::2] + rgb[1::2, 0::2]
    small += rgb[0::2, 1::2]
    small += rgb[1::2, 1::2]
    small *= 0.25
    return small.astype(np.uint8)


def main():
    first, stride = int(sys.argv[1]), int(sys.argv[2])
    clip = encode_clip()
    out = sys.stdout.buffer
    n = first
    try:
        while True:
            out.write(decode_frame(clip[n % GOP], n).tobytes())
            out.flush()
            n += stride
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    os._exit(0)  # the parent closed the pipe: nothing to flush


main()
'''


class DecodedFrames:
    """Frames from `n` decoder subprocesses, read round-robin (frame i comes from decoder i % n)."""

    def __init__(self, n):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.procs = [subprocess.Popen([sys.executable, "-c", DECODER_SRC, str(k), str(n)], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, env=env, bufsize=0)
                      for k in range(n)]
        self.buf = bytearray(FRAME_BYTES)
        self.next = 0

    def read(self):
        proc = self.procs[self.next]
        self.next = (self.next + 1) % len(self.procs)
        view = memoryview(self.buf)
        got = 0
        while got < FRAME_BYTES:
            k = proc.stdout.readinto(view[got:])
            if not k:
                raise RuntimeError(f"decoder process {proc.pid} exited (status {proc.poll()})")
            got += k
        return self.buf

    def close(self):
        for p in self.procs:
            p.stdout.close()
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class SegNet(nn.Module):
    """A small encoder-decoder segmentation CNN."""

    def __init__(self, w=64):
        super().__init__()

        def block(a, b, stride=1):
            return [nn.Conv2d(a, b, 3, stride, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True)]

        self.enc = nn.Sequential(*block(3, w, 2), *block(w, w), *block(w, 2 * w, 2), *block(2 * w, 2 * w),
                                 *block(2 * w, 4 * w, 2), *block(4 * w, 4 * w), *block(4 * w, 4 * w))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                 *block(4 * w, 2 * w), nn.Upsample(scale_factor=2, mode="bilinear",
                                                                    align_corners=False),
                                 *block(2 * w, w), nn.Conv2d(w, N_CLASSES, 1))
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255)
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255)

    def forward(self, frame_hwc):
        x = frame_hwc.permute(2, 0, 1).unsqueeze(0).float()
        x = (x - self.mean) / self.std
        return self.dec(self.enc(x))


def segment(model, frames):
    buf = frames.read()
    x = torch.frombuffer(buf, dtype=torch.uint8).view(OUT_H, OUT_W, 3).cuda()
    with torch.inference_mode():
        labels = model(x).argmax(1)
        return torch.bincount(labels.flatten(), minlength=N_CLASSES).cpu()


def main():
    args = parse(__doc__, steps=40, window=15)
    need_cuda("numpy")  # the decoder processes run this interpreter, with NumPy
    sources = []
    try:
        broken = DecodedFrames(1) if (not args.fixed or args.ab) else None
        fixed = DecodedFrames(4) if (args.fixed or args.ab) else None
        sources = [s for s in (broken, fixed) if s is not None]
        torch.backends.cudnn.benchmark = True
        model = SegNet().cuda().eval()

        if args.ab:
            ab(torch, lambda i: segment(model, broken), lambda i: segment(model, fixed), args.ab, args.window)
        else:
            frames = fixed if args.fixed else broken
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                segment(model, frames)
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("subprocess_decoder", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        for s in sources:
            s.close()


if __name__ == "__main__":
    main()
