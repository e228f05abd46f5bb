// Shared client of the playout monitor pages: a same-origin WebSocket (`/ws` on the page's own host and
// port, wss under https), reconnect with capped backoff, and the staleness rules the pages display.

/** No message at all from the monitor for this long: everything on screen is stale. */
export const LINK_STALE_MS = 3000;

export function wsUrl() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${location.host}/ws`;
}

/**
 * Live device list. `onUpdate(devices)` is called on every message and every 250 ms (so ages move).
 * Each device gets `ageMs` (age of its data, on the monitor's clock) and `isStale` (age over its
 * `staleAfterMs`, or the link to the monitor is down), `linkUp`.
 */
export function connectMonitor(onUpdate, options = {}) {
  const devices = new Map();
  /** The monitor's short event history (state changes, link losses), newest last, at most EVENTS_MAX. */
  let events = [];
  let lastMessageAt = 0; // performance.now() of the last message
  let serverOffset = 0; // server epoch ms − client epoch ms at the last message
  let backoff = 1000;
  let ws;
  let closed = false;

  function view() {
    const now = performance.now();
    const linkUp = ws !== undefined && ws.readyState === 1 && now - lastMessageAt < LINK_STALE_MS;
    const serverNow = Date.now() + serverOffset;
    return [...devices.values()].map((d) => {
      const ageMs = Math.max(0, serverNow - d.updated);
      const isStale =
        !linkUp || d.stale === true || ((d.state === 'play' || d.state === 'rec') && ageMs > d.staleAfterMs);
      return { ...d, ageMs, isStale, linkUp };
    });
  }

  function emit() {
    const sinceMessageMs = lastMessageAt === 0 ? Infinity : performance.now() - lastMessageAt;
    onUpdate(view(), {
      linkUp: ws !== undefined && ws.readyState === 1 && sinceMessageMs < LINK_STALE_MS,
      sinceMessageMs,
      events,
    });
  }

  function open() {
    ws = new WebSocket(wsUrl());
    ws.onopen = () => {
      backoff = 1000;
    };
    ws.onmessage = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      lastMessageAt = performance.now();
      if (typeof msg.timestamp === 'number') serverOffset = msg.timestamp - Date.now();
      if (msg.type === 'playoutStates') {
        devices.clear();
        for (const d of msg.data) devices.set(d.id, d);
        if (Array.isArray(msg.events)) events = msg.events.slice(-EVENTS_MAX);
      } else if (msg.type === 'event') {
        events = [...events, msg.data].slice(-EVENTS_MAX);
      } else if (msg.type === 'deviceState') {
        devices.set(msg.data.id, msg.data);
      } else if (msg.type === 'heartbeat') {
        for (const [id, updated] of Object.entries(msg.updated)) {
          const d = devices.get(Number(id));
          if (d) d.updated = updated;
        }
      }
      if (options.onMessage) options.onMessage(msg);
      emit();
    };
    ws.onclose = () => {
      emit();
      if (closed) return;
      setTimeout(open, backoff * (0.8 + Math.random() * 0.4));
      backoff = Math.min(backoff * 2, 30000);
    };
  }
  open();
  const timer = setInterval(emit, 250);
  return {
    close() {
      closed = true;
      clearInterval(timer);
      ws?.close();
    },
  };
}

export const EVENTS_MAX = 50;

export const STATE_LABEL = { play: 'PLAY', rec: 'REC', stop: 'STOP', offline: 'OFFLINE' };

/** Milliseconds → `M:SS` (or `H:MM:SS`), for remaining time. */
export function formatRemaining(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

/** The class a device's state box gets: the tally colour, or `stale` (never a playing colour from old data). */
export function stateClass(d) {
  return d.isStale ? 'stale' : d.state;
}

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

/** One history line: `21:45:03 Deck 2 PLAY → STOP`, `… link lost (reason)`, `… link back`. */
export function eventText(e) {
  const t = new Date(e.at).toLocaleTimeString([], { hour12: false });
  const what =
    e.kind === 'link_lost'
      ? 'link lost'
      : e.kind === 'link_up'
        ? 'link back'
        : `${STATE_LABEL[e.from] ?? e.from} \u2192 ${STATE_LABEL[e.to] ?? e.to}`;
  return `${t} ${e.name} ${what}${e.reason ? ` (${e.reason})` : ''}`;
}

/** The line under a stale device: the last state it reported (never shown as the state itself) and why. */
export function staleReason(d) {
  if (!d.isStale) return d.reason ?? '';
  const why = d.linkUp ? (d.reason ?? 'data too old') : 'no data from the monitor';
  return `last known ${STATE_LABEL[d.state]} · ${why}`;
}
