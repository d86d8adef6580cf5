// Runs the HTML report's own sort script in node against the page's own table markup, then clicks every header
// of every table twice and checks the rows come out sorted by that column, ascending then descending. A small
// stand-in for the DOM gives the script what a browser would (querySelectorAll, tHead/tBodies, rows, cells,
// cellIndex, classList, get/set/removeAttribute, textContent, appendChild); a script that indexes cells by anything but the header's own
// column, as the one that threw "Cannot read properties of undefined (reading 'textContent')" did, fails here.
//   node html_sort_harness.js report.html
'use strict';
const fs = require('fs');

const page = fs.readFileSync(process.argv[2], 'utf8');
const text = (html) => html.replace(/<[^>]*>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>')
  .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');
const cellsOf = (tr, tag) => [...tr.matchAll(new RegExp(`<${tag}( class="(\\w+)")?[^>]*>([\\s\\S]*?)</${tag}>`, 'g'))]
  .map((m, i) => ({ textContent: text(m[3]), cellIndex: i, className: m[2] || '' }));

const tables = [];
for (const m of page.matchAll(/<table class="sortable">([\s\S]*?)<\/table>/g)) {
  const head = m[1].match(/<thead>([\s\S]*?)<\/thead>/)[1];
  const body = m[1].match(/<tbody>([\s\S]*?)<\/tbody>/)[1];
  const table = { headers: cellsOf(head, 'th') };
  const tbody = { rows: [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) => ({ cells: cellsOf(r[1], 'td') })) };
  tbody.appendChild = (row) => { tbody.rows.splice(tbody.rows.indexOf(row), 1); tbody.rows.push(row); };
  table.tBodies = [tbody];
  table.tHead = { rows: [{ cells: table.headers }] };
  for (const th of table.headers) {
    th.attributes = {};
    th.getAttribute = (a) => (a in th.attributes ? th.attributes[a] : null);
    th.setAttribute = (a, v) => { th.attributes[a] = String(v); };
    th.removeAttribute = (a) => { delete th.attributes[a]; };
    th.classList = { contains: (c) => th.className.split(' ').includes(c) };
    th.listeners = [];
    th.addEventListener = (type, f) => { if (type === 'click') th.listeners.push(f); };
    th.closest = (sel) => (sel === 'table' ? table : null);
    th.click = () => th.listeners.forEach((f) => f.call(th, { target: th }));
  }
  tables.push(table);
}
const document = {
  querySelectorAll(sel) {
    if (sel === 'table.sortable') return tables;
    if (sel === 'table.sortable th') return tables.flatMap((t) => t.headers);
    throw new Error(`the stand-in DOM does not know the selector ${sel}`);
  },
  // The timeline's zoom script looks for its SVG and does nothing without one; zooming is tested in the real
  // browser (tests/report/browser_check.py).
  getElementById() { return null; },
};

const script = page.match(/<script>([\s\S]*?)<\/script>/)[1];
new Function('document', script)(document);

// The order a reader expects, written apart from the page's script: a numeric column (header class "n") by the
// number each cell starts with (sizes in bytes, "under 10", below the counters' resolution, as 0), cells without
// one last either way; a text column in natural order (digits as numbers).
const units = { B: 0, kB: 1, MB: 2, GB: 3, TB: 4 };
const num = (t) => {
  if (/^under [\d.]+$/.test(t)) return 0;
  const m = t.match(/^(-?\d+(?:\.\d+)?)(?: (B|kB|MB|GB|TB))?/);
  return m ? parseFloat(m[1]) * 1000 ** (units[m[2]] || 0) : null;
};
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
const outOfOrder = (x, y, numeric, dir) => {
  if (!numeric) return dir * collator.compare(x, y) > 0;
  const nx = num(x), ny = num(y);
  if (nx === null || ny === null) return nx === null && ny !== null;
  return dir * (nx - ny) > 0;
};
let failures = 0, clicks = 0;
tables.forEach((table, ti) => {
  table.headers.forEach((th, col) => {
    for (const dir of [1, -1]) {
      try {
        th.click();
      } catch (e) {
        console.error(`table ${ti} ("${table.headers.map((h) => h.textContent).join(' | ')}"), column ${col}: ${e}`);
        failures++;
        return;
      }
      clicks++;
      const values = table.tBodies[0].rows.map((r) => r.cells[col].textContent);
      const numeric = th.className === 'n';
      const expected = dir > 0 ? 'ascending' : 'descending';
      if (th.getAttribute('aria-sort') !== expected) {
        console.error(`table ${ti}, column ${col} ("${th.textContent}"): aria-sort is ${th.getAttribute('aria-sort')}, not ${expected}`);
        failures++;
      }
      for (let i = 1; i < values.length; i++) {
        if (outOfOrder(values[i - 1], values[i], numeric, dir)) {
          console.error(`table ${ti}, column ${col} ("${th.textContent}"): not sorted ${dir > 0 ? 'ascending' : 'descending'}: ${JSON.stringify(values)}`);
          failures++;
          break;
        }
      }
    }
  });
});
// A CPU time below the counters' resolution sorts as the smallest figure, not among the words ("n/a").
const threads = tables.find((t) => t.headers.some((h) => h.textContent === 'CPU (ms)'));
if (threads) {
  const th = threads.headers.find((h) => h.textContent === 'CPU (ms)');
  const col = threads.headers.indexOf(th);
  if (th.getAttribute('aria-sort') === 'ascending') th.click();  // the next click sorts ascending
  th.click();
  const cells = threads.tBodies[0].rows.map((r) => r.cells[col].textContent).filter((v) => v !== 'n/a');
  if (cells.includes('under 10') && cells[0] !== 'under 10') {
    console.error(`"under 10" does not sort first in the CPU column: ${JSON.stringify(cells)}`);
    failures++;
  }
}
if (tables.length < 2) { console.error(`only ${tables.length} table(s) found in ${process.argv[2]}`); failures++; }
console.log(`${tables.length} tables, ${clicks} header clicks sorted, ${failures} failure(s)`);
process.exit(failures ? 1 : 0);
