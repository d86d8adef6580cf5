#!/usr/bin/env python3
"""The live page and /metrics of `iscope-run --live` (docs/live.md), on a real program (live_demo: steps with two
child ranges, one planted slow step):

  * the page, its data and /metrics answer 401 without the token, or with a wrong one;
  * the data endpoint, read repeatedly, shows the step count growing, then the planted slow step (>= 400 ms: the
    program sleeps that long in it, so this is a lower bound, not a speed test) and the breakdown's child ranges;
  * /metrics parses as the Prometheus text format: the histogram's buckets never decrease, +Inf equals _count,
    and once the program stops making steps, _count equals the steps the data endpoint saw;
  * with --browser, headless Chromium opens the page (DevTools protocol, as tests/report/browser_check.py does)
    and its numbers update: the step count grows and the slowest step shown is the planted one;
  * the program exits, and iscope-run with it, while a client still holds a connection open;
  * --live on a non-loopback address without --live-any-address is refused before the program runs.

    live_check.py --iscope-run PATH --demo PATH --out DIR [--browser --chromium PATH]

Exit status: 0 passed, 1 failed; 77 (skipped, saying why) with --browser when Chromium or python3-websocket is
missing, 1 instead under ISCOPE_TEST_REQUIRE_BROWSER=1 (CI).
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PLANTED_MS = 400


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def get(url):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_until(what, check, timeout=60, every=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = check()
        if v:
            return v
        time.sleep(every)
    fail(f"{what} within {timeout} s")


def parse_metrics(text):
    """{name: [(labels dict, value)]} from the text format; fails on a line that is not a comment or a sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        if not m:
            fail(f"/metrics: not a sample line: {line!r}")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def check_histogram(metrics):
    buckets = metrics.get("inferscope_step_duration_seconds_bucket") or fail("/metrics: no step histogram")
    values = [v for _, v in buckets]
    if any(b < a for a, b in zip(values, values[1:])):
        fail(f"/metrics: buckets decrease: {values}")
    if buckets[-1][0].get("le") != "+Inf":
        fail("/metrics: the last bucket is not +Inf")
    count = metrics["inferscope_step_duration_seconds_count"][0][1]
    if values[-1] != count:
        fail(f"/metrics: +Inf bucket {values[-1]} != _count {count}")
    for name in ("inferscope_step_duration_seconds_sum", "inferscope_dropped_records_total", "inferscope_session_state"):
        if name not in metrics:
            fail(f"/metrics: no {name}")
    return int(count)


def start(args):
    stop, exit_file, args.slow = (os.path.join(args.out, n) for n in ("STOP", "EXIT", "SLOW"))
    for f in (stop, exit_file, args.slow):
        if os.path.exists(f):
            os.remove(f)
    proc = subprocess.Popen([args.iscope_run, "-o", os.path.join(args.out, "live.iscope"), "--no-cupti", "--no-python",
                             "--live", "127.0.0.1:0", "--", args.demo, stop, exit_file, args.slow],
                            stderr=subprocess.PIPE, text=True)
    lines = []
    url = [None]

    def read():
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"live page: (http://\S+)", line)
            if m and not url[0]:
                url[0] = m.group(1)
    threading.Thread(target=read, daemon=True).start()
    wait_until("the live page's URL on stderr", lambda: url[0], timeout=60, every=0.1)
    print("live page:", url[0])
    return proc, url[0], stop, exit_file, lines


def check_token(url):
    base, token = url.split("/?token=")
    if not re.fullmatch(r"[0-9a-f]{32}", token):
        fail(f"token {token!r} is not 32 hex digits")
    for path in ("/", "/data", "/metrics"):
        for suffix in ("", "?token=" + "0" * 32):
            status, _ = get(base + path + suffix)
            if status not in (401, 403):
                fail(f"{path}{suffix} answered {status} without the right token")
        status, _ = get(base + path + "?token=" + token)
        if status != 200:
            fail(f"{path} with the token answered {status}")
    print("token: required for /, /data and /metrics")
    return base, token


def data(base, token):
    status, body = get(f"{base}/data?token={token}")
    if status != 200:
        fail(f"/data answered {status}")
    return json.loads(body)


def check_data(args, base, token):
    first = wait_until("a first step", lambda: (d := data(base, token))["steps_total"] > 0 and d)
    wait_until("the step count to grow", lambda: data(base, token)["steps_total"] > first["steps_total"])
    open(args.slow, "w").close()  # plants the slow step now that we are watching
    d = wait_until(f"the planted slow step (>= {PLANTED_MS} ms) as the slowest",
                   lambda: (d := data(base, token))["slowest"] and d["slowest"]["dur_ms"] >= PLANTED_MS and d)
    if not d["p50_ms"] < d["slowest"]["dur_ms"]:
        fail(f"p50 {d['p50_ms']} is not below the planted step")
    names = {r["name"] for r in d["breakdown"]}
    if not {"preprocess", "compute"} <= names:
        fail(f"breakdown names {names}, expected preprocess and compute")
    if not any(s["name"] == "compute" for s in d["timeline"]["spans"]):
        fail("no compute range in the timeline")
    # The demo runs no GPU work: the GPU part says so (null, no lanes), never a made-up 0 % busy share.
    if d["gpu"] is not None or d["timeline"]["gpu"]:
        fail(f"GPU data without GPU work: {d['gpu']}, {len(d['timeline']['gpu'])} GPU spans")
    # Nor does it generate tokens or serve requests on an event loop (it is C++).
    if d["serving"] is not None:
        fail(f"serving data without generation or requests: {d['serving']}")
    print(f"data: steps grew from {first['steps_total']} to {d['steps_total']}, slowest {d['slowest']['dur_ms']:.0f} ms, "
          f"breakdown {sorted(names)}")


# What /data holds on a GPU host (the shape render_gpu.cpp writes), drawn by the page's own functions in one
# evaluation (the page's next refresh redraws from the real data): the machines these tests run on have no GPU.
GPU_DATA_JS = """({records: 12, steps_settled: 4, steps_pending: 1, steps_incomplete: 0, window_steps: 4,
  busy_p50: 0.68, busy_ratio: 0.7, bottleneck: {category: 'gpu_busy', share: 0.7},
  categories: [{name: 'gpu_busy', share: 0.7, ms_per_step: 7}, {name: 'sync_wait', share: 0.1, ms_per_step: 1},
               {name: 'launch', share: 0.05, ms_per_step: 0.5}, {name: 'host', share: 0.15, ms_per_step: 1.5}]})"""
GPU_TIMELINE_JS = """({from_ms: 0, to_ms: 20, threads: {'1': 'main'},
  spans: [{thread: 1, name: 'step', depth: 0, start_ms: 0, dur_ms: 10, step: true}],
  gpu: [{device: 0, stream: 7, kind: 'kernel', start_ms: 1, dur_ms: 5},
        {device: 0, stream: 8, kind: 'memcpy', start_ms: 2, dur_ms: 3},
        {device: 1, stream: 7, kind: 'kernel', start_ms: 4, dur_ms: 2}]})"""


def check_page_draws_gpu(b):
    got = b.evaluate("(() => { drawGpu(" + GPU_DATA_JS + "); drawTimeline(" + GPU_TIMELINE_JS + "); return {"
                     "busy: el('gpu_busy').textContent, bottleneck: el('bottleneck').textContent, "
                     "categories: el('categories').rows.length, "
                     "gpu_rects: document.querySelectorAll('#timeline rect.gpu').length, "
                     "lanes: [...document.querySelectorAll('#timeline text')].map(t => t.textContent)}; })()")
    want_lanes = {"GPU 0 stream 7", "GPU 0 stream 8", "GPU 1 stream 7"}
    if (got["busy"] != "68 %" or "current bottleneck (live estimate): GPU busy (70 %" not in got["bottleneck"]
            or "iscope-analyze" not in got["bottleneck"] or got["categories"] != 4 or got["gpu_rects"] != 3
            or not want_lanes <= set(got["lanes"])):
        fail(f"page given GPU data drew {got}")
    print(f"browser: GPU data drawn: busy {got['busy']}, {got['gpu_rects']} GPU spans in {len(want_lanes)} lanes")


# What /data's serving part holds for a program that generates tokens inside asyncio requests (the shape
# render_serving.cpp writes), drawn by the page's own function.
SERVING_DATA_JS = """({generation: {calls: 8, tokens: 384, function: 'GenerationMixin.generate',
  token_function: 'GPT2LMHeadModel.forward', ttft_p50_ms: 11.5, ttft_p90_ms: 14, tpot_p50_ms: 8.1, tpot_p90_ms: 9,
  latency_p50_ms: 391, latency_p90_ms: 450, tokens_per_s: 118},
  requests: {function: 'classify', count: 3300, latency_p50_ms: 24.2, latency_p90_ms: 25.4, latency_p99_ms: 728}})"""


def check_page_draws_serving(b):
    before = b.evaluate("el('serving').hidden")
    got = b.evaluate("(() => { drawServing(" + SERVING_DATA_JS + "); return {hidden: el('serving').hidden, "
                     "rows: [...el('serving_rows').rows].map(r => r.textContent)}; })()")
    text = " | ".join(got["rows"])
    if (not before or got["hidden"] or len(got["rows"]) != 4 or "time to first token" not in text
            or "p50 11.5 ms" not in text or "GPT2LMHeadModel.forward" not in text or "3300 requests of classify" not in text):
        fail(f"page given serving data drew {got} (hidden before: {before})")
    print(f"browser: serving data drawn: {len(got['rows'])} rows")


def check_browser(args, url):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
    import browser_check
    b = browser_check.Browser(args.chromium)
    try:
        b.call("Page.navigate", {"url": url}, session=True)
        steps = lambda: int(b.evaluate("(document.getElementById('steps') || {}).textContent || 0") or 0)
        first = wait_until("the page to show a step", lambda: steps() > 0 and steps())
        wait_until("the page's step count to grow", lambda: steps() > first)
        open(args.slow, "w").close()  # plants the slow step now that the page is watching
        slowest = lambda: float(b.evaluate("parseFloat((document.getElementById('slowest') || {}).textContent) || 0"))
        wait_until("the page to show the planted slow step", lambda: slowest() >= PLANTED_MS)
        rows = b.evaluate("document.getElementById('breakdown').rows.length")
        rects = b.evaluate("document.querySelectorAll('#timeline rect.step').length")
        if not rows or not rects:
            fail(f"page: {rows} breakdown rows, {rects} step spans in the timeline")
        gpu_state = b.evaluate("document.getElementById('gpu_state').textContent")
        gpu_busy = b.evaluate("document.getElementById('gpu_busy').textContent")
        if gpu_state != "no GPU activity recorded" or gpu_busy != "\u2013":
            fail(f"page without GPU work shows GPU state {gpu_state!r}, busy {gpu_busy!r}")
        print(f"browser: steps from {first} up, slowest {slowest():.0f} ms, {rows} breakdown rows, {rects} steps drawn")
        b.screenshot(os.path.join(args.out, "live.png"))
        check_page_draws_gpu(b)  # after the screenshot: it shows the real page, not the made-up GPU data
        check_page_draws_serving(b)
    finally:
        b.close()


def check_final_counts(base, token, stop):
    open(stop, "w").close()
    # Steps end when STOP appears; the count is final once two reads a flush apart agree.
    prev = [-1]

    def settled():
        n = data(base, token)["steps_total"]
        same, prev[0] = n == prev[0], n
        return same and n

    steps = wait_until("the step count to settle", settled, every=1.0)
    metrics = parse_metrics(get(f"{base}/metrics?token={token}")[1])
    count = check_histogram(metrics)
    gpu_series = [k for k in metrics if "gpu" in k or k.startswith("inferscope_step_time_seconds")]
    if gpu_series:
        fail(f"GPU series without GPU work: {gpu_series}")
    serving_series = [k for k in metrics if "token" in k or "request_latency" in k or "serving" in k]
    if serving_series:
        fail(f"serving series without generation or requests: {serving_series}")
    if count != steps:
        fail(f"/metrics _count {count} != {steps} steps on the data endpoint")
    print(f"metrics: histogram well formed, _count {count} == steps seen")


def check_exit(proc, base, exit_file, lines):
    host, port = re.match(r"http://([^:/]+):(\d+)", base).groups()
    held = socket.create_connection((host, int(port)), timeout=10)
    held.sendall(b"GET /data HTTP/1.1\r\nHost: x\r\n")  # an unfinished request: the server waits for the rest
    open(exit_file, "w").close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("the program did not exit within 60 s while a client held a connection")
    held.close()
    if proc.returncode != 0:
        fail(f"iscope-run exited {proc.returncode}: {''.join(lines)}")
    print("exit: the program exited with a client connected")


def check_refused(args):
    """A non-loopback address without --live-any-address: refused before the program runs (exit 2, saying why)."""
    r = subprocess.run([args.iscope_run, "-o", os.path.join(args.out, "refused.iscope"), "--live", "0.0.0.0:0", "--",
                        args.demo], capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or "not loopback" not in r.stderr:
        fail(f"--live 0.0.0.0:0 without --live-any-address: exit {r.returncode}, stderr {r.stderr!r}")
    print("address: a non-loopback address is refused without --live-any-address")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iscope-run", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--browser", action="store_true")
    ap.add_argument("--chromium")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.browser:
        try:
            import websocket  # noqa: F401
            missing = None if args.chromium and os.path.exists(args.chromium) else "Chromium"
        except ImportError:
            missing = "the websocket module (Debian: python3-websocket)"
        if missing:
            print(f"SKIPPED: {missing} is missing")
            sys.exit(1 if os.environ.get("ISCOPE_TEST_REQUIRE_BROWSER") == "1" else 77)
    check_refused(args)
    proc, url, stop, exit_file, lines = start(args)
    try:
        base, token = check_token(url)
        if args.browser:
            check_browser(args, url)
        else:
            check_data(args, base, token)
        check_final_counts(base, token, stop)
        check_exit(proc, base, exit_file, lines)
    finally:
        for f in (stop, exit_file):  # the program ends on its own, whatever failed
            open(f, "w").close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("PASSED")


if __name__ == "__main__":
    main()
