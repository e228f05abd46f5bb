// The join page's tally light (README "Tally"): a big light for the person at the device, program red,
// preview green, off dark, unknown grey with its reason and age. Fed live by the page's WebSocket, which
// only watches the stream (`watch`: it never takes the slot of the agent beside it). Built once, updated
// in place.
import { age, el, setClass, setText } from './dom.js';

const WORDS = { program: 'PROGRAM', preview: 'PREVIEW', off: 'OFF', unknown: 'UNKNOWN' };
const HINTS = {
  program: 'You are on air',
  preview: 'You are next (on preview)',
  off: 'Not on air',
};

/** The light: `root` to place on the page; `set(state, reason, sinceMs)`; ticks its own age text. */
export function tallyLight(stream) {
  const word = el('div', { class: 'tally-word', 'data-testid': 'tally-word' });
  const detail = el('div', { class: 'tally-detail', 'data-testid': 'tally-detail' });
  const where = el('div', { class: 'tally-stream' }, stream ? `Tally · ${stream}` : 'Tally');
  const root = el(
    'section',
    { class: 'tally-light unknown', 'data-testid': 'tally-light', 'data-tally': 'unknown', role: 'status' },
    where,
    word,
    detail,
  );
  let current = { state: 'unknown', reason: 'connecting to the broker', since: Date.now() };
  const draw = () => {
    const { state, reason, since } = current;
    setClass(root, `tally-light ${state}`);
    if (root.dataset.tally !== state) root.dataset.tally = state;
    setText(word, WORDS[state]);
    setText(detail, state === 'unknown' ? `${reason} · for ${age(Date.now() - since)}` : HINTS[state]);
  };
  draw();
  setInterval(() => {
    if (current.state === 'unknown') draw();
  }, 1000);
  return {
    root,
    reason: () => current.reason,
    state: () => current.state,
    setStream(name) {
      setText(where, `Tally · ${name}`);
    },
    /**
     * `since`: when the state began (ms, this page's clock). Without it, an unknown that follows an
     * unknown keeps its start (the broker lost, then not answering: the age keeps growing).
     */
    set(state, reason = '', since) {
      const keep = since === undefined && state === 'unknown' && current.state === 'unknown';
      current = { state, reason, since: keep ? current.since : (since ?? Date.now()) };
      draw();
    },
  };
}

/**
 * The page's signalling connection (RFC 6455; the token as the `bearer.<token>` subprotocol, never in the
 * URL): sends `watch` for `stream` and hands each message to `onMessage`; reconnects with backoff (0.5 s
 * doubling to 10 s). `onDown(reason)` when it closes.
 */
export function watchTally({ name, token, stream, onMessage, onDown }) {
  let backoff = 500;
  let stopped = false;
  const connect = () => {
    if (stopped) return;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/api/ws/${encodeURIComponent(name)}`, [
      'punch.v1',
      `bearer.${token}`,
    ]);
    ws.addEventListener('open', () => {
      backoff = 500;
      ws.send(JSON.stringify(stream ? { type: 'watch', stream } : { type: 'watch' }));
    });
    ws.addEventListener('message', (ev) => {
      let m;
      try {
        m = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (m.type === 'session_closed') stopped = true;
      onMessage(m);
    });
    ws.addEventListener('close', (ev) => {
      if (stopped) return;
      onDown(`connection to the broker lost (${ev.code || 'no close code'}); reconnecting`);
      setTimeout(connect, backoff);
      backoff = Math.min(10_000, backoff * 2);
    });
  };
  connect();
  return { stop: () => (stopped = true) };
}

/** The light's state for a `tally` message: unknown (with the sender's age) when it is stale. */
export function lightOf(m, now = Date.now()) {
  if (m.stale === true) {
    const since = now - (typeof m.age === 'number' ? m.age : 0);
    return { state: 'unknown', reason: "the mixer's tally is not known (stale at the sender)", since };
  }
  return { state: m.state, reason: '', since: now };
}
