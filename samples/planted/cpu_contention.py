"""cpu_contention: three busy pure-Python threads compete for the GIL with the inference thread."""
import threading
import time

from _common import need_cuda, run

torch = need_cuda()
w = torch.randn(1024, 1024, device="cuda")
stop = False
paused = threading.Event()  # set: the busy threads sleep (the fixed variant: no GIL-holding thread running)


def busy():
    n = 0
    while not stop:
        if paused.is_set():
            time.sleep(0.001)
            continue
        for i in range(10000):
            n += i * i  # holds the GIL in pure Python
    return n


def prepare():
    s = 0
    for i in range(40000):  # ~2-4 ms of Python that now has to win the GIL
        s += i % 7
    return s


def step(i):
    prepare()
    x = torch.randn(1024, 1024, device="cuda")
    for _ in range(4):
        x = torch.tanh(x @ w)
    torch.cuda.synchronize()


def step_broken(i):
    paused.clear()
    step(i)


def step_fixed(i):
    """The fix: the busy threads are not running (stopped, or moved to a process of their own)."""
    paused.set()
    step(i)


threads = [threading.Thread(target=busy, name=f"busy{k}", daemon=True) for k in range(3)]
for t in threads:
    t.start()
print("planting cpu_contention: 3 busy Python threads + a step with ~40k Python iterations of preprocessing")
try:
    run("cpu_contention", step_broken, fixed=step_fixed)
finally:
    stop = True
    for t in threads:
        t.join(timeout=2)
