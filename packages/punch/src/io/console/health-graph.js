// Punch health graph (docs/health.md "Graph"): a self-contained renderer of one link's 10-minute history
// as inline SVG, for the operator console. Plain browser JavaScript, no build step, no inline styles (the
// page's CSP allows none): colours and sizes come from classes in console.css or SVG attributes.
//
//   PunchHealthGraph.render(container, view, nowMs)
//
// `view` is the body of GET /api/session/<name>/health?stream=<stream> (`history.sender`,
// `history.receiver`: points `{t, rtt, lossPct, retransmitPct, dropped, bitrate, marginMs}`). The first call
// builds the SVG inside `container`; later calls update the same elements in place (nothing the operator
// is looking at is rebuilt). A history whose newest point is older than 15 s is drawn grey with its age.
'use strict';

(function (root) {
  const SVG = 'http://www.w3.org/2000/svg';
  const SPAN_MS = 600000;
  const STALE_MS = 15000;
  /** Width in CSS pixels when the container has none yet. */
  const DEFAULT_W = 600;
  const ROW = 70;
  const PAD = 4;
  /** Rows: what is drawn, from which end, on which scale. */
  const ROWS = [
    { key: 'lossPct', end: 'receiver', label: 'Loss before ARQ (receiver), %', min: 10 },
    { key: 'retransmitPct', end: 'receiver', label: 'Retransmitted (receiver), %', min: 10 },
    { key: 'rtt', end: 'receiver', label: 'RTT, ms', min: 50 },
    { key: 'marginMs', end: 'receiver', label: 'Margin: latency − 4 × RTT, ms', min: 100 },
    { key: 'dropped', end: 'receiver', label: 'Dropped too late (receiver), packets', min: 5, bars: true },
  ];

  /**
   * The SVG path of one series: x spans the last 10 minutes before `now`, y the row's height from the
   * smaller of 0 and the series' minimum (a margin below zero is drawn below zero, never clipped to it) to
   * the larger of the row's minimum scale and the series' maximum. Pure, for the tests.
   */
  function pathOf(points, key, now, height, minScale, W = DEFAULT_W) {
    const pts = (points || []).filter((p) => typeof p[key] === 'number' && now - p.t <= SPAN_MS);
    const top = Math.max(minScale, ...pts.map((p) => p[key]));
    const bottom = Math.min(0, ...pts.map((p) => p[key]));
    const x = (t) => (((t - (now - SPAN_MS)) / SPAN_MS) * W).toFixed(1);
    const y = (v) => (height - PAD - ((v - bottom) / (top - bottom)) * (height - 2 * PAD)).toFixed(1);
    const d = pts.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(p.t)},${y(p[key])}`).join(' ');
    return { d, top, bottom, last: pts.length ? pts[pts.length - 1][key] : null };
  }

  function node(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (parent) parent.append(e);
    return e;
  }

  function build(container) {
    const svg = node('svg', {
      class: 'health-graph',
      role: 'img',
      'aria-label': 'Link health, last 10 minutes',
      'data-punch-graph': '1',
    });
    const parts = ROWS.map((row, i) => {
      const g = node('g', { transform: `translate(0 ${i * ROW})`, class: `row ${row.key}` }, svg);
      const frame = node(
        'rect',
        { x: 0, y: 0, height: ROW - 2, class: 'frame', fill: 'none', stroke: '#8888' },
        g,
      );
      const line = node(
        'path',
        { class: 'series', fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 },
        g,
      );
      const text = node('text', { x: 6, y: 14, class: 'label', 'font-size': 12 }, g);
      return { line, text, frame };
    });
    const stale = node(
      'text',
      { y: ROW - 10, 'text-anchor': 'end', class: 'stale-note', 'font-size': 12 },
      svg,
    );
    container.append(svg);
    return { svg, parts, stale };
  }

  const state = new WeakMap();

  function render(container, view, now) {
    let s = state.get(container);
    if (!s || !s.svg.isConnected) {
      s = build(container);
      state.set(container, s);
    }
    // Drawn at the container's own width: one SVG unit is one CSS pixel, so the text keeps its size.
    const W = Math.max(200, Math.round(container.clientWidth || DEFAULT_W));
    const H = ROW * ROWS.length;
    s.svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    s.svg.setAttribute('width', String(W));
    s.svg.setAttribute('height', String(H));
    s.stale.setAttribute('x', String(W - 6));
    const history = (view && view.history) || {};
    let newest = 0;
    ROWS.forEach((row, i) => {
      const points = history[row.end] || [];
      for (const p of points) newest = Math.max(newest, p.t);
      const { d, top, bottom, last } = pathOf(points, row.key, now, ROW - 2, row.min, W);
      const part = s.parts[i];
      part.frame.setAttribute('width', String(W));
      part.line.setAttribute('d', d);
      const shown = last === null ? '—' : String(Math.round(last * 10) / 10);
      part.text.textContent = `${row.label}: ${shown} (scale ${Math.round(bottom)} to ${Math.round(top)})`;
    });
    const age = newest ? now - newest : Infinity;
    const isStale = age > STALE_MS;
    s.svg.classList.toggle('stale', isStale);
    s.stale.textContent = isStale
      ? newest
        ? `stale: last report ${Math.round(age / 1000)} s ago`
        : 'no reports yet'
      : '';
    return { stale: isStale };
  }

  root.PunchHealthGraph = { render, pathOf, SPAN_MS, STALE_MS };
})(globalThis);
