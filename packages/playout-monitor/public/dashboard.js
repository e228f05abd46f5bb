// Grid of up to 12 devices: state (tally colours), timecode, file, progress and remaining time; a vision
// mixer also gets FTB / REC / STREAM badges and a compact strip of its inputs in their tally colours
// (program red, preview green, off dark, unknown grey: docs/TALLY.md).
import {
  connectMonitor,
  eventText,
  staleReason,
  el,
  formatRemaining,
  stateClass,
  STATE_LABEL,
} from './app.js';

const grid = document.getElementById('grid');
const banner = document.getElementById('banner');
const history = document.getElementById('events');

/** Lines of the event history shown (the monitor keeps 50). */
const HISTORY_SHOWN = 8;
let shownEventsKey = '';

/** The event history, newest first; rebuilt only when it changed; greyed while the link is down. */
function renderEvents(events, linkUp) {
  history.classList.toggle('stale', !linkUp);
  const last = events.slice(-HISTORY_SHOWN).reverse();
  const key = last.map((e) => `${e.at}/${e.id}/${e.kind}/${e.to}`).join(',');
  if (key === shownEventsKey) return;
  shownEventsKey = key;
  const items = last.map((e) =>
    el('li', { class: `event ev-${e.kind}${e.to ? ` to-${e.to}` : ''}`, 'data-kind': e.kind }, eventText(e)),
  );
  if (items.length === 0) items.push(el('li', { class: 'event none' }, 'No events yet'));
  history.replaceChildren(...items);
}

/** Inputs shown in a mixer's strip (the rest are counted). */
const STRIP_MAX = 24;

/** A mixer's inputs, each in its tally colour; grey (unknown) when the data is stale, never the old colour. */
function inputStrip(d) {
  const inputs = d.inputs.slice(0, STRIP_MAX).map((i) => {
    const tally = d.isStale ? 'unknown' : i.tally;
    return el(
      'span',
      {
        class: `input ${tally}`,
        'data-key': i.key,
        'data-tally': tally,
        title: `${i.number} ${i.title} (${tally})`,
      },
      `${i.number} ${i.title}`,
    );
  });
  if (d.inputs.length > STRIP_MAX)
    inputs.push(el('span', { class: 'input more' }, `+${d.inputs.length - STRIP_MAX}`));
  return el('div', { class: 'inputs', 'data-strip': String(d.id) }, ...inputs);
}

/** CasparCG: one line per watched layer (PROTOCOLS.md "Several layers"); grey when the data is stale. */
function layerLines(d) {
  return el(
    'div',
    { class: 'layers', 'data-layers': String(d.id) },
    ...d.layers.map((l) => {
      const state = d.isStale ? 'stale' : l.paused ? 'paused' : l.state;
      const label = state === 'paused' ? 'PAUSED' : state === 'stale' ? 'NO DATA' : STATE_LABEL[l.state];
      return el(
        'div',
        { class: `layer ${state}`, 'data-layer': String(l.layer), 'data-state': state },
        `L${l.layer} ${label} ${l.timecode} ${l.filename || '\u2014'}`,
      );
    }),
  );
}

function card(d) {
  const cls = stateClass(d);
  const label = d.isStale ? 'NO DATA' : STATE_LABEL[d.state];
  const badges = [];
  if (d.isStale) badges.push(el('span', { class: 'badge', 'data-badge': 'stale' }, 'STALE'));
  if (d.simulated) badges.push(el('span', { class: 'badge sim', 'data-badge': 'simulated' }, 'SIMULATED'));
  if (d.fadeToBlack) badges.push(el('span', { class: 'badge ftb', 'data-badge': 'ftb' }, 'FTB'));
  // Recording while the state box says something else (e.g. no data): the state box says REC otherwise.
  if (d.recording && d.state !== 'rec')
    badges.push(el('span', { class: 'badge rec', 'data-badge': 'recording' }, 'REC'));
  if (d.streaming) badges.push(el('span', { class: 'badge stream', 'data-badge': 'streaming' }, 'STREAM'));
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
  if (d.inputs && d.inputs.length > 0) c.append(inputStrip(d));
  if (d.layers && d.layers.length > 0) c.append(layerLines(d));
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
  renderEvents(link.events, link.linkUp);
});
