"""Keyword-spotting model fed by a DataLoader with num_workers=0, so the log-mel front end runs on the step thread.

Each clip (1.5 s of 16 kHz audio from an in-memory bank of decoded recordings) is randomly shifted and
scaled, then turned into log-mel features with deltas, normalised and SpecAugment-masked in NumPy inside
Dataset.__getitem__: about a millisecond per clip. With num_workers=0 the DataLoader calls __getitem__ in the
main process, one clip after the other, before every batch: the Transformer encoder waits for the feature
extraction of all 32 clips each step.
Fix: num_workers=8 worker processes (persistent), which compute the features of the next batches while the
GPU runs the current one.
"""
import os
import time
import types

from _harness import ab, need_cuda, parse, report

# One BLAS thread per process (set before NumPy is imported): 8 workers x 16 OpenBLAS threads for the mel
# projection would oversubscribe the 16 CPUs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    np = torch = DataLoader = None
    nn = types.SimpleNamespace(Module=object)
    Dataset = object

WAITS_ON = "the DataLoader's in-process loading (num_workers=0): log-mel feature extraction in __getitem__"
WAITS_ON_NAMES = ["dataloader", "__getitem__", "logmel", "log_mel", "num_workers"]
HOT_FUNCTIONS = ["log_mel_spectrogram", "spec_augment", "add_deltas"]
FIX = "Give the DataLoader worker processes (num_workers=8, persistent_workers=True) instead of num_workers=0."
FIX_WORDS = ["num_workers", "worker processes", "workers"]

SR, CLIP_S = 16_000, 1.5
N_FFT, HOP, N_MELS = 512, 160, 64
BATCH = 32
BANK = 128
KEYWORDS = 35


def mel_filterbank(sr=SR, n_fft=N_FFT, n_mels=N_MELS):
    def hz_to_mel(f):
        return 2595 * np.log10(1 + f / 700)
    mels = np.linspace(hz_to_mel(20), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700 * (10 ** (mels / 2595) - 1)
    bins = np.fft.rfftfreq(n_fft, 1 / sr)
    fb = np.zeros((n_mels, len(bins)), np.float32)
    for m in range(n_mels):
        lo, mid, hi = hz[m], hz[m + 1], hz[m + 2]
        fb[m] = np.clip(np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), 0, None)
    return fb


def log_mel_spectrogram(wav, fb, window):
    wav = np.append(wav[:1], wav[1:] - 0.97 * wav[:-1])  # pre-emphasis
    n_frames = 1 + (len(wav) - N_FFT) // HOP
    frames = wav[np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]] * window
    power = np.abs(np.fft.rfft(frames, n=N_FFT)) ** 2
    return np.log(power @ fb.T + 1e-6)


def add_deltas(feats, width=2):
    padded = np.pad(feats, ((width, width), (0, 0)), mode="edge")
    denom = 2 * sum(n * n for n in range(1, width + 1))
    delta = sum(n * (padded[width + n:len(feats) + width + n] - padded[width - n:len(feats) + width - n])
                for n in range(1, width + 1)) / denom
    return np.concatenate([feats, delta], axis=1)


def spec_augment(feats, rng, n_time=2, n_freq=2):
    feats = feats.copy()
    for _ in range(n_time):
        w = rng.integers(0, 20)
        t0 = rng.integers(0, feats.shape[0] - w)
        feats[t0:t0 + w] = 0
    for _ in range(n_freq):
        w = rng.integers(0, 10)
        f0 = rng.integers(0, feats.shape[1] - w)
        feats[:, f0:f0 + w] = 0
    return feats


def decoded_clip_bank(n=BANK):
    """Decoded recordings kept in memory (synthesised here: a few voiced harmonics plus noise)."""
    rng = np.random.default_rng(0)
    t = np.arange(int(SR * CLIP_S)) / SR
    bank = np.empty((n, len(t)), np.float32)
    for k in range(n):
        f0 = rng.uniform(90, 250)
        wav = sum(np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 6.3)) / h for h in range(1, 6))
        bank[k] = wav * np.hanning(len(t)) + rng.normal(0, 0.05, len(t))
    return bank


class SpokenCommands(Dataset):
    """Short spoken-command clips with their keyword label."""

    def __init__(self, bank, n=100_000):
        self.bank = bank
        self.n = n
        self.fb = mel_filterbank()
        self.window = np.hanning(N_FFT).astype(np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.default_rng(idx)
        wav = np.roll(self.bank[idx % len(self.bank)], rng.integers(-1600, 1600)) * np.float32(rng.uniform(0.5, 2))
        feats = add_deltas(log_mel_spectrogram(wav, self.fb, self.window))
        feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-5)  # per-utterance CMVN
        return torch.from_numpy(spec_augment(feats, rng).astype(np.float32)), idx % KEYWORDS


def make_loader(bank, num_workers):
    return DataLoader(SpokenCommands(bank), batch_size=BATCH, num_workers=num_workers, pin_memory=True,
                      persistent_workers=num_workers > 0)


class KeywordSpotter(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.subsample = nn.Sequential(nn.Conv1d(2 * N_MELS, d, 5, stride=2, padding=2), nn.GELU(),
                                       nn.Conv1d(d, d, 3, padding=1), nn.GELU())
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
        self.head = nn.Linear(d, KEYWORDS)

    def forward(self, feats):  # feats: (batch, frames, 2 * N_MELS)
        x = self.subsample(feats.transpose(1, 2)).transpose(1, 2)
        return self.head(self.encoder(x).mean(1))


def spot(model, feats):
    with torch.inference_mode():
        return model(feats.cuda(non_blocking=True)).argmax(1).cpu()


def main():
    args = parse(__doc__, steps=40, window=25)
    need_cuda("numpy")
    model = KeywordSpotter().cuda().eval()
    bank = decoded_clip_bank()

    if args.ab:
        inline, workers = iter(make_loader(bank, 0)), iter(make_loader(bank, 8))
        ab(torch, lambda i: spot(model, next(inline)[0]), lambda i: spot(model, next(workers)[0]),
           args.ab, args.window)
        return

    variant = "fixed" if args.fixed else "broken"
    t0 = time.perf_counter()
    t_first = t0
    for i, (feats, labels) in enumerate(make_loader(bank, 8 if args.fixed else 0)):
        spot(model, feats)
        if i == 0:
            t_first = time.perf_counter()
        if i + 1 == args.steps:
            break
    torch.cuda.synchronize()
    report("dataloader_no_workers", variant, t0, t_first, time.perf_counter(), args.steps)


if __name__ == "__main__":
    main()
