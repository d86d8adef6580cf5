"""The step timeline's thread-state rows and launch-to-kernel arrows, checked in the browser for browser_check.py
(its Timeline drives the view; this module only adds what these two need):

  * arrows: the widest CUDA call whose GPU work is drawn in the step (rect[data-k] outside a GPU lane) is zoomed
    to until it is a few pixels wide and clicked with the mouse; there must then be one arrow per call and GPU
    span of that correlation id, each starting at the call's left edge on its bottom and ending at the GPU span's
    start (where the ticks' scale puts it) on its top; Esc must clear them;
  * state rows: every thread-state label shown lies inside its stretch and the plot (never cut by the next
    stretch or the plot's edge), the row's name fits the label column, at zoom 1 and zoomed in.
"""
# Installed as window.__lanes once the timeline probe (window.__tl) is; viewport pixels throughout.
LANES_PROBE = r"""
(() => {
  const svg = document.getElementById('tl-svg');
  if (!svg) return false;
  const box = (e) => { const r = e.getBoundingClientRect(); return {x: r.left, w: r.width, y: r.top, h: r.height}; };
  const shown = (e) => getComputedStyle(e).display !== 'none';
  const scale = () => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  window.__lanes = {
    // The widest call with its GPU work drawn, or null.
    pickCall() {
      const calls = Array.from(svg.querySelectorAll('rect[data-k]:not(.g)'));
      if (!calls.length) return null;
      calls.sort((a, b) => (b.dataset.e - b.dataset.s) - (a.dataset.e - a.dataset.s));
      const e = calls[0];
      e.scrollIntoView({block: 'center'});
      return {key: e.dataset.k, s: +e.dataset.s, e: +e.dataset.e, label: e.dataset.l};
    },
    call(key) {
      const e = svg.querySelector(`rect[data-k="${key}"]:not(.g)`);
      return {...box(e), shown: shown(e)};
    },
    // The selection, its arrows' ends, and where the spans of `key` are.
    arrows(key) {
      const r = svg.getBoundingClientRect(), s = scale(), sc = window.__tl.scale();
      const ends = Array.from(svg.querySelectorAll('#tl-arrows path.tl-arrow')).map((p) => {
        const n = p.getAttribute('d').match(/-?[\d.]+/g).map(Number);
        return {x1: r.left + n[0] * s, y1: r.top + n[1] * s, x2: r.left + n[n.length - 2] * s,
                y2: r.top + n[n.length - 1] * s};
      });
      const spans = Array.from(svg.querySelectorAll(`rect[data-k="${key}"]`)).map((e) => ({
        gpu: e.classList.contains('g'), left: box(e).x, bottom: r.top + (+e.getAttribute('y') + +e.getAttribute('height')) * s,
        top: r.top + e.getAttribute('y') * s, start: sc.a + sc.b * e.dataset.s}));
      const sel = document.getElementById('tl-sel');
      return {sel: svg.dataset.sel || '', ends, spans, text: sel ? sel.textContent : ''};
    },
    // Labels of the state rows that stick out of their stretch or the plot, and row names over the plot.
    cutStates() {
      const p = window.__tl.plot(), out = [];
      let labels = 0;
      svg.querySelectorAll('rect.st').forEach((e) => {
        const t = e.nextElementSibling;
        if (!shown(e) || !t || !t.classList.contains('sl') || !shown(t)) return;
        labels++;
        const rb = box(e), tb = box(t), l = Math.max(rb.x, p.left), rr = Math.min(rb.x + rb.w, p.left + p.width);
        if (tb.x < l - 1 || tb.x + tb.w > rr + 1 || Math.abs(tb.y + tb.h / 2 - (rb.y + rb.h / 2)) > rb.h / 2)
          out.push(`"${t.textContent}" at ${tb.x.toFixed(1)}-${(tb.x + tb.w).toFixed(1)} px in a stretch at ` +
                   `${l.toFixed(1)}-${rr.toFixed(1)} px`);
      });
      const names = Array.from(svg.querySelectorAll('text')).filter((t) => t.textContent.startsWith('thread state'));
      names.forEach((t) => {
        const b = box(t);
        if (b.x + b.w > p.left) out.push(`the row name "${t.textContent}" reaches ${(b.x + b.w).toFixed(1)} px, over the plot`);
      });
      return {rows: svg.querySelectorAll('rect.st').length, names: names.length, labels, cut: out.slice(0, 3), count: out.length};
    },
  };
  return true;
})()
"""


def near(a, b, tol=1.5):
    return abs(a - b) <= tol


def check_states(tl, when):
    """The state rows' labels at the current view; a note of what was seen ("" when the page has none)."""
    c = tl.b.evaluate("window.__lanes.cutStates()")
    if not c["rows"]:
        return ""
    tl.expect(c["names"] > 0, f"{when}: {c['rows']} thread-state stretch(es) but no row named 'thread state'")
    tl.expect(not c["count"], f"{when}: {c['count']} thread-state label(s) cut: " + "; ".join(c["cut"]))
    return f"{c['rows']} thread-state stretches ({c['labels']} labelled {when})"


def zoom_onto(tl, call, min_px=4, max_wheels=60):
    """Wheels in on the call until it is `min_px` wide on screen (or the page's largest zoom)."""
    for _ in range(max_wheels):
        box = tl.b.evaluate(f"window.__lanes.call({call['key']!r})")
        if box["shown"] and box["w"] >= min_px:
            return box
        tl.b.wheel(tl.pointer_over(call), box["y"] + box["h"] / 2, -100)
    return tl.b.evaluate(f"window.__lanes.call({call['key']!r})")


def check_arrows(tl, shot):
    """Clicks a CUDA call that has its GPU work drawn and checks the arrows; a note of what was seen."""
    call = tl.b.evaluate("window.__lanes.pickCall()")
    if not call:
        return "no CUDA call with its GPU work in the step"
    box = zoom_onto(tl, call)
    x = min(max(box["x"] + box["w"] / 2, tl.plot["left"] + 1), tl.plot["left"] + tl.plot["width"] - 1)
    tl.b.click(x, box["y"] + box["h"] / 2)
    tl.b.settle()
    st = tl.b.evaluate(f"window.__lanes.arrows({call['key']!r})")
    calls = [s for s in st["spans"] if not s["gpu"]]
    work = [s for s in st["spans"] if s["gpu"]]
    ok = tl.expect(st["sel"] == call["key"], f"a click on {call['label']} (correlation {call['key']}) selected "
                   f"{st['sel'] or 'nothing'}")
    ok &= tl.expect(bool(st["ends"]) and len(st["ends"]) == len(calls) * len(work),
                    f"{len(st['ends'])} arrow(s) for {len(calls)} call(s) and {len(work)} GPU span(s) of correlation "
                    f"{call['key']}")
    for e in st["ends"]:
        from_call = any(near(e["x1"], c["left"]) and near(e["y1"], c["bottom"]) for c in calls)
        to_work = any(near(e["x2"], w["start"]) and near(e["y2"], w["top"]) for w in work)
        tl.expect(from_call, f"an arrow starts at ({e['x1']:.1f}, {e['y1']:.1f}), not at the bottom left of "
                  f"{call['label']}: {[(round(c['left'], 1), round(c['bottom'], 1)) for c in calls]}")
        tl.expect(to_work, f"an arrow ends at ({e['x2']:.1f}, {e['y2']:.1f}), not at the start of the GPU work "
                  f"launched: {[(round(w['start'], 1), round(w['top'], 1)) for w in work]}")
    tl.expect(st["text"].strip() != "", "the selection is not named beside the timeline (#tl-sel)")
    states = check_states(tl, "zoomed onto a call")
    if ok:
        tl.b.screenshot(shot, tl.probe("clip"))
    tl.b.key("Escape", "Escape", 27)
    after = tl.b.evaluate(f"window.__lanes.arrows({call['key']!r})")
    tl.expect(not after["ends"] and after["sel"] == "", f"Esc left {len(after['ends'])} arrow(s), selection "
              f"{after['sel']!r}")
    tl.b.key("0", "Digit0", 48)
    return f"arrows of {call['label']} ({len(work)} GPU span(s)) checked" + (f", {states}" if states else "")


def run(tl, shot):
    """The state rows at zoom 1, then the arrows (which zoom in, and check the rows again there); a note."""
    if not tl.b.evaluate(LANES_PROBE):
        return ""
    states = check_states(tl, "at zoom 1")
    arrows = check_arrows(tl, shot)
    return ", ".join(x for x in (states, arrows) if x)
