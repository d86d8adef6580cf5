"""Text classifier whose requests are tokenized by a producer thread with a pure-Python BPE tokenizer.

A threading.Thread named 'producer' takes incoming request texts, runs a hand-written byte-pair-encoding loop
over every word (no cache, pure Python: several milliseconds per batch) and puts padded id lists on a
queue.Queue; the main thread takes a batch with queue.get() and runs a small Transformer encoder. The
tokenizer is slower than the model, and being Python it also holds the GIL the main thread needs to launch its
kernels, so the step spends most of its time waiting in queue.get() for the producer.
Fix: tokenize in a multiprocessing.Pool of 6 processes (several batches in flight), so the tokenizer neither
runs one batch at a time nor shares the main thread's GIL.
"""
import collections
import multiprocessing as mp
import queue
import random
import threading
import time
import types

from _harness import ab, need_cuda, parse, report

try:
    import torch
    from torch import nn
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = "thread 'producer' tokenizing requests with a pure-Python BPE loop (and holding the GIL)"
WAITS_ON_NAMES = ["producer"]
HOT_FUNCTIONS = ["bpe_merge_word", "tokenize_batch"]
FIX = "Tokenize in a multiprocessing.Pool of worker processes with several batches in flight instead of one thread."
FIX_WORDS = ["process", "multiprocessing", "pool"]

BATCH, SEQ, WORDS_PER_REQUEST = 16, 128, 90
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS]


def build_merges():
    """The BPE merge table, ranked: letter pairs into syllables, then frequent syllable pairs."""
    ranks = {}
    for s in SYLLABLES:
        ranks[(s[0], s[1])] = len(ranks)
    rng = random.Random(0)
    for _ in range(1500):
        ranks.setdefault((rng.choice(SYLLABLES), rng.choice(SYLLABLES)), len(ranks))
    vocab = {tok: i + 4 for i, tok in enumerate(sorted(set(CONSONANTS + VOWELS) | set(SYLLABLES) |
                                                       {a + b for a, b in ranks}))}
    return ranks, vocab


RANKS, VOCAB = build_merges()


def bpe_merge_word(word):
    parts = list(word)
    while len(parts) > 1:
        best_rank, best_i = None, -1
        for i in range(len(parts) - 1):
            r = RANKS.get((parts[i], parts[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best_rank, best_i = r, i
        if best_rank is None:
            break
        parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return parts


def tokenize_batch(texts):
    batch = []
    for text in texts:
        ids = [1]  # <bos>
        for word in text.lower().split():
            ids.extend(VOCAB.get(p, 3) for p in bpe_merge_word(word))
        ids = ids[:SEQ - 1] + [2]  # <eos>
        batch.append(ids + [0] * (SEQ - len(ids)))
    return batch


def fetch_requests(n):
    """The next batch of incoming request texts (simulated traffic: random words of 2 to 4 syllables)."""
    rng = random.Random(n)
    return [" ".join("".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(WORDS_PER_REQUEST))
            for _ in range(BATCH)]


def prepare_batch(n):
    return tokenize_batch(fetch_requests(n))


def producer_loop(out_q, stop):
    n = 0
    while not stop.is_set():
        batch = prepare_batch(n)
        n += 1
        while not stop.is_set():
            try:
                out_q.put(batch, timeout=0.1)
                break
            except queue.Full:
                pass


class PoolTokenizer:
    """The fix: the same prepare_batch in worker processes, a bounded number of batches in flight."""

    def __init__(self, processes=6, in_flight=12):
        self.pool = mp.Pool(processes)
        self.pending = collections.deque(self.pool.apply_async(prepare_batch, (n,)) for n in range(in_flight))
        self.n = in_flight

    def get(self):
        batch = self.pending.popleft().get()
        self.pending.append(self.pool.apply_async(prepare_batch, (self.n,)))
        self.n += 1
        return batch

    def close(self):
        self.pool.terminate()
        self.pool.join()


class IntentClassifier(nn.Module):
    def __init__(self, d=384, n_layers=4, n_intents=64):
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB) + 4, d, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, n_intents)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids))[:, 0])


def classify(model, batch):
    ids = torch.tensor(batch, dtype=torch.long).cuda()
    with torch.inference_mode():
        return model(ids).argmax(1).cpu()


def main():
    args = parse(__doc__, steps=50, window=25)
    need_cuda()
    # The pool forks before CUDA is initialised and before any thread exists.
    pool = PoolTokenizer() if (args.fixed or args.ab) else None
    model = IntentClassifier().cuda().eval()
    stop = threading.Event()
    tokenized = queue.Queue(maxsize=8)
    producer = None
    if not args.fixed or args.ab:
        producer = threading.Thread(target=producer_loop, args=(tokenized, stop), name="producer", daemon=True)
        producer.start()

    try:
        if args.ab:
            ab(torch, lambda i: classify(model, tokenized.get()), lambda i: classify(model, pool.get()),
               args.ab, args.window)
        else:
            next_batch = pool.get if args.fixed else tokenized.get
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                classify(model, next_batch())
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("producer_thread", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    finally:
        stop.set()
        if producer is not None:
            producer.join(timeout=5)
        if pool is not None:
            pool.close()


if __name__ == "__main__":
    main()
