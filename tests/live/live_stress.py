#!/usr/bin/env python3
"""The live page's program run again and again under CPU load, to catch what happens at its exit (issue 43: under
load, 1 of 18 runs of `iscope-run --live` ended with SIGSEGV after "dump written", and the program's last line of
output was lost).

Each run: live_demo (tests/live/live_demo.cpp) recorded with the live page on, while clients poll /data and
/metrics, one client holds a request it never finishes, and another trickles one; the program makes steps for a
while, then exits with those clients still connected. A run passes when the program ends by itself with status 0
(no signal), its last line of output arrived, and its dump ends with its END chunk (with iscope-run: and iscope-run
said "dump written"). Meanwhile LOAD processes spin on the CPUs.

    live_stress.py --demo PATH [--iscope-run PATH] --out DIR [--runs N] [--load K] [--env K=V ...]

Without --iscope-run the demo records from its environment (INFERSCOPE_ENABLE=1, INFERSCOPE_LIVE): what a
sanitizer build can run, its library not preloaded. --env adds variables (ASAN_OPTIONS=..., TSAN_OPTIONS=...).

Exit status: 0 every run passed; 1 a run failed (each failure is printed with the run's stderr); 77 (skipped,
saying why) where no loopback socket can be opened.
"""
import argparse
import multiprocessing
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

END_CHUNK = 9  # lib/dump/format.hpp, ChunkType::kEnd
TAIL = 24 + 24  # ChunkHeader + EndEntry


def ends_with_end_chunk(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < TAIL:
                return False
            f.seek(-TAIL, os.SEEK_END)
            kind, _, length = struct.unpack("<IIQ", f.read(16))
            return kind == END_CHUNK and length == 24
    except OSError:
        return False


def spin(stop):
    while not stop.is_set():
        pass


def get(port, path):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            while s.recv(65536):
                pass
    except OSError:
        pass


class Clients:
    """Pollers, a client that never finishes its request and one that trickles it, until stopped."""

    def __init__(self, port, token):
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.poll, args=(port, p), daemon=True)
                        for p in (f"/data?token={token}", f"/metrics?token={token}", f"/?token={token}")]
        self.held = []
        for head in (b"GET /data?token=" + token.encode() + b" HTTP/1.1\r\nHost", b"GET /metrics HTTP/1.1\r\n"):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(head)
                self.held.append(s)
            except OSError:
                pass
        self.threads.append(threading.Thread(target=self.trickle, daemon=True))
        for t in self.threads:
            t.start()

    def poll(self, port, path):
        while not self.stop.is_set():
            get(port, path)
            time.sleep(0.02)

    def trickle(self):
        while not self.stop.is_set() and self.held:
            try:
                self.held[-1].send(b"X")
            except OSError:
                return
            time.sleep(0.3)

    def close(self):
        self.stop.set()
        for s in self.held:
            s.close()


def one_run(args, i):
    d = os.path.join(args.out, f"run{i}")
    os.makedirs(d, exist_ok=True)
    stop, exit_, slow, dump = (os.path.join(d, n) for n in ("stop", "exit", "slow", "run.iscope"))
    for p in (stop, exit_, dump):
        if os.path.exists(p):
            os.remove(p)
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in args.env)
    if args.iscope_run:
        cmd = [args.iscope_run, "-o", dump, "--live", "127.0.0.1:0", "--", args.demo, stop, exit_, slow]
    else:
        env.update(INFERSCOPE_ENABLE="1", INFERSCOPE_OUTPUT=dump, INFERSCOPE_LIVE="127.0.0.1:0")
        cmd = [args.demo, stop, exit_, slow]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err_lines, out_chunks, url = [], [], threading.Event()
    found = {}

    def read_err():
        for line in iter(p.stderr.readline, b""):
            line = line.decode(errors="replace")
            err_lines.append(line)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)", line)
            if m and not url.is_set():
                found["port"], found["token"] = int(m.group(1)), m.group(2)
                url.set()

    def read_out():
        out_chunks.append(p.stdout.read())

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    out_reader = threading.Thread(target=read_out, daemon=True)
    out_reader.start()
    clients = None
    if url.wait(60):
        clients = Clients(found["port"], found["token"])
    time.sleep(args.seconds)
    open(stop, "w").close()
    open(exit_, "w").close()
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if clients:
        clients.close()
    reader.join(10)
    out_reader.join(10)
    out = b"".join(out_chunks)
    err = "".join(err_lines)
    problems = []
    if not url.is_set():
        problems.append("no live page URL printed")
    if p.returncode != 0:
        problems.append(f"status {p.returncode}" + (f" (signal {-p.returncode})" if p.returncode < 0 else ""))
    if b"live_demo: done" not in out:
        problems.append("the program's last line of output is missing")
    if args.iscope_run and "dump written" not in err:
        problems.append("iscope-run did not say 'dump written'")
    if not ends_with_end_chunk(dump):
        problems.append("the dump has no END chunk")
    return problems, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", required=True)
    ap.add_argument("--iscope-run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=1.5, help="how long each run makes steps with clients on")
    ap.add_argument("--load", type=int, default=multiprocessing.cpu_count(), help="CPU-spinning processes")
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args()
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).bind(("127.0.0.1", 0))
    except OSError as e:
        print(f"SKIPPED: no loopback socket here ({e})")
        return 77
    os.makedirs(args.out, exist_ok=True)
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for s in spinners:
        s.start()
    failed = left_behind = 0
    try:
        for i in range(args.runs):
            problems, err = one_run(args, i)
            # Not a failure by itself: a server thread left running while the process exits is what can crash it.
            left_behind += "left behind" in err
            if problems:
                failed += 1
                print(f"run {i}: FAILED: {'; '.join(problems)}\n--- stderr ---\n{err}--------------")
            else:
                print(f"run {i}: ok")
            sys.stdout.flush()
    finally:
        stop.set()
        for s in spinners:
            s.join(5)
            if s.is_alive():
                os.kill(s.pid, signal.SIGKILL)
    print(f"{args.runs - failed} of {args.runs} runs ended cleanly under {args.load} spinning processes; "
          f"in {left_behind} the live server's threads were left behind at the stop")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
