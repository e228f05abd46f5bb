// Grid of up to 12 devices: state (tally colours), timecode, file, progress and remaining time.
import { connectMonitor, staleReason, el, formatRemaining, stateClass, STATE_LABEL } from './app.js';

const grid = document.getElementById('grid');
const banner = document.getElementById('banner');

function card(d) {
  const cls = stateClass(d);
  const label = d.isStale ? 'NO DATA' : STATE_LABEL[d.state];
  const badges = [];
  if (d.isStale) badges.push(el('span', { class: 'badge', 'data-badge': 'stale' }, 'STALE'));
  if (d.simulated) badges.push(el('span', { class: 'badge sim', 'data-badge': 'simulated' }, 'SIMULATED'));
  const c = el(
    'section',
    {
      class: `card ${cls}`,
      'data-device': String(d.id),
      'data-state': d.state,
      'data-stale': String(d.isStale),
    },
    el('div', { class: 'name' }, d.name),
    el('div', { class: 'type' }, `${d.type} · ${d.ip}:${d.port}`),
    el('div', {}, el('span', { class: `state ${cls}` }, label), ...badges),
    el('div', { class: 'tc' }, d.timecode),
    el('div', { class: 'file' }, d.filename || '\u2014'),
  );
  if (d.durationMs > 0 && d.positionMs !== undefined) {
    const pct = Math.min(100, (100 * d.positionMs) / d.durationMs);
    const bar = el('div');
    bar.style.width = `${pct}%`;
    c.append(el('div', { class: 'progress' }, bar));
  }
  if (d.remainingMs !== undefined) {
    const r = el('div', { class: 'remaining' }, `\u2212${formatRemaining(d.remainingMs)}`);
    if (d.state === 'play' && d.remainingMs < 5000) r.classList.add('alert');
    else if (d.state === 'play' && d.remainingMs < 10000) r.classList.add('warn');
    c.append(r);
  }
  const reason = staleReason(d);
  c.append(el('div', { class: 'reason' }, reason));
  return c;
}

connectMonitor((devices, link) => {
  banner.classList.toggle('show', !link.linkUp);
  const shown = devices.slice(0, 12);
  // Columns and rows for the count (landscape screens): 1, 2, 3, 2×2, 3×2, 3×3, 4×3.
  const n = Math.max(1, shown.length);
  const cols = n <= 3 ? n : n <= 4 ? 2 : n <= 6 ? 3 : n <= 9 ? 3 : 4;
  grid.style.setProperty('--cols', String(cols));
  grid.style.setProperty('--rows', String(Math.ceil(n / cols)));
  grid.replaceChildren(...shown.map(card));
});
