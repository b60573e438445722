// The trace page: /zipkin/traces/{traceId}. Draws the waterfall.
import {
  ApiError, PREFIX, api, apiUrl, clear, el, formatDuration, formatTime, loadConfig,
  normalizeTraceId, serviceColor, setupHeader, showStatus,
} from './common.js';
import { buildTrace } from './model.js';

const statusEl = document.getElementById('trace-status');
const waterfall = document.getElementById('waterfall');

setupHeader();
main().catch((e) => {
  document.getElementById('trace-title').textContent = 'Trace could not be shown';
  showStatus(statusEl, e.message, 'error');
  waterfall.dataset.state = 'error';
});

async function main() {
  const rawId = decodeURIComponent(location.pathname.slice((PREFIX + 'traces/').length));
  const traceId = normalizeTraceId(rawId);
  if (!traceId) {
    document.getElementById('trace-title').textContent = 'Not a trace ID';
    showStatus(statusEl, `"${rawId}" is not a trace ID: it must be 1–32 hex digits.`, 'error');
    waterfall.dataset.state = 'error';
    return;
  }
  document.title = `Trace ${traceId} · Zipkin`;
  document.getElementById('trace-id-input').value = traceId;
  const config = await loadConfig();
  const raw = document.getElementById('raw-json');
  raw.href = apiUrl(config, '/trace/' + traceId);

  let spans;
  try {
    spans = await api(config, '/trace/' + traceId);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      document.getElementById('trace-title').textContent = 'Trace not found';
      showStatus(statusEl, `No spans with trace ID ${traceId} are stored (it may have expired, or not been reported yet).`, 'error');
      waterfall.dataset.state = 'notfound';
      return;
    }
    throw e;
  }
  if (!Array.isArray(spans) || spans.length === 0) {
    document.getElementById('trace-title').textContent = 'Trace not found';
    showStatus(statusEl, `The server returned no spans for ${traceId}.`, 'error');
    waterfall.dataset.state = 'notfound';
    return;
  }
  // Timings for the curious (and the browser test): data-fetched-ms,
  // data-model-ms and data-dom-ms on #waterfall, ms since navigation start.
  waterfall.dataset.fetchedMs = String(Math.round(performance.now()));
  const trace = buildTrace(spans);
  waterfall.dataset.modelMs = String(Math.round(performance.now()));
  renderSummary(trace, traceId);
  renderAxis(trace);
  renderRows(trace);
  waterfall.dataset.domMs = String(Math.round(performance.now()));
}

function renderSummary(trace, traceId) {
  const root = trace.root;
  const title = document.getElementById('trace-title');
  title.textContent = '';
  if (root) {
    title.append(el('span', { className: 'svc-name', text: root.service + ': ' }),
      el('span', { text: root.span.name || '(no name)' }));
  } else {
    title.textContent = 'Trace ' + traceId;
  }
  const facts = document.getElementById('trace-facts');
  const add = (k, v, extra = {}) => facts.append(el('div', extra, el('dt', { text: k }), el('dd', { text: v })));
  add('Trace ID', trace.traceId || traceId, { id: 'fact-trace-id' });
  add('Started', formatTime(trace.start));
  add('Duration', formatDuration(trace.duration), { id: 'fact-duration' });
  add('Services', String(trace.services.size));
  add('Spans', String(trace.rows.length), { id: 'fact-spans' });
  add('Depth', String(trace.maxDepth + 1));
  if (trace.errorCount) add('Errors', String(trace.errorCount), { className: 'error', id: 'fact-errors' });
  if (trace.dropped) add('Unreadable spans', String(trace.dropped), { className: 'error' });

  const legend = document.getElementById('trace-legend');
  for (const [svc, count] of [...trace.services.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const swatch = el('span', { className: 'swatch' });
    swatch.style.backgroundColor = serviceColor(svc);
    legend.append(el('li', {}, swatch, el('span', { text: `${svc} ×${count}` })));
  }
  showStatus(statusEl, '');
}

// tickStep picks a round tick interval giving about 5 ticks.
function tickStep(duration) {
  const raw = duration / 5;
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

function renderAxis(trace) {
  const axis = document.getElementById('time-axis');
  clear(axis);
  axis.append(el('div', { className: 'axis-label', text: 'Service · span' }));
  const scale = el('div', { className: 'axis-scale' });
  axis.append(scale);
  const d = trace.duration;
  if (d <= 0) {
    scale.append(el('span', { className: 'tick', text: '0' }));
    return;
  }
  const step = tickStep(d);
  for (let t = 0; t <= d * 1.0001; t += step) {
    const tick = el('span', { className: 'tick', text: t === 0 ? '0' : formatDuration(t) });
    tick.style.left = (100 * t / d) + '%';
    scale.append(tick);
  }
}

let selected = null;

function renderRows(trace) {
  const d = trace.duration > 0 ? trace.duration : 1;
  const frag = document.createDocumentFragment();
  const rowEls = new Array(trace.rows.length);
  for (const n of trace.rows) {
    const row = el('div', {
      className: 'row' + (n.error ? ' error' : '') + (n.orphan ? ' orphan' : ''),
      role: 'treeitem',
      tabIndex: 0,
      dataset: {
        index: n.index,
        spanId: n.span.id,
        key: n.key,
        parentKey: n.parent ? n.parent.key : '',
        depth: n.depth,
        service: n.service,
      },
    });
    row.setAttribute('aria-level', String(n.depth + 1));
    const label = el('div', { className: 'label' });
    label.style.paddingLeft = (0.25 + n.depth * 0.9) + 'rem';
    if (n.children.length) {
      const t = el('button', { type: 'button', className: 'toggle', ariaLabel: 'Collapse', ariaExpanded: true, text: '▾' });
      label.append(t);
      row.setAttribute('aria-expanded', 'true');
    } else {
      label.append(el('span', { className: 'toggle-spacer' }));
    }
    const svc = el('span', { className: 'svc', text: n.service });
    svc.style.borderLeftColor = serviceColor(n.service);
    label.append(svc, el('span', { className: 'name', text: n.span.name || '(no name)' }));
    if (n.error) label.append(el('span', { className: 'err-mark', title: 'error', text: '!' }));
    if (n.notes.length) label.append(el('span', { className: 'note-mark', title: n.notes.join('\n'), text: 'i' }));

    const lane = el('div', { className: 'lane' });
    const bar = el('div', { className: 'bar' + (n.noDuration ? ' marker' : '') + (n.noTimestamp ? ' untimed' : '') });
    const left = Math.min(100, Math.max(0, 100 * (n.start - trace.start) / d));
    const width = n.noDuration ? 0 : Math.max(0, Math.min(100 - left, 100 * n.duration / d));
    bar.style.left = left + '%';
    if (!n.noDuration) bar.style.width = width + '%';
    bar.style.backgroundColor = serviceColor(n.service);
    const dl = el('span', { className: 'bar-label', text: n.noDuration ? '?' : formatDuration(n.duration) });
    if (left + width > 80 && left > 15) {
      // No room after the bar: put the label before it.
      dl.style.right = (100 - left) + '%';
    } else if (left + width > 80) {
      // A long bar from near the start: put the label inside it.
      dl.classList.add('inside');
      dl.style.left = left + '%';
    } else {
      dl.style.left = (left + width) + '%';
    }
    lane.append(bar, dl);
    row.append(label, lane);
    rowEls[n.index] = row;
    frag.append(row);
  }
  clear(waterfall);
  waterfall.append(frag);

  const collapsed = new Set();
  const applyVisibility = () => {
    // Hide the descendants of collapsed rows, in one pass.
    let hideUntil = -1;
    for (const n of trace.rows) {
      const hidden = n.index <= hideUntil;
      rowEls[n.index].hidden = hidden;
      if (!hidden && collapsed.has(n.index)) hideUntil = Math.max(hideUntil, n.last);
    }
  };
  const setCollapsed = (n, yes) => {
    if (!n.children.length) return;
    if (yes) collapsed.add(n.index); else collapsed.delete(n.index);
    const row = rowEls[n.index];
    row.setAttribute('aria-expanded', String(!yes));
    const t = row.querySelector('.toggle');
    t.textContent = yes ? '▸' : '▾';
    t.setAttribute('aria-expanded', String(!yes));
    t.setAttribute('aria-label', yes ? 'Expand' : 'Collapse');
    row.classList.toggle('collapsed', yes);
  };

  waterfall.addEventListener('click', (ev) => {
    const row = ev.target.closest('.row');
    if (!row) return;
    const n = trace.rows[Number(row.dataset.index)];
    if (ev.target.closest('.toggle')) {
      setCollapsed(n, !collapsed.has(n.index));
      applyVisibility();
      return;
    }
    select(n, row, trace);
  });
  waterfall.addEventListener('keydown', (ev) => {
    const row = ev.target.closest('.row');
    if (!row || ev.target !== row) return;
    const n = trace.rows[Number(row.dataset.index)];
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); select(n, row, trace); }
    if (ev.key === 'ArrowLeft' && n.children.length) { setCollapsed(n, true); applyVisibility(); }
    if (ev.key === 'ArrowRight' && n.children.length) { setCollapsed(n, false); applyVisibility(); }
  });
  document.getElementById('expand-all').addEventListener('click', () => {
    for (const n of trace.rows) setCollapsed(n, false);
    applyVisibility();
  });
  document.getElementById('collapse-all').addEventListener('click', () => {
    for (const n of trace.rows) if (n.depth === 0) setCollapsed(n, true);
    applyVisibility();
  });
  document.getElementById('details-close').addEventListener('click', () => {
    document.getElementById('details').hidden = true;
    if (selected) selected.classList.remove('selected');
    selected = null;
  });

  // Mark the page done once the browser has laid out and painted the rows.
  requestAnimationFrame(() => requestAnimationFrame(() => {
    waterfall.dataset.state = 'rendered';
    waterfall.dataset.renderMs = String(Math.round(performance.now()));
  }));
}

function endpointText(e) {
  if (!e) return 'none';
  const parts = [];
  if (e.serviceName) parts.push(e.serviceName);
  const addr = e.ipv4 || (e.ipv6 ? `[${e.ipv6}]` : '');
  if (addr || e.port) parts.push(`${addr || '?'}${e.port ? ':' + e.port : ''}`);
  return parts.join(' @ ') || 'none';
}

function select(n, row, trace) {
  if (selected) selected.classList.remove('selected');
  selected = row;
  row.classList.add('selected');
  const panel = document.getElementById('details');
  const body = document.getElementById('details-body');
  document.getElementById('details-title').textContent = `${n.service}: ${n.span.name || '(no name)'}`;
  clear(body);
  const s = n.span;

  const facts = el('dl', { className: 'kv', id: 'details-facts' });
  const add = (k, v) => facts.append(el('dt', { text: k }), el('dd', { text: v }));
  add('Span ID', s.id);
  add('Parent ID', s.parentId || 'none (root)');
  add('Trace ID', s.traceId || trace.traceId);
  add('Kind', s.kind || 'local');
  if (s.shared) add('Shared', 'yes: server half of an RPC that shares its span ID with the client');
  add('Start', s.timestamp ? `${formatTime(s.timestamp)} (+${formatDuration(s.timestamp - trace.start - n.skew)})` : 'not reported');
  add('Duration', s.duration ? formatDuration(s.duration) : 'not reported');
  add('Local endpoint', endpointText(s.localEndpoint));
  add('Remote endpoint', endpointText(s.remoteEndpoint));
  if (s.debug) add('Debug', 'yes');
  body.append(facts);

  if (n.notes.length) {
    const notes = el('ul', { className: 'notes', id: 'details-notes' });
    for (const t of n.notes) notes.append(el('li', { text: t }));
    body.append(el('h3', { text: 'Notes' }), notes);
  }

  body.append(el('h3', { text: 'Tags' }));
  const tagKeys = Object.keys(s.tags).sort();
  if (tagKeys.length) {
    const table = el('table', { className: 'tags', id: 'details-tags' });
    for (const k of tagKeys) {
      table.append(el('tr', { className: k === 'error' ? 'error' : '' },
        el('th', { text: k, scope: 'row' }), el('td', { text: s.tags[k] })));
    }
    body.append(table);
  } else {
    body.append(el('p', { className: 'muted', text: 'No tags.' }));
  }

  body.append(el('h3', { text: 'Annotations' }));
  if (n.annotations.length) {
    const table = el('table', { className: 'annotations', id: 'details-annotations' });
    for (const a of n.annotations) {
      table.append(el('tr', {}, el('th', { text: '+' + formatDuration(a.timestamp - trace.start), scope: 'row' }),
        el('td', { text: a.value })));
    }
    body.append(table);
  } else {
    body.append(el('p', { className: 'muted', text: 'No annotations.' }));
  }
  panel.hidden = false;
}
