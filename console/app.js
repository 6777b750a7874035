// app.js: the console's shell: the routes (#/jobs, #/jobs/NAME, #/fleet), the REST API with
// the user's token, and the DOM helper every page builds with. Nothing is ever put in the page
// as HTML: names come from clients (jobs, hosts, phases, events) and are set as text only.
import { jobsPage } from './jobs.js';
import { jobPage } from './job.js';
import { fleetPage } from './fleet.js';

const TOKEN_KEY = 'culprit.token';

// el('div', {class: 'x', onclick: f}, 'text', child, ...): an element; strings become text nodes
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

// The REST API, relative to the page (the console may sit behind a path prefix).
export async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch('api/v1/' + path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    showTokenForm(token ? 'That token is not accepted.' : '');
    throw new ApiError(401, 'a token is needed');
  }
  if (!res.ok) {
    let detail = res.statusText;
    try { const j = await res.json(); detail = j.detail || j.error || detail; } catch (e) { /* not JSON */ }
    throw new ApiError(res.status, detail);
  }
  if (opts.raw) return res;
  return res.json();
}

export function jobHref(name) { return '#/jobs/' + encodeURIComponent(name); }

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
  if (ms >= 10000) return (ms / 1000).toFixed(1) + ' s';
  if (ms >= 1000) return (ms / 1000).toFixed(2) + ' s';
  return ms.toFixed(ms >= 100 ? 0 : 1) + ' ms';
}

export function fmtTime(t) {
  if (!t) return '–';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}

function showTokenForm(message) {
  document.getElementById('main').replaceChildren();
  document.getElementById('token-form').hidden = false;
  document.getElementById('token-error').textContent = message || '';
}

function route() {
  const main = document.getElementById('main');
  const hash = location.hash || '#/jobs';
  document.getElementById('token-form').hidden = true;
  document.getElementById('forget').hidden = !localStorage.getItem(TOKEN_KEY);
  main.replaceChildren();
  delete document.body.dataset.rendered;
  delete document.body.dataset.heatmap;
  for (const a of document.querySelectorAll('nav a')) a.classList.remove('on');
  let page;
  if (hash.startsWith('#/jobs/')) {
    document.getElementById('nav-jobs').classList.add('on');
    page = jobPage(main, decodeURIComponent(hash.slice('#/jobs/'.length)));
  } else if (hash.startsWith('#/fleet')) {
    document.getElementById('nav-fleet').classList.add('on');
    page = fleetPage(main);
  } else {
    document.getElementById('nav-jobs').classList.add('on');
    page = jobsPage(main, new URLSearchParams(hash.split('?')[1] || ''));
  }
  Promise.resolve(page).catch((e) => {
    if (e instanceof ApiError && e.status === 401) return;
    main.append(el('p', { class: 'error' }, 'Could not load this page: ' + e.message));
  });
}

document.getElementById('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  localStorage.setItem(TOKEN_KEY, document.getElementById('token').value.trim());
  document.getElementById('token').value = '';
  route();
});
document.getElementById('forget').addEventListener('click', () => {
  localStorage.removeItem(TOKEN_KEY);
  route();
});
window.addEventListener('hashchange', route);
route();
