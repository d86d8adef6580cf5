"""Far-field speech classifier whose audio front end runs on a ThreadPoolExecutor that is too small.

Every request is one second of 4-channel microphone-array audio at 48 kHz. Its front end is NumPy on large
arrays: an FFT of every channel, delay-and-sum beamforming in the frequency domain, resampling to 16 kHz by
spectrum truncation and inverse FFT, a 255-tap band-pass FIR filter (np.convolve), a framed STFT (np.fft.rfft of
98 x 512 frames), a mel filterbank (matrix product) and log compression. These calls release the GIL, so the
front end is not GIL-bound; it runs on a concurrent.futures.ThreadPoolExecutor with max_workers=2 (threads
'audio-prep_0' and 'audio-prep_1'), one future per request, a done-callback recording each request's latency.
The main thread takes the futures of the next 8 requests, waits on each with fut.result(), stacks the
log-mel features and runs a Transformer classifier on the GPU. Two threads cannot prepare 8 requests in the
time the GPU needs for a batch, so the step spends most of its time in fut.result() waiting on the pool.
Fix: max_workers=8, so that the (GIL-free) front end runs on enough cores to keep up.
"""
import collections
import os
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("OMP_NUM_THREADS", "1")       # one core per pool thread; the pool is the parallelism
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

from _harness import ab, need_cuda, parse, report

try:
    import numpy as np
except ImportError:  # need_cuda("numpy") says so and exits 77
    np = None
try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = ("the 2 threads of a ThreadPoolExecutor ('audio-prep_N') running the NumPy audio front end "
            "(FFT beamforming, FIR filter, STFT, mel), which the step waits on in fut.result()")
WAITS_ON_NAMES = ["audio-prep", "pool", "executor"]
HOT_FUNCTIONS = ["audio_frontend", "beamform", "log_mel"]
FIX = "Raise the ThreadPoolExecutor's max_workers from 2 to 8 so that the GIL-free front end runs on more cores."
FIX_WORDS = ["max_workers", "worker", "thread"]

BATCH = 8
CHANNELS, SR_IN, SR = 4, 48000, 16000
N_FFT, HOP, WIN, N_MELS, N_FRAMES = 512, 160, 400, 80, 98
N_CLASSES = 35


def mel_filterbank(n_mels=N_MELS, n_fft=N_FFT, sr=SR):
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    pts = mel_to_hz(np.linspace(hz_to_mel(20.0), hz_to_mel(sr / 2), n_mels + 2))
    fb = np.zeros((n_fft // 2 + 1, n_mels), dtype=np.float32)
    for m in range(n_mels):
        lo, mid, hi = pts[m], pts[m + 1], pts[m + 2]
        fb[:, m] = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
    return fb


def bandpass_taps(n=255, lo=80.0, hi=7600.0, sr=SR):
    t = np.arange(n) - (n - 1) / 2
    h = (2 * hi / sr) * np.sinc(2 * hi / sr * t) - (2 * lo / sr) * np.sinc(2 * lo / sr * t)
    return (h * np.hamming(n)).astype(np.float32)


class FrontEnd:
    """The constants of the front end, computed once."""

    def __init__(self):
        self.mel = mel_filterbank()
        self.taps = bandpass_taps()
        self.window = np.hanning(WIN).astype(np.float32)
        freqs = np.fft.rfftfreq(SR_IN, 1.0 / SR_IN)
        delays = np.array([0.0, 1.1e-4, 2.2e-4, 3.3e-4])                      # a linear array, 3.7 cm spacing
        self.steer = np.exp(2j * np.pi * freqs[None, :] * delays[:, None]).astype(np.complex64) / CHANNELS
        rng = np.random.default_rng(7)
        self.clips = [rng.standard_normal((CHANNELS, SR_IN)).astype(np.float32) * 0.1 for _ in range(16)]


def beamform(fe, audio):
    spec = np.fft.rfft(audio, axis=1)                                         # (4, 24001)
    return (spec * fe.steer).sum(axis=0)


def resample(spec):
    keep = SR // 2 + 1
    return np.fft.irfft(spec[:keep], n=SR).astype(np.float32) * (SR / SR_IN)


def log_mel(fe, x):
    pad = np.pad(x, (N_FFT // 2, N_FFT // 2), mode="reflect")
    idx = np.arange(N_FRAMES)[:, None] * HOP + np.arange(WIN)[None, :]
    frames = pad[idx] * fe.window
    power = np.abs(np.fft.rfft(frames, n=N_FFT, axis=1)) ** 2               # (98, 257)
    mel = np.log(power.astype(np.float32) @ fe.mel + 1e-6)                    # (98, 80)
    return (mel - mel.mean(axis=0)) / (mel.std(axis=0) + 1e-5)


def audio_frontend(fe, n):
    audio = fe.clips[n % len(fe.clips)]
    x = resample(beamform(fe, audio))
    x = np.convolve(x, fe.taps, mode="same")
    return log_mel(fe, x).astype(np.float32)


class FeatureFeed:
    """Requests submitted to a ThreadPoolExecutor ahead of the model, `depth` batches in flight."""

    def __init__(self, fe, max_workers, depth=2):
        self.fe = fe
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="audio-prep")
        self.latency = collections.deque(maxlen=1000)
        self.lock = threading.Lock()
        self.n = 0
        self.pending = collections.deque()
        for _ in range(depth * BATCH):
            self.submit()

    def _done(self, fut, t0):
        with self.lock:
            self.latency.append(time.perf_counter() - t0)

    def submit(self):
        t0 = time.perf_counter()
        fut = self.pool.submit(audio_frontend, self.fe, self.n)
        fut.add_done_callback(lambda f, t0=t0: self._done(f, t0))
        self.pending.append(fut)
        self.n += 1

    def next_batch(self):
        feats = []
        for _ in range(BATCH):
            fut = self.pending.popleft()
            feats.append(fut.result(timeout=60))
            self.submit()
        return np.stack(feats)

    def close(self):
        for fut in self.pending:
            fut.cancel()
        self.pool.shutdown(wait=True)


class KeywordTransformer(nn.Module):
    def __init__(self, d=384, n_layers=8):
        super().__init__()
        self.proj = nn.Linear(N_MELS, d)
        self.pos = nn.Parameter(torch.randn(1, N_FRAMES, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, N_CLASSES)

    def forward(self, mel):
        return self.head(self.encoder(self.proj(mel) + self.pos).mean(1))


def classify(model, feed):
    feats = feed.next_batch()
    with torch.inference_mode():
        return model(torch.from_numpy(feats).cuda()).argmax(1).cpu()


def main():
    args = parse(__doc__, steps=40, window=15)
    need_cuda("numpy")
    model = KeywordTransformer().cuda().eval()
    fe = FrontEnd()
    feeds = []
    try:
        broken = FeatureFeed(fe, max_workers=2) if (not args.fixed or args.ab) else None
        fixed = FeatureFeed(fe, max_workers=8) if (args.fixed or args.ab) else None
        feeds = [f for f in (broken, fixed) if f is not None]
        if args.ab:
            ab(torch, lambda i: classify(model, broken), lambda i: classify(model, fixed), args.ab, args.window)
        else:
            feed = fixed if args.fixed else broken
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                classify(model, feed)
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("callback_pool", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        for f in feeds:
            f.close()


if __name__ == "__main__":
    main()
