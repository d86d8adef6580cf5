#!/usr/bin/env python3
"""Loads HTML reports in a real browser (headless Chromium, driven through the DevTools protocol) and does what
a reader does with them, with the browser's own input events (mouse clicks, the wheel, drags, keys):

  * the page loads from file:// with no console error, no uncaught exception and no request for anything
    outside the file (it must open offline), and is no wider than a 1400 px window;
  * every header of every sortable table is clicked twice: the column must come out ascending, then
    descending, by the order a reader expects (checked here, not with the page's script: a numeric column by
    its numbers, "under 10" as 0, cells without one last; text in natural order), with the same rows as before;
  * the step timeline: the + button doubles the scale about the middle, the wheel zooms about the pointer, a
    drag pans by as many pixels as the mouse moved, the arrow key pans and 0 resets, the ticks follow the
    scale, labels appear on spans that became wide enough, a GPU span too short to draw at first is drawn
    on its own once zoomed in (never a short GPU span widened over idle time), and reset restores the view;
  * the first screen: the first finding starts within the first 900 px of the page (a 1400 x 900 screen), the
    verdict names the primary cause in words, the data-quality notes are open exactly when their summary says
    "check first"; the timeline's legend lists only what it draws, and a finding's "show in the timeline"
    zooms the timeline to its example span and brings it into view;
  * the thread-state rows' labels are never cut, and a click on a CUDA call draws arrows to the GPU work it
    launched, from the call to the work's start (browser_lanes.py);
  * screenshots in --out: NAME.png (the whole page as it opens), NAME-top.png (its first 1400 x 1000 px),
    NAME-timeline.png (the timeline, zoomed in) and NAME-arrow.png (a call's arrows); docs/images/ holds copies.

    browser_check.py --chromium /usr/bin/chromium --out DIR page.html [page.html ...]
    browser_check.py --chromium /usr/bin/chromium --out DIR --analyze build/.../iscope-analyze DUMP_OR_TRACE ...
      (each input is first turned into DIR/<name>.html by iscope-analyze)
    browser_check.py ... --self-test PAGE_OR_INPUT
      (the check itself: copies of the page broken in one way each, see BREAKAGES, must each fail)

Exit status: 0 when every page passed, 1 when one failed (each failure is printed), 77 when Chromium or the
websocket module (Debian: python3-websocket) is missing, saying which; 1 instead of 77 when the environment
sets ISCOPE_TEST_REQUIRE_BROWSER=1 (CI, where scripts/deps.sh installed both).
"""
import argparse
import base64
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import browser_lanes  # the thread-state rows and the launch-to-kernel arrows

try:
    import websocket  # Debian: python3-websocket
except ImportError:
    websocket = None

WIDTH, HEIGHT = 1400, 1000


class Browser:
    """One headless Chromium and one page of it, spoken to over the DevTools protocol (flattened sessions)."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="iscope-chromium-")
        self.ws = None
        # --no-sandbox: CI and this project's containers run as root, where Chromium's sandbox refuses to start.
        # A session of its own, so that close() ends Chromium's helper processes too.
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={WIDTH},{HEIGHT}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            self.connect()
        except BaseException:
            self.close()
            raise

    def connect(self):
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
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(domain + ".enable", session=True)
        # The layout viewport itself 1400 px wide, whatever the window's scrollbar takes.
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)

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
            finally:
                self.ws.settimeout(30)
        raise RuntimeError(f"no {method} within {timeout} s")

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"script failed: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r["result"].get("value")

    def settle(self):
        """Returns once the page has drawn a frame after the last input."""
        self.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))")

    def mouse(self, kind, x, y, **extra):
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **extra}, session=True)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=1)

    def wheel(self, x, y, delta_y):
        self.mouse("mouseWheel", x, y, deltaX=0, deltaY=delta_y)
        self.settle()

    def drag(self, x0, y, x1, steps=4):
        self.mouse("mouseMoved", x0, y)
        self.mouse("mousePressed", x0, y, button="left", buttons=1, clickCount=1)
        for i in range(1, steps + 1):
            self.mouse("mouseMoved", x0 + (x1 - x0) * i / steps, y, button="left", buttons=1)
        self.mouse("mouseReleased", x1, y, button="left", buttons=0, clickCount=1)
        self.settle()

    def key(self, key, code, vk):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk,
                                                 **({"text": key} if len(key) == 1 and kind == "keyDown" else {})},
                      session=True)
        self.settle()

    def problems(self):
        """Console errors, uncaught exceptions and requests that left the file, seen so far."""
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
            elif m == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                if not url.startswith(("file:", "data:", "about:", "blob:")):
                    out.append("the page requested " + url[:200] + " (a report must open offline)")
        return out

    def screenshot(self, path, clip=None):
        params = {"format": "png", "captureBeyondViewport": True}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        r = self.call("Page.captureScreenshot", params, session=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        """Ends Chromium and every helper process it started, then removes its profile."""
        try:
            if self.ws:
                self.ws.close()
        finally:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                self.proc.wait()
            # A helper still exiting can write into the profile after the main process is gone.
            for _ in range(30):
                shutil.rmtree(self.profile, ignore_errors=True)
                if not os.path.exists(self.profile):
                    break
                time.sleep(0.1)

    def signal_group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


# ---- tables -------------------------------------------------------------------------------------------------

# The sortable headers: where each is, whether its column is numeric, and the table's rows as they are.
HEADERS = r"""
Array.from(document.querySelectorAll('table.sortable')).flatMap((table, ti) =>
  Array.from(table.tHead.rows[0].cells).map((th) => ({
    table: ti, col: th.cellIndex, name: ((table.closest('section') || {}).id || `table ${ti}`) + ' / ' + th.textContent,
    numeric: th.classList.contains('n')})))
"""

# Scrolls header (table TI, column COL) into view and returns its middle, in viewport pixels.
HEADER_AT = r"""
(() => {
  const th = document.querySelectorAll('table.sortable')[TI].tHead.rows[0].cells[COL];
  th.scrollIntoView({block: 'center'});
  const r = th.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
})()
"""

# Table TI after a click on column COL: its rows' text, the column, the header's aria-sort and whether the
# column is in order (ASC) by the rule in the module's docstring (Intl.Collator: the browser's locale order).
TABLE_STATE = r"""
(() => {
  const table = document.querySelectorAll('table.sortable')[TI], th = table.tHead.rows[0].cells[COL];
  const rows = Array.from(table.tBodies[0].rows);
  const vals = rows.map((r) => r.cells[COL].textContent);
  const units = {B: 0, kB: 1, MB: 2, GB: 3, TB: 4};
  const number = (t) => {
    if (/^under [\d.]+$/.test(t.trim())) return 0;
    const m = t.trim().match(/^(-?\d+(?:\.\d+)?)(?: (B|kB|MB|GB|TB))?/);
    return m ? parseFloat(m[1]) * 1000 ** (units[m[2]] || 0) : null;
  };
  const collator = new Intl.Collator(undefined, {numeric: true, sensitivity: 'base'});
  let bad = null;
  for (let i = 1; i < vals.length && !bad; i++) {
    const a = vals[i - 1], b = vals[i], na = number(a), nb = number(b);
    const wrong = !NUMERIC ? (ASC ? 1 : -1) * collator.compare(a, b) > 0
      : (na === null || nb === null) ? (na === null && nb !== null) : (ASC ? na > nb : na < nb);
    if (wrong) bad = `${JSON.stringify(a)} before ${JSON.stringify(b)}`;
  }
  return {rows: rows.map((r) => r.textContent), bad, ariaSort: th.getAttribute('aria-sort')};
})()
"""


# The summary of the closed <details> holding table TI (scrolled into view), or null: a reader opens it first.
CLOSED_DETAILS = r"""
(() => {
  const d = document.querySelectorAll('table.sortable')[TI].closest('details');
  if (!d || d.open) return null;
  const s = d.querySelector('summary');
  s.scrollIntoView({block: 'center'});
  const r = s.getBoundingClientRect();
  return {x: r.left + 20, y: r.top + r.height / 2};
})()
"""


def js(template, **values):
    for k, v in values.items():
        template = template.replace(k, json.dumps(v))
    return template


def check_tables(browser):
    """Clicks every header twice; returns (tables, headers, failures)."""
    failures = []
    headers = browser.evaluate(HEADERS)
    opened = []  # summaries clicked open, closed again at the end
    for h in headers:
        ti, col = h["table"], h["col"]
        summary = browser.evaluate(js(CLOSED_DETAILS, TI=ti))
        if summary:
            browser.click(summary["x"], summary["y"])
            opened.append(ti)
        before = sorted(browser.evaluate(js(TABLE_STATE, TI=ti, COL=col, NUMERIC=h["numeric"], ASC=True))["rows"])
        for asc in (True, False):
            at = browser.evaluate(js(HEADER_AT, TI=ti, COL=col))
            browser.click(at["x"], at["y"])
            state = browser.evaluate(js(TABLE_STATE, TI=ti, COL=col, NUMERIC=h["numeric"], ASC=asc))
            way = "ascending" if asc else "descending"
            if state["bad"]:
                failures.append(f"{h['name']} {way} ({'numbers' if h['numeric'] else 'text'}): {state['bad']}")
            if sorted(state["rows"]) != before:
                failures.append(f"{h['name']} {way}: the rows changed, not only their order")
            if state["ariaSort"] != way:
                failures.append(f"{h['name']}: aria-sort is {state['ariaSort']!r} after the {way} click")
    for ti in opened:
        browser.evaluate(js("document.querySelectorAll('table.sortable')[TI].closest('details').open = false", TI=ti))
    return len({h["table"] for h in headers}), len(headers), failures


# ---- timeline -----------------------------------------------------------------------------------------------

# Measuring the timeline on screen, in viewport pixels. Installed once per page as window.__tl. The view is
# judged as a reader would: the ticks give the scale (x = a + b * ms), and every span must sit where that scale
# puts its times.
TIMELINE_PROBE = r"""
(() => {
  const svg = document.getElementById('tl-svg');
  if (!svg) return false;
  const spans = Array.from(svg.querySelectorAll('rect[data-s]:not(.mk)'));  // marks (.mk) have a minimum width
  const shown = (e) => getComputedStyle(e).display !== 'none';
  const box = (e) => { const r = e.getBoundingClientRect(); return {x: r.left, w: r.width, y: r.top, h: r.height}; };
  const scale = () => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  window.__tl = {
    plot() {
      const r = svg.getBoundingClientRect(), s = scale();
      return {left: r.left + svg.dataset.x0 * s, width: svg.dataset.w * s, top: r.top, height: r.height,
              span: +svg.dataset.span, minGpuPx: +svg.dataset.minGpuPx};
    },
    view() { return {k: +svg.dataset.k, off: +svg.dataset.off, w: +svg.dataset.w}; },
    // The scale the ticks show: x = a + b * t from the first two tick lines and their labels.
    scale() {
      const left = svg.getBoundingClientRect().left, s = scale();
      const lines = Array.from(svg.querySelectorAll('#tl-ticks line')).map((l) => left + l.getAttribute('x1') * s);
      const labels = Array.from(svg.querySelectorAll('#tl-ticks text')).map((t) => parseFloat(t.textContent));
      if (lines.length < 2 || labels.length !== lines.length) return {ticks: lines.length};
      const b = (lines[1] - lines[0]) / (labels[1] - labels[0]);
      return {ticks: lines.length, a: lines[0] - b * labels[0], b};
    },
    // Spans drawn away from where the ticks' scale puts them: the left edge (where it is inside the plot) and the
    // width (where both edges are). Returns how many were checked and the first few that are off.
    misplaced(a, b) {
      const p = this.plot(), out = [], inside = (x) => x > p.left + 1 && x < p.left + p.width - 1;
      let checked = 0;
      spans.filter(shown).forEach((e) => {
        const r = box(e), x = a + b * e.dataset.s, w = Math.max(0.6, b * (e.dataset.e - e.dataset.s));
        const bad = inside(x) && inside(x + w) ? Math.abs(r.x - x) > 1.5 || Math.abs(r.w - w) > 1
          : inside(x) ? Math.abs(r.x - x) > 1.5 : inside(x + w) ? Math.abs(r.x + r.w - x - w) > 1.5 : null;
        if (bad === null) return;
        checked++;
        if (bad)
          out.push(`${e.dataset.l || e.getAttribute('class')} at ${r.x.toFixed(1)} px, ${r.w.toFixed(1)} wide ` +
                   `(the ticks put it at ${x.toFixed(1)}, ${w.toFixed(1)} wide)`);
      });
      return {checked, off: out.slice(0, 3), count: out.length};
    },
    span(i) {
      const e = spans[i], r = svg.getBoundingClientRect(), s = scale();
      return {x: box(e).x, w: box(e).w, y: r.top + e.getAttribute('y') * s, h: e.getAttribute('height') * s,
              shown: shown(e), s: +e.dataset.s, e: +e.dataset.e};
    },
    // The first GPU span written hidden (too short at zoom 1).
    pickShortGpu() { return spans.findIndex((e) => e.classList.contains('g') && !shown(e)); },
    // Spans with room for a label (40 px of them visible) but no label shown inside them.
    unlabelled() {
      const p = this.plot(), texts = Array.from(svg.querySelectorAll('text.sl')).filter(shown).map(box);
      return spans.filter((e) => e.dataset.l && shown(e)).map((e) => [e, box(e)]).filter(([e, b]) => {
        const l = Math.max(b.x, p.left), r = Math.min(b.x + b.w, p.left + p.width);
        const inside = (t) => t.x >= l - 1 && t.x <= r && Math.abs(t.y + t.h / 2 - (b.y + b.h / 2)) < b.h;
        return r - l >= 40 && !texts.some(inside);
      }).map(([e]) => e.dataset.l).slice(0, 3);
    },
    // GPU spans drawn although shorter than the page's minimum at this zoom: a short kernel widened over idle
    // time (a long one cut by the view's edge is fine).
    narrowGpu() {
      const p = this.plot(), pxPerMs = p.width * this.view().k / p.span;
      return spans.filter((e) => e.classList.contains('g') && shown(e))
        .filter((e) => (e.dataset.e - e.dataset.s) * pxPerMs < p.minGpuPx - 0.01).length;
    },
    button(name) {
      const b = document.querySelector(`.tl-controls button[data-zoom="${name}"]`);
      if (!b || b.offsetParent === null) return null;
      b.scrollIntoView({block: 'nearest'});
      const r = b.getBoundingClientRect();
      return {x: r.left + r.width / 2, y: r.top + r.height / 2};
    },
    clip() {
      const r = document.getElementById('timeline').getBoundingClientRect();
      return {x: r.left + window.scrollX - 8, y: r.top + window.scrollY - 4, width: r.width + 16, height: r.height + 8};
    },
  };
  svg.scrollIntoView({block: 'center'});
  return true;
})()
"""


class Timeline:
    """The checks of the timeline, each adding to `failures`. After every action the scale is read off the ticks
    and compared with what the action should have done to it, and every span is checked against that scale."""

    def __init__(self, browser):
        self.b = browser
        self.failures = []
        self.edges_checked = 0  # span edges checked against the ticks in zoomed views
        self.skipped = ""  # why the page has no timeline to check (a launcher's), else empty
        self.lanes = ""  # what browser_lanes saw (state rows, arrows)

    def probe(self, what, *args):
        return self.b.evaluate(f"window.__tl.{what}({', '.join(json.dumps(a) for a in args)})")

    def expect(self, ok, message):
        if not ok:
            self.failures.append("timeline: " + message)
        return ok

    def scale(self, after):
        """The ticks' scale, with every span checked against it; None when the ticks cannot give one."""
        sc = self.probe("scale")
        if not self.expect("b" in sc, f"after {after}: {sc['ticks']} tick(s), too few to read the scale"):
            return None
        m = self.probe("misplaced", sc["a"], sc["b"])
        if after != "loading":
            self.edges_checked += m["checked"]
        self.expect(not m["count"], f"after {after}: {m['count']} span(s) away from the ticks' scale: "
                    + "; ".join(m["off"]))
        return sc

    def same(self, got, want, what, tol=1.5):
        """`got` and `want` are scales; `want` is what the action should have produced."""
        if got is None or want is None:
            return
        x0, x1 = self.plot["left"], self.plot["left"] + self.plot["width"]  # compare where the plot's edges land
        ok = abs(got["b"] / want["b"] - 1) < 0.01 and all(
            abs((x - got["a"]) / got["b"] - (x - want["a"]) / want["b"]) * got["b"] < tol for x in (x0, x1))
        self.expect(ok, f"{what}: the ticks show {got['b']:.3f} px/ms with 0 ms at {got['a']:.1f} px, expected "
                    f"{want['b']:.3f} px/ms with 0 ms at {want['a']:.1f} px")

    def run(self, shot):
        if not self.b.evaluate(TIMELINE_PROBE):
            # a launcher of ranks has no step of its own to draw: its page is the run's tables
            if self.b.evaluate("!!document.querySelector('#run[data-launcher]')"):
                self.skipped = "a launcher's page: no timeline of its own"
                # the run's timeline instead: a lane per rank and per rank's GPU, with spans drawn in it
                names = self.b.evaluate("[...document.querySelectorAll('#run-svg text')].map(t => t.textContent)") or []
                spans = self.b.evaluate("document.querySelectorAll('#run-svg rect').length") or 0
                if self.b.evaluate("!!document.querySelector('#run-svg')"):
                    lanes = [n for n in names if n.startswith("rank ")]
                    return (self.expect(any(n.startswith("rank 0") for n in lanes)
                                        and any(n.startswith("rank 1 GPU") for n in lanes),
                                        f"the run's timeline has no lane per rank: {lanes[:8]}")
                            and self.expect(spans > 4, f"the run's timeline draws {spans} span(s)"))
                return True
            return self.expect(False, "no svg#tl-svg on the page")
        if not self.expect(self.probe("button", "in"), "the zoom buttons are missing or hidden"):
            return False
        self.plot = self.probe("plot")
        self.expect(self.probe("narrowGpu") == 0, "a GPU span narrower than the minimum is drawn at zoom 1")
        s0 = self.scale("loading")
        self.expect(s0 is None or abs(s0["b"] * self.plot["span"] - self.plot["width"]) < 1,
                    "at zoom 1 the ticks do not span the whole step across the plot")
        s1 = self.zoom_button(s0)
        s2 = self.wheel(s1)
        s3 = self.drag(s2)
        unlabelled = self.probe("unlabelled")
        self.expect(not unlabelled, f"zoomed in, spans with room show no label: {unlabelled}")
        self.keys(s3, s0)
        self.short_gpu()
        self.b.evaluate("document.activeElement && document.activeElement.blur()")  # no focus ring in the picture
        self.b.screenshot(shot, self.probe("clip"))
        self.click_button("reset")
        v = self.probe("view")
        self.expect(v["k"] == 1 and v["off"] == 0, f"reset left zoom {v['k']}, offset {v['off']}")
        self.same(self.scale("reset"), s0, "reset")
        self.expect(self.edges_checked > 0, "no span edge was inside any zoomed view: nothing checked the spans")
        self.lanes = browser_lanes.run(self, shot.replace("-timeline.png", "-arrow.png"))
        return True

    def click_button(self, name):
        at = self.probe("button", name)
        self.b.click(at["x"], at["y"])

    def zoom_button(self, s0):
        self.click_button("in")
        mid = self.plot["left"] + self.plot["width"] / 2
        self.expect(self.probe("view")["k"] == 2, f"the + button: zoom {self.probe('view')['k']}, expected 2")
        got = self.scale("the + button")
        if s0:  # twice the px/ms, the instant in the middle kept
            self.same(got, {"b": 2 * s0["b"], "a": mid - 2 * (mid - s0["a"])}, "the + button (2x about the middle)")
        return got

    def wheel(self, s1):
        x, y = self.plot["left"] + 0.6 * self.plot["width"], self.plot["top"] + 30
        k1 = self.probe("view")["k"]
        self.b.wheel(x, y, -100)
        k2 = self.probe("view")["k"]
        self.expect(k2 > k1, f"the wheel did not zoom in (zoom {k1} -> {k2})")
        got = self.scale("the wheel")
        if s1:
            f = k2 / k1
            self.same(got, {"b": f * s1["b"], "a": x - f * (x - s1["a"])}, "the wheel (zoom about the pointer)")
        return got

    def drag(self, s2):
        v = self.probe("view")
        room_right = v["w"] - v["w"] / v["k"] - v["off"]  # plot px at zoom 1 the view can still move right
        dx = -200 if room_right * v["k"] > 220 else 200
        x, y = self.plot["left"] + self.plot["width"] / 2, self.plot["top"] + 30
        self.b.drag(x, y, x + dx)
        got = self.scale("a drag")
        if s2:
            self.same(got, {"b": s2["b"], "a": s2["a"] + dx}, f"a drag by {dx} px")
        return got

    def keys(self, s3, s0):
        self.b.click(self.plot["left"] + self.plot["width"] / 2, self.plot["top"] + 30)  # focus; no movement, no pan
        v = self.probe("view")
        right = (v["w"] - v["w"] / v["k"] - v["off"]) * v["k"] > self.plot["width"] / 10 + 5
        self.b.key(*(("ArrowRight", "ArrowRight", 39) if right else ("ArrowLeft", "ArrowLeft", 37)))
        if s3:
            step = self.plot["width"] / 10 * (-1 if right else 1)
            self.same(self.scale("an arrow key"), {"b": s3["b"], "a": s3["a"] + step},
                      "an arrow key (a tenth of the view)")
        self.b.key("0", "Digit0", 48)
        self.expect(self.probe("view")["k"] == 1, f"the 0 key left zoom {self.probe('view')['k']}")
        self.same(self.scale("the 0 key"), s0, "the 0 key (reset)")

    def pointer_over(self, s):
        """The viewport x of span `s`'s middle in the current view, kept inside the plot. Chromium delivers the
        pointer at a whole pixel (cut, not rounded), so each wheel zooms about a point up to a pixel off the one asked for; aiming
        anew before every wheel keeps that error from growing with the zoom (a span at the plot's right edge
        was pushed out of the view by it)."""
        v, p = self.probe("view"), self.plot
        zoom1 = (s["s"] + s["e"]) / 2 / p["span"] * v["w"]  # plot units at zoom 1
        x = p["left"] + (zoom1 - v["off"]) * v["k"] * p["width"] / v["w"]
        return min(max(x + 0.5, p["left"] + 0.5), p["left"] + p["width"] - 0.01)  # + 0.5: the whole pixel nearest

    def short_gpu(self):
        """Zooms with the wheel on a GPU span too short for zoom 1 until it is drawn on its own."""
        g = self.probe("pickShortGpu")
        if g < 0:
            for _ in range(3):
                self.click_button("in")
            return
        s = self.probe("span", g)
        need = self.plot["minGpuPx"] / ((s["e"] - s["s"]) / self.plot["span"] * self.plot["width"]) * 1.3
        if need > 4000:  # too short to draw even at the page's largest zoom: nothing to see
            return
        for _ in range(max(1, math.ceil(math.log(need) / math.log(1.25)))):
            self.b.wheel(self.pointer_over(s), s["y"] + s["h"] / 2, -100)
        s2, k = self.probe("span", g), self.probe("view")["k"]
        self.expect(s2["shown"] and s2["w"] >= self.plot["minGpuPx"] - 0.01,
                    f"at zoom {k:.0f} the short GPU span {s['s']}-{s['e']} ms is still not drawn on its own "
                    f"(shown: {s2['shown']}, {s2['w']:.2f} px)")
        self.expect(self.probe("narrowGpu") == 0, f"at zoom {k:.0f} a GPU span narrower than the minimum is drawn")
        self.scale(f"zooming in on a short GPU span (zoom {k:.0f})")


# ---- a page -------------------------------------------------------------------------------------------------

# The first screen (docs/reports.md): where the first finding starts on the page (it must be on a 1400 x 900
# screen), whether the verdict says the cause in words, and whether the data-quality notes are open.
FIRST_SCREEN = r"""
(() => {
  const f = document.querySelector('.finding'), v = document.getElementById('verdict');
  const q = document.getElementById('warnings');
  return {finding: f ? Math.round(f.getBoundingClientRect().top + window.scrollY) : null,
          verdict: v ? v.textContent : null, cause: !!(v && v.querySelector('.cat')),
          quality: q ? {open: q.open, summary: q.querySelector('summary').textContent} : null};
})()
"""

# The timeline's legend against what it draws: every legend swatch's colour must be the fill of a drawn span.
LEGEND = r"""
(() => {
  const sec = document.getElementById('timeline');
  if (!sec || !document.getElementById('tl-svg')) return null;
  const probe = document.createElement('i');
  document.body.appendChild(probe);
  const rgb = (c) => { probe.style.color = c; return getComputedStyle(probe).color; };
  const drawn = new Set(Array.from(document.querySelectorAll('#tl-svg rect[data-s]:not(.mk)'))
    .map((r) => rgb(r.getAttribute('fill'))));
  const legend = Array.from(sec.querySelectorAll('.legend span'))
    .map((sp) => ({name: sp.textContent, color: getComputedStyle(sp.querySelector('i')).backgroundColor}));
  probe.remove();
  return legend.filter((l) => !drawn.has(l.color)).map((l) => l.name);
})()
"""

# A finding's "show in the timeline" button, scrolled into view: its middle, or null when there is none.
GOTO = r"""
(() => {
  const b = document.querySelector('.finding button.tl-goto');
  if (!b) return null;
  b.scrollIntoView({block: 'center'});
  const r = b.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2, s: +b.dataset.gotoS, e: +b.dataset.gotoE};
})()
"""

# The timeline's view after a goto: zoom, and the instants at the plot's edges (ms from the step's start).
VIEW = r"""
(() => {
  const svg = document.getElementById('tl-svg'), k = +svg.dataset.k, off = +svg.dataset.off, W = +svg.dataset.w;
  const span = +svg.dataset.span, r = svg.getBoundingClientRect();
  return {k, span, t0: off / W * span, t1: (off + W / k) / W * span, top: r.top, bottom: r.bottom,
          vh: window.innerHeight};
})()
"""

FIRST_SCREEN_H = 900  # the screen the first finding must show on (1400 x 900)


def check_first_screen(browser):
    """(summary, failures) of the first screen: the first finding's top on the page, the verdict."""
    fs = browser.evaluate(FIRST_SCREEN)
    failures = []
    if fs["finding"] is not None and fs["finding"] >= FIRST_SCREEN_H:
        failures.append(f"the first finding starts {fs['finding']} px down: below a 1400 x {FIRST_SCREEN_H} screen")
    if fs["finding"] is not None and not fs["cause"]:
        failures.append("findings, but the first screen names no primary cause in words (#verdict .cat)")
    if fs["quality"] and fs["quality"]["open"] != ("check first" in fs["quality"]["summary"]):
        failures.append(f"the data-quality notes are {'open' if fs['quality']['open'] else 'closed'} under the "
                        f"summary {fs['quality']['summary']!r}")
    where = "no finding" if fs["finding"] is None else f"first finding at {fs['finding']} px"
    return where, failures


def check_timeline_links(browser):
    """Failures of the legend (only what is drawn) and of a finding's one-click zoom to its example span."""
    failures = []
    extra = browser.evaluate(LEGEND)
    if extra:
        failures.append(f"the timeline's legend lists what it does not draw: {extra}")
    at = browser.evaluate(GOTO)
    if at:
        browser.click(at["x"], at["y"])
        browser.settle()
        v = browser.evaluate(VIEW)
        # the span in view with at most a fifth of it on each side (the whole step when the span is most of it)
        want = min(v["span"], max((at["e"] - at["s"]) * 1.4, v["span"] / 5000))
        if not (v["t0"] <= at["s"] + 1e-6 and v["t1"] >= at["e"] - 1e-6 and v["t1"] - v["t0"] <= want * 1.01 + 1e-6):
            failures.append(f"'show in the timeline' for {at['s']:.3f}-{at['e']:.3f} ms left the view at zoom "
                            f"{v['k']:.2f}, {v['t0']:.3f}-{v['t1']:.3f} ms")
        if v["bottom"] < 0 or v["top"] > v["vh"]:
            failures.append("'show in the timeline' did not bring the timeline into view")
    return failures


LAYOUT = r"""
(() => ({width: document.documentElement.scrollWidth, view: window.innerWidth,
         process: (() => { const d = document.getElementById('process'); return d ? d.open : null; })()}))()
"""


def check_page(browser, html, out_dir):
    """Returns (summary, failures): everything wrong with one page."""
    browser.events.clear()
    nav = browser.call("Page.navigate", {"url": "file://" + os.path.abspath(html)}, session=True)
    if nav.get("errorText"):
        return "", [f"could not load: {nav['errorText']}"]
    browser.wait_for("Page.loadEventFired")
    failures = []
    stem = os.path.join(out_dir, os.path.splitext(os.path.basename(html))[0])
    browser.screenshot(stem + ".png")  # as the page opens, before anything is sorted or zoomed
    browser.screenshot(stem + "-top.png", {"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT})
    first_screen, fs_failures = check_first_screen(browser)
    failures += fs_failures
    layout = browser.evaluate(LAYOUT)
    if layout["width"] > layout["view"]:
        failures.append(f"the page is {layout['width']} px wide in a {layout['view']} px window")
    if layout["process"]:
        failures.append("the process details are open; they belong collapsed")
    tables, headers, sort_failures = check_tables(browser)
    failures += sort_failures
    if tables == 0:
        failures.append("no sortable table on the page")
    timeline = Timeline(browser)
    timeline.run(stem + "-timeline.png")
    failures += timeline.failures
    failures += check_timeline_links(browser)
    drawn = f"no timeline ({timeline.skipped})" if timeline.skipped else "timeline zoomed and panned"
    if timeline.lanes:
        drawn += f" ({timeline.lanes})"
    summary = f"{first_screen}, {tables} tables, {headers} headers sorted both ways, {drawn}, screenshots {stem}.png"
    return summary, browser.problems() + failures  # problems: at load and during everything above


# (name, what the copy breaks, old text, new text): each copy of a good page must fail the check.
BREAKAGES = [
    ("no-sort", "the sort script no longer moves rows", "rows.forEach(function (r) { body.appendChild(r); });", ""),
    ("numbers-as-text", "numeric columns sorted as text", "numeric = th.classList.contains('n');", "numeric = false;"),
    ("no-zoom", "zooming leaves the zoom factor alone", "k = Math.min(Math.max(k * factor, 1), MAX_ZOOM);", ""),
    ("no-pan", "dragging does not move the view", "off = drag.off - (plotX(ev) - drag.x) / k;", ""),
    ("spans-stay", "zooming leaves the spans where they were", "s.rect.setAttribute('x', a.toFixed(2));", ""),
    ("ticks-stay", "zooming leaves the ticks alone", "drawTicks(t0, t1);", ""),
    ("stale-labels", "labels stay where zoom 1 put them", "placeLabel(s, Math.max(a, X0),", "(0) && placeLabel(s, 0,"),
    ("short-gpu-widened", "short GPU spans drawn at the minimum width", "gpu: r.classList.contains('g')",
     "gpu: false"),
    ("process-open", "the process details shown open", '<details id="process">', '<details id="process" open>'),
    ("finding-below-fold", "the first finding pushed below the first screen", '<section id="findings">',
     '<div style="height:900px"></div><section id="findings">'),
    ("legend-too-long", "the timeline's legend lists a category it does not draw", '<div class="legend"><span>',
     '<div class="legend"><span><i class="sw" style="background:#123456"></i>nothing</span><span>'),
    ("console-error", "the page logs an error", "</body>", "<script>console.error('broken on purpose')</script></body>"),
    ("network", "the page loads an image from the network", "</body>",
     "<img src=\"http://127.0.0.1:9/logo.png\" alt=\"\"></body>"),
    ("too-wide", "a figure wider than the window", "</body>", "<div style=\"width:1600px\">wide</div></body>"),
    ("no-arrow", "a click on a CUDA call draws no arrow", "drawArrows(t0, pxPerMs);", ""),
    ("arrow-off-kernel", "the arrow ends past the kernel's start", "var x2 = X0 + (g.start - t0) * pxPerMs",
     "var x2 = X0 + (g.end - t0) * pxPerMs + 9"),
    ("state-labels-cut", "thread-state labels drawn past the end of their stretch",
     "s.text.setAttribute('x', (x + 2).toFixed(2));",
     "s.text.setAttribute('x', (x + 2 + (s.labelFill !== '#fff' ? width - 8 : 0)).toFixed(2));"),
]


def self_test(browser, page, out_dir):
    """0 when every broken copy of `page` fails the check (and the page itself passes), else 1."""
    text = open(page).read()
    _, failures = check_page(browser, page, out_dir)
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
        try:
            _, failures = check_page(browser, broken, out_dir)
        except RuntimeError as e:  # a page so broken the probe itself fails also counts as caught
            failures = [str(e)]
        print(f"{'ok' if failures else 'FAIL'} self-test: {name} ({what}): "
              f"{'caught: ' + failures[0] if failures else 'NOT caught'}")
        ok &= bool(failures)
    return 0 if ok else 1


def make_pages(inputs, analyze, out_dir):
    """The pages to check: the inputs themselves, or iscope-analyze's report of each. None when one failed."""
    if not analyze:
        return inputs
    pages = []
    for src in inputs:
        name = os.path.basename(src)
        for ext in (".json.gz", ".json", ".iscope"):  # a rank's dump run.4711.iscope keeps its pid: run.4711.html
            if name.endswith(ext):
                name = name[: -len(ext)]
                break
        page = os.path.join(out_dir, name + ".html")
        r = subprocess.run([analyze, src, "-o", page], capture_output=True, text=True)
        if r.returncode not in (0, 3) or not os.path.exists(page):
            print(f"FAIL {src}: iscope-analyze exited {r.returncode}: {r.stderr.strip()[-300:]}")
            return None
        pages.append(page)
    return pages


def missing_tool(args):
    if not args.chromium or not os.path.exists(args.chromium):
        return "Chromium not found (Debian: apt-get install chromium)"
    if websocket is None:
        return "the websocket module is missing (Debian: apt-get install python3-websocket)"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--out", required=True, help="folder for the screenshots (and the pages made by --analyze)")
    ap.add_argument("--analyze", help="iscope-analyze: turn each input into OUT/<name>.html first")
    ap.add_argument("--self-test", action="store_true", help="check that the check fails on broken copies of the "
                    "first input's page")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    missing = missing_tool(args)
    if missing:
        if os.environ.get("ISCOPE_TEST_REQUIRE_BROWSER") == "1":
            print(f"FAIL: {missing}, and ISCOPE_TEST_REQUIRE_BROWSER=1 requires the browser check")
            return 1
        print(f"SKIPPED: {missing}; reports not checked in a browser")
        return 77
    os.makedirs(args.out, exist_ok=True)
    pages = make_pages(args.inputs, args.analyze, args.out)
    if pages is None:
        return 1
    browser = Browser(args.chromium)
    try:
        if args.self_test:
            return self_test(browser, pages[0], args.out)
        failed = 0
        for page in pages:
            summary, failures = check_page(browser, page, args.out)
            print(f"{'ok' if not failures else 'FAIL'} {page}: {summary}")
            for f in failures:
                print("  - " + f)
            failed += bool(failures)
    finally:
        browser.close()
    print(f"browser_check: {len(pages) - failed} of {len(pages)} pages passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
