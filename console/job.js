// job.js: one job's page. The verdict first (category, culprits with their hosts, time lost per
// iteration, since which iteration), then each finding with its actions and the wrong fix it
// rules out, the out-of-band events with their verdicts, the step time, the rank x iteration
// heat map, the node grid, the incidents on a timeline, and the deep-dive buttons (Perfetto
// trace of the window, a capture, Grafana).
import { api, ApiError, el, fmtMs, fmtTime } from './app.js';
import { categoryColour, stepChart } from './chart.js';
import { decodeHeatmap, HeatmapView, nodeGrid } from './heatmap.js';

const enc = encodeURIComponent;

async function optional(p) {
  try { return await p; } catch (e) { if (e instanceof ApiError && e.status === 404) return null; throw e; }
}

async function fetchHeatmap(job, params) {
  const res = await api(`jobs/${enc(job)}/heatmap?` + new URLSearchParams(params), { raw: true });
  return decodeHeatmap(await res.arrayBuffer());
}

function culpritsOf(report) {
  return (report && report.suspects ? report.suspects : []).filter((s) => s.role === 'culprit');
}

function verdict(job, report) {
  const sec = el('section', { id: 'verdict', class: 'verdict' });
  if (!report) {
    sec.append(el('h2', {}, 'No diagnosis yet'), el('p', {}, 'culpritd has not diagnosed this job (no anomalous window so far).'));
    return sec;
  }
  const v = report.verdict || {}, w = report.window, culprits = culpritsOf(report);
  const cat = el('span', { class: 'category' }, v.category || 'none');
  cat.style.borderColor = categoryColour(v.category);
  sec.append(el('h2', {}, cat), el('p', { class: 'summary' }, v.summary || ''));
  const facts = el('dl', { class: 'facts' });
  const fact = (k, val) => facts.append(el('dt', {}, k), el('dd', {}, val));
  if (culprits.length) {
    const byHost = new Map();
    for (const s of culprits) {
      if (!byHost.has(s.host)) byHost.set(s.host, []);
      byHost.get(s.host).push(s.rank);
    }
    for (const ranks of byHost.values()) ranks.sort((a, b) => a - b);
    fact('culprits', el('ul', { id: 'culprits' }, [...byHost].map(([host, ranks]) => el('li', {},
      el('span', { class: 'ranks' }, (ranks.length > 1 ? 'ranks ' : 'rank ') + ranks.join(', ')), ' on ', el('b', { class: 'host' }, host)))),
    );
    if (report.culprits_total > culprits.length) fact('culprits in all', String(report.culprits_total));
  }
  if (report.lost_ms_per_iter !== undefined && report.lost_ms_per_iter !== null) fact('time lost per iteration', fmtMs(report.lost_ms_per_iter));
  if (w) {
    fact('since iteration', String(w.first_iter) + (w.onset ? ` (${w.onset}, seen at ${w.detected_iter})` : ''));
    fact('step time', `${fmtMs(w.window_iter_ms)} against a baseline of ${fmtMs(w.baseline_iter_ms)}`);
  }
  if (report.victims) fact('victims', `${report.victims.ranks} ranks wait` + (report.victims.phases && report.victims.phases.length ? ' in ' + report.victims.phases.join(', ') : ''));
  fact('report', `${report.created ? fmtTime(report.created) : 'latest'} · window ${w ? w.first_iter + '–' + w.last_iter : 'none'}`);
  sec.append(facts);
  return sec;
}

// The place of a finding's action approval (POST /api/v1/incidents/{key}/actions/{n}/approve,
// built with the action hooks); empty until then.
function approveSlot(finding, n) {
  return el('span', { class: 'approve-slot', dataset: { finding: String(finding), action: String(n) } });
}

function findings(report) {
  const list = (report && report.findings) || [];
  const sec = el('section', { id: 'findings' }, el('h2', {}, 'Findings'));
  if (!list.length) { sec.append(el('p', {}, 'None.')); return sec; }
  list.forEach((f, k) => {
    const acts = (f.actions || []).map((a, n) => a.kind === 'avoid'
      ? el('li', { class: 'avoid' }, el('b', {}, 'Not this: '), a.text)
      : el('li', { class: 'action', dataset: { kind: a.kind } }, el('b', {}, 'Action: '), a.text,
        a.expected_gain_ms_per_iter ? el('span', { class: 'gain' }, ` (expected gain ${fmtMs(a.expected_gain_ms_per_iter)} per iteration)`) : '',
        a.command ? el('code', {}, a.command) : '', approveSlot(k, n)));
    const c = el('span', { class: 'category small' }, f.category);
    c.style.borderColor = categoryColour(f.category);
    sec.append(el('article', { class: 'finding' }, el('h3', {}, c, ' ', f.summary || ''),
      f.lost_ms_per_iter ? el('p', {}, `${fmtMs(f.lost_ms_per_iter)} lost per iteration; ${f.culprits_total || 0} culprits`) : '',
      el('ul', { class: 'actions' }, acts)));
  });
  return sec;
}

function events(report) {
  const list = (report && report.events) || [];
  const sec = el('section', { id: 'events' }, el('h2', {}, 'Out-of-band events'));
  if (!list.length) { sec.append(el('p', {}, 'None weighed in the latest diagnosis.')); return sec; }
  sec.append(el('table', {}, el('thead', {}, el('tr', {}, ['host', 'event', 'verdict', 'why'].map((h) => el('th', {}, h)))),
    el('tbody', {}, list.map((e) => el('tr', { dataset: { verdict: e.verdict } }, el('td', {}, e.host), el('td', {}, e.kind + (e.detail ? ' (' + e.detail + ')' : '')),
      el('td', {}, el('span', { class: 'badge ' + e.verdict }, e.verdict)), el('td', {}, e.reason || ''))))));
  return sec;
}

function incidentsTimeline(data) {
  const list = (data && data.incidents) || [];
  const sec = el('section', { id: 'incidents' }, el('h2', {}, 'Incidents'));
  if (!list.length) { sec.append(el('p', {}, 'None.')); return sec; }
  const t = (x) => new Date(x).getTime(), now = Date.now();
  const start = Math.min(...list.map((i) => t(i.opened))), end = Math.max(...list.map((i) => (i.resolved ? t(i.resolved) : now)), start + 1);
  const lane = el('div', { class: 'timeline' });
  for (const i of list.slice().reverse()) {
    const a = t(i.opened), b = i.resolved ? t(i.resolved) : now;
    const bar = el('div', { class: 'bar' + (i.state === 'open' ? ' open' : ''), title: `${i.category}: ${i.summary}` },
      `${i.category} · ${i.state}${i.resolution ? ' (' + i.resolution + ')' : ''}`);
    bar.style.marginLeft = ((a - start) / (end - start)) * 70 + '%';
    bar.style.width = Math.max(8, ((b - a) / (end - start)) * 70) + '%';
    bar.style.borderColor = categoryColour(i.category);
    lane.append(el('div', { class: 'lane' }, bar, el('span', { class: 'when' }, fmtTime(i.opened) + (i.resolved ? ' → ' + fmtTime(i.resolved) : ' → now'))));
  }
  sec.append(lane);
  return sec;
}

async function download(job, report, status) {
  const culprits = culpritsOf(report).map((s) => s.rank).slice(0, 16), w = report && report.window;
  const ranks = culprits.length ? culprits : [0];
  const p = new URLSearchParams({ ranks: ranks.join(',') });
  if (w) { p.set('from_iter', String(w.first_iter)); p.set('to_iter', String(Math.min(w.last_iter, w.first_iter + 9))); }
  status.textContent = 'fetching the trace ...';
  try {
    const res = await api(`jobs/${enc(job)}/trace?` + p, { raw: true });
    const url = URL.createObjectURL(await res.blob());
    const a = el('a', { href: url, download: job.replace(/[^A-Za-z0-9._-]/g, '_') + '.pftrace' });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    status.textContent = 'trace downloaded: open it in ui.perfetto.dev';
  } catch (e) { status.textContent = 'no trace: ' + e.message; }
}

// The report JSON in a new tab (fetched with the token, which a plain link would not carry).
async function openReport(base, status) {
  try {
    const res = await api(base + '/reports/latest', { raw: true });
    const url = URL.createObjectURL(new Blob([await res.text()], { type: 'application/json' }));
    window.open(url, '_blank', 'noopener');
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (e) { status.textContent = 'no report: ' + e.message; }
}

async function capture(job, report, status) {
  const ranks = culpritsOf(report).map((s) => s.rank).slice(0, 256);
  status.textContent = 'asking the agents ...';
  try {
    const r = await api(`jobs/${enc(job)}/capture`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ranks: ranks.length ? ranks : [0], iterations: 3 }) });
    status.textContent = `capture ${r.capture} sent to ${r.agents.length} agents; the trace of the next iterations holds their kernels`;
  } catch (e) { status.textContent = 'no capture: ' + e.message; }
}

// The heat map's first metric: the phase the first culprit's evidence names (where the culprits
// differ from their peers; in the iteration time every rank waits for them alike), else step.
function firstMetric(report) {
  const c = culpritsOf(report)[0];
  return (c && c.evidence && c.evidence[0] && c.evidence[0].phase) || 'step';
}

export async function jobPage(main, name) {
  const base = `jobs/${enc(name)}`;
  const jobP = optional(api(base)), reportP = optional(api(base + '/reports/latest'));
  const incP = optional(api(base + '/incidents?limit=50'));
  for (const p of [jobP, incP]) p.catch(() => {}); // awaited below (a 401 shows the token form)
  const report = await reportP;
  const heatP = optional(fetchHeatmap(name, { metric: firstMetric(report), group: 'node' }));
  heatP.catch(() => {});
  const job = await jobP;
  if (!job) {
    main.append(el('h1', {}, name), el('p', { class: 'error' }, 'No such job is known to this culpritd.'));
    document.body.dataset.rendered = 'job';
    return;
  }
  const t = job.topology || {};
  const head = el('div', { class: 'job-head' }, el('h1', { id: 'job-name' }, job.job),
    el('span', { class: 'badge ' + job.state, id: 'job-state' }, job.state),
    el('span', { class: 'topo' }, `${(t.world || 0).toLocaleString('en')} ranks · tp ${t.tp} cp ${t.cp} pp ${t.pp} dp ${t.dp} ep ${t.ep}`));
  const status = el('span', { class: 'status', id: 'deep-dive-status' });
  const tools = el('div', { class: 'tools' },
    el('button', { type: 'button', id: 'trace-button', onclick: () => download(name, report, status) }, 'Perfetto trace of the window'),
    el('button', { type: 'button', id: 'capture-button', disabled: job.state !== 'live', onclick: () => capture(name, report, status) }, 'Request a capture'),
    job.grafana_url ? el('a', { class: 'button', id: 'grafana-link', href: job.grafana_url, target: '_blank', rel: 'noopener' }, 'Grafana') : '',
    el('button', { type: 'button', id: 'report-button', onclick: () => openReport(base, status) }, 'Report JSON'), status);
  main.append(head, tools, verdict(job, report), findings(report), events(report));

  const chartSec = el('section', { id: 'steps' }, el('h2', {}, 'Step time'));
  const heatSec = el('section', { id: 'heat' }, el('h2', {}, 'Ranks × iterations'));
  const gridSec = el('section', { id: 'nodes' }, el('h2', {}, 'Nodes'));
  main.append(chartSec, heatSec, gridSec);
  const heat = await heatP;
  if (!heat || !heat.meta.n_iters) {
    heatSec.append(el('p', {}, 'No iterations stored for this job.'));
  } else {
    const m = heat.meta, w = report && report.window;
    chartSec.append(stepChart(m.first_iter, [
      { label: 'slowest rank', values: m.step_max_ms, colour: '#c8141e', cls: 'max' },
      { label: 'median rank', values: m.step_median_ms, colour: '#555', dash: [4, 3], cls: 'median' }],
    (w && w.baseline_iter_ms) || job.baseline_ms, w ? [[w.first_iter, w.last_iter]] : []));
    const metric = el('select', { id: 'heat-metric' }, el('option', { value: 'step' }, 'step (iteration time)'), m.phases.map((p) => el('option', { value: p }, p)));
    metric.value = m.metric;
    const group = el('select', { id: 'heat-group' }, el('option', { value: 'node' }, 'by node'), el('option', { value: 'stage' }, 'by pipeline stage'), el('option', { value: 'dp' }, 'by DP replica'));
    const holder = el('div', {});
    heatSec.append(el('div', { class: 'heat-controls' }, el('label', {}, 'metric ', metric), el('label', {}, 'rows ', group)), holder);
    const span = (d) => {
      const a = w ? Math.max(0, w.first_iter - d.meta.first_iter) : 0, b = w ? Math.min(d.meta.n_iters, w.last_iter - d.meta.first_iter + 1) : d.meta.n_iters;
      return a < b ? [a, b] : [0, d.meta.n_iters];
    };
    const grid = (d) => { const [a, b] = span(d); gridSec.replaceChildren(el('h2', {}, 'Nodes'), el('p', { class: 'hint' }, `each tile a host, coloured by its worst rank over iterations ${d.meta.first_iter + a}–${d.meta.first_iter + b - 1}`), nodeGrid(d, a, b)); };
    const show = (d) => {
      holder.replaceChildren();
      const params = { metric: metric.value, group: group.value };
      new HeatmapView(holder, d, (a, b) => fetchHeatmap(name, Object.assign({ rows: `${a}-${b}` }, params)), () => {
        document.body.dataset.heatmap = 'drawn';
      });
      grid(d);
    };
    const refetch = async () => show(await fetchHeatmap(name, { metric: metric.value, group: group.value }));
    metric.addEventListener('change', refetch);
    group.addEventListener('change', refetch);
    show(heat);
  }
  main.append(incidentsTimeline(await incP));
  performance.mark('culprit-job-rendered');
  document.body.dataset.rendered = 'job';
}
