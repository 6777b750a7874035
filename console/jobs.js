// jobs.js: every job culpritd knows, live and past (GET /api/v1/jobs): a filter on the name
// and the state, a page at a time.
import { api, el, fmtMs, fmtTime, jobHref } from './app.js';

const PAGE = 50;

function stepCell(j) {
  if (j.step_ms === null || j.step_ms === undefined) return '–';
  const base = j.baseline_ms;
  if (!base) return fmtMs(j.step_ms);
  const ratio = j.step_ms / base;
  return el('span', { class: ratio > 1.15 ? 'bad' : '' },
    fmtMs(j.step_ms) + ' / ' + fmtMs(base) + ' (' + ratio.toFixed(2) + '×)');
}

function incidentCell(inc) {
  if (!inc) return '–';
  const state = inc.state === 'open' ? 'open' : 'resolved' + (inc.resolution ? ' (' + inc.resolution + ')' : '');
  return el('span', { class: inc.state === 'open' ? 'badge open' : 'badge' }, state + ': ' + inc.category);
}

export async function jobsPage(main, params) {
  const q = params.get('q') || '', state = params.get('state') || '', offset = Number(params.get('offset') || 0);
  const go = (nq, ns, no) => {
    const p = new URLSearchParams();
    if (nq) p.set('q', nq);
    if (ns) p.set('state', ns);
    if (no) p.set('offset', String(no));
    location.hash = '#/jobs' + (p.toString() ? '?' + p : '');
  };
  const input = el('input', { type: 'search', id: 'job-filter', placeholder: 'part of a job name', value: q });
  const select = el('select', { id: 'job-state' },
    el('option', { value: '' }, 'live and ended'), el('option', { value: 'live' }, 'live'),
    el('option', { value: 'ended' }, 'ended'));
  select.value = state;
  const form = el('form', { class: 'filter', onsubmit: (e) => { e.preventDefault(); go(input.value, select.value, 0); } },
    input, select, el('button', { type: 'submit' }, 'Filter'));
  select.addEventListener('change', () => go(input.value, select.value, 0));
  main.append(el('h1', {}, 'Jobs'), form);

  const p = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  if (q) p.set('q', q);
  if (state) p.set('state', state);
  const data = await api('jobs?' + p);
  const rows = data.jobs.map((j) => el('tr', { dataset: { job: j.job } },
    el('td', {}, el('a', { href: jobHref(j.job) }, j.job)),
    el('td', { class: 'num' }, j.topology && j.topology.world ? j.topology.world.toLocaleString('en') : '–'),
    el('td', {}, el('span', { class: 'badge ' + j.state }, j.state)),
    el('td', {}, stepCell(j)),
    el('td', {}, incidentCell(j.incident)),
    el('td', {}, fmtTime(j.last_seen))));
  const total = data.total !== undefined ? data.total : data.jobs.length;
  main.append(el('table', { id: 'jobs' },
    el('thead', {}, el('tr', {}, ['job', 'ranks', 'state', 'last step / baseline', 'incident', 'last seen']
      .map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 6 }, 'No job matches.')))));
  const pager = el('p', { class: 'pager' },
    `${total ? offset + 1 : 0}–${offset + data.jobs.length} of ${total} jobs `);
  if (offset > 0) pager.append(el('button', { type: 'button', onclick: () => go(q, state, Math.max(0, offset - PAGE)) }, 'Previous'));
  if (offset + data.jobs.length < total) pager.append(el('button', { type: 'button', onclick: () => go(q, state, offset + PAGE) }, 'Next'));
  main.append(pager);
  if (data.elsewhere && data.elsewhere.length)
    main.append(el('h2', {}, 'Jobs other culpritd instances own'), el('ul', {},
      data.elsewhere.map((j) => el('li', {}, j.name + ' — ' + j.instance + ' (' + j.api_url + ')'))));
  document.body.dataset.rendered = 'jobs';
}
