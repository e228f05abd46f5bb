// Punch join page (README "Pages and the operator console"): plain browser JavaScript, no build step.
// The page is /s/<name>?t=<peer token>: that stream's state and how to join it. The operator's console is
// operator.js. The token never leaves this origin; it goes to the API as a bearer token.
import { copyButton, el, pageToken, sessionName, setClass, setText, showClosed, viewOf } from './dom.js';
import { lifetimeBar } from './lifetime.js';

const { token } = pageToken();
const name = sessionName();
const api = (path) => `/api/session/${encodeURIComponent(name)}${path}`;
const auth = { authorization: `Bearer ${token}` };

let view = null;
let closed = false;
/** stream -> its card, built once and updated in place. */
const cards = new Map();

function verdict(s) {
  if (s.state === 'waiting') {
    const present = [s.peer_a, s.peer_b].filter((p) => p && p.present).length;
    return present === 0 ? 'Waiting for both peers to join.' : 'Waiting for the second peer to join.';
  }
  return s.state === 'connected' ? 'Connected.' : 'Matched; waiting for SRT to connect.';
}

function peerText(p) {
  if (!p) return 'free';
  const where = p.present ? 'present' : 'gone';
  return `${p.label || '—'}${p.role ? ` (${p.role})` : ''}: ${where}, ${p.ip}:${p.port}`;
}

function card(stream) {
  const state = el('span', { class: 'badge', 'data-testid': 'stream-state' });
  const a = el('td', {});
  const b = el('td', {});
  const v = el('div', { class: 'verdict', 'data-testid': 'verdict' });
  const root = el(
    'section',
    { class: 'card', 'data-stream': stream },
    el('h2', {}, stream, state),
    el('table', {}, el('tr', {}, el('td', {}, 'A'), a), el('tr', {}, el('td', {}, 'B'), b)),
    v,
    joinSteps(stream),
  );
  const update = (s) => {
    setText(state, s.state);
    setClass(state, `badge ${s.state}`);
    setText(a, peerText(s.peer_a));
    setText(b, peerText(s.peer_b));
    setText(v, verdict(s));
  };
  return { root, update };
}

const updateLifetime = lifetimeBar({
  admin: false,
  getView: () => view,
  isClosed: () => closed,
  extend: async () => 'only the operator can extend a session',
});

function render() {
  const root = document.getElementById('app');
  const state = document.getElementById('state');
  if (closed) {
    showClosed(
      el('p', {}, 'The operator closed this session or it expired. Ask the operator for a new link.'),
    );
    updateLifetime();
    return;
  }
  if (!view) return;
  setText(state, view.state);
  setClass(state, `badge ${view.state}`);
  updateLifetime();
  for (const [stream, s] of Object.entries(view.streams)) {
    let c = cards.get(stream);
    if (!c) {
      c = card(stream);
      cards.set(stream, c);
      root.append(c.root);
    }
    c.update(s);
  }
}

function joinSteps() {
  const link = location.href;
  const send = `npx punch agent --link '${link}' --role sender --port 9000 --input udp://127.0.0.1:5000`;
  const feed = 'ffmpeg -re -i <your source> -c copy -f mpegts "udp://127.0.0.1:5000?pkt_size=1316"';
  const recv = `npx punch agent --link '${link}' --role receiver --port 9000 --output udp://127.0.0.1:5001`;
  const step = (title, text) =>
    el('li', {}, title, el('div', { class: 'row' }, el('pre', {}, text), copyButton(text)));
  return el(
    'div',
    {},
    el('h3', {}, 'Join this stream'),
    el(
      'ol',
      {},
      el(
        'li',
        {},
        'Install Node.js 20+, this repository (npm ci) and srt-live-transmit (Debian/Ubuntu: apt-get install srt-tools; macOS: brew install srt).',
      ),
      step('Sending: run the agent', send),
      step('…and feed it MPEG-TS over UDP', feed),
      step('Receiving instead: run the agent and play udp://127.0.0.1:5001', recv),
      el(
        'li',
        {},
        'Other tools (OBS, vMix, GStreamer, FFmpeg): the operator copies your connection string from the console once both ends have joined; it contains the passphrase.',
      ),
    ),
  );
}

async function refresh() {
  if (closed) return;
  const v = await viewOf(await fetch(api(''), { headers: auth }));
  if (v === 'closed') closed = true;
  else if (v) view = v;
  render();
}

if (token && document.body.dataset.role === 'peer') {
  document.getElementById('state').hidden = false;
  void refresh();
  setInterval(() => void refresh(), 3000);
}
