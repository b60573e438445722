// The search page: /zipkin/?serviceName=...&... The query lives in the URL
// with the API's own parameter names (durations in µs, lookback and endTs in
// ms) plus sort=newest|longest, so a search can be bookmarked and shared.
import {
  api, clear, el, formatDuration, formatTime, fromLocalInput, loadConfig, parseDuration,
  serviceColor, setupHeader, showStatus, toLocalInput, traceHref,
} from './common.js';
import { summarize } from './model.js';

const form = document.getElementById('search-form');
const formError = document.getElementById('search-error');
const statusEl = document.getElementById('search-status');
const results = document.getElementById('results');
const f = (name) => document.getElementById('f-' + name);

const PARAMS = ['serviceName', 'spanName', 'remoteServiceName', 'annotationQuery',
  'minDuration', 'maxDuration', 'lookback', 'endTs', 'limit', 'sort'];

setupHeader();
main().catch((e) => showStatus(statusEl, e.message, 'error'));

async function main() {
  const q = new URLSearchParams(location.search);
  fillForm(q);
  form.addEventListener('submit', onSubmit);
  const config = await loadConfig();
  const names = loadNames(config);
  f('serviceName').addEventListener('change', () => loadServiceNames(config, f('serviceName').value));
  const hasQuery = PARAMS.some((p) => q.has(p));
  if (hasQuery) {
    await Promise.all([names, search(config, q)]);
  } else {
    showStatus(statusEl, 'Choose a service or other criteria and press "Find traces".');
    results.dataset.state = 'idle';
    await names;
  }
}

function fillForm(q) {
  for (const p of ['serviceName', 'spanName', 'remoteServiceName', 'annotationQuery']) {
    if (q.has(p)) f(p).value = q.get(p);
  }
  for (const p of ['minDuration', 'maxDuration']) {
    const v = Number(q.get(p));
    if (q.has(p) && v > 0) f(p).value = formatDuration(v).replace('µs', 'us');
  }
  if (q.has('lookback')) {
    const sel = f('lookback');
    const v = q.get('lookback');
    if (![...sel.options].some((o) => o.value === v) && Number(v) > 0) {
      sel.append(el('option', { value: v, text: formatDuration(Number(v) * 1000) }));
    }
    sel.value = v;
  }
  if (q.has('endTs') && Number(q.get('endTs')) > 0) f('endTs').value = toLocalInput(Number(q.get('endTs')));
  if (q.has('limit')) f('limit').value = q.get('limit');
  if (q.get('sort') === 'longest') f('sort').value = 'longest';
}

function onSubmit(ev) {
  ev.preventDefault();
  formError.textContent = '';
  const q = new URLSearchParams();
  for (const p of ['serviceName', 'spanName', 'remoteServiceName', 'annotationQuery']) {
    const v = f(p).value.trim();
    if (v) q.set(p, v);
  }
  for (const p of ['minDuration', 'maxDuration']) {
    const v = parseDuration(f(p).value);
    if (Number.isNaN(v)) {
      formError.textContent = `${p === 'minDuration' ? 'Min' : 'Max'} duration: use a number with a unit, e.g. 250us, 100ms, 1.5s`;
      f(p).focus();
      return;
    }
    if (v !== '') q.set(p, String(v));
  }
  if (q.has('maxDuration') && !q.has('minDuration')) {
    formError.textContent = 'Max duration needs a min duration too (the Zipkin API requires it).';
    return;
  }
  q.set('lookback', f('lookback').value);
  const end = fromLocalInput(f('endTs').value);
  if (Number.isNaN(end)) { formError.textContent = 'Ending at: not a valid date and time.'; return; }
  if (end !== '') q.set('endTs', String(end));
  const limit = Number(f('limit').value);
  if (!(limit >= 1)) { formError.textContent = 'Limit must be at least 1.'; return; }
  q.set('limit', String(Math.floor(limit)));
  q.set('sort', f('sort').value);
  location.assign('?' + q.toString());
}

async function loadNames(config) {
  try {
    const services = await api(config, '/services');
    fillDatalist('dl-services', services);
    if (f('serviceName').value) await loadServiceNames(config, f('serviceName').value);
    document.body.dataset.servicesLoaded = 'true';
  } catch (e) {
    showStatus(statusEl, 'Could not load service names: ' + e.message, 'error');
  }
}

async function loadServiceNames(config, service) {
  if (!service) { fillDatalist('dl-spans', []); fillDatalist('dl-remote', []); return; }
  const [spans, remotes] = await Promise.all([
    api(config, '/spans', { serviceName: service }).catch(() => []),
    api(config, '/remoteServices', { serviceName: service }).catch(() => []),
  ]);
  fillDatalist('dl-spans', spans);
  fillDatalist('dl-remote', remotes);
}

function fillDatalist(id, values) {
  const dl = document.getElementById(id);
  clear(dl);
  if (!Array.isArray(values)) return;
  for (const v of values) dl.append(el('option', { value: String(v) }));
}

async function search(config, q) {
  const params = {};
  for (const p of ['serviceName', 'spanName', 'remoteServiceName', 'annotationQuery', 'minDuration', 'maxDuration', 'lookback', 'limit']) {
    if (q.get(p)) params[p] = q.get(p);
  }
  params.endTs = q.get('endTs') || String(Date.now());
  params.lookback = params.lookback || '3600000';
  params.limit = params.limit || '10';
  showStatus(statusEl, 'Searching…');
  results.dataset.state = 'loading';
  let traces;
  try {
    traces = await api(config, '/traces', params);
  } catch (e) {
    showStatus(statusEl, 'Search failed: ' + e.message, 'error');
    results.dataset.state = 'error';
    return;
  }
  const list = (Array.isArray(traces) ? traces : []).map(summarize).filter((s) => s.spanCount > 0);
  if (q.get('sort') === 'longest') list.sort((a, b) => b.duration - a.duration || b.start - a.start);
  else list.sort((a, b) => b.start - a.start || b.duration - a.duration);
  renderResults(list);
  showStatus(statusEl, list.length === 0
    ? 'No traces match. Widen the lookback, check the service name, or remove criteria.'
    : `${list.length} trace${list.length === 1 ? '' : 's'}${list.length >= Number(params.limit) ? ' (limit reached)' : ''}`);
  results.dataset.state = 'done';
}

function renderResults(list) {
  clear(results);
  const longest = Math.max(1, ...list.map((s) => s.duration));
  for (const s of list) {
    const link = el('a', { className: 'result-link', href: traceHref(s.traceId) },
      el('span', { className: 'svc-name', text: s.rootService + ': ' }),
      el('span', { className: 'root-name', text: s.rootName }));
    const bar = el('div', { className: 'dur-bar' + (s.errorCount ? ' error' : '') });
    bar.style.width = Math.max(0.5, 100 * s.duration / longest) + '%';
    const services = el('ul', { className: 'services' });
    for (const [svc, count] of [...s.services.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) {
      const chip = el('li', { className: 'chip', dataset: { service: svc } }, el('span', { text: svc }), el('span', { className: 'count', text: '×' + count }));
      chip.style.borderLeftColor = serviceColor(svc);
      services.append(chip);
    }
    const li = el('li', { className: 'result' + (s.errorCount ? ' error' : ''), dataset: { traceId: s.traceId } },
      el('div', { className: 'result-head' },
        link,
        s.errorCount ? el('span', { className: 'err-badge', title: 'spans with an error tag', text: `${s.errorCount} error${s.errorCount === 1 ? '' : 's'}` }) : null,
        el('span', { className: 'duration', text: formatDuration(s.duration) })),
      el('div', { className: 'dur-track' }, bar),
      el('div', { className: 'result-meta' },
        el('span', { className: 'span-count', text: `${s.spanCount} span${s.spanCount === 1 ? '' : 's'}` }),
        el('span', { className: 'started', text: formatTime(s.start) }),
        el('span', { className: 'trace-id', text: s.traceId }),
        services));
    results.append(li);
  }
}
