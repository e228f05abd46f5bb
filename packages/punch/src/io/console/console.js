// Punch join page (README "Pages and the operator console"): plain browser JavaScript, no build step.
// The page is /s/<name>?t=<peer token>: that stream's state and how to join it. The operator's console is
// operator.js. The token never leaves this origin; it goes to the API as a bearer token.
import {
  claimsOf,
  copyButton,
  el,
  pageToken,
  sessionName,
  setClass,
  setText,
  showClosed,
  viewOf,
} from './dom.js';
import { lifetimeBar } from './lifetime.js';
import { lightOf, tallyLight, watchTally } from './tally-light.js';

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
  if (!light.root.isConnected) root.prepend(light.root);
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

// A broker that stops answering (frozen, cut) may leave the WebSocket open: the poll notices, and the
// light goes grey instead of keeping a colour nobody confirms any more.
const NO_ANSWER = 'no answer from the broker';
let lastTally = null;
let lastAnswerAt = Date.now();

async function refresh() {
  if (closed) return;
  let r;
  try {
    r = await fetch(api(''), { headers: auth, signal: AbortSignal.timeout(5000) });
  } catch {
    // The age counts from the broker's last answer, not from when the page gave up waiting.
    light.set('unknown', NO_ANSWER, light.state() === 'unknown' ? undefined : lastAnswerAt);
    return;
  }
  lastAnswerAt = Date.now();
  if (light.reason() === NO_ANSWER) showTally(lastTally);
  const v = await viewOf(r);
  if (v === 'closed') closed = true;
  else if (v) view = v;
  render();
}

// The stream this link is for (the token's claim; the broker checks it): its tally light tops the page.
const myStream = (claimsOf(token) || {}).stream;
const light = tallyLight(myStream);

function showTally(m) {
  if (!m) {
    light.set('unknown', 'no tally from the mixer yet');
    return;
  }
  const l = lightOf(m, m.receivedAt);
  light.set(l.state, l.reason, l.since);
}

function onSignal(m) {
  if (m.type === 'tally') {
    if (myStream && m.stream !== myStream) return;
    light.setStream(m.stream);
    lastTally = { ...m, receivedAt: Date.now() };
    showTally(lastTally);
  } else if (m.type === 'session') {
    void refresh();
  } else if (m.type === 'session_closed') {
    closed = true;
    render();
  } else if (m.type === 'error') {
    light.set('unknown', `the broker refused this page's tally: ${m.message}`);
  }
}

// The light must stay readable for the whole show: ask the browser to keep the screen on (Screen Wake
// Lock API; a secure context only, and given up by the browser whenever the page is hidden).
async function keepAwake() {
  try {
    if (navigator.wakeLock && document.visibilityState === 'visible')
      await navigator.wakeLock.request('screen');
  } catch {
    // not allowed here (no secure context, battery saver): the screen may sleep
  }
}

if (token && document.body.dataset.role === 'peer') {
  document.getElementById('state').hidden = false;
  showTally(null);
  render();
  void refresh();
  setInterval(() => void refresh(), 3000);
  watchTally({
    name,
    token,
    stream: myStream,
    onMessage: onSignal,
    onDown: (reason) => {
      lastTally = null; // the broker sends the stream's tally again on the next watch
      light.set('unknown', reason);
    },
  });
  void keepAwake();
  document.addEventListener('visibilitychange', () => void keepAwake());
}
