// The health block of one stream card (README "Health", docs/health.md): each end, labelled sender and
// receiver, over the broker's 10 s and 60 s windows (RTT min/avg/max, loss before ARQ, retransmit share,
// packets dropped too late, the receiver's margin), the advice, the alarms and the 10-minute graph
// (/assets/health-graph.js). Built once, then updated in place like the rest of the console.
import { el, setClass, setText } from './dom.js';

const num = (v, digits, unit = '') =>
  typeof v === 'number' && Number.isFinite(v) ? `${v.toFixed(digits)}${unit}` : '—';
export const mbit = (bps) => (typeof bps === 'number' ? `${(bps / 1e6).toFixed(2)} Mbit/s` : '—');
const signed = (v) => (typeof v === 'number' ? `${v > 0 ? '+' : ''}${v.toFixed(0)} ms` : '—');

/** The rows of an end's table: label, value of one window's figures, receiver only. */
const FIGURES = [
  ['RTT min/avg/max, ms', (f) => `${num(f.rtt.min, 1)}/${num(f.rtt.avg, 1)}/${num(f.rtt.max, 1)}`],
  ['Loss before ARQ', (f) => num(f.lossPct, 2, ' %')],
  ['Retransmitted', (f) => num(f.retransmitPct, 2, ' %')],
  ['Dropped too late', (f) => `${f.dropped} pkt`],
  ['Bitrate', (f) => mbit(f.bitrate)],
  // docs/health.md "Figures": latency − (4 × RTT avg + RTT swing).
  ['Margin', (f) => signed(f.marginMs), true],
  ['Latency / needed', (f) => `${num(f.latency, 0)} / ${num(f.needMs, 0)} ms`, true],
];

const ROLE_WORDS = { sender: 'Sender', receiver: 'Receiver' };

/** One end's table: a row per figure, a column per window. */
function endTable(role) {
  const cells = FIGURES.map(() => [el('td', {}), el('td', {})]);
  const rows = FIGURES.map(([label, , rxOnly], i) => {
    const row = el('tr', {}, el('th', { scope: 'row' }, label), ...cells[i]);
    if (rxOnly && role !== 'receiver') row.hidden = true;
    return row;
  });
  const root = el(
    'div',
    { class: 'table-wrap end', 'data-end': role },
    el(
      'table',
      {},
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          el('th', { scope: 'col', class: 'role' }, ROLE_WORDS[role]),
          el('th', { scope: 'col' }, '10 s'),
          el('th', { scope: 'col' }, '60 s'),
        ),
      ),
      el('tbody', {}, ...rows),
    ),
  );
  const update = (windows) => {
    root.hidden = !windows;
    if (!windows) return;
    FIGURES.forEach(([, value], i) => {
      setText(cells[i][0], value(windows.w10));
      setText(cells[i][1], value(windows.w60));
    });
  };
  return { root, update };
}

/**
 * A client that sends only the spec's fields has no counters, so no windows: its latest report, said so.
 * `ends` is the health report's per-slot latest report, each naming its role.
 */
function latestLine(ends) {
  return Object.entries(ends || {})
    .map(([slot, e]) => {
      const who = e.role ? ROLE_WORDS[e.role] : `Peer ${slot.toUpperCase()}`;
      const dropped = typeof e.dropped === 'number' ? `${e.dropped} dropped` : 'drops not reported';
      return `${who} (latest report): RTT ${num(e.rtt, 1, ' ms')} · retransmit ${num(e.retransmit, 2, ' %')} · ${mbit(e.bitrate)} · ${dropped}`;
    })
    .join('\n');
}

/** The figures block: status and RTT, both ends' tables, the advice. */
export function healthPart() {
  const status = el('span', { class: 'badge', 'data-testid': 'health-status' });
  const big = el('span', { class: 'big' });
  const head = el('div', { class: 'row' }, status, big);
  const sender = endTable('sender');
  const receiver = endTable('receiver');
  const tables = el('div', { class: 'ends' }, sender.root, receiver.root);
  const latest = el('p', { class: 'latest', 'data-testid': 'latest-reports' });
  const advice = el('ul', { class: 'advice', 'data-testid': 'advice' });
  const none = el('p', { class: 'muted' }, 'No health reports.');
  const root = el('div', { class: 'health' }, head, tables, latest, advice, none);
  /** `h`: the stream's health_report entry (or none); `shown`: false while the stream waits for a peer. */
  const update = (h, shown) => {
    root.hidden = !shown;
    none.hidden = Boolean(h);
    for (const n of [head, tables, latest, advice]) n.hidden = !h;
    if (!h) return;
    setText(status, h.status || '—');
    setClass(status, `badge ${h.status || ''}`.trim());
    const figures = h.figures || {};
    const windowed = Boolean(figures.sender || figures.receiver);
    setText(big, `${num(h.rtt, 1, ' ms')} RTT${windowed ? ' (10 s avg)' : ''}`);
    sender.update(figures.sender);
    receiver.update(figures.receiver);
    tables.hidden = !windowed;
    const line = windowed
      ? ''
      : `${latestLine(h.ends)}\nThis client sends no packet counters: no 10 s / 60 s figures.`;
    setText(latest, line);
    latest.hidden = !line;
    // The advice list changes rarely: rebuilt only when its text changes (it holds nothing to type in).
    const items = h.advice || [];
    if (advice.dataset.key !== items.join('\n')) {
      advice.dataset.key = items.join('\n');
      advice.replaceChildren(...items.map((a) => el('li', {}, a)));
    }
    advice.hidden = items.length === 0;
  };
  return { root, update };
}

/**
 * What the relay measured on a relayed stream (docs/relay.md "What the operator sees"): the end-to-end RTT,
 * its two legs and the loss before the relay, for the direction that carries the media. `update(m, at)`
 * takes the `relay` figures of a health_report or the view's `relay.measured` and the Date.now() they
 * arrived; `tick()` ages them, so they grey with their age once stale (no new reading for 10 s).
 */
export function relayPart() {
  const root = el('p', { class: 'relay-figures', 'data-testid': 'relay-figures' });
  let last = null;
  const paint = () => {
    root.hidden = !last;
    if (!last) return;
    const { m, at } = last;
    const since = (Date.now() - at) / 1000;
    const d = m.b_to_a.packets > m.a_to_b.packets ? m.b_to_a : m.a_to_b;
    // The older of the reading and its newest RTT figure (a link that stopped acknowledging).
    const age = Math.max(m.age + since, d.rtt_age === null ? 0 : d.rtt_age + since);
    const stale = m.stale || age > 10;
    const legs =
      d.sender_leg_ms === null
        ? ''
        : ` (relay↔sender ${num(d.sender_leg_ms, 1, ' ms')}, relay↔receiver ${num(d.receiver_leg_ms, 1, ' ms')})`;
    setText(
      root,
      `Relay: RTT ${num(d.rtt_ms, 1, ' ms')}${legs} · lost before the relay ${d.lost_upstream} of ` +
        `${d.packets} packets · ${d.retransmitted} retransmitted` +
        (stale ? ` · stale, measured ${Math.round(age)} s ago` : ''),
    );
    setClass(root, stale ? 'relay-figures stale' : 'relay-figures');
  };
  return {
    root,
    update(m, at) {
      last = m ? { m, at } : null;
      paint();
    },
    tick: paint,
  };
}

/** The stream's alarms (docs/health.md "Alarms"): a row per active alarm, with its message and time. */
export function alarmPart() {
  const root = el('div', { class: 'alarms', role: 'alert', 'data-testid': 'alarms' });
  const badge = el('span', { class: 'badge alarm', 'data-testid': 'alarm-badge' }, 'alarm');
  const rows = new Map();
  /** `active`: alarm name -> {message, at}. */
  const update = (active) => {
    for (const [alarm, a] of active) {
      let r = rows.get(alarm);
      if (!r) {
        r = el('p', { class: 'alarm-row', 'data-alarm': alarm });
        rows.set(alarm, r);
        root.append(r);
      }
      setText(
        r,
        `${alarm === 'drops' ? 'Drops' : 'Margin'} since ${new Date(a.at).toLocaleTimeString()}: ${a.message}`,
      );
    }
    for (const [alarm, r] of rows) {
      if (!active.has(alarm)) {
        r.remove();
        rows.delete(alarm);
      }
    }
    root.hidden = rows.size === 0;
    badge.hidden = rows.size === 0;
    setText(badge, rows.size > 1 ? `${rows.size} alarms` : 'alarm');
  };
  update(new Map());
  return { root, badge, update };
}

/**
 * The 10-minute graph of one link: GET …/health (the caller's `load`, with the admin token) drawn by
 * PunchHealthGraph, which greys it with its age once the newest point is older than 15 s. `tick()` fetches
 * again (a failed fetch redraws the last history at the current time, so it greys as it ages).
 */
export function graphPart(load) {
  const box = el('div', { class: 'graph-box', 'data-testid': 'health-graph' });
  const root = el('div', { class: 'graph' }, el('h3', {}, 'Last 10 minutes'), box);
  root.hidden = true;
  let last = null;
  let busy = false;
  const draw = () => {
    const g = globalThis.PunchHealthGraph;
    if (!g || !last) return;
    const h = last.history || {};
    root.hidden = !(h.sender && h.sender.length) && !(h.receiver && h.receiver.length);
    if (!root.hidden) g.render(box, last, Date.now());
  };
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const view = await load();
      if (view) last = view;
    } catch {
      // keep the last history: drawn at the current time, it greys with its age
    } finally {
      busy = false;
    }
    draw();
  };
  return { root, tick, draw };
}

/** Loads /assets/health-graph.js once (a classic script from this origin: the page's CSP allows it). */
export function loadGraphScript(onLoad) {
  const s = el('script', { src: '/assets/health-graph.js' });
  s.addEventListener('load', onLoad);
  document.head.append(s);
}
