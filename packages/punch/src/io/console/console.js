// Punch operator console (README "Operator console"): plain browser JavaScript, no build step.
// The page is /s/<name>?t=<token>; with an admin token it is the console (live over the WebSocket as an
// admin observer), with a peer token the join page for that stream. The token never leaves this origin.
'use strict';

const params = new URLSearchParams(location.search);
const token = params.get('t') || '';
const name = decodeURIComponent(location.pathname.split('/')[2] || '');
const role = document.body.dataset.role;
const api = (path) => `/api/session/${encodeURIComponent(name)}${path}`;
const auth = { authorization: `Bearer ${token}` };

const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};

let view = null;
let closed = false;
/** stream -> latest health_report entry and its RTT history over the last 60 s. */
const health = new Map();
const history = new Map();
/** stream -> {for_peer_a, for_peer_b} once matched. */
const strings = new Map();
/** stream -> issued peer token {url, qr}. */
const issued = new Map();

function copyButton(text) {
  const b = el('button', { class: 'small', type: 'button' }, 'Copy');
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = 'Copied';
    } catch {
      b.textContent = 'Select and copy';
    }
    setTimeout(() => (b.textContent = 'Copy'), 2000);
  });
  return b;
}

function mbit(bps) {
  return `${(bps / 1e6).toFixed(2)} Mbit/s`;
}

/** Plain-words verdict from the latest health and the session's latency (4 x RTT rule, spec bands). */
function verdict(stream, h) {
  if (!view) return '';
  const s = view.streams[stream];
  if (s.state === 'waiting') {
    const present = [s.peer_a, s.peer_b].filter((p) => p && p.present).length;
    return present === 0 ? 'Waiting for both peers to join.' : 'Waiting for the second peer to join.';
  }
  if (!h)
    return s.state === 'connected'
      ? 'Connected; no health report yet.'
      : 'Matched; waiting for SRT to connect.';
  const latency = view.latency;
  if (latency < 4 * h.rtt) {
    return `Latency ${latency} ms is below 4 × RTT (${h.rtt.toFixed(1)} ms): raise it to ${h.suggestedLatency} ms.`;
  }
  if (h.retransmit > 5)
    return `Retransmitting ${h.retransmit.toFixed(1)} %: the path is losing packets; raise the latency or lower the bitrate.`;
  if (h.retransmit >= 1) return `Retransmitting ${h.retransmit.toFixed(1)} %: watch the path.`;
  return `Healthy: latency ${latency} ms covers 4 × RTT (${h.rtt.toFixed(1)} ms).`;
}

function peerRow(label, p) {
  if (!p) return el('tr', {}, el('td', {}, label), el('td', { colspan: '3', class: 'muted' }, 'free'));
  return el(
    'tr',
    {},
    el('td', {}, label),
    el(
      'td',
      { 'data-testid': 'presence' },
      el('span', { class: `dot${p.present ? ' on' : p.signalling ? ' media' : ''}` }),
      // README "State from media": absent signalling while the other end reports the link up.
      p.present ? 'present' : p.signalling ? 'signalling lost, media reported by the other end' : 'gone',
    ),
    el('td', {}, p.label || '—', p.role ? el('span', { class: 'muted' }, ` (${p.role})`) : null),
    el('td', {}, `${p.ip}:${p.port}`),
  );
}

function healthBlock(stream) {
  const h = health.get(stream);
  if (!h) return el('p', { class: 'muted' }, 'No health reports.');
  const rtts = (history.get(stream) || []).map((x) => x.rtt);
  const min = Math.min(...rtts);
  const max = Math.max(...rtts);
  const avg = rtts.reduce((a, b) => a + b, 0) / rtts.length;
  const ends = Object.entries(h.ends || {}).map(([slot, e]) =>
    el(
      'tr',
      {},
      el('td', {}, slot.toUpperCase()),
      el('td', {}, `${e.rtt.toFixed(1)} ms`),
      el('td', {}, `${e.retransmit.toFixed(2)} %`),
      el('td', {}, mbit(e.bitrate)),
      el('td', {}, e.dropped === null ? '—' : String(e.dropped)),
      el('td', {}, e.buffer === null ? '—' : `${Math.max(0, 100 - e.buffer).toFixed(0)} %`),
    ),
  );
  return el(
    'div',
    { class: 'health' },
    el(
      'div',
      { class: 'row' },
      el('span', { class: `badge ${h.status}`, 'data-testid': 'health-status' }, h.status),
      el('span', { class: 'big' }, `${h.rtt.toFixed(1)} ms RTT`),
    ),
    el(
      'div',
      {},
      `RTT min/avg/max ${min.toFixed(1)}/${avg.toFixed(1)}/${max.toFixed(1)} ms (60 s) · retransmit ${h.retransmit.toFixed(2)} % · ${mbit(h.bitrate)}`,
    ),
    ends.length
      ? el(
          'table',
          {},
          el(
            'tr',
            {},
            ...['End', 'RTT', 'Retr.', 'Bitrate', 'Drops', 'Buffer headroom'].map((t) => el('th', {}, t)),
          ),
          ...ends,
        )
      : null,
  );
}

function stringsBlock(stream) {
  const s = strings.get(stream);
  if (!s) return null;
  const block = (title, map) =>
    el(
      'details',
      {},
      el('summary', {}, title),
      ...Object.entries(map).map(([format, text]) =>
        el(
          'div',
          {},
          el('div', { class: 'row' }, el('b', {}, format), copyButton(text)),
          el('pre', {}, text),
        ),
      ),
    );
  return el(
    'div',
    {},
    block('Connection strings for peer A', s.for_peer_a),
    block('Connection strings for peer B', s.for_peer_b),
  );
}

function issueBlock(stream) {
  const out = el('div', {});
  const label = el('input', {
    placeholder: 'Label (e.g. Camera 1)',
    'aria-label': 'Peer label',
    maxlength: '64',
  });
  const button = el('button', { type: 'button' }, 'Issue peer token');
  button.addEventListener('click', async () => {
    const r = await fetch(api('/token'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ stream, ...(label.value ? { label: label.value } : {}) }),
    });
    const body = await r.json();
    if (!r.ok) {
      out.replaceChildren(el('p', { class: 'error' }, body.message || 'could not issue a token'));
      return;
    }
    issued.set(stream, body);
    render();
  });
  const t = issued.get(stream);
  if (t) {
    out.append(
      el('p', {}, 'Join link (open it on the device, or scan the QR):'),
      el('div', { class: 'row' }, el('pre', { 'data-testid': 'join-link' }, t.url), copyButton(t.url)),
      el('img', { class: 'qr', alt: 'QR code of the join link', src: t.qr }),
    );
  }
  return el(
    'div',
    {},
    el('label', {}, 'Invite a peer to this stream'),
    el('div', { class: 'row' }, label, button),
    out,
  );
}

function render() {
  const root = document.getElementById('app');
  if (closed) {
    root.replaceChildren(
      el(
        'section',
        { class: 'card' },
        el('h2', {}, 'Session closed'),
        el('p', {}, 'Both agents were told to stop. Create a new session from the start page.'),
        el('a', { href: '/' }, 'New session'),
      ),
    );
    document.getElementById('state').textContent = 'CLOSED';
    document.getElementById('state').className = 'badge CLOSED';
    return;
  }
  if (!view) return;
  const state = document.getElementById('state');
  state.textContent = view.state;
  state.className = `badge ${view.state}`;
  updateLifetime();
  const cards = Object.entries(view.streams).map(([stream, s]) => {
    const h = health.get(stream);
    return el(
      'section',
      { class: 'card', 'data-stream': stream },
      el('h2', {}, stream, el('span', { class: `badge ${s.state}`, 'data-testid': 'stream-state' }, s.state)),
      el('table', {}, peerRow('A', s.peer_a), peerRow('B', s.peer_b)),
      role === 'admin' ? healthBlock(stream) : null,
      el('div', { class: 'verdict', 'data-testid': 'verdict' }, verdict(stream, h)),
      role === 'admin' ? stringsBlock(stream) : null,
      role === 'admin' ? issueBlock(stream) : joinSteps(stream),
    );
  });
  if (role === 'admin') {
    const close = el('button', { class: 'danger', type: 'button' }, 'Close session');
    close.addEventListener('click', async () => {
      if (!confirm(`Close session ${name}? Both agents stop.`)) return;
      const r = await fetch(api(''), { method: 'DELETE', headers: auth });
      if (r.status === 204) {
        closed = true;
        render();
      }
    });
    cards.push(
      el(
        'section',
        { class: 'card' },
        el('h2', {}, 'Session'),
        el('p', { class: 'muted' }, `Latency ${view.latency} ms.`),
        close,
      ),
    );
  }
  root.replaceChildren(...cards);
}

/** Warn this long before the session's expiry (README "Lifetime"). */
const WARN_MS = 5 * 60_000;
let extendButton = null;

/**
 * The lifetime bar, built once and updated in place every second: the expiry, a warning in the last five
 * minutes, the overtime note past the TTL, and (admin) an Extend button (PATCH, one hour from now).
 */
function updateLifetime() {
  if (!view) return;
  const bar = document.getElementById('lifetime');
  const text = document.getElementById('lifetime-text');
  const left = view.expiresAt - Date.now();
  const at = new Date(view.expiresAt).toLocaleTimeString();
  document.getElementById('expires').textContent = `expires ${at}`;
  if (closed) {
    bar.hidden = true;
    return;
  }
  const mmss = (ms) =>
    `${Math.floor(ms / 60_000)}:${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')}`;
  let message = `Session expires at ${at}.`;
  let level = '';
  if (view.overtime || left <= 0) {
    message =
      'Past its lifetime: the running links stay up while media flows, but nobody new can join. Extend it to invite again.';
    level = 'warn';
  } else if (left <= WARN_MS) {
    message = `Session ends in ${mmss(left)} (at ${at}): running links stay up while media flows, but nobody new can join after that.`;
    level = 'warn';
  }
  bar.hidden = role !== 'admin' && level === '';
  bar.className = `lifetime ${level}`;
  if (text.textContent !== message) text.textContent = message;
  if (role === 'admin' && !extendButton) {
    extendButton = el('button', { type: 'button', class: 'small', 'data-testid': 'extend' }, 'Extend 1 h');
    extendButton.addEventListener('click', async () => {
      const r = await fetch(api(''), {
        method: 'PATCH',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ttl: 3600 }),
      });
      if (r.ok) {
        view = await r.json();
        updateLifetime();
      } else text.textContent = `Extend failed: ${(await r.json()).message || r.status}`;
    });
    bar.append(extendButton);
  }
}
setInterval(updateLifetime, 1000);

// This page's join link, rebuilt from its parts (a link with extra parameters would otherwise carry them
// into a shell command); a quote can never end the command's quoted word.
const joinLink = () =>
  `${location.origin}${location.pathname}?t=${encodeURIComponent(token)}`.replaceAll("'", '%27');

// The join steps per OS come from the broker (src/io/join-steps.ts, a <template> in the page): download the
// single-file agent from this broker, run it with node and this page's address, the join link (the HTML
// holds a placeholder: the token is never written into it). Each command gets a Copy button.
function joinSteps() {
  const template = document.getElementById('join-steps');
  const steps = template ? template.content.cloneNode(true) : document.createDocumentFragment();
  for (const pre of steps.querySelectorAll('pre')) {
    pre.textContent = pre.textContent.replaceAll('<join link>', joinLink());
    const row = el('div', { class: 'row' });
    pre.replaceWith(row);
    row.append(pre, copyButton(pre.textContent));
  }
  return el('div', {}, steps);
}

async function refresh() {
  if (closed) return;
  const r = await fetch(api(''), { headers: auth });
  if (r.status === 410) {
    closed = true;
    render();
    return;
  }
  if (!r.ok) return;
  view = await r.json();
  if (role === 'admin') {
    for (const [stream, s] of Object.entries(view.streams)) {
      if (s.state !== 'waiting' && !strings.has(stream)) {
        const c = await fetch(api(`/connect?stream=${encodeURIComponent(stream)}`), { headers: auth });
        if (c.ok) strings.set(stream, await c.json());
      } else if (s.state === 'waiting') strings.delete(stream);
    }
  }
  render();
}

let backoff = 500;
function connectWs() {
  if (closed) return;
  const ws = new WebSocket(
    `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/ws/${encodeURIComponent(name)}?token=${encodeURIComponent(token)}`,
  );
  ws.addEventListener('open', () => {
    backoff = 500;
    document.getElementById('live').textContent = 'live';
  });
  ws.addEventListener('message', (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === 'session' || m.type === 'presence' || m.type === 'peer_match') {
      if (m.type === 'peer_match') strings.delete(m.stream);
      void refresh();
    } else if (m.type === 'health_report') {
      const now = Date.now();
      for (const [stream, h] of Object.entries(m.streams)) {
        health.set(stream, h);
        const list = (history.get(stream) || []).filter((x) => now - x.at < 60_000);
        list.push({ at: now, rtt: h.rtt });
        history.set(stream, list);
      }
      render();
    } else if (m.type === 'session_closed') {
      closed = true;
      render();
    }
  });
  ws.addEventListener('close', () => {
    document.getElementById('live').textContent = 'reconnecting…';
    if (closed) return;
    setTimeout(connectWs, backoff);
    backoff = Math.min(10_000, backoff * 2);
  });
}

// Health that stops arriving is not shown as current: drop reports older than 15 s.
setInterval(() => {
  const now = Date.now();
  for (const [stream, list] of history) {
    const last = list[list.length - 1];
    if (last && now - last.at > 15_000) {
      health.delete(stream);
      history.delete(stream);
      render();
    }
  }
}, 5000);

void refresh();
if (role === 'admin') connectWs();
else setInterval(() => void refresh(), 3000);
