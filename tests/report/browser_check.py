#!/usr/bin/env python3
"""Loads HTML reports in a real browser (headless Chromium, driven through the DevTools protocol) and checks
what a reader does with them:

  * the page loads with no console error and no uncaught exception;
  * every header of every sortable table sorts its column, ascending on the first click and descending on the
    second, by the page's own rule (numbers and byte sizes as numbers, anything else as text);
  * the step timeline zooms (the + button, the mouse wheel) and pans (a drag), its ticks follow, and reset
    brings the whole step back;
  * a full-page screenshot is written beside the page (NAME.png in --out).

    browser_check.py --chromium /usr/bin/chromium --out DIR page.html [page.html ...]
    browser_check.py --chromium /usr/bin/chromium --out DIR --analyze build/.../iscope-analyze DUMP_OR_TRACE ...
      (each input is first turned into DIR/<name>.html by iscope-analyze)
    browser_check.py ... --self-test PAGE_OR_INPUT
      (the check itself: three copies of the page, one whose sort script is cut, one whose zoom does nothing and
      one that logs a console error, must each fail)

Exit status: 0 when every page passed, 1 when one failed (each failure is printed), 77 when Chromium or the
websocket module (Debian: python3-websocket) is missing, saying which.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import websocket  # Debian: python3-websocket
except ImportError:
    websocket = None


class Browser:
    """One headless Chromium and one page of it, spoken to over the DevTools protocol (flattened sessions)."""

    def __init__(self, chromium, width=1400, height=1000):
        self.profile = tempfile.mkdtemp(prefix="iscope-chromium-")
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and len(open(port_file).read().split()) >= 2):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("Chromium did not open its DevTools port within 30 s")
            time.sleep(0.1)
        port, path = open(port_file).read().split()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=30)
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(domain + ".enable", session=True)

    def call(self, method, params=None, session=False):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.ws.settimeout(max(0.1, deadline - time.time()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise RuntimeError(f"no {method} within {timeout} s")

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"script failed: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r["result"].get("value")

    def errors(self):
        """Console errors and uncaught exceptions seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("uncaught: " + p.get("exceptionDetails", {}).get("exception", {}).get("description", str(p)))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                   for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


# Clicks every sortable header twice and checks the column's order each time by the order a reader expects,
# written apart from the page's script: a numeric column (header class "n") by the number each cell starts with
# (sizes in bytes, "under 10", below the counters' resolution, as 0), cells without one last either way; a text
# column in natural order.
SORT_CHECK = r"""
(() => {
  const failures = [];
  let headers = 0;
  const units = {B: 0, KiB: 1, MiB: 2, GiB: 3, TiB: 4};
  const number = (t) => {
    if (/^under [\d.]+$/.test(t.trim())) return 0;
    const m = t.trim().match(/^(-?\d+(?:\.\d+)?)(?: (B|KiB|MiB|GiB|TiB))?/);
    return m ? parseFloat(m[1]) * 1024 ** (units[m[2]] || 0) : null;
  };
  const collator = new Intl.Collator(undefined, {numeric: true, sensitivity: 'base'});
  const ordered = (vals, numeric, asc) => {
    for (let i = 1; i < vals.length; i++) {
      const a = vals[i - 1], b = vals[i], na = number(a), nb = number(b);
      const bad = !numeric ? (asc ? 1 : -1) * collator.compare(a, b) > 0
        : (na === null || nb === null) ? (na === null && nb !== null) : (asc ? na > nb : na < nb);
      if (bad) return `${JSON.stringify(a)} before ${JSON.stringify(b)}`;
    }
    return null;
  };
  document.querySelectorAll('table.sortable').forEach((table, ti) => {
    const name = (table.closest('section') || {}).id || `table ${ti}`;
    Array.from(table.tHead.rows[0].cells).forEach((th) => {
      headers++;
      const numeric = th.classList.contains('n');
      for (const asc of [true, false]) {
        th.click();
        const vals = Array.from(table.tBodies[0].rows).map((r) => r.cells[th.cellIndex].textContent);
        const bad = ordered(vals, numeric, asc);
        if (bad) failures.push(`${name} / '${th.textContent}' ${asc ? 'ascending' : 'descending'}: ${bad}`);
      }
    });
  });
  return {tables: document.querySelectorAll('table.sortable').length, headers, failures};
})()
"""

# Zooms with the button and the wheel, pans with a drag, resets; returns what changed.
ZOOM_CHECK = r"""
(() => {
  const svg = document.getElementById('tl-svg');
  if (!svg) return {present: false};
  const firstTick = () => (svg.querySelector('#tl-ticks text') || {}).textContent;
  const out = {present: true, k0: +svg.dataset.k, tick0: firstTick()};
  document.querySelector('.tl-controls button[data-zoom="in"]').click();
  out.k_button = +svg.dataset.k;
  const r = svg.getBoundingClientRect();
  const x = r.left + r.width * 0.6, y = r.top + 30;
  svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: x, clientY: y, bubbles: true, cancelable: true}));
  out.k_wheel = +svg.dataset.k;
  const off0 = +svg.dataset.off;
  svg.dispatchEvent(new MouseEvent('mousedown', {clientX: x, clientY: y, bubbles: true}));
  window.dispatchEvent(new MouseEvent('mousemove', {clientX: x - 200, clientY: y, bubbles: true}));
  window.dispatchEvent(new MouseEvent('mouseup', {clientX: x - 200, clientY: y, bubbles: true}));
  out.pan = +svg.dataset.off - off0; out.tick_zoomed = firstTick();
  document.querySelector('.tl-controls button[data-zoom="reset"]').click();
  out.k_reset = +svg.dataset.k; out.off_reset = +svg.dataset.off;
  return out;
})()
"""


def check_zoom(z):
    if not z.get("present"):
        return []
    bad = []
    if not (z["k0"] == 1 and z["k_button"] == 2):
        bad.append(f"zoom button: k {z['k0']} -> {z['k_button']} (expected 1 -> 2)")
    if not z["k_wheel"] > z["k_button"]:
        bad.append(f"wheel: k {z['k_button']} -> {z['k_wheel']} (expected larger)")
    if not z["pan"] > 0:
        bad.append(f"drag left by 200 px moved the view by {z['pan']} px (expected to the right, > 0)")
    if z["tick_zoomed"] == z["tick0"]:
        bad.append(f"ticks did not follow the zoom (first tick still {z['tick0']!r})")
    if not (z["k_reset"] == 1 and z["off_reset"] == 0):
        bad.append(f"reset left k={z['k_reset']} off={z['off_reset']}")
    return bad


def check_page(browser, html, out_dir):
    browser.events.clear()
    browser.call("Page.navigate", {"url": "file://" + os.path.abspath(html)}, session=True)
    browser.wait_for("Page.loadEventFired")
    sort = browser.evaluate(SORT_CHECK)
    failures = list(sort["failures"])
    if sort["tables"] == 0:
        failures.append("no sortable table on the page")
    failures += check_zoom(browser.evaluate(ZOOM_CHECK))
    shot = os.path.join(out_dir, os.path.splitext(os.path.basename(html))[0] + ".png")
    browser.screenshot(shot)
    return sort, browser.errors() + failures, shot  # errors: at load and while sorting and zooming


# (name, what the copy breaks, old text, new text): each copy of a good page must fail the check.
BREAKAGES = [
    ("no-sort", "the sort script no longer moves rows", "rows.forEach(function (r) { body.appendChild(r); });", ""),
    ("no-zoom", "zooming leaves the zoom factor alone", "k = Math.min(Math.max(k * factor, 1), MAX_ZOOM);", ""),
    ("console-error", "the page logs an error", "</body>", "<script>console.error('broken on purpose')</script></body>"),
]


def self_test(browser, page, out_dir):
    """0 when every broken copy of `page` fails the check (and the page itself passes), else 1."""
    text = open(page).read()
    _, failures, _ = check_page(browser, page, out_dir)
    ok = not failures
    print(f"{'ok' if ok else 'FAIL'} self-test: the unbroken page {'passes' if ok else 'fails: ' + '; '.join(failures)}")
    for name, what, old, new in BREAKAGES:
        if old not in text:
            print(f"FAIL self-test: {name}: the page no longer contains {old!r}; update BREAKAGES")
            ok = False
            continue
        broken = os.path.join(out_dir, f"broken-{name}.html")
        with open(broken, "w") as f:
            f.write(text.replace(old, new, 1))
        _, failures, _ = check_page(browser, broken, out_dir)
        print(f"{'ok' if failures else 'FAIL'} self-test: {name} ({what}): "
              f"{'caught: ' + failures[0] if failures else 'NOT caught'}")
        ok &= bool(failures)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--out", required=True, help="folder for the screenshots (and the pages made by --analyze)")
    ap.add_argument("--analyze", help="iscope-analyze: turn each input into OUT/<name>.html first")
    ap.add_argument("--self-test", action="store_true", help="check that the check fails on broken copies of the "
                    "first input's page")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    if not args.chromium or not os.path.exists(args.chromium):
        print("SKIPPED: Chromium not found (Debian: apt-get install chromium); reports not checked in a browser")
        return 77
    if websocket is None:
        print("SKIPPED: the websocket module is missing (Debian: apt-get install python3-websocket); reports not "
              "checked in a browser")
        return 77
    os.makedirs(args.out, exist_ok=True)
    pages = []
    for src in args.inputs:
        if not args.analyze:
            pages.append(src)
            continue
        name = os.path.basename(src).split(".")[0]
        page = os.path.join(args.out, name + ".html")
        r = subprocess.run([args.analyze, src, "-o", page], capture_output=True, text=True)
        if r.returncode not in (0, 3) or not os.path.exists(page):
            print(f"FAIL {src}: iscope-analyze exited {r.returncode}: {r.stderr.strip()[-300:]}")
            return 1
        pages.append(page)
    browser = Browser(args.chromium)
    if args.self_test:
        try:
            return self_test(browser, pages[0], args.out)
        finally:
            browser.close()
    failed = 0
    try:
        for page in pages:
            sort, failures, shot = check_page(browser, page, args.out)
            status = "ok" if not failures else "FAIL"
            print(f"{status} {page}: {sort['tables']} tables, {sort['headers']} headers sorted both ways, "
                  f"screenshot {shot}")
            for f in failures:
                print("  - " + f)
            failed += bool(failures)
    finally:
        browser.close()
    print(f"browser_check: {len(pages) - failed} of {len(pages)} pages passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
