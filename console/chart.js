// chart.js: the two small charts of the console, on canvases: a job's step time per
// iteration with its baseline and anomalous windows, and incidents per day by category.
import { el, fmtMs } from './app.js';

const CATEGORY_COLOURS = {
  compute_degradation: '#c8141e', communication_degradation: '#2c7bb6', host_delay: '#fdae61',
  kernel_stall: '#7b3294', stage_imbalance: '#1a9641', hang: '#404040',
};
export function categoryColour(c) { return CATEGORY_COLOURS[c] || '#999'; }

// series: [{label, values (ms per iteration, null: none), colour, dash}]; windows: [[first, last]]
export function stepChart(firstIter, series, baselineMs, windows) {
  const c = el('canvas', { id: 'step-chart', class: 'chart', width: 900, height: 220 });
  const draw = () => {
    c.width = Math.max(400, (c.parentNode && c.parentNode.clientWidth) || 900);
    const g = c.getContext('2d'), L = 64, R = 10, T = 10, B = 24, w = c.width - L - R, h = c.height - T - B;
    const n = Math.max(...series.map((s) => s.values.length), 1);
    const all = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined).concat(baselineMs ? [baselineMs] : []);
    const max = Math.max(1, ...all) * 1.1;
    const x = (i) => L + (n > 1 ? (i / (n - 1)) * w : w / 2), y = (v) => T + h - (v / max) * h;
    g.fillStyle = '#fff';
    g.fillRect(0, 0, c.width, c.height);
    g.fillStyle = 'rgba(200, 20, 30, 0.12)';
    for (const [a, b] of windows) {
      const xa = x(Math.max(0, a - firstIter) - 0.5), xb = x(Math.min(n - 1, b - firstIter) + 0.5);
      if (xb > L && xa < L + w) g.fillRect(Math.max(L, xa), T, Math.min(L + w, xb) - Math.max(L, xa), h);
    }
    g.strokeStyle = '#ccc';
    g.fillStyle = '#333';
    g.font = '11px sans-serif';
    for (let k = 0; k <= 4; k++) {
      const v = (max / 4) * k;
      g.beginPath(); g.moveTo(L, y(v)); g.lineTo(L + w, y(v)); g.stroke();
      g.fillText(fmtMs(v), 2, y(v) + 4);
    }
    const step = Math.max(1, Math.ceil(n / 16));
    for (let i = 0; i < n; i += step) g.fillText(String(firstIter + i), x(i) - 6, c.height - 6);
    if (baselineMs) {
      g.strokeStyle = '#1a9641'; g.setLineDash([6, 4]);
      g.beginPath(); g.moveTo(L, y(baselineMs)); g.lineTo(L + w, y(baselineMs)); g.stroke();
      g.setLineDash([]);
    }
    for (const s of series) {
      g.strokeStyle = s.colour; g.setLineDash(s.dash || []); g.lineWidth = 2;
      g.beginPath();
      let on = false;
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) { on = false; return; }
        if (on) g.lineTo(x(i), y(v)); else g.moveTo(x(i), y(v));
        on = true;
      });
      g.stroke();
      g.setLineDash([]); g.lineWidth = 1;
    }
  };
  requestAnimationFrame(draw);
  const keys = series.map((s) => el('span', { class: 'key' }, el('i', { class: 'swatch ' + s.cls }), s.label));
  if (baselineMs) keys.push(el('span', { class: 'key' }, el('i', { class: 'swatch baseline' }), 'baseline ' + fmtMs(baselineMs)));
  if (windows.length) keys.push(el('span', { class: 'key' }, el('i', { class: 'swatch window' }), 'anomalous window'));
  return el('div', { class: 'chart-wrap' }, c, el('div', { class: 'keys' }, keys));
}

// rows: [{day, category, incidents}] -> a bar per day, stacked by category
export function categoryChart(rows) {
  const days = [...new Set(rows.map((r) => r.day))].sort(), cats = [...new Set(rows.map((r) => r.category))].sort();
  const c = el('canvas', { id: 'category-chart', class: 'chart', width: 900, height: 200 });
  const draw = () => {
    c.width = Math.max(400, (c.parentNode && c.parentNode.clientWidth) || 900);
    const g = c.getContext('2d'), L = 40, B = 24, T = 10, w = c.width - L - 10, h = c.height - T - B;
    const total = (d) => rows.filter((r) => r.day === d).reduce((a, r) => a + r.incidents, 0);
    const max = Math.max(1, ...days.map(total)), bw = days.length ? Math.min(60, w / days.length - 4) : 0;
    g.fillStyle = '#fff';
    g.fillRect(0, 0, c.width, c.height);
    g.fillStyle = '#333';
    g.font = '11px sans-serif';
    g.fillText(String(max), 4, T + 10);
    g.fillText('0', 4, T + h);
    days.forEach((d, k) => {
      let top = T + h;
      const x = L + k * (w / Math.max(1, days.length));
      for (const cat of cats) {
        const r = rows.find((q) => q.day === d && q.category === cat);
        if (!r) continue;
        const bh = (r.incidents / max) * h;
        g.fillStyle = categoryColour(cat);
        g.fillRect(x, top - bh, bw, bh);
        top -= bh;
      }
      g.fillStyle = '#333';
      g.fillText(d.slice(5), x, c.height - 6);
    });
  };
  requestAnimationFrame(draw);
  return el('div', { class: 'chart-wrap' }, c, el('div', { class: 'keys' },
    cats.map((cat) => { const s = el('i', { class: 'swatch' }); s.style.backgroundColor = categoryColour(cat); return el('span', { class: 'key' }, s, cat); })));
}
