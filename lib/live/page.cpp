// The live page: one HTML file with an inline script that fetches the data every second and redraws.
#include "live/render.hpp"

namespace inferscope::live {

namespace {

constexpr const char* kHead = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>InferScope live</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222}
.kv span{display:inline-block;margin-right:24px}.kv b{font-size:20px}
table{border-collapse:collapse}td{padding:2px 8px}td.n{text-align:right}
.bar{background:#4a7fd0;height:10px}#state.stopped{color:#a00}
svg text{font-size:11px}
</style></head><body>
<h1>InferScope live</h1>
<p id="state">connecting…</p>
<div class="kv"><span>steps <b id="steps">0</b></span><span>p50 <b id="p50">–</b> ms</span>
<span>p90 <b id="p90">–</b> ms</span><span>slowest of the last <span id="window">0</span>: <b id="slowest">–</b> ms
<span id="slowest_at"></span></span><span>dropped records <b id="dropped">0</b></span>
<span>GPU busy p50 <b id="gpu_busy">–</b></span></div>
<p id="step_hint" hidden></p>
<div id="serving" hidden><h2>Generation and requests</h2><table id="serving_rows"></table></div>
<h2>GPU and bottleneck (live estimates)</h2><p id="gpu_state">no GPU activity recorded</p>
<p id="bottleneck"></p><table id="categories"></table>
<h2>Breakdown of a step (mean of the newest steps)</h2><table id="breakdown"></table>
<h2>Timeline of the newest steps</h2><svg id="timeline" width="1000" height="40"></svg>
<script>
)HTML";

constexpr const char* kScript = R"JS(
const fmt = v => (Math.round(v * 100) / 100).toString();
function el(id) { return document.getElementById(id); }
function drawBreakdown(rows) {
  const t = el('breakdown'); t.innerHTML = '';
  const max = Math.max(1e-9, ...rows.map(r => r.ms));
  for (const r of rows) {
    const tr = t.insertRow();
    tr.insertCell().textContent = r.name;
    const c = tr.insertCell(); c.className = 'n'; c.textContent = fmt(r.ms) + ' ms';
    const b = tr.insertCell(); const d = document.createElement('div'); d.className = 'bar';
    d.style.width = Math.round(300 * r.ms / max) + 'px'; b.appendChild(d);
  }
}
const pct = v => Math.round(v * 100) + ' %';
const CATEGORY = {gpu_busy: 'GPU busy', sync_wait: 'host blocked in a CUDA sync call (GPU idle)',
                  launch: 'host in launch calls (GPU idle)', host: 'other host work (GPU idle)'};
function drawGpu(g) {
  const t = el('categories'); t.innerHTML = '';
  if (!g) {
    el('gpu_busy').textContent = '–';
    el('gpu_state').textContent = 'no GPU activity recorded';
    el('bottleneck').textContent = '';
    return;
  }
  el('gpu_busy').textContent = g.busy_p50 === null ? '–' : pct(g.busy_p50);
  el('gpu_state').textContent = g.records + ' GPU records; ' + g.steps_settled + ' steps measured (figures over the ' +
      'newest ' + g.window_steps + '), ' + g.steps_pending + ' waiting for their GPU records' +
      (g.steps_incomplete ? ', ' + g.steps_incomplete + ' left out (their records overwritten, or too many waiting)' : '');
  el('bottleneck').textContent = g.bottleneck ? 'current bottleneck (live estimate): ' + CATEGORY[g.bottleneck.category] +
      ' (' + pct(g.bottleneck.share) + ' of the newest steps\' time); the verdict is iscope-analyze on the dump' : '';
  for (const c of g.categories) {
    const tr = t.insertRow();
    tr.insertCell().textContent = CATEGORY[c.name] || c.name;
    const v = tr.insertCell(); v.className = 'n'; v.textContent = pct(c.share);
    const b = tr.insertCell(); const d = document.createElement('div'); d.className = 'bar';
    d.style.width = Math.round(300 * c.share) + 'px'; b.appendChild(d);
  }
}
function drawServing(sv) {
  el('serving').hidden = !sv;
  const t = el('serving_rows'); t.innerHTML = '';
  if (!sv) return;
  const row = (what, p50, p90, note) => {
    const tr = t.insertRow();
    tr.insertCell().textContent = what;
    const a = tr.insertCell(); a.className = 'n'; a.textContent = 'p50 ' + fmt(p50) + ' ms';
    const b = tr.insertCell(); b.className = 'n'; b.textContent = 'p90 ' + fmt(p90) + ' ms';
    tr.insertCell().textContent = note;
  };
  const g = sv.generation, q = sv.requests;
  if (g) {
    const of = g.calls + ' calls of ' + g.function + ', ' + g.tokens + ' tokens (' + g.token_function + ')';
    row('time to first token', g.ttft_p50_ms, g.ttft_p90_ms, of);
    row('time per output token', g.tpot_p50_ms, g.tpot_p90_ms, fmt(g.tokens_per_s) + ' tokens/s per call');
    row('generation call', g.latency_p50_ms, g.latency_p90_ms, '');
  }
  if (q) row('request latency', q.latency_p50_ms, q.latency_p90_ms,
             q.count + ' requests of ' + q.function + ', p99 ' + fmt(q.latency_p99_ms) + ' ms');
}
function drawTimeline(tl) {
  const svg = el('timeline'); const W = 1000, L = 140, RH = 16;
  const threads = [...new Set(tl.spans.map(s => s.thread))];
  const rows = {}; let y = 0;
  for (const th of threads) { rows[th] = y; y += RH * (1 + Math.max(0, ...tl.spans.filter(s => s.thread === th).map(s => s.depth))); }
  const lanes = {};
  for (const g of tl.gpu) { const k = 'GPU ' + g.device + ' stream ' + g.stream; if (!(k in lanes)) { lanes[k] = y; y += RH; } }
  svg.setAttribute('height', Math.max(40, y + 20));
  const span = Math.max(1e-6, tl.to_ms - tl.from_ms), x = ms => L + (W - L) * (ms - tl.from_ms) / span;
  let h = '';
  for (const th of threads) h += `<text x="0" y="${rows[th] + 12}">${(tl.threads[th] || ('thread ' + th)).replace(/</g, '&lt;')}</text>`;
  for (const s of tl.spans) {
    const x0 = Math.max(L, x(s.start_ms)), x1 = Math.max(x0 + 1, x(s.start_ms + s.dur_ms));
    const y0 = rows[s.thread] + RH * s.depth;
    h += `<rect class="${s.step ? 'step' : 'range'}" x="${x0}" y="${y0}" width="${x1 - x0}" height="${RH - 2}" ` +
         `fill="${s.step ? '#d08a4a' : '#4a7fd0'}"><title>${s.name.replace(/</g, '&lt;')} ${fmt(s.dur_ms)} ms</title></rect>`;
  }
  for (const k in lanes) h += `<text x="0" y="${lanes[k] + 12}">${k}</text>`;
  for (const g of tl.gpu) {
    const x0 = Math.max(L, x(g.start_ms)), x1 = Math.max(x0 + 1, x(g.start_ms + g.dur_ms));
    h += `<rect class="gpu" x="${x0}" y="${lanes['GPU ' + g.device + ' stream ' + g.stream]}" width="${x1 - x0}" ` +
         `height="${RH - 2}" fill="#5aa05a"><title>${g.kind} ${fmt(g.dur_ms)} ms</title></rect>`;
  }
  svg.innerHTML = h;
}
async function tick() {
  try {
    const r = await fetch(DATA_URL, {cache: 'no-store'});
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const d = await r.json();
    el('state').textContent = 'session ' + d.state + ', ' + d.records_total + ' records';
    el('state').className = '';
    el('steps').textContent = d.steps_total;
    el('step_hint').textContent = d.step_hint; el('step_hint').hidden = !d.step_hint;
    el('p50').textContent = fmt(d.p50_ms); el('p90').textContent = fmt(d.p90_ms);
    el('window').textContent = d.window_steps;
    el('slowest').textContent = d.slowest ? fmt(d.slowest.dur_ms) : '–';
    el('slowest_at').textContent = d.slowest ? '(at ' + fmt(d.slowest.start_ms / 1000) + ' s)' : '';
    el('dropped').textContent = d.dropped_records;
    drawBreakdown(d.breakdown); drawServing(d.serving); drawGpu(d.gpu); drawTimeline(d.timeline);
  } catch (e) {
    el('state').textContent = 'not updating (' + e.message + '): the program has probably exited';
    el('state').className = 'stopped';
  }
}
tick(); setInterval(tick, 1000);
</script></body></html>
)JS";

}  // namespace

std::string render_page(const std::string& token) {
  const std::string url = token.empty() ? "data" : "data?token=" + token;
  return std::string(kHead) + "const DATA_URL = " + json_string(url) + ";" + kScript;
}

}  // namespace inferscope::live
