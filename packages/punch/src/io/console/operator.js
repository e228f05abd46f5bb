// Punch operator console (README "Operator console"): plain browser JavaScript, no build step.
//
// The page is /s/<name>#t=<admin token>: the fragment never reaches a server. The token goes to the API in
// an Authorization header and to the WebSocket as the subprotocol `bearer.<token>` beside `punch.v1`.
//
// Every element is built once and then updated in place (text, classes, attributes): a label being typed,
// an open <details>, the focus and the scroll position survive every health report and state change.
// While the broker is unreachable the page turns grey and says why and for how long.
import {
  age,
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
import { alarmNotifier } from './alarm-notify.js';
import { alarmPart, graphPart, healthPart, loadGraphScript, relayPart } from './health-view.js';
import { lifetimeBar } from './lifetime.js';
import { lightOf } from './tally-light.js';

const { token, from } = pageToken();
const claims = claimsOf(token);
if (claims && claims.role === 'admin') start();

function start() {
  // An admin link of the older form (`?t=`): keep the token out of every later request and of the history.
  if (from === 'query') {
    window.history.replaceState(null, '', `${location.pathname}#t=${encodeURIComponent(token)}`);
  }
  const name = sessionName();
  const api = (path) => `/api/session/${encodeURIComponent(name)}${path}`;
  const auth = { authorization: `Bearer ${token}` };
  document.body.dataset.role = 'admin';
  document.getElementById('app').replaceChildren();
  for (const id of ['state', 'live']) document.getElementById(id).hidden = false;

  let view = null;
  /** Date.now() of the last view fetched. */
  let viewAt = 0;
  let closed = false;
  let ws = null;
  /** stream -> latest health_report entry, and when it arrived (Date.now()). */
  const health = new Map();
  const healthAt = new Map();
  /** stream -> active alarms (alarm name -> {message, at}), from `health_alarm` and the reports. */
  const alarms = new Map();
  /** stream -> {for_peer_a, for_peer_b} once matched. */
  const strings = new Map();
  /** stream -> tally state as the broker last echoed it. */
  const tally = new Map();
  /** stream -> card (its elements, kept for in-place updates). */
  const cards = new Map();
  let invites = [];

  // --- the broker link: up, or down with a reason since a time (README "Operator console").
  const conn = document.getElementById('conn');
  const connText = el('span', {});
  conn.append(connText);
  const link = { up: false, since: Date.now(), reason: 'connecting to the broker' };
  let wsOpen = false;
  function setLink(up, reason) {
    if (link.up !== up) link.since = Date.now();
    link.up = up;
    link.reason = reason;
    paintLink();
  }
  function paintLink() {
    const live = document.getElementById('live');
    document.body.classList.toggle('stale', !link.up && !closed);
    if (closed) {
      conn.hidden = true;
      setText(live, '');
      return;
    }
    setText(live, link.up ? 'live' : 'not live');
    setClass(live, link.up ? 'live on' : 'live off');
    conn.hidden = link.up;
    if (!link.up) {
      setText(
        connText,
        `Broker unreachable for ${age(Date.now() - link.since)} (since ${new Date(link.since).toLocaleTimeString()}): ` +
          `${link.reason}. What is shown below is from before then and may be out of date; reconnecting…`,
      );
    }
  }
  setInterval(paintLink, 1000);
  // The relay figures grey with their age between two updates.
  setInterval(() => {
    for (const c of cards.values()) c.relay.tick();
  }, 1000);

  /** fetch with a deadline: a broker that stops answering is as unreachable as one that refuses. */
  const call = (path, init = {}) =>
    fetch(path, { ...init, headers: { ...auth, ...init.headers }, signal: AbortSignal.timeout(4000) });

  // A frozen broker keeps its sockets open: its health probe is what notices.
  setInterval(async () => {
    if (closed) return;
    try {
      const r = await fetch('/api/health', { signal: AbortSignal.timeout(2500) });
      if (!r.ok) setLink(false, `the broker answers ${r.status} (its store cannot save)`);
      else if (wsOpen && !link.up) setLink(true, '');
    } catch {
      setLink(false, 'no answer from the broker within 2.5 s');
    }
  }, 1500);

  // --- verdict (docs/health.md "Advice": the latency is fixed at creation, never "raise it")
  const STATUS_WORDS = { healthy: 'Healthy', warning: 'Warning', critical: 'Critical' };

  function verdict(stream, h) {
    const s = view.streams[stream];
    if (s.state === 'waiting') {
      const present = [s.peer_a, s.peer_b].filter((p) => p && p.present).length;
      return present === 0 ? 'Waiting for both peers to join.' : 'Waiting for the second peer to join.';
    }
    // docs/relay.md "What the operator sees": the relay's part in the link, or why it could not take it.
    const relay =
      s.relay && s.relay.state === 'refused'
        ? ` The relay refused the fallback (${s.relay.reason}).`
        : s.relay && s.relay.state === 'ended'
          ? ` The relay ended its allocation (${s.relay.reason}).`
          : '';
    if (s.state === 'relaying') return 'Direct rendezvous did not connect; moving the link to the relay.';
    if (!h)
      return s.state === 'connected'
        ? `Connected${s.path === 'relayed' ? ' over the relay' : ''}; no health report yet.`
        : `Matched; waiting for SRT to connect.${relay}`;
    const words = STATUS_WORDS[h.status] || h.status;
    const rtt = `RTT ${h.rtt.toFixed(1)} ms, ${h.retransmit.toFixed(1)} % repaired`;
    // Drops and a short margin do not change the spec's status, but the operator hears about them first.
    const rx = h.figures && h.figures.receiver;
    if (h.alarms && h.alarms.drops && rx) {
      return `Glitching: ${rx.w10.dropped} packets dropped too late in the last 10 s (${words.toLowerCase()} by RTT and repair: ${rtt}).`;
    }
    if (h.alarms && h.alarms.margin) {
      return `At risk: the latency does not cover 4 × RTT plus its swing (${words.toLowerCase()} by RTT and repair: ${rtt}).`;
    }
    if (h.advice) return `${words}: ${rtt} over the last 10 s.`;
    // A client without counters (spec fields only): its latest report, by the same rule.
    if (view.latency < 4 * h.rtt) {
      return (
        `At risk: latency ${view.latency} ms is below 4 × RTT (${h.rtt.toFixed(1)} ms; ${words.toLowerCase()} by ` +
        `RTT and repair). The latency is fixed for this session: for a safe link, create a new session with ` +
        `latency ${h.suggestedLatency} ms or more.`
      );
    }
    return `${words}: ${rtt}; latency ${view.latency} ms covers 4 × RTT.`;
  }

  // --- one card per stream, built once
  function peerRow(slot) {
    const dot = el('span', { class: 'dot' });
    const presence = el('span', {});
    const label = el('span', {});
    const role = el('span', { class: 'muted' });
    const addr = el('td', { class: 'addr' });
    const row = el(
      'tr',
      {},
      el('td', {}, slot.toUpperCase()),
      el('td', { 'data-testid': 'presence' }, dot, presence),
      el('td', {}, label, role),
      addr,
    );
    const update = (p) => {
      if (!p) {
        setClass(dot, 'dot');
        setText(presence, 'free');
        setText(label, '—');
        setText(role, '');
        setText(addr, '');
        return;
      }
      setClass(dot, `dot${p.present ? ' on' : p.signalling ? ' media' : ''}`);
      // README "State from media": absent signalling while the other end reports the link up.
      setText(
        presence,
        p.present ? 'present' : p.signalling ? 'signalling lost, media reported by the other end' : 'gone',
      );
      setText(label, p.label || '—');
      setText(role, p.role ? ` (${p.role})` : '');
      setText(addr, `${p.ip}:${p.port}`);
    };
    return { row, update };
  }

  function tallyPart(stream) {
    const badge = el('span', { class: 'badge tally-off', 'data-testid': 'tally-state' }, 'tally off');
    const buttons = {};
    const group = el('div', { class: 'segmented', role: 'group', 'aria-label': `Tally of ${stream}` });
    for (const state of ['off', 'preview', 'program']) {
      const b = el(
        'button',
        { type: 'button', class: `small tally-${state}`, 'aria-pressed': 'false', 'data-tally': state },
        state === 'off' ? 'Off' : state === 'preview' ? 'Preview' : 'Program',
      );
      // The spec's admin `tally` message; the broker sends it to both peers of the stream and echoes it here.
      b.addEventListener('click', () => {
        if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'tally', stream, state }));
      });
      buttons[state] = b;
      group.append(b);
    }
    const update = () => {
      const t = tally.get(stream);
      // Until the broker echoes a tally, the stream has none: off. A tally the mixer's monitor sent as stale
      // (README "Tally": `off` with `stale: true`) is unknown, never a colour.
      setText(badge, t === 'unknown' ? 'tally unknown (mixer data stale)' : `tally ${t || 'off'}`);
      setClass(badge, `badge tally-${t || 'off'}`);
      for (const [state, b] of Object.entries(buttons)) {
        b.setAttribute('aria-pressed', String((t || 'off') === state));
        b.disabled = !wsOpen;
      }
    };
    return { badge, group, update };
  }

  function stringsPart() {
    const block = (title) => {
      const body = el('div', {});
      const details = el('details', {}, el('summary', {}, title), body);
      return { details, body };
    };
    const a = block('Connection strings for peer A');
    const b = block('Connection strings for peer B');
    const hint = el(
      'p',
      { class: 'muted' },
      'Connection strings for other tools (FFmpeg, OBS, vMix, GStreamer) appear once both peers have joined.',
    );
    const root = el(
      'div',
      { class: 'strings' },
      el('h3', {}, 'Connection strings'),
      hint,
      a.details,
      b.details,
    );
    let shownKey = '';
    const fill = (part, map) =>
      part.body.replaceChildren(
        ...Object.entries(map).map(([format, text]) =>
          el(
            'div',
            { class: 'string' },
            el('div', { class: 'row' }, el('b', {}, format), copyButton(text)),
            el('pre', {}, text),
          ),
        ),
      );
    const update = (s) => {
      hint.hidden = Boolean(s);
      a.details.hidden = !s;
      b.details.hidden = !s;
      const key = s ? JSON.stringify(s) : '';
      // Rebuilt only when the strings themselves change (new coordinates); the <details> stay as they are.
      if (!s || key === shownKey) return;
      shownKey = key;
      fill(a, s.for_peer_a);
      fill(b, s.for_peer_b);
    };
    return { root, update };
  }

  const INVITE_WORDS = { unused: 'not joined yet', present: 'joined', away: 'left', revoked: 'revoked' };

  function invitePart(stream) {
    const input = el('input', {
      placeholder: 'Label (e.g. Camera 1)',
      'aria-label': 'Peer label',
      maxlength: '64',
      autocomplete: 'off',
    });
    const button = el('button', { type: 'button' }, 'Issue peer token');
    const error = el('p', { class: 'error', role: 'alert' });
    error.hidden = true;
    const list = el('ul', { class: 'invites', 'data-testid': 'invites' });
    const empty = el('p', { class: 'muted' }, 'No invites yet: each device joins with its own link.');
    const items = new Map();
    let openNext = null;
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const r = await call(api('/token'), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ stream, ...(input.value ? { label: input.value } : {}) }),
        });
        const body = await r.json().catch(() => ({}));
        if (!r.ok) {
          error.hidden = false;
          setText(error, body.message || `could not issue a token (${r.status})`);
          return;
        }
        error.hidden = true;
        input.value = '';
        openNext = body.invite;
        await loadInvites();
      } catch {
        error.hidden = false;
        setText(error, 'could not issue a token: the broker did not answer');
      } finally {
        button.disabled = false;
      }
    });
    const item = (inv) => {
      const label = el('b', {}, inv.label || '(no label)');
      const state = el('span', { class: 'badge', 'data-testid': 'invite-state' });
      const when = el('span', { class: 'muted' }, ` issued ${new Date(inv.issued).toLocaleTimeString()}`);
      const revoke = el('button', { type: 'button', class: 'small danger' }, 'Revoke');
      revoke.addEventListener('click', async () => {
        if (!confirm(`Revoke the invite "${inv.label || inv.id}"? Its device is disconnected at once.`))
          return;
        revoke.disabled = true;
        const r = await call(api(`/invites/${encodeURIComponent(inv.id)}`), { method: 'DELETE' }).catch(
          () => null,
        );
        if (!r || r.status !== 204) {
          revoke.disabled = false;
          error.hidden = false;
          setText(error, `Revoke failed: ${r ? r.status : 'the broker did not answer'}`);
        }
        await loadInvites();
      });
      const linkText = el('pre', { 'data-testid': 'join-link' }, inv.url || '');
      const qr = el('img', {
        class: 'qr',
        alt: `QR code of the join link for ${inv.label || 'this invite'}`,
      });
      const qrBox = el('details', { class: 'qr-box' }, el('summary', {}, 'QR code'), qr);
      // The QR image is fetched the first time it is shown.
      qrBox.addEventListener('toggle', () => {
        if (qrBox.open && !qr.getAttribute('src') && inv.qr) qr.setAttribute('src', inv.qr);
      });
      const linkRow = el(
        'div',
        { class: 'row link' },
        linkText,
        copyButton(() => linkText.textContent),
      );
      const li = el(
        'li',
        { 'data-invite': inv.id },
        el('div', { class: 'row' }, label, state, when, revoke),
        linkRow,
        qrBox,
      );
      const update = (i) => {
        setText(state, INVITE_WORDS[i.state] || i.state);
        const at = (iso) => new Date(iso).toLocaleTimeString();
        setText(when, i.revoked ? ` revoked ${at(i.revoked)}` : ` issued ${at(i.issued)}`);
        setClass(state, `badge invite-${i.state}`);
        li.classList.toggle('revoked', i.state === 'revoked');
        revoke.hidden = i.state === 'revoked';
        linkRow.hidden = !i.url;
        qrBox.hidden = !i.qr;
      };
      return { li, update, qrBox };
    };
    const update = (all) => {
      const mine = all.filter((i) => i.stream === stream);
      empty.hidden = mine.length > 0;
      for (const inv of mine) {
        let it = items.get(inv.id);
        if (!it) {
          it = item(inv);
          items.set(inv.id, it);
          list.append(it.li);
          if (openNext === inv.id) it.qrBox.open = true;
        }
        it.update(inv);
      }
    };
    const root = el(
      'div',
      { class: 'invite' },
      el('h3', {}, 'Invites'),
      el('div', { class: 'row nowrap' }, input, button),
      error,
      empty,
      list,
    );
    return { root, update };
  }

  function card(stream) {
    const state = el('span', { class: 'badge', 'data-testid': 'stream-state' });
    const a = peerRow('a');
    const b = peerRow('b');
    const h = healthPart();
    const t = tallyPart(stream);
    const v = el('div', { class: 'verdict', 'data-testid': 'verdict' });
    const rp = relayPart();
    const s = stringsPart();
    const inv = invitePart(stream);
    const al = alarmPart();
    const g = graphPart(async () => {
      const r = await call(api(`/health?stream=${encodeURIComponent(stream)}`));
      return r.ok ? r.json() : null;
    });
    const root = el(
      'section',
      { class: 'card stream', 'data-stream': stream },
      el(
        'h2',
        {},
        el('span', { class: 'stream-name' }, stream),
        state,
        t.badge,
        al.badge,
        el('span', { class: 'tally' }, t.group),
      ),
      al.root,
      el(
        'div',
        { class: 'columns' },
        el(
          'div',
          { class: 'col' },
          el('div', { class: 'table-wrap' }, el('table', { class: 'peers' }, el('tbody', {}, a.row, b.row))),
          v,
          rp.root,
        ),
        el('div', { class: 'col' }, inv.root),
        el('div', { class: 'col' }, s.root),
      ),
      el('div', { class: 'link-health' }, h.root, g.root),
    );
    const update = () => {
      const st = view.streams[stream];
      setText(state, st.path === 'relayed' ? `${st.state} · relayed` : st.state);
      setClass(state, `badge ${st.state}`);
      a.update(st.peer_a);
      b.update(st.peer_b);
      // A stream waiting for a peer has no link: no health badge of a peer that left beside that wait.
      // Nor its alarms: without reports they are no longer known (the row and notification were shown).
      if (st.state === 'waiting') {
        health.delete(stream);
        alarms.delete(stream);
      }
      const hh = health.get(stream);
      h.update(hh, st.state !== 'waiting');
      al.update(alarms.get(stream) || new Map());
      setText(v, verdict(stream, hh));
      // The relay's figures: live from health_report, else from the view; none off the relay.
      if (st.path !== 'relayed') rp.update(null);
      else if (hh && hh.relay) rp.update(hh.relay, healthAt.get(stream));
      else rp.update(st.relay && st.relay.measured, viewAt);
      t.update();
      s.update(strings.get(stream));
      inv.update(invites);
    };
    return { root, update, graph: g, relay: rp };
  }

  // --- the session bar: latency and Close
  const closeButton = el('button', { class: 'danger', type: 'button' }, 'Close session');
  closeButton.addEventListener('click', async () => {
    if (!confirm(`Close session ${name}? Both agents stop.`)) return;
    const r = await call(api(''), { method: 'DELETE' }).catch(() => null);
    if (r && r.status === 204) {
      closed = true;
      render();
    }
  });
  const latency = el('span', { class: 'muted' });
  const notifier = alarmNotifier();
  document.getElementById('session-tools').append(latency, notifier.root, closeButton);

  const updateLifetime = lifetimeBar({
    admin: true,
    getView: () => view,
    isClosed: () => closed,
    extend: async () => {
      const r = await call(api(''), {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ttl: 3600 }),
      }).catch(() => null);
      if (!r) return 'the broker did not answer';
      if (!r.ok) return (await r.json().catch(() => ({}))).message || String(r.status);
      view = await r.json();
      return null;
    },
  });

  function render() {
    const root = document.getElementById('app');
    const state = document.getElementById('state');
    if (closed) {
      showClosed(
        el('p', {}, 'Both agents were told to stop. Create a new session from the start page.'),
        el('a', { href: '/' }, 'New session'),
      );
      document.getElementById('session-tools').hidden = true;
      updateLifetime();
      paintLink();
      return;
    }
    if (!view) return;
    setText(state, view.state);
    setClass(state, `badge ${view.state}`);
    setText(latency, `Latency ${view.latency} ms`);
    updateLifetime();
    for (const stream of Object.keys(view.streams)) {
      let c = cards.get(stream);
      if (!c) {
        c = card(stream);
        cards.set(stream, c);
        root.append(c.root);
      }
      c.update();
    }
  }

  async function loadInvites() {
    const r = await call(api('/invites')).catch(() => null);
    if (!r || !r.ok) return;
    invites = (await r.json()).invites;
    render();
  }

  let refreshing = null;
  let again = false;
  /** GET the view (one at a time; a request while one runs is folded into one more after it). */
  async function refresh() {
    if (closed) return;
    if (refreshing) {
      again = true;
      return refreshing;
    }
    refreshing = (async () => {
      try {
        const v = await viewOf(await call(api('')));
        if (v === 'closed') closed = true;
        else if (v) {
          view = v;
          viewAt = Date.now();
        }
        if (!v || closed) {
          render();
          return;
        }
        for (const [stream, s] of Object.entries(view.streams)) {
          if (s.state !== 'waiting' && !strings.has(stream)) {
            const c = await call(api(`/connect?stream=${encodeURIComponent(stream)}`));
            if (c.ok) strings.set(stream, await c.json());
          } else if (s.state === 'waiting') strings.delete(stream);
        }
        render();
      } catch {
        setLink(false, 'the broker did not answer a request');
      } finally {
        refreshing = null;
      }
    })();
    await refreshing;
    if (again) {
      again = false;
      await refresh();
    }
  }

  let backoff = 500;
  let invitesTimer = null;
  function connectWs() {
    if (closed) return;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    ws = new WebSocket(`${scheme}://${location.host}/api/ws/${encodeURIComponent(name)}`, [
      'punch.v1',
      `bearer.${token}`,
    ]);
    ws.addEventListener('open', () => {
      backoff = 500;
      wsOpen = true;
      setLink(true, '');
      void refresh();
      void loadInvites();
    });
    ws.addEventListener('message', (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === 'session' || m.type === 'presence' || m.type === 'peer_match') {
        if (m.type === 'peer_match') strings.delete(m.stream);
        void refresh();
        // Invite states follow presence; one list request for a burst of events.
        clearTimeout(invitesTimer);
        invitesTimer = setTimeout(() => void loadInvites(), 300);
      } else if (m.type === 'health_report') {
        for (const [stream, h] of Object.entries(m.streams)) {
          health.set(stream, h);
          healthAt.set(stream, Date.now());
          alarmsFromReport(stream, h.alarms);
          const c = cards.get(stream);
          // The first report of a link: its graph now, not at the next refresh.
          if (c && c.graph.root.hidden) void c.graph.tick();
        }
        render();
      } else if (m.type === 'health_alarm') {
        onAlarm(m);
        render();
      } else if (m.type === 'tally') {
        tally.set(m.stream, lightOf(m).state);
        render();
      } else if (m.type === 'session_closed') {
        closed = true;
        render();
      }
    });
    ws.addEventListener('close', (ev) => {
      wsOpen = false;
      if (closed) return;
      setLink(false, `the signalling connection closed (${ev.code || 'no close code'})`);
      render();
      setTimeout(connectWs, backoff);
      backoff = Math.min(10_000, backoff * 2);
    });
  }

  // Health that stops arriving is not shown as current: drop reports older than 15 s.
  setInterval(() => {
    const now = Date.now();
    for (const [stream, at] of healthAt) {
      if (now - at > 15_000) {
        health.delete(stream);
        healthAt.delete(stream);
        alarms.delete(stream);
        render();
      }
    }
  }, 5000);

  // --- alarms (docs/health.md "Alarms"): raised and cleared by `health_alarm`; a report's `alarms` flags
  // also clear them, and raise them for a console that opened while an alarm was already on.
  function onAlarm(m) {
    const active = alarms.get(m.stream) || new Map();
    alarms.set(m.stream, active);
    if (!m.active) {
      active.delete(m.alarm);
      return;
    }
    active.set(m.alarm, { message: m.message, at: m.at });
    notifier.raise(
      `Punch ${name}: ${m.stream} ${m.alarm === 'drops' ? 'drops' : 'margin'}`,
      m.message,
      `${m.stream}/${m.alarm}`,
    );
  }
  const ALARM_TEXT = {
    drops: 'packets dropped too late in the last 10 s',
    margin: 'the latency does not cover 4 × RTT plus its swing',
  };
  function alarmsFromReport(stream, flags) {
    if (!flags) return;
    const active = alarms.get(stream) || new Map();
    alarms.set(stream, active);
    for (const [alarm, on] of Object.entries(flags)) {
      if (!on) active.delete(alarm);
      else if (!active.has(alarm)) active.set(alarm, { message: ALARM_TEXT[alarm] || alarm, at: Date.now() });
    }
  }

  // --- the 10-minute graphs: fetched every 5 s for links that report (or did: it greys with its age)
  loadGraphScript(() => {
    for (const c of cards.values()) c.graph.draw();
  });
  setInterval(() => {
    if (closed) return;
    for (const [stream, c] of cards) {
      if (health.has(stream) || !c.graph.root.hidden) void c.graph.tick();
    }
  }, 5000);

  paintLink();
  void refresh();
  connectWs();
}
