// The HTML report's scripts, inlined into every page (html.cpp). Both only enhance the page: without them the
// tables are complete and ordered and the timeline shows the whole step.
#pragma once

namespace inferscope::report::html {

// Sorting is a convenience: the tables are complete and ordered without it. Each table gets its own handlers and
// a header sorts by its own column (th.cellIndex): an index counted over all the page's headers, as an earlier
// version used, only fits the first table and threw a TypeError on any other. What it needs of the markup
// (Table::write): a <thead> row of <th>, class "n" on a numeric column's header, and a <tbody> whose rows have a
// cell per header; a <tfoot> (a total) stays where it is.
//  - A numeric column sorts by the number a cell starts with: "12.5", "234.2 MB" as bytes, "55.0 (assumed)" as
//    55. A figure below the counter's resolution ("under 10" ms of CPU time) sorts as 0, before every measured
//    one. Cells with no number ("n/a", "unknown", "-") go last either way, so the largest values come first on
//    the second click.
//  - A text column sorts in the reader's locale, digits as numbers ("linear.py:99" before "linear.py:130").
//  - The first click sorts ascending, the next one descending; aria-sort on the header says which (and the
//    style draws the arrow).
// tests/report/html_sort_harness.js runs it in node on a generated page; tests/report/browser_check.py in Chromium.
constexpr const char* kScript = R"JS(
(function () {
  var UNITS = {B: 0, kB: 1, MB: 2, GB: 3, TB: 4};
  var text = new Intl.Collator(undefined, {numeric: true, sensitivity: 'base'});

  function cellNumber(t) {
    if (/^under [\d.]+$/.test(t.trim())) return 0;
    var m = t.trim().match(/^(-?\d+(?:\.\d+)?)(?: (B|kB|MB|GB|TB)\b)?/);
    if (!m) return NaN;
    return parseFloat(m[1]) * (m[2] ? Math.pow(1000, UNITS[m[2]]) : 1);
  }

  function compare(x, y, numeric, asc) {
    if (!numeric) return asc ? text.compare(x, y) : text.compare(y, x);
    var nx = cellNumber(x), ny = cellNumber(y);
    if (isNaN(nx) || isNaN(ny)) return isNaN(nx) - isNaN(ny);
    return asc ? nx - ny : ny - nx;
  }

  function sortBy(table, th) {
    var col = th.cellIndex, numeric = th.classList.contains('n');
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    var body = table.tBodies[0], rows = Array.from(body.rows);
    rows.sort(function (a, b) {
      return compare(a.cells[col].textContent, b.cells[col].textContent, numeric, asc);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
  }

  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener('click', function () { sortBy(table, th); });
    });
  });
})();
)JS";

// Zoom and pan of the step timeline (html_timeline.cpp's markup): svg#tl-svg with the plot's geometry in data-*
// (x0, w: the plot's left edge and width; span: the milliseconds it shows at zoom 1), every span a rect with
// data-s/data-e (ms) and data-l (its label), g#tl-ticks, rect.density (the strips drawn for zoom 1).
// The view is a zoom factor k >= 1 and an offset `off`, the view's left edge in plot pixels at zoom 1. Each
// redraw places every span from its times (a transform would stretch the labels), labels the spans that now
// have room, shows GPU spans (class g) once they are MIN_GPU_PX wide and sums the narrower ones into strips of
// the visible range (the server's strips are for zoom 1 only), redraws the ticks and the selection's arrows
// (a CUDA call and its GPU work, which share data-k). svg.dataset.k and .off hold the view for
// tests/report/browser_check.py. Thread-state rows (rect.st) are placed like spans; their labels are dark (data-lc).
constexpr const char* kTimelineScript = R"JS(
(function () {
  var svg = document.getElementById('tl-svg');
  if (!svg) return;
  var NS = svg.namespaceURI;
  var X0 = +svg.dataset.x0, W = +svg.dataset.w, H = +svg.dataset.h, SPAN = +svg.dataset.span;
  var MIN_GPU_PX = +svg.dataset.minGpuPx, MIN_OPACITY = +svg.dataset.minOpacity, MAX_ZOOM = 5000;
  var LABEL_DY = +svg.dataset.labelDy || 10;
  var k = 1, off = 0;
  var ticks = document.getElementById('tl-ticks'), viewText = document.getElementById('tl-view');
  var serverStrips = Array.from(svg.querySelectorAll('rect.density'));
  var spans = Array.from(svg.querySelectorAll('rect[data-s]')).map(function (r) {
    var next = r.nextElementSibling;
    r.removeAttribute('display');  // a short GPU span's; from here on placeSpan shows or hides each span
    return {rect: r, start: +r.dataset.s, end: +r.dataset.e, label: r.dataset.l || '', labelFill: r.dataset.lc || '#fff',
            gpu: r.classList.contains('g'), mark: r.classList.contains('mk') ? (r.classList.contains('hl') ? 3 : 1.5) : 0,
            key: r.dataset.k || '', state: r.classList.contains('st'),
            text: next && next.classList.contains('sl') ? next : null};
  });

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function truncate(s, n) {
    var chars = Array.from(s);
    return chars.length <= n ? s : chars.slice(0, n - 1).join('') + '\u2026';
  }

  // fit_label in html_timeline.cpp: the whole label, else its last part, cut where 5 or more characters fit.
  function fitLabel(label, fits) {
    if (Array.from(label).length <= fits) return label;
    var tail = label;
    var seps = ['::', '.'];
    for (var i = 0; i < seps.length; i++) {
      var at = label.lastIndexOf(seps[i]);
      if (at < 0) continue;
      if (label.length - at - seps[i].length >= 3) tail = label.slice(at + seps[i].length);
      break;
    }
    if (Array.from(tail).length <= fits) return tail;
    return fits >= 5 ? truncate(tail, fits) : '';
  }

  // A label where it fits, about 6.6 px a character (the rule html_timeline.cpp uses at zoom 1).
  function placeLabel(s, x, width) {
    var fits = width > 24 ? Math.floor((width - 4) / 6.6) : 0;
    var text = s.label ? fitLabel(s.label, fits) : '';
    if (!text) {
      if (s.text) s.text.style.display = 'none';
      return;
    }
    if (!s.text) {
      s.text = el('text', {'class': 'sl', y: +s.rect.getAttribute('y') + LABEL_DY, fill: s.labelFill, 'pointer-events': 'none'});
      s.rect.after(s.text);
    }
    s.text.style.display = '';
    s.text.setAttribute('x', (x + 2).toFixed(2));
    s.text.textContent = text;
    // A thread state's words are wider than 6.6 px a character ("runn\u2026" took 36.4 px of a 37 px stretch):
    // measured, and cut shorter until they fit (few such labels, so the measuring costs little).
    for (var n = fits - 1; s.state && n >= 0 && s.text.getComputedTextLength() > width - 3; n--) {
      var shorter = n >= 5 ? fitLabel(s.label, n) : '';
      if (!shorter) { s.text.style.display = 'none'; break; }
      s.text.textContent = shorter;
    }
  }

  function placeSpan(s, t0, pxPerMs) {
    var a = X0 + (s.start - t0) * pxPerMs, b = X0 + (s.end - t0) * pxPerMs;
    var shown = b >= X0 && a <= X0 + W && !(s.gpu && b - a < MIN_GPU_PX);
    s.rect.style.display = shown ? '' : 'none';
    if (!shown) {
      if (s.text) s.text.style.display = 'none';
      return;
    }
    a = Math.max(a, X0 - 1);  // only the visible part: no coordinates in the millions at a high zoom
    b = Math.min(b, X0 + W + 1);
    var width = Math.max(s.mark || 0.6, b - a);
    s.rect.setAttribute('x', a.toFixed(2));
    s.rect.setAttribute('width', width.toFixed(2));
    placeLabel(s, Math.max(a, X0), Math.min(b, X0 + W) - Math.max(a, X0));
  }

  // The GPU spans still narrower than MIN_GPU_PX, per lane, row and category: the busy part of each pixel of
  // the view, drawn as runs of equal opacity (at least MIN_OPACITY where anything ran).
  function drawStrips(t0, pxPerMs) {
    var zoomed = k > 1;
    serverStrips.forEach(function (r) { r.style.display = zoomed ? 'none' : ''; });
    svg.querySelectorAll('g.tl-strip').forEach(function (g) { g.remove(); });
    if (!zoomed) return;
    var strips = new Map();
    spans.forEach(function (s) {
      if (!s.gpu) return;
      var a = (s.start - t0) * pxPerMs, b = (s.end - t0) * pxPerMs;
      if (b - a >= MIN_GPU_PX || b < 0 || a > W) return;
      var key = s.rect.parentNode, id = s.rect.getAttribute('y') + ' ' + s.rect.dataset.c;
      if (!strips.has(key)) strips.set(key, new Map());
      var lane = strips.get(key);
      if (!lane.has(id)) lane.set(id, {like: s.rect, busy: new Float64Array(W), count: new Uint32Array(W)});
      var st = lane.get(id), first = Math.max(0, Math.floor(a));
      st.count[Math.min(first, W - 1)]++;
      for (var p = first; p < W && p < b; p++) st.busy[p] += Math.min(b, p + 1) - Math.max(a, p);
    });
    strips.forEach(function (lane, group) {
      var g = el('g', {'class': 'tl-strip'}, group);
      lane.forEach(function (st) { drawStrip(st, g, t0, pxPerMs); });
    });
  }

  function drawStrip(st, g, t0, pxPerMs) {
    var level = function (p) { return Math.round(Math.min(1, st.busy[p]) * 100); };
    for (var p = 0; p < W;) {
      var lv = level(p), end = p + 1, n = 0, busy = 0;
      while (end < W && level(end) === lv) end++;
      for (var q = p; q < end; q++) { n += st.count[q]; busy += Math.min(1, st.busy[q]); }
      if (lv > 0 || n > 0) {
        var r = el('rect', {'class': 'density', x: X0 + p, y: st.like.getAttribute('y'), width: end - p,
                            height: st.like.getAttribute('height'), fill: st.like.getAttribute('fill'),
                            'fill-opacity': Math.max(MIN_OPACITY, lv / 100)}, g);
        el('title', {}, r).textContent = n + ' short ' + st.like.dataset.c + ' span(s) in ' +
            (t0 + p / pxPerMs).toFixed(4) + '\u2013' + (t0 + end / pxPerMs).toFixed(4) + ' ms, busy ' +
            Math.round(busy / (end - p) * 100) + ' % of it';
      }
      p = end;
    }
  }

  // Ticks about a tenth of the view apart, rounded to 1, 2 or 5 times a power of ten (nice_step in
  // html_timeline.cpp, so that zoom 1 looks as written), with the digits that tell them apart.
  function drawTicks(t0, t1) {
    var raw = (t1 - t0) / 10, pow = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * pow; }).filter(function (v) { return raw <= v; })[0];
    var digits = step < 0.01 ? Math.min(6, Math.max(3, -Math.floor(Math.log10(step) + 1e-9))) : step < 1 ? 2 : 1;
    while (ticks.firstChild) ticks.removeChild(ticks.firstChild);
    for (var t = Math.ceil(t0 / step) * step; t <= t1 + step * 1e-6; t += step) {
      var x = (X0 + (t - t0) / (t1 - t0) * W).toFixed(1);
      el('line', {x1: x, y1: 16, x2: x, y2: H, stroke: '#e3e7eb'}, ticks);
      el('text', {x: +x + 2, y: 12, fill: '#5d6875'}, ticks).textContent = t.toFixed(digits) + ' ms';
    }
  }

  // The selection: a correlation id (data-k) whose CUDA call and GPU work are joined by arrows, from the call's
  // start at its bottom edge to the GPU work's start at its top (where a short kernel is not drawn, to where it
  // ran). svg.dataset.sel holds it for tests/report/browser_check.py.
  var arrows = document.getElementById('tl-arrows'), selText = document.getElementById('tl-sel'), selected = '';
  var byKey = new Map();
  spans.forEach(function (s) {
    if (!s.key) return;
    if (!byKey.has(s.key)) byKey.set(s.key, []);
    byKey.get(s.key).push(s);
  });
  function drawArrows(t0, pxPerMs) {
    if (!arrows) return;
    while (arrows.firstChild) arrows.removeChild(arrows.firstChild);
    var group = byKey.get(selected) || [];
    var calls = group.filter(function (s) { return !s.gpu; }), work = group.filter(function (s) { return s.gpu; });
    calls.forEach(function (c) {
      var x1 = X0 + (c.start - t0) * pxPerMs, y1 = +c.rect.getAttribute('y') + +c.rect.getAttribute('height');
      work.forEach(function (g) {
        var x2 = X0 + (g.start - t0) * pxPerMs, y2 = +g.rect.getAttribute('y'), bend = Math.max(12, (y2 - y1) / 2);
        el('path', {'class': 'tl-arrow', d: 'M' + x1.toFixed(2) + ' ' + y1.toFixed(1) + ' C' + x1.toFixed(2) + ' ' +
                    (y1 + bend).toFixed(1) + ' ' + x2.toFixed(2) + ' ' + (y2 - bend).toFixed(1) + ' ' + x2.toFixed(2) +
                    ' ' + y2.toFixed(1), fill: 'none', stroke: '#1d232b', 'stroke-width': 1.5}, arrows);
        // Its head, pointing down the curve's last (vertical) stretch (a path, not an SVG marker, which a page refers to by URL).
        el('path', {'class': 'tl-head', d: 'M' + (x2 - 4).toFixed(2) + ' ' + (y2 - 7).toFixed(1) + ' L' +
                    (x2 + 4).toFixed(2) + ' ' + (y2 - 7).toFixed(1) + ' L' + x2.toFixed(2) + ' ' + y2.toFixed(1) + ' Z',
                    fill: '#1d232b'}, arrows);
      });
    });
  }
  function select(key) {
    (byKey.get(selected) || []).forEach(function (s) { s.rect.classList.remove('sel'); });
    selected = byKey.has(key) ? key : '';
    var group = byKey.get(selected) || [];
    group.forEach(function (s) { s.rect.classList.add('sel'); });
    svg.dataset.sel = selected;
    if (selText) {
      var calls = group.filter(function (s) { return !s.gpu; }), work = group.filter(function (s) { return s.gpu; });
      selText.textContent = !group.length ? '' : calls.map(function (s) { return s.label; }).join(', ') + ' \u2192 ' +
          work.map(function (s) { return s.label; }).join(', ') + (calls.length && work.length ? ': it started ' +
          ((work[0].start - calls[0].start) * 1000).toFixed(1) + ' us after the call began' : '');
    }
    draw();
  }

  function draw() {
    k = Math.min(Math.max(k, 1), MAX_ZOOM);
    if (k < 1.001) k = 1;
    off = Math.max(0, Math.min(off, W - W / k));
    var t0 = off / W * SPAN, t1 = (off + W / k) / W * SPAN, pxPerMs = W * k / SPAN;
    spans.forEach(function (s) { placeSpan(s, t0, pxPerMs); });
    drawStrips(t0, pxPerMs);
    drawTicks(t0, t1);
    drawArrows(t0, pxPerMs);
    svg.dataset.k = k;
    svg.dataset.off = off;
    viewText.textContent = k > 1 ? 'showing ' + t0.toFixed(3) + '\u2013' + t1.toFixed(3) + ' ms' : '';
  }

  // Zooms by `factor` keeping the instant under plot x `px` where it is.
  function zoomAt(factor, px) {
    var at = off + px / k;
    k = Math.min(Math.max(k * factor, 1), MAX_ZOOM);
    off = at - px / k;
    draw();
  }
  function panBy(px) { off += px / k; draw(); }
  function reset() { k = 1; off = 0; draw(); }
  // Shows [t0, t1] (ms from the step's start) with a margin of a fifth of it on each side.
  function zoomTo(t0, t1) {
    var pad = Math.max((t1 - t0) * 0.2, SPAN / MAX_ZOOM);
    t0 = Math.max(0, t0 - pad);
    t1 = Math.min(SPAN, t1 + pad);
    k = SPAN / Math.max(t1 - t0, SPAN / MAX_ZOOM);
    off = t0 / SPAN * W;
    draw();
  }
  function plotX(ev) {
    var r = svg.getBoundingClientRect();
    return (ev.clientX - r.left) * (svg.viewBox.baseVal.width / r.width) - X0;
  }

  svg.addEventListener('wheel', function (ev) {
    var px = plotX(ev);
    if (px < 0 || px > W) return;
    ev.preventDefault();
    if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) panBy(ev.deltaX);
    else zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, px);
  }, {passive: false});
  var drag = null, pressedAt = null;
  svg.addEventListener('mousedown', function (ev) {
    if (ev.button !== 0) return;
    ev.preventDefault();  // no text selection; focus for the keys instead
    svg.focus({preventScroll: true});
    drag = {x: plotX(ev), off: off};
    pressedAt = {x: ev.clientX, y: ev.clientY};
    svg.classList.add('dragging');
  });
  // A click (not the end of a drag) on a span with a correlation id selects it; anywhere else clears.
  svg.addEventListener('click', function (ev) {
    if (pressedAt && Math.abs(ev.clientX - pressedAt.x) + Math.abs(ev.clientY - pressedAt.y) > 4) return;
    var r = ev.target.closest ? ev.target.closest('rect[data-k]') : null;
    select(r ? r.dataset.k : '');
  });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    off = drag.off - (plotX(ev) - drag.x) / k;
    draw();
  });
  window.addEventListener('mouseup', function () {
    drag = null;
    svg.classList.remove('dragging');
  });
  var keys = {
    '+': function () { zoomAt(2, W / 2); }, '=': function () { zoomAt(2, W / 2); },
    '-': function () { zoomAt(0.5, W / 2); }, '_': function () { zoomAt(0.5, W / 2); },
    '0': reset, ArrowLeft: function () { panBy(-W / 10); }, ArrowRight: function () { panBy(W / 10); },
    Escape: function () { select(''); }
  };
  svg.addEventListener('keydown', function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !keys[ev.key]) return;
    ev.preventDefault();
    keys[ev.key]();
  });
  var controls = document.querySelector('.tl-controls');
  controls.querySelectorAll('button[data-zoom]').forEach(function (b) {
    b.addEventListener('click', function () {
      if (b.dataset.zoom === 'reset') reset();
      else zoomAt(b.dataset.zoom === 'in' ? 2 : 0.5, W / 2);
    });
  });
  // One click from a finding's example, the first screen or the controls: the timeline zoomed to that span.
  document.querySelectorAll('[data-goto-s]').forEach(function (b) {
    b.addEventListener('click', function (ev) {
      ev.preventDefault();
      zoomTo(+b.dataset.gotoS, +b.dataset.gotoE);
      if (!controls.contains(b)) svg.scrollIntoView({block: 'center'});
    });
  });
  controls.hidden = false;
  draw();
})();
)JS";

}  // namespace inferscope::report::html
