// Shared helpers for the viewer pages.
//
// Rule for every page: data from the API (span names, service names, tags,
// annotation values, IDs) is untrusted. It reaches the page only through
// el()/text nodes (textContent), SVG text nodes, form values and URLs we build
// from validated hex IDs. Never innerHTML, never attribute strings.

export const PREFIX = '/zipkin/';

let configPromise;

// loadConfig fetches /zipkin/config.json once. apiBase has no trailing slash.
export function loadConfig() {
  if (!configPromise) {
    configPromise = fetch(PREFIX + 'config.json', { headers: { Accept: 'application/json' } })
      .then((r) => {
        if (!r.ok) throw new Error(`config.json: HTTP ${r.status}`);
        return r.json();
      })
      .then((c) => ({ apiBase: String(c.apiBase ?? '/api/v2').replace(/\/+$/, '') }));
  }
  return configPromise;
}

// ApiError carries the HTTP status and the server's message.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// apiUrl builds an absolute URL for an API path with query parameters.
// Parameters whose value is '', null or undefined are left out.
export function apiUrl(config, path, params = {}) {
  const u = new URL(config.apiBase + path, location.origin);
  for (const [k, v] of Object.entries(params)) {
    if (v !== '' && v !== null && v !== undefined) u.searchParams.set(k, String(v));
  }
  return u.toString();
}

// api fetches JSON from the API; a non-2xx answer throws ApiError with the
// server's text body (Zipkin answers 400 with a plain-text reason).
export async function api(config, path, params = {}) {
  const url = apiUrl(config, path, params);
  let r;
  try {
    r = await fetch(url, { headers: { Accept: 'application/json' } });
  } catch (e) {
    throw new ApiError(0, `cannot reach the Zipkin API at ${config.apiBase}: ${e.message}`);
  }
  if (!r.ok) {
    let body = '';
    try { body = (await r.text()).trim(); } catch { /* ignore */ }
    throw new ApiError(r.status, `${path}: HTTP ${r.status}${body ? ': ' + body.slice(0, 500) : ''}`);
  }
  return r.json();
}

// el creates an element. props: className, text (textContent), title, href,
// type, dataset (object), hidden, id, role, tabIndex, ariaLabel, ariaExpanded.
// Children: nodes or strings (strings become text nodes).
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    switch (k) {
      case 'text': e.textContent = String(v); break;
      case 'dataset': for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv); break;
      case 'ariaLabel': e.setAttribute('aria-label', String(v)); break;
      case 'ariaExpanded': e.setAttribute('aria-expanded', String(v)); break;
      default: e[k] = v;
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

// clear removes all children of a node.
export function clear(node) {
  node.replaceChildren();
}

// normalizeTraceId returns a 16 or 32 lower-hex trace ID, or null if s is
// not 1–32 hex digits (all zeros is invalid too), as Zipkin normalises it.
export function normalizeTraceId(s) {
  const id = String(s ?? '').trim().toLowerCase();
  if (!/^[0-9a-f]{1,32}$/.test(id) || /^0+$/.test(id)) return null;
  if (id.length <= 16) return id.padStart(16, '0');
  const full = id.padStart(32, '0');
  return full.startsWith('0000000000000000') ? full.slice(16) : full;
}

// normalizeSpanId pads a 1–16 hex ID to 16, or returns null.
export function normalizeSpanId(s) {
  if (typeof s !== 'string') return null;
  const id = s.trim().toLowerCase();
  if (!/^[0-9a-f]{1,16}$/.test(id)) return null;
  return id.padStart(16, '0');
}

export function traceHref(traceId) {
  return PREFIX + 'traces/' + traceId;
}

// setupHeader wires the "open trace ID" box present on every page.
export function setupHeader() {
  const form = document.getElementById('trace-id-form');
  const input = document.getElementById('trace-id-input');
  const err = document.getElementById('trace-id-error');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = normalizeTraceId(input.value);
    if (!id) {
      err.textContent = 'A trace ID is 1–32 hex digits';
      input.setAttribute('aria-invalid', 'true');
      return;
    }
    err.textContent = '';
    location.assign(traceHref(id));
  });
  input.addEventListener('input', () => {
    err.textContent = '';
    input.removeAttribute('aria-invalid');
  });
  const page = document.body.dataset.page;
  const current = document.getElementById('nav-' + page);
  if (current) current.setAttribute('aria-current', 'page');
}

// formatDuration renders microseconds for people: 850µs, 12.3ms, 1.25s, 2m 5s.
export function formatDuration(us) {
  if (us === undefined || us === null || !Number.isFinite(us)) return '?';
  const a = Math.abs(us);
  if (a < 1000) return `${Math.round(us)}µs`;
  if (a < 1e6) return `${trim(us / 1000)}ms`;
  if (a < 60e6) return `${trim(us / 1e6)}s`;
  const m = Math.floor(us / 60e6);
  const s = Math.round((us - m * 60e6) / 1e6);
  return `${m}m ${s}s`;
}

function trim(x) {
  const a = Math.abs(x);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return String(Number(x.toFixed(digits)));
}

// parseDuration turns "150ms", "1.5s", "200us", "200µs", "2m" or a plain
// number of microseconds into microseconds. Empty gives ''. Invalid gives NaN.
export function parseDuration(s) {
  const t = String(s ?? '').trim().toLowerCase();
  if (t === '') return '';
  const m = /^(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|min)?$/.exec(t);
  if (!m) return NaN;
  const n = Number(m[1]);
  const unit = m[2] || 'us';
  const mult = { us: 1, 'µs': 1, ms: 1e3, s: 1e6, m: 60e6, min: 60e6 }[unit];
  const v = Math.round(n * mult);
  return v >= 1 ? v : NaN;
}

// formatTime renders an epoch-microsecond timestamp in local time.
export function formatTime(us) {
  if (!Number.isFinite(us)) return 'unknown';
  const d = new Date(us / 1000);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// toLocalInput and fromLocalInput convert between epoch ms and the value of
// an <input type="datetime-local" step="1">.
export function toLocalInput(ms) {
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fromLocalInput(v) {
  if (!v) return '';
  const ms = new Date(v).getTime();
  return Number.isFinite(ms) ? ms : NaN;
}

// serviceColor gives a stable colour for a service name.
const colorCache = new Map();
export function serviceColor(name) {
  const key = String(name ?? '');
  let c = colorCache.get(key);
  if (!c) {
    let h = 2166136261;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    const hue = (h >>> 0) % 360;
    c = `hsl(${hue} 55% 52%)`;
    colorCache.set(key, c);
  }
  return c;
}

// showStatus writes a message into a status element; kind 'error' styles it.
export function showStatus(node, message, kind = '') {
  node.textContent = message;
  node.classList.toggle('error', kind === 'error');
}
