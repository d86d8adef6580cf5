"""Two inference threads share one detector behind a threading.Lock, and one of them post-processes under it.

Threads 'worker-a' and 'worker-b' serve two camera streams with the same detector on the GPU; the model is
guarded by a threading.Lock ('model_lock'). worker-a (the measured step) holds the lock only for its forward
pass and the copy of its top-k boxes back to the host. worker-b, after the same GPU call, also runs its
Matrix-NMS post-processing in NumPy (pairwise IoU matrices of 512 boxes for each of its 4 images, the decay
factors and the re-scored selection, several milliseconds) before it leaves the `with model_lock:` block. So
each of worker-a's steps waits for the lock for the whole of worker-b's GPU call plus its CPU post-processing.
Fix: hold the lock only around the GPU call and run the post-processing after releasing it.
"""
import os
import threading
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
except ImportError:  # need_cuda() says what is missing and exits 77; the stand-ins let the classes be defined
    torch = None
    nn = types.SimpleNamespace(Module=object)

WAITS_ON = ("the threading.Lock around the shared model, held by thread 'worker-b' during its GPU call and its "
            "NumPy Matrix-NMS post-processing (matrix_nms)")
WAITS_ON_NAMES = ["worker-b", "lock"]
HOT_FUNCTIONS = ["matrix_nms", "postprocess", "pairwise_iou"]
FIX = "Hold the model lock only around the GPU call and run worker-b's post-processing after releasing it."
FIX_WORDS = ["lock", "outside", "release"]

IMAGES_A, IMAGES_B, SIZE, TOPK, N_CLASSES = 4, 4, 256, 512, 20


class Detector(nn.Module):
    """A small single-stage detector: a strided conv backbone and a per-cell box/class head."""

    def __init__(self, width=96):
        super().__init__()

        def block(a, b, stride):
            return [nn.Conv2d(a, b, 3, stride, 1, bias=False), nn.BatchNorm2d(b), nn.SiLU(inplace=True)]

        self.backbone = nn.Sequential(*block(3, width, 2), *block(width, width, 1), *block(width, 2 * width, 2),
                                      *block(2 * width, 2 * width, 1), *block(2 * width, 4 * width, 2),
                                      *block(4 * width, 4 * width, 1))
        self.head = nn.Conv2d(4 * width, 3 * (4 + N_CLASSES), 1)

    def forward(self, images):
        x = images.float().div_(255.0)
        out = self.head(self.backbone(x))                           # (B, 3*(4+C), H/8, W/8)
        b = out.shape[0]
        out = out.view(b, 3, 4 + N_CLASSES, -1).permute(0, 1, 3, 2).reshape(b, -1, 4 + N_CLASSES)
        cells = out.shape[1]
        side = SIZE // 8
        idx = torch.arange(cells, device=out.device) % (side * side)
        cx = ((idx % side).float() + out[..., 0].sigmoid()) / side
        cy = ((idx // side).float() + out[..., 1].sigmoid()) / side
        w, h = out[..., 2].sigmoid() * 0.5, out[..., 3].sigmoid() * 0.5
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
        conf, cls = out[..., 4:].sigmoid().max(-1)
        top = conf.topk(TOPK, dim=1)
        gather = top.indices
        return (boxes.gather(1, gather.unsqueeze(-1).expand(-1, -1, 4)), top.values, cls.gather(1, gather))


def detect(model, model_lock, frames):
    """The GPU call under the lock: forward pass and top-k boxes back on the host."""
    x = torch.from_numpy(frames).cuda()
    with model_lock:
        with torch.inference_mode():
            boxes, scores, classes = model(x)
            return boxes.cpu().numpy(), scores.cpu().numpy(), classes.cpu().numpy()


def pairwise_iou(boxes):
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    area = (x2 - x1) * (y2 - y1)
    iw = np.clip(np.minimum(x2[:, None], x2[None, :]) - np.maximum(x1[:, None], x1[None, :]), 0, None)
    ih = np.clip(np.minimum(y2[:, None], y2[None, :]) - np.maximum(y1[:, None], y1[None, :]), 0, None)
    inter = iw * ih
    return inter / (area[:, None] + area[None, :] - inter + 1e-9)


def matrix_nms(boxes, scores, classes, sigma=2.0, keep_thresh=0.05):
    """Matrix NMS (SOLOv2) on one image's boxes, sorted by score: decayed scores and the kept indices."""
    order = np.argsort(-scores, kind="stable")
    boxes, scores, classes = boxes[order], scores[order], classes[order]
    iou = np.triu(pairwise_iou(boxes) * (classes[:, None] == classes[None, :]), k=1)
    comp = iou.max(0)
    decay = np.exp(-sigma * (iou ** 2 - comp[:, None] ** 2)).min(0)
    decayed = scores * decay
    keep = np.nonzero(decayed > keep_thresh)[0]
    return order[keep], decayed[keep]


def postprocess(boxes, scores, classes):
    return [matrix_nms(boxes[i], scores[i], classes[i]) for i in range(boxes.shape[0])]


def camera_frames(seed, n_images):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n_images, 3, SIZE, SIZE), dtype=np.uint8)


class WorkerB:
    """Stream b: detection and post-processing; `fixed` says whether post-processing leaves the lock first."""

    def __init__(self, model, model_lock, fixed):
        self.model, self.model_lock, self.fixed = model, model_lock, fixed
        self.stop = threading.Event()
        self.frames = [camera_frames(100 + k, IMAGES_B) for k in range(4)]
        self.served = 0
        self.error = None

    def next_frames(self, n):
        """The next frames of stream b, with the exposure correction the camera driver leaves to us."""
        f = self.frames[n % len(self.frames)].astype(np.float32)
        f *= 1.0 + 0.02 * ((n % 5) - 2)
        return np.clip(f, 0, 255).astype(np.uint8)

    def run(self):
        try:
            n = 0
            while not self.stop.is_set():
                frames = self.next_frames(n)
                n += 1
                if self.fixed:
                    boxes, scores, classes = detect(self.model, self.model_lock, frames)
                    postprocess(boxes, scores, classes)
                else:
                    x = torch.from_numpy(frames).cuda()
                    with self.model_lock:
                        with torch.inference_mode():
                            b, s, c = self.model(x)
                            boxes, scores, classes = b.cpu().numpy(), s.cpu().numpy(), c.cpu().numpy()
                        postprocess(boxes, scores, classes)
                self.served += 1
        except BaseException as e:  # reported by main()
            self.error = e


def worker_a(args, model, model_lock, b, result):
    frames = [camera_frames(k, IMAGES_A) for k in range(4)]

    def step(i):
        boxes, scores, classes = detect(model, model_lock, frames[i % len(frames)])
        return int((scores[:, 0] > 0.5).sum())

    def broken(i):
        b.fixed = False
        return step(i)

    def fixed(i):
        b.fixed = True
        return step(i)

    try:
        if args.ab:
            ab(torch, broken, fixed, args.ab, args.window)
        else:
            t0 = time.perf_counter()
            t_first = t0
            for i in range(args.steps):
                step(i)
                if i == 0:
                    t_first = time.perf_counter()
            torch.cuda.synchronize()
            report("shared_model_lock", "fixed" if args.fixed else "broken", t0, t_first, time.perf_counter(),
                   args.steps)
    except BaseException as e:  # re-raised by main()
        result.append(e)


def main():
    args = parse(__doc__, steps=40, window=15)
    need_cuda("numpy")
    torch.backends.cudnn.benchmark = True
    model = Detector().cuda().eval()
    model_lock = threading.Lock()
    with torch.inference_mode():  # cudnn autotuning for both batch shapes before the streams start
        model(torch.zeros(IMAGES_A, 3, SIZE, SIZE, dtype=torch.uint8, device="cuda"))
        model(torch.zeros(IMAGES_B, 3, SIZE, SIZE, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()

    b = WorkerB(model, model_lock, fixed=args.fixed)
    tb = threading.Thread(target=b.run, name="worker-b", daemon=True)
    result = []
    ta = threading.Thread(target=worker_a, args=(args, model, model_lock, b, result), name="worker-a")
    tb.start()
    try:
        ta.start()
        ta.join()
    finally:
        b.stop.set()
        tb.join(timeout=10)
    if result:
        raise result[0]
    if b.error is not None:
        raise b.error


if __name__ == "__main__":
    main()
