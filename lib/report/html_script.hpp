// The HTML report's scripts, inlined into every page (html.cpp). Both only enhance the page: without them the
// tables are complete and ordered and the timeline shows the whole step.
#pragma once

namespace inferscope::report::html {

// Sorting is a convenience: the tables are complete and ordered without it. Each table gets its own handlers and
// a header sorts by its own column (th.cellIndex): an index counted over all the page's headers, as an earlier
// version used, only fits the first table and threw a TypeError on any other. What it needs of the markup
// (Table::write): a <thead> row of <th>, class "n" on a numeric column's header, and a <tbody> whose rows have a
// cell per header; a <tfoot> (a total) stays where it is.
//  - A numeric column sorts by the number a cell starts with: "12.5", "234.2 MiB" as bytes, "55.0 (assumed)" as
//    55. A figure below the counter's resolution ("under 10" ms of CPU time) sorts as 0, before every measured
//    one. Cells with no number ("n/a", "unknown", "-") go last either way, so the largest values come first on
//    the second click.
//  - A text column sorts in the reader's locale, digits as numbers ("linear.py:99" before "linear.py:130").
//  - The first click sorts ascending, the next one descending; aria-sort on the header says which (and the
//    style draws the arrow).
// tests/report/html_sort_harness.js runs it in node on a generated page; tests/report/browser_check.py in Chromium.
constexpr const char* kScript = R"JS(
(function () {
  var UNITS = {B: 0, KiB: 1, MiB: 2, GiB: 3, TiB: 4};
  var text = new Intl.Collator(undefined, {numeric: true, sensitivity: 'base'});

  function cellNumber(t) {
    if (/^under [\d.]+$/.test(t.trim())) return 0;
    var m = t.trim().match(/^(-?\d+(?:\.\d+)?)(?: (B|KiB|MiB|GiB|TiB)\b)?/);
    if (!m) return NaN;
    return parseFloat(m[1]) * (m[2] ? Math.pow(1024, UNITS[m[2]]) : 1);
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

// Zoom and pan of the step timeline (write_timeline's markup: svg#tl-svg with data-span/x0/w/h, the spans in
// g.tl-z groups inside nested <svg> viewports over the plot, g#tl-ticks). The view is a zoom factor k >= 1 and an offset in plot pixels;
// each g.tl-z gets matrix(k,0,0,1,e,0) so a span at plot x lands at x0 + (x - x0 - off) * k. Span labels are
// hidden while zoomed (they would stretch); the ticks are redrawn for the visible milliseconds. svg.dataset.k
// and .off hold the view (the browser test reads them).
constexpr const char* kTimelineScript = R"JS(
(function(){var svg=document.getElementById('tl-svg');if(!svg)return;
var NS=svg.namespaceURI,span=+svg.dataset.span,x0=+svg.dataset.x0,w=+svg.dataset.w,h=+svg.dataset.h;
var k=1,off=0,ticks=document.getElementById('tl-ticks'),view=document.getElementById('tl-view');
function nice(r){var p=Math.pow(10,Math.floor(Math.log10(r))),m=r/p;return (m<1.5?1:m<3.5?2:m<7.5?5:10)*p;}
function el(n,a){var e=document.createElementNS(NS,n);for(var q in a)e.setAttribute(q,a[q]);return e;}
function draw(){k=Math.max(1,Math.min(k,5000));off=Math.max(0,Math.min(off,w-w/k));
var e=x0*(1-k)-k*off,m='matrix('+k+',0,0,1,'+e+',0)';
svg.querySelectorAll('g.tl-z').forEach(function(g){g.setAttribute('transform',m);});
svg.querySelectorAll('text.sl').forEach(function(t){t.style.display=k>1.001?'none':'';});
var t0=off/w*span,t1=(off+w/k)/w*span,st=nice((t1-t0)/8),d=st<0.01?3:st<1?2:1;
while(ticks.firstChild)ticks.removeChild(ticks.firstChild);
for(var t=Math.ceil(t0/st)*st;t<=t1+1e-9;t+=st){var x=x0+(t-t0)/(t1-t0)*w;
ticks.appendChild(el('line',{x1:x.toFixed(1),y1:16,x2:x.toFixed(1),y2:h,stroke:'#e3e7eb'}));
var tx=el('text',{x:(x+2).toFixed(1),y:12,fill:'#5d6875'});tx.textContent=t.toFixed(d)+' ms';ticks.appendChild(tx);}
svg.dataset.k=k;svg.dataset.off=off;
if(view)view.textContent=k>1.001?'showing '+t0.toFixed(3)+'\u2013'+t1.toFixed(3)+' ms':'';}
function zoomAt(f,px){var c=off+px/k;k*=f;k=Math.max(1,Math.min(k,5000));off=c-px/k;draw();}
function plotX(ev){var r=svg.getBoundingClientRect();return (ev.clientX-r.left)*(svg.viewBox.baseVal.width/r.width)-x0;}
svg.addEventListener('wheel',function(ev){var px=plotX(ev);if(px<0||px>w)return;ev.preventDefault();
zoomAt(ev.deltaY<0?1.25:0.8,px);},{passive:false});
var drag=null;svg.addEventListener('mousedown',function(ev){drag={x:plotX(ev),off:off};});
window.addEventListener('mousemove',function(ev){if(!drag)return;off=drag.off-(plotX(ev)-drag.x)/k;draw();});
window.addEventListener('mouseup',function(){drag=null;});
document.querySelectorAll('.tl-controls button').forEach(function(b){b.addEventListener('click',function(){
var z=b.dataset.zoom;if(z==='reset'){k=1;off=0;draw();}else zoomAt(z==='in'?2:0.5,w/2);});});
draw();})();
)JS";

}  // namespace inferscope::report::html
