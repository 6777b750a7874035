// fleet.js: the hosts most often a culprit across jobs in the last 1, 7 or 30 days
// (GET /api/v1/fleet), with their jobs and categories, and the incidents per day by category.
import { api, el, fmtTime, jobHref } from './app.js';
import { categoryChart, categoryColour } from './chart.js';

export async function fleetPage(main) {
  const days = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('days') || 7);
  const choose = el('p', { class: 'filter' }, 'last ', [1, 7, 30].map((d) =>
    el('a', { class: 'button' + (d === days ? ' on' : ''), href: '#/fleet?days=' + d, id: 'fleet-days-' + d }, d === 1 ? '1 day' : d + ' days')));
  main.append(el('h1', {}, 'Fleet'), choose);
  const f = await api('fleet?days=' + days);
  main.append(el('p', {}, `${f.incidents} incidents in the last ${f.days} days; the hosts that were a culprit in them, most often first:`));
  main.append(el('table', { id: 'fleet-hosts' },
    el('thead', {}, el('tr', {}, ['host', 'incidents', 'jobs', 'categories', 'last'].map((h) => el('th', {}, h)))),
    el('tbody', {}, f.hosts.length ? f.hosts.map((h) => el('tr', { dataset: { host: h.host } },
      el('td', {}, el('b', {}, h.host)), el('td', { class: 'num' }, String(h.incidents)),
      el('td', {}, h.jobs.map((j, k) => [k ? ', ' : '', el('a', { href: jobHref(j) }, j)])),
      el('td', {}, h.categories.map((c) => { const s = el('span', { class: 'category small' }, c); s.style.borderColor = categoryColour(c); return s; })),
      el('td', {}, fmtTime(h.last)))) : el('tr', {}, el('td', { colspan: 5 }, 'No culprit in this period.')))));
  main.append(el('h2', {}, 'Incidents per day by category'), categoryChart(f.categories));
  document.body.dataset.rendered = 'fleet';
}
