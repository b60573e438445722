// The dependencies page: /zipkin/dependency?endTs=...&lookback=...
// Draws GET /dependencies as a layered graph in SVG: callers left of callees,
// one column per layer, edges labelled with call and error counts. A table
// below lists the same links.
import {
  api, clear, el, formatDuration, fromLocalInput, loadConfig, serviceColor, setupHeader,
  showStatus, toLocalInput,
} from './common.js';

const SVG = 'http://www.w3.org/2000/svg';
const statusEl = document.getElementById('dep-status');
const wrap = document.getElementById('graph-wrap');

setupHeader();
main().catch((e) => {
  showStatus(statusEl, e.message, 'error');
  wrap.dataset.state = 'error';
});

async function main() {
  const q = new URLSearchParams(location.search);
  const endInput = document.getElementById('d-endTs');
  const lookbackSel = document.getElementById('d-lookback');
  if (Number(q.get('endTs')) > 0) endInput.value = toLocalInput(Number(q.get('endTs')));
  if (Number(q.get('lookback')) > 0) {
    const v = q.get('lookback');
    if (![...lookbackSel.options].some((o) => o.value === v)) {
      lookbackSel.append(el('option', { value: v, text: formatDuration(Number(v) * 1000) }));
    }
    lookbackSel.value = v;
  }
  document.getElementById('dep-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const out = new URLSearchParams();
    const end = fromLocalInput(endInput.value);
    if (Number.isNaN(end)) {
      document.getElementById('dep-error').textContent = 'Ending at: not a valid date and time.';
      return;
    }
    if (end !== '') out.set('endTs', String(end));
    out.set('lookback', lookbackSel.value);
    location.assign('?' + out.toString());
  });

  const config = await loadConfig();
  const endTs = Number(q.get('endTs')) > 0 ? Number(q.get('endTs')) : Date.now();
  const lookback = Number(lookbackSel.value) > 0 ? Number(lookbackSel.value) : 3600000;
  showStatus(statusEl, 'Loading…');
  const links = await api(config, '/dependencies', { endTs, lookback });
  const clean = (Array.isArray(links) ? links : [])
    .filter((l) => l && typeof l.parent === 'string' && typeof l.child === 'string')
    .map((l) => ({
      parent: l.parent,
      child: l.child,
      callCount: Number(l.callCount) || 0,
      errorCount: Number(l.errorCount) || 0,
    }));
  if (clean.length === 0) {
    showStatus(statusEl, `No dependency links between ${new Date(endTs - lookback).toLocaleString()} and ${new Date(endTs).toLocaleString()}.`);
    wrap.dataset.state = 'empty';
    return;
  }
  const calls = clean.reduce((a, l) => a + l.callCount, 0);
  showStatus(statusEl, `${clean.length} link${clean.length === 1 ? '' : 's'}, ${calls} call${calls === 1 ? '' : 's'} between ` +
    `${new Date(endTs - lookback).toLocaleString()} and ${new Date(endTs).toLocaleString()}.`);
  drawGraph(clean);
  fillTable(clean);
  wrap.dataset.state = 'rendered';
}

// layout assigns each service a layer (longest path from a service nobody
// calls, ignoring edges that close a cycle) and a row within the layer.
function layout(links) {
  const names = [...new Set(links.flatMap((l) => [l.parent, l.child]))].sort();
  const out = new Map(names.map((n) => [n, []]));
  const indeg = new Map(names.map((n) => [n, 0]));
  for (const l of links) {
    if (l.parent === l.child) continue;
    out.get(l.parent).push(l.child);
  }
  // Find back edges with a DFS so the rest is acyclic.
  const state = new Map();
  const back = new Set();
  for (const start of names) {
    if (state.has(start)) continue;
    const stack = [[start, 0]];
    state.set(start, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [n, i] = top;
      const succ = out.get(n);
      if (i < succ.length) {
        top[1]++;
        const m = succ[i];
        if (state.get(m) === 1) back.add(n + '\u0000' + m);
        else if (!state.has(m)) { state.set(m, 1); stack.push([m, 0]); }
      } else {
        state.set(n, 2);
        stack.pop();
      }
    }
  }
  const dag = new Map(names.map((n) => [n, out.get(n).filter((m) => !back.has(n + '\u0000' + m))]));
  for (const [, succ] of dag) for (const m of succ) indeg.set(m, indeg.get(m) + 1);
  // Longest-path layering over a topological order.
  const layer = new Map(names.map((n) => [n, 0]));
  const queue = names.filter((n) => indeg.get(n) === 0);
  const deg = new Map(indeg);
  while (queue.length) {
    const n = queue.shift();
    for (const m of dag.get(n)) {
      layer.set(m, Math.max(layer.get(m), layer.get(n) + 1));
      deg.set(m, deg.get(m) - 1);
      if (deg.get(m) === 0) queue.push(m);
    }
  }
  const columns = [];
  for (const n of names) {
    const l = layer.get(n);
    (columns[l] ||= []).push(n);
  }
  // Order each column by the mean row of its callers (one barycentre pass).
  const row = new Map();
  columns.forEach((col, ci) => {
    if (ci > 0) {
      const score = (n) => {
        const callers = links.filter((l) => l.child === n && row.has(l.parent)).map((l) => row.get(l.parent));
        return callers.length ? callers.reduce((a, b) => a + b, 0) / callers.length : Infinity;
      };
      col.sort((a, b) => score(a) - score(b) || a.localeCompare(b));
    }
    col.forEach((n, i) => row.set(n, i));
  });
  return { names, layer, row, columns };
}

function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawGraph(links) {
  const { names, layer, row, columns } = layout(links);
  const NODE_W = 170, NODE_H = 34, COL_GAP = 150, ROW_GAP = 40, PAD = 30;
  const maxRows = Math.max(...columns.map((c) => (c ? c.length : 0)));
  const width = PAD * 2 + columns.length * NODE_W + (columns.length - 1) * COL_GAP;
  const height = PAD * 2 + maxRows * NODE_H + (maxRows - 1) * ROW_GAP + 30;
  const pos = new Map();
  for (const n of names) {
    const col = columns[layer.get(n)];
    const offset = (maxRows - col.length) * (NODE_H + ROW_GAP) / 2;
    pos.set(n, {
      x: PAD + layer.get(n) * (NODE_W + COL_GAP),
      y: PAD + 15 + offset + row.get(n) * (NODE_H + ROW_GAP),
    });
  }
  const root = svg('svg', {
    id: 'dep-graph', viewBox: `0 0 ${width} ${height}`, width, height,
    role: 'img', 'aria-label': 'Service dependency graph',
  });
  const defs = svg('defs');
  for (const [id, cls] of [['arrow', 'arrow'], ['arrow-err', 'arrow err']]) {
    const m = svg('marker', {
      id, viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 9, markerHeight: 9,
      markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse',
    });
    m.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: cls }));
    defs.append(m);
  }
  root.append(defs);

  const edges = svg('g', { class: 'edges' });
  const labels = svg('g', { class: 'edge-labels' });
  links.forEach((l, i) => {
    const a = pos.get(l.parent), b = pos.get(l.child);
    let d, lx, ly;
    if (l.parent === l.child) {
      const x = a.x + NODE_W - 20, y = a.y;
      d = `M${x},${y} C${x + 10},${y - 45} ${x + 50},${y - 20} ${a.x + NODE_W},${y + 10}`;
      lx = x + 30; ly = y - 30;
    } else if (layer.get(l.child) > layer.get(l.parent)) {
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const mx = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
      lx = mx; ly = (y1 + y2) / 2 - 6;
    } else {
      // Back edge (cycle) or same layer: arc below the nodes.
      const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y + NODE_H;
      const dip = Math.max(y1, y2) + 40;
      d = `M${x1},${y1} C${x1},${dip} ${x2},${dip} ${x2},${y2}`;
      lx = (x1 + x2) / 2; ly = dip - 8;
    }
    const err = l.errorCount > 0;
    const path = svg('path', {
      d, class: 'edge' + (err ? ' err' : ''),
      'marker-end': `url(#${err ? 'arrow-err' : 'arrow'})`,
      'data-parent': l.parent, 'data-child': l.child,
    });
    path.style.strokeWidth = String(Math.min(6, 1.2 + Math.log10(1 + l.callCount)));
    path.append(svg('title', {}, `${l.parent} → ${l.child}: ${l.callCount} calls, ${l.errorCount} errors`));
    edges.append(path);
    const text = `${l.callCount} call${l.callCount === 1 ? '' : 's'}` + (err ? ` · ${l.errorCount} error${l.errorCount === 1 ? '' : 's'}` : '');
    const label = svg('text', {
      x: lx, y: ly, 'text-anchor': 'middle', class: 'edge-label' + (err ? ' err' : ''),
      'data-parent': l.parent, 'data-child': l.child, 'data-index': i,
    }, text);
    labels.append(label);
  });
  root.append(edges);

  const nodes = svg('g', { class: 'nodes' });
  for (const n of names) {
    const p = pos.get(n);
    const g = svg('g', { class: 'node', 'data-service': n, transform: `translate(${p.x},${p.y})` });
    const rect = svg('rect', { width: NODE_W, height: NODE_H, rx: 6 });
    rect.style.stroke = serviceColor(n);
    const shown = n.length > 22 ? n.slice(0, 21) + '…' : n;
    g.append(rect, svg('text', { x: NODE_W / 2, y: NODE_H / 2 + 5, 'text-anchor': 'middle' }, shown), svg('title', {}, n));
    nodes.append(g);
  }
  root.append(nodes, labels);
  clear(wrap);
  wrap.append(root);
}

function fillTable(links) {
  const tbody = document.getElementById('dep-rows');
  clear(tbody);
  const sorted = links.slice().sort((a, b) => a.parent.localeCompare(b.parent) || a.child.localeCompare(b.child));
  for (const l of sorted) {
    tbody.append(el('tr', { className: l.errorCount ? 'error' : '', dataset: { parent: l.parent, child: l.child } },
      el('td', { text: l.parent }), el('td', { text: l.child }),
      el('td', { className: 'num calls', text: String(l.callCount) }),
      el('td', { className: 'num errors', text: String(l.errorCount) })));
  }
  document.getElementById('dep-table').hidden = false;
}
