// The trace model: turns the JSON v2 spans of one trace into a tree ready to
// draw. It follows what Zipkin's own UI does with messy data:
//
//   - Spans reported in pieces (same ID, same side) are merged.
//   - A client and a server sharing one span ID (B3/Brave's default) stay two
//     rows: the server half (shared=true, set here when the reporter forgot it)
//     becomes a child of the client half. Children of that span ID attach to
//     the server half on the same service, as the server made them.
//   - A span whose parent is not in the trace is an orphan: it is drawn at the
//     root level with a note. Parent cycles are broken the same way.
//   - A span without timestamp takes its earliest annotation, else its
//     parent's start, and is marked. A span without duration takes its
//     annotations' extent, else it is drawn as a marker and flagged.
//   - Clock skew: when a server span on another host starts before its client
//     or ends after it, the server's subtree on that host is shifted so the
//     server sits in the middle of the client (Zipkin's rule, extended to the
//     "ends after" case), and a note says by how much.
//
// Nothing here touches the DOM.

import { normalizeSpanId, normalizeTraceId } from './common.js';

const KINDS = new Set(['CLIENT', 'SERVER', 'PRODUCER', 'CONSUMER']);

function posInt(v) {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : undefined;
}

function cleanEndpoint(e) {
  if (!e || typeof e !== 'object') return undefined;
  const out = {};
  if (typeof e.serviceName === 'string' && e.serviceName !== '') out.serviceName = e.serviceName;
  if (typeof e.ipv4 === 'string' && e.ipv4 !== '') out.ipv4 = e.ipv4;
  if (typeof e.ipv6 === 'string' && e.ipv6 !== '') out.ipv6 = e.ipv6;
  if (typeof e.port === 'number' && e.port > 0) out.port = e.port;
  return Object.keys(out).length ? out : undefined;
}

function annotationCompare(a, b) {
  return a.timestamp - b.timestamp || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0);
}

function uniqueAnnotations(list) {
  const seen = new Set();
  const out = [];
  for (const a of list) {
    const k = a.timestamp + '\u0000' + a.value;
    if (!seen.has(k)) { seen.add(k); out.push(a); }
  }
  return out.sort(annotationCompare);
}

// cleanSpan validates and normalises one raw span; null if it has no usable ID.
export function cleanSpan(raw) {
  if (!raw || typeof raw !== 'object') return null;
  const id = normalizeSpanId(raw.id);
  if (!id || /^0+$/.test(id)) return null;
  const s = { id, traceId: normalizeTraceId(raw.traceId) || '' };
  const parentId = normalizeSpanId(raw.parentId);
  if (parentId && parentId !== id && !/^0+$/.test(parentId)) s.parentId = parentId;
  if (KINDS.has(raw.kind)) s.kind = raw.kind;
  if (typeof raw.name === 'string' && raw.name !== '' && raw.name !== 'unknown') s.name = raw.name;
  s.timestamp = posInt(raw.timestamp);
  s.duration = posInt(raw.duration);
  s.localEndpoint = cleanEndpoint(raw.localEndpoint);
  s.remoteEndpoint = cleanEndpoint(raw.remoteEndpoint);
  const anns = Array.isArray(raw.annotations) ? raw.annotations : [];
  s.annotations = uniqueAnnotations(anns
    .filter((a) => a && typeof a.timestamp === 'number' && Number.isFinite(a.timestamp))
    .map((a) => ({ timestamp: a.timestamp, value: String(a.value ?? '') })));
  s.tags = {};
  if (raw.tags && typeof raw.tags === 'object') {
    for (const [k, v] of Object.entries(raw.tags)) s.tags[k] = v === null || v === undefined ? '' : String(v);
  }
  if (raw.debug === true) s.debug = true;
  // shared describes the server half; ignore it on a client.
  if (raw.shared === true && s.kind !== 'CLIENT') s.shared = true;
  return s;
}

function serviceOf(s) {
  return s.localEndpoint?.serviceName;
}

function endpointsCompatible(a, b) {
  if (!a || !b) return true;
  for (const f of ['serviceName', 'ipv4', 'ipv6', 'port']) {
    if (a[f] !== undefined && b[f] !== undefined && a[f] !== b[f]) return false;
  }
  return true;
}

function mergeTwo(a, b) {
  const out = { ...a };
  out.traceId = b.traceId.length > a.traceId.length ? b.traceId : a.traceId;
  for (const f of ['parentId', 'kind', 'name', 'timestamp', 'duration']) {
    if (out[f] === undefined) out[f] = b[f];
  }
  out.localEndpoint = a.localEndpoint || b.localEndpoint ? { ...b.localEndpoint, ...a.localEndpoint } : undefined;
  out.remoteEndpoint = a.remoteEndpoint || b.remoteEndpoint ? { ...b.remoteEndpoint, ...a.remoteEndpoint } : undefined;
  out.annotations = uniqueAnnotations(a.annotations.concat(b.annotations));
  out.tags = { ...b.tags, ...a.tags };
  if (a.debug || b.debug) out.debug = true;
  if (a.shared || b.shared) out.shared = true;
  out.pieces = (a.pieces || 1) + (b.pieces || 1);
  return out;
}

function sharedRank(s) {
  if (s.shared) return 2;
  return s.kind === 'CLIENT' ? 0 : 1;
}

// mergeSpans merges spans reported in pieces and fixes the shared flag.
export function mergeSpans(spans) {
  const list = spans.slice().sort((a, b) =>
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) ||
    sharedRank(a) - sharedRank(b) ||
    String(serviceOf(a) ?? '').localeCompare(String(serviceOf(b) ?? '')));
  const out = [];
  for (let i = 0; i < list.length; i++) {
    let s = list[i];
    while (i + 1 < list.length && list[i + 1].id === s.id &&
      Boolean(list[i + 1].shared) === Boolean(s.shared) &&
      endpointsCompatible(s.localEndpoint, list[i + 1].localEndpoint) &&
      !(s.kind && list[i + 1].kind && s.kind !== list[i + 1].kind)) {
      s = mergeTwo(s, list[i + 1]);
      i++;
    }
    const last = out[out.length - 1];
    if (last && last.id === s.id) {
      // The server half of an RPC whose reporter did not set shared.
      if (last.kind === 'CLIENT' && s.kind === 'SERVER' && !s.shared) s = { ...s, shared: true };
      // A shared server span that was not told its parent.
      if (s.shared && !s.parentId && last.parentId) s = { ...s, parentId: last.parentId };
    }
    out.push(s);
  }
  return out;
}

function hostKey(s) {
  const e = s.localEndpoint;
  if (!e) return undefined;
  return e.ipv4 || e.ipv6 || (e.serviceName ? 'service:' + e.serviceName : undefined);
}

function isError(s) {
  return Object.prototype.hasOwnProperty.call(s.tags, 'error') ||
    s.annotations.some((a) => a.value === 'error');
}

function byStart(a, b) {
  const as = a.start, bs = b.start;
  if (as === undefined && bs !== undefined) return 1;
  if (bs === undefined && as !== undefined) return -1;
  if (as !== bs) return as - bs;
  // client half before its server half
  if (a.span.id === b.span.id) return sharedRank(a.span) - sharedRank(b.span);
  return String(a.span.name ?? '').localeCompare(String(b.span.name ?? ''));
}

// buildTrace turns raw JSON spans into {traceId, rows, roots, nodes, start,
// duration, services, errorCount, dropped, ...}. rows is the depth-first
// order to draw; each node has depth, start, duration (µs, skew-corrected),
// parent, children, notes and flags.
export function buildTrace(rawSpans) {
  const input = Array.isArray(rawSpans) ? rawSpans : [];
  const cleaned = [];
  let dropped = 0;
  for (const r of input) {
    const s = cleanSpan(r);
    if (s) cleaned.push(s); else dropped++;
  }
  const merged = mergeSpans(cleaned);
  let traceId = '';
  for (const s of merged) if (s.traceId.length > traceId.length) traceId = s.traceId;

  const nodes = merged.map((span) => ({
    span,
    key: span.id,
    parent: null,
    children: [],
    depth: 0,
    notes: [],
    error: isError(span),
    service: serviceOf(span) || span.remoteEndpoint?.serviceName || 'unknown',
    start: span.timestamp ?? (span.annotations.length ? span.annotations[0].timestamp : undefined),
    duration: span.duration,
    annotations: span.annotations,
    skew: 0,
  }));

  // Keys: a span ID for client/local spans; "<id>~s" (+ "~n" for a second
  // server) for shared server halves.
  const byId = new Map();
  const sharedById = new Map();
  for (const n of nodes) {
    if (n.span.shared) {
      const list = sharedById.get(n.span.id) || [];
      n.key = n.span.id + '~s' + (list.length ? '~' + list.length : '');
      list.push(n);
      sharedById.set(n.span.id, list);
    } else if (!byId.has(n.span.id)) {
      byId.set(n.span.id, n);
    } else {
      // Same ID, same side, endpoints that do not merge: keep both.
      n.key = n.span.id + '~' + nodes.indexOf(n);
    }
  }

  const roots = [];
  const orphans = [];
  for (const n of nodes) {
    const s = n.span;
    let parent = null;
    if (s.shared && byId.has(s.id)) {
      parent = byId.get(s.id);
    } else if (s.parentId) {
      const shared = sharedById.get(s.parentId) || [];
      parent = shared.find((p) => serviceOf(p.span) && serviceOf(p.span) === serviceOf(s)) ||
        byId.get(s.parentId) || shared[0] || null;
      if (!parent) n.notes.push(`Parent span ${s.parentId} is not in this trace; shown at the top level.`);
    }
    if (parent === n) parent = null;
    if (parent) {
      n.parent = parent;
      parent.children.push(n);
    } else if (s.parentId && !(s.shared && byId.has(s.id))) {
      n.orphan = true;
      orphans.push(n);
    } else {
      roots.push(n);
    }
  }

  // Break parent cycles: anything not reachable from a root becomes a root.
  const reached = new Set();
  const mark = (start) => {
    const stack = [start];
    while (stack.length) {
      const n = stack.pop();
      if (reached.has(n)) continue;
      reached.add(n);
      for (const c of n.children) stack.push(c);
    }
  };
  roots.forEach(mark);
  orphans.forEach(mark);
  for (const n of nodes) {
    if (reached.has(n)) continue;
    if (n.parent) n.parent.children = n.parent.children.filter((c) => c !== n);
    n.parent = null;
    n.orphan = true;
    n.notes.push('Its parent chain loops back to itself; shown at the top level.');
    orphans.push(n);
    mark(n);
  }

  const top = roots.concat(orphans);

  // Clock skew, top-down. A skew found at a server span applies to its
  // descendants on the same host.
  const walk = [];
  for (const r of top) walk.push([r, null]);
  while (walk.length) {
    const [n, inherited] = walk.pop();
    if (inherited && hostKey(n.span) === inherited.host) shift(n, inherited.skew);
    let skew = clockSkew(n);
    if (skew) {
      shift(n, skew.skew);
      n.notes.push(`Clock skew: ${n.service}'s clock looks ${Math.abs(skew.skew)}µs ` +
        `${skew.skew > 0 ? 'ahead of' : 'behind'} its caller's; its spans were shifted to fit inside the client span.`);
      n.skewed = true;
    } else {
      skew = inherited;
    }
    for (const c of n.children) walk.push([c, skew]);
  }

  // Durations from annotations where missing.
  for (const n of nodes) {
    if (n.duration === undefined && n.annotations.length > 1) {
      const d = n.annotations[n.annotations.length - 1].timestamp - n.annotations[0].timestamp;
      if (d > 0) {
        n.duration = d;
        n.notes.push('No duration was reported; the extent of its annotations is shown.');
      }
    }
  }

  // Trace bounds from the spans that have a start.
  let start = Infinity;
  let end = -Infinity;
  for (const n of nodes) {
    if (n.start === undefined) continue;
    start = Math.min(start, n.start);
    end = Math.max(end, n.start + (n.duration || 0));
  }
  if (start === Infinity) { start = 0; end = 0; }

  // Sort children and place spans that have no time at their parent's start.
  top.sort(byStart);
  const rows = [];
  const stack = top.slice().reverse().map((n) => [n, 0]);
  while (stack.length) {
    const [n, depth] = stack.pop();
    n.depth = depth;
    if (n.start === undefined) {
      n.start = n.parent ? n.parent.start : start;
      n.noTimestamp = true;
      n.notes.push('No timestamp was reported; drawn at its parent\'s start.');
    }
    if (n.duration === undefined) {
      n.noDuration = true;
      n.notes.push('No duration was reported; drawn as a marker.');
    }
    n.index = rows.length;
    rows.push(n);
    n.children.sort(byStart);
    for (let i = n.children.length - 1; i >= 0; i--) stack.push([n.children[i], depth + 1]);
  }
  // Subtree extent: rows[index+1 .. last] are the descendants.
  for (let i = rows.length - 1; i >= 0; i--) {
    const n = rows[i];
    n.last = n.children.length ? n.children[n.children.length - 1].last : i;
  }

  const services = new Map();
  let errorCount = 0;
  let maxDepth = 0;
  for (const n of rows) {
    const svc = serviceOf(n.span);
    if (svc) services.set(svc, (services.get(svc) || 0) + 1);
    if (n.error) errorCount++;
    maxDepth = Math.max(maxDepth, n.depth);
  }

  return {
    traceId,
    rows,
    roots: top,
    nodes: rows,
    root: top[0],
    start,
    duration: Math.max(0, end - start),
    services,
    errorCount,
    maxDepth,
    dropped,
  };
}

function shift(n, skew) {
  if (!skew) return;
  if (n.start !== undefined) n.start -= skew;
  n.annotations = n.annotations.map((a) => ({ timestamp: a.timestamp - skew, value: a.value }));
  n.skew += skew;
}

// clockSkew returns {host, skew} when n is a SERVER whose CLIENT parent on
// another host does not contain it in time.
function clockSkew(n) {
  const p = n.parent;
  if (!p || p.span.kind !== 'CLIENT' || n.span.kind !== 'SERVER') return null;
  const cs = p.start, ss = n.start;
  if (cs === undefined || ss === undefined) return null;
  const host = hostKey(n.span);
  const clientHost = hostKey(p.span);
  if (!host || !clientHost || host === clientHost) return null;
  const cd = p.duration, sd = n.duration;
  let skew = 0;
  if (ss < cs) {
    if (!cd || !sd || cd < sd) skew = ss - cs - 1;
    else skew = ss - (cd - sd) / 2 - cs;
  } else if (cd && sd && sd <= cd && ss + sd > cs + cd) {
    skew = ss - (cd - sd) / 2 - cs;
  }
  skew = Math.round(skew);
  return skew ? { host, skew } : null;
}

// summarize gives what the search page lists for one trace.
export function summarize(rawSpans) {
  const t = buildTrace(rawSpans);
  const root = t.root;
  return {
    traceId: t.traceId,
    rootService: root ? root.service : 'unknown',
    rootName: root ? root.span.name || '(no name)' : '(empty trace)',
    start: t.start,
    duration: t.duration,
    spanCount: t.rows.length,
    services: t.services,
    errorCount: t.errorCount,
  };
}
