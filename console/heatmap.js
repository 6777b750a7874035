// heatmap.js: the rank x iteration heat map (GET /api/v1/jobs/{job}/heatmap, binary; its
// encoding is in docs/api.md), drawn on a canvas: a row per rank (or per node or run of nodes
// when the server aggregated them), a column per iteration, the colour the cell's ratio to its
// role group's median. Culprit rows are marked; hovering a cell tells its numbers; dragging a
// rectangle zooms into it (an aggregated range is fetched again rank by rank), double-click
// or "Reset zoom" zooms out.
import { el, fmtMs } from './app.js';

const GUTTER = 150, AXIS = 18;

export function decodeHeatmap(buf) {
  const dv = new DataView(buf);
  const magic = String.fromCharCode(dv.getUint8(0), dv.getUint8(1), dv.getUint8(2), dv.getUint8(3));
  if (magic !== 'CHM1') throw new Error('not a heat map');
  const jl = dv.getUint32(4, true);
  const meta = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 8, jl)));
  const a4 = (x) => (x + 3) & ~3;
  const n = meta.rows, it = meta.n_iters, ib = meta.index_bytes;
  let off = a4(8 + jl);
  const rowRank = new Uint32Array(buf, off, n); off += 4 * n;
  const med = new Float32Array(buf, off, meta.n_roles * it); off += 4 * meta.n_roles * it;
  const Idx = ib === 4 ? Uint32Array : Uint16Array;
  const rowHost = new Idx(buf, off, n); off = a4(off + ib * n);
  const rowRole = new Idx(buf, off, n); off = a4(off + ib * n);
  const cells = new Uint8Array(buf, off, n * it);
  const lo = meta.scale.log2_lo, hi = meta.scale.log2_hi;
  const culprits = new Set(meta.culprits);
  // groups: [first row (of the whole ordering), rows, culprits, label]; the row each starts at here
  const groupOfRow = new Int32Array(n);
  meta.groups.forEach((g, k) => {
    if (meta.aggregated) groupOfRow[k] = k;
    else for (let r = g[0] - meta.row_offset; r < g[0] - meta.row_offset + g[1]; r++) groupOfRow[r] = k;
  });
  return {
    meta, rowRank, med, rowHost, rowRole, cells, groupOfRow, culprits,
    ratio: (code) => (code ? 2 ** (lo + ((code - 1) / 254) * (hi - lo)) : NaN),
    rowCulprit: (r) => (meta.aggregated ? meta.groups[r][2] > 0 : culprits.has(rowRank[r])),
    groupLabel: (k) => meta.groups[k][3] !== null ? meta.groups[k][3] : meta.hosts[rowHost[meta.groups[k][0] - meta.row_offset]],
  };
}

// colour of a ratio: grey at 1, warmer above (red at 4x), bluer below
const PALETTE = (() => {
  const p = new Uint8ClampedArray(256 * 4);
  const mix = (a, b, t) => a.map((x, i) => Math.round(x + (b[i] - x) * t));
  const grey = [236, 236, 236], amber = [253, 174, 97], red = [200, 20, 30], blue = [44, 123, 182];
  for (let c = 0; c < 256; c++) {
    let rgb = [255, 255, 255];
    if (c) {
      const l = -2 + ((c - 1) / 254) * 6, t = Math.max(-1, Math.min(1, l / 2));
      rgb = t >= 0 ? (t < 0.3 ? mix(grey, amber, t / 0.3) : mix(amber, red, (t - 0.3) / 0.7)) : mix(grey, blue, -t);
    }
    p.set([...rgb, 255], c * 4);
  }
  return p;
})();

export function ratioColour(ratio) {
  if (!(ratio > 0)) return '#fff';
  const l = Math.log2(ratio), c = Math.max(1, Math.min(255, Math.round(1 + ((l + 2) / 6) * 254)));
  return `rgb(${PALETTE[c * 4]},${PALETTE[c * 4 + 1]},${PALETTE[c * 4 + 2]})`;
}

export function legend() {
  const c = el('canvas', { width: 240, height: 12, class: 'legend-bar' });
  const g = c.getContext('2d');
  for (let x = 0; x < 240; x++) {
    const code = 1 + Math.round((x / 239) * 254);
    g.fillStyle = `rgb(${PALETTE[code * 4]},${PALETTE[code * 4 + 1]},${PALETTE[code * 4 + 2]})`;
    g.fillRect(x, 0, 1, 12);
  }
  return el('div', { class: 'legend' }, '¼×', c, '16× the role group\'s median');
}

// A heat map view on a canvas. fetchRows(a, b) fetches rows a..b of the whole ordering again.
export class HeatmapView {
  constructor(host, data, fetchRows, onRender) {
    this.host = host;
    this.base = data;
    this.fetchRows = fetchRows;
    this.onRender = onRender;
    this.canvas = el('canvas', { id: 'heatmap', class: 'heatmap', height: 480 });
    this.canvas.view = this; // what is drawn, for whoever reads the canvas (tests/integration/console)
    this.tip = el('div', { class: 'tip', id: 'heatmap-tip', hidden: true });
    this.reset = el('button', { type: 'button', id: 'heatmap-reset', onclick: () => this.show(this.base) }, 'Reset zoom');
    host.append(el('div', { class: 'heatmap-wrap' }, this.canvas, this.tip), el('div', { class: 'heatmap-tools' }, this.reset, legend()));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    this.canvas.addEventListener('mousedown', (e) => { this.drag = this.at(e); });
    this.canvas.addEventListener('mouseup', (e) => this.release(e));
    this.canvas.addEventListener('dblclick', () => this.show(this.base));
    this.show(data);
  }

  show(data) {
    this.data = data;
    this.view = { r0: 0, r1: data.meta.rows, i0: 0, i1: data.meta.n_iters };
    this.draw();
  }

  geometry() {
    const w = this.canvas.width - GUTTER, h = this.canvas.height - AXIS, v = this.view;
    return { w, h, rowsPerPx: (v.r1 - v.r0) / h, itW: w / (v.i1 - v.i0) };
  }

  draw() {
    const d = this.data, v = this.view, it = d.meta.n_iters;
    this.canvas.width = Math.max(400, this.host.clientWidth || 900);
    const g = this.canvas.getContext('2d'), geo = this.geometry();
    g.fillStyle = '#fff';
    g.fillRect(0, 0, this.canvas.width, this.canvas.height);
    const nI = v.i1 - v.i0, nY = Math.max(1, Math.min(geo.h, v.r1 - v.r0));
    if (!d.meta.rows || !nI) {
      g.fillStyle = '#555';
      g.fillText('no data in this range', GUTTER + 10, AXIS + 20);
      this.onRender && this.onRender();
      return;
    }
    // one pixel row: the worst cell of the rows it covers (a culprit never falls between pixels)
    const img = g.createImageData(nI, nY), px = img.data;
    this.pixelRows = new Int32Array(nY);
    for (let y = 0; y < nY; y++) {
      const a = v.r0 + Math.floor((y * (v.r1 - v.r0)) / nY), b = Math.max(a + 1, v.r0 + Math.floor(((y + 1) * (v.r1 - v.r0)) / nY));
      let worstRow = a, worstSum = -1;
      for (let i = 0; i < nI; i++) {
        let worst = 0;
        for (let r = a; r < b; r++) {
          const c = d.cells[r * it + v.i0 + i];
          if (c > worst) worst = c;
        }
        px.set(PALETTE.subarray(worst * 4, worst * 4 + 4), (y * nI + i) * 4);
      }
      for (let r = a; r < b; r++) {
        let s = 0;
        for (let i = 0; i < nI; i++) s += d.cells[r * it + v.i0 + i];
        if (s > worstSum) { worstSum = s; worstRow = r; }
      }
      this.pixelRows[y] = worstRow;
    }
    const off = document.createElement('canvas');
    off.width = nI;
    off.height = nY;
    off.getContext('2d').putImageData(img, 0, 0);
    g.imageSmoothingEnabled = false;
    g.drawImage(off, GUTTER, AXIS, geo.w, geo.h);
    // iteration axis
    g.fillStyle = '#333';
    g.font = '11px sans-serif';
    const step = Math.max(1, Math.ceil(40 / geo.itW));
    for (let i = v.i0; i < v.i1; i += step) g.fillText(String(d.meta.first_iter + i), GUTTER + (i - v.i0) * geo.itW + 2, 12);
    // group labels where there is room, culprit marks always
    const rowY = (r) => AXIS + ((r - v.r0) / (v.r1 - v.r0)) * geo.h;
    let lastY = -20;
    d.meta.groups.forEach((grp, k) => {
      const first = d.meta.aggregated ? k : grp[0] - d.meta.row_offset, n = d.meta.aggregated ? 1 : grp[1];
      if (first + n <= v.r0 || first >= v.r1) return;
      const y = rowY(Math.max(first, v.r0));
      if (grp[2] > 0) {
        g.fillStyle = '#c8141e';
        const y1 = rowY(Math.min(first + n, v.r1));
        g.fillRect(GUTTER - 6, y, 5, Math.max(2, y1 - y));
      }
      if (y - lastY >= 12) {
        g.fillStyle = grp[2] > 0 ? '#c8141e' : '#333';
        const label = d.groupLabel(k) + (grp[2] > 0 ? ' ◀' : '');
        g.fillText(label.length > 22 ? label.slice(0, 21) + '…' : label, 2, Math.min(y + 10, this.canvas.height - 2));
        lastY = y;
      }
    });
    // rank rows of culprits, when each row has at least a pixel: an outline
    if (!d.meta.aggregated && geo.rowsPerPx <= 1) {
      g.strokeStyle = '#000';
      for (let r = v.r0; r < v.r1; r++) if (d.rowCulprit(r)) g.strokeRect(GUTTER + 0.5, rowY(r) + 0.5, geo.w - 1, Math.max(1, geo.h / (v.r1 - v.r0)) - 1);
    }
    this.reset.hidden = this.data === this.base && v.r0 === 0 && v.r1 === d.meta.rows && v.i0 === 0 && v.i1 === it;
    this.onRender && this.onRender();
  }

  at(e) {
    const rect = this.canvas.getBoundingClientRect(), v = this.view, geo = this.geometry();
    const x = ((e.clientX - rect.left) * this.canvas.width) / rect.width - GUTTER;
    const y = ((e.clientY - rect.top) * this.canvas.height) / rect.height - AXIS;
    if (x < 0 || y < 0 || x >= geo.w || y >= geo.h) return null;
    const py = Math.min(this.pixelRows.length - 1, Math.floor((y / geo.h) * this.pixelRows.length));
    return { row: this.pixelRows[py], rowF: v.r0 + (y / geo.h) * (v.r1 - v.r0), iter: v.i0 + Math.floor(x / geo.itW), x: e.clientX - rect.left, y: e.clientY - rect.top };
  }

  hover(e) {
    const p = this.at(e), d = this.data;
    if (!p) { this.tip.hidden = true; return; }
    const m = d.meta, code = d.cells[p.row * m.n_iters + p.iter], ratio = d.ratio(code), iter = m.first_iter + p.iter;
    const lines = [];
    if (m.aggregated) {
      const g = m.groups[p.row];
      lines.push(d.groupLabel(p.row) + ` (${g[1]} ranks${g[2] ? ', ' + g[2] + ' culprits' : ''})`);
      lines.push(`iteration ${iter}: worst rank ${Number.isNaN(ratio) ? 'not reported' : ratio.toFixed(2) + '× its role group'}`);
    } else {
      const rank = d.rowRank[p.row], host = m.hosts[d.rowHost[p.row]], med = d.med[d.rowRole[p.row] * m.n_iters + p.iter];
      lines.push(`rank ${rank} on ${host}${d.culprits.has(rank) ? ' (culprit)' : ''}`);
      lines.push(`${m.metric}, iteration ${iter}: ` + (Number.isNaN(ratio) ? 'not reported'
        : `${ratio.toFixed(2)}× the role group's median (about ${fmtMs(ratio * med)}; median ${fmtMs(med)})`));
    }
    this.tip.replaceChildren(...lines.map((l) => el('div', {}, l)));
    this.tip.hidden = false;
    this.tip.style.left = Math.min(p.x + 14, this.canvas.clientWidth - 320) + 'px';
    this.tip.style.top = p.y + 14 + 'px';
  }

  async release(e) {
    const a = this.drag, b = this.at(e);
    this.drag = null;
    if (!a || !b || (Math.abs(a.x - b.x) < 5 && Math.abs(a.y - b.y) < 5)) return;
    const d = this.data, r0 = Math.max(0, Math.floor(Math.min(a.rowF, b.rowF))), r1 = Math.min(d.meta.rows, Math.ceil(Math.max(a.rowF, b.rowF)) + 1);
    const i0 = Math.min(a.iter, b.iter), i1 = Math.max(a.iter, b.iter) + 1;
    if (d.meta.aggregated) { // fetch the ranks of these rows
      const first = d.meta.groups[r0][0], last = d.meta.groups[r1 - 1][0] + d.meta.groups[r1 - 1][1] - 1;
      const more = await this.fetchRows(first, last);
      this.data = more;
      this.view = { r0: 0, r1: more.meta.rows, i0, i1 };
    } else {
      this.view = { r0, r1, i0, i1 };
    }
    this.draw();
  }
}

// A tile per host, coloured by its worst rank: the rank's median ratio over the iterations
// [i0, i1) (the anomalous window when there is one).
export function nodeGrid(d, i0, i1) {
  const m = d.meta, worst = new Map();
  for (let r = 0; r < m.rows; r++) {
    const codes = [];
    for (let i = i0; i < i1; i++) { const c = d.cells[r * m.n_iters + i]; if (c) codes.push(c); }
    if (!codes.length) continue;
    codes.sort((x, y) => x - y);
    const ratio = d.ratio(codes[codes.length >> 1]), host = m.aggregated ? d.groupLabel(r) : m.hosts[d.rowHost[r]];
    const w = worst.get(host);
    if (!w || ratio > w.ratio) worst.set(host, { ratio, rank: m.aggregated ? null : d.rowRank[r], culprit: d.rowCulprit(r) || (w && w.culprit) });
    else if (d.rowCulprit(r)) w.culprit = true;
  }
  const tiles = [...worst.entries()].map(([host, w]) => {
    const t = el('span', { class: 'tile' + (w.culprit ? ' culprit' : ''), title: `${host}: worst rank ${w.rank !== null ? w.rank + ' ' : ''}at ${w.ratio.toFixed(2)}× its role group`, dataset: { host } });
    t.style.backgroundColor = ratioColour(w.ratio);
    return t;
  });
  return el('div', { class: 'node-grid', id: 'node-grid' }, tiles);
}
