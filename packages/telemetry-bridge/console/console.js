// Telemetry bridge web console (docs/console.md). Plain browser JavaScript, no build step.
// Live state comes over the bridge's own WebSocket protocol (docs/protocol.md); clients, commands and the
// event log come from GET /api/hub, polled. With authentication on, the token typed here is kept in
// sessionStorage (this tab only) and sent as the handshake's authToken and as `Authorization: Bearer`.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const state = new Map();
  let token = sessionStorage.getItem('tb-token') || '';
  let ws;
  let seq = 0;
  let reconnectTimer;
  let pollTimer;
  let renderQueued = false;
  const pending = new Map();
  // When the console last heard from the bridge (any frame), and why it is not live (undefined while live).
  let lastHeard = 0;
  let blindReason = 'connecting to the bridge';
  let blindSince = Date.now();
  // How long the bridge may stay silent (it answers our ping every second) before the console says so.
  const SILENT_MS = 2500;

  const esc = (s) =>
    String(s).replace(
      /[&<>"']/g,
      (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
    );
  const short = (v) => {
    const s = JSON.stringify(v);
    return s === undefined ? '' : s.length > 160 ? s.slice(0, 157) + '…' : s;
  };
  const time = (ms) => (ms ? new Date(ms).toLocaleTimeString() : '—');

  function setConn(text, cls) {
    const el = $('conn');
    el.textContent = text;
    el.className = 'badge ' + cls;
  }

  // ------------------------------------------------------------------ blind: every panel says it is not live
  const age = (ms) => {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 90 ? s + ' s' : Math.round(s / 60) + ' min';
  };
  function notes() {
    return [...document.querySelectorAll('#main > section')].map((sec) => {
      let n = sec.querySelector(':scope > .blind-note');
      if (!n) {
        n = document.createElement('p');
        n.className = 'blind-note';
        n.setAttribute('role', 'status');
        sec.insertBefore(n, sec.children[1] || null);
      }
      return n;
    });
  }
  function renderBlind() {
    const blind = blindReason !== undefined;
    $('main').classList.toggle('blind', blind);
    const text = blind
      ? 'Not live: ' +
        blindReason +
        '. ' +
        (lastHeard
          ? 'Showing data from ' + time(lastHeard) + ' (' + age(Date.now() - lastHeard) + ' old).'
          : 'No data yet.')
      : '';
    for (const n of notes()) {
      n.hidden = !blind;
      if (n.textContent !== text) n.textContent = text;
    }
  }
  function goBlind(reason) {
    if (blindReason === undefined) blindSince = Date.now();
    blindReason = reason;
    renderBlind();
  }
  function goLive() {
    blindReason = undefined;
    renderBlind();
  }
  setInterval(() => {
    if (blindReason === undefined && lastHeard && Date.now() - lastHeard > SILENT_MS) {
      goBlind('no answer from the bridge for ' + age(Date.now() - lastHeard));
      setConn('no answer — reconnecting', 'bad');
      if (ws) ws.close();
      return;
    }
    if (blindReason !== undefined) renderBlind();
    else if (document.querySelector('#link-events li.open')) queueRender();
  }, 500);

  function showLogin(message) {
    $('login').hidden = false;
    $('main').hidden = true;
    $('login-error').textContent = message || '';
    $('token').focus();
  }

  $('login').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('token').value;
    sessionStorage.setItem('tb-token', token);
    $('login').hidden = true;
    $('main').hidden = false;
    connect();
  });

  // ------------------------------------------------------------------ patterns (docs/protocol.md "Patterns")
  function matches(pattern, path) {
    const p = pattern.split('.');
    const s = path.split('.');
    for (let i = 0; i < p.length; i++) {
      if (p[i] === '**') return i === p.length - 1 && s.length > i;
      if (i >= s.length) return false;
      if (p[i] !== '*' && p[i] !== s[i]) return false;
    }
    return p.length === s.length;
  }

  // ------------------------------------------------------------------ WebSocket
  function send(msg) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
  }
  function nextId() {
    seq += 1;
    return 'console-' + Date.now().toString(36) + '-' + seq;
  }

  function connect() {
    clearTimeout(reconnectTimer);
    if (ws) ws.close();
    setConn('connecting…', 'warn');
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(proto + '//' + location.host + '/');
    ws.onopen = () => {
      const hs = { type: 'handshake', name: 'console', version: '1' };
      if (token) hs.authToken = token;
      ws.send(JSON.stringify(hs));
    };
    const socket = ws;
    ws.onmessage = (ev) => {
      lastHeard = Date.now();
      onMessage(JSON.parse(ev.data));
    };
    ws.onclose = (ev) => {
      if (socket !== ws) return;
      goBlind('lost the connection to the bridge (code ' + ev.code + ')');
      if (ev.code === 4003) {
        setConn('not authorised', 'bad');
        showLogin('The bridge refused that token.');
        return;
      }
      setConn('disconnected — retrying', 'bad');
      reconnectTimer = setTimeout(connect, 1000);
    };
  }

  function onMessage(m) {
    if (m.type === 'handshake_response') {
      if (!m.success) return;
      setConn('live', 'ok');
      goLive();
      $('version').textContent = 'bridge ' + m.serverVersion + ' · ' + m.namespace;
      state.clear();
      send({
        id: nextId(),
        type: 'subscribe',
        path: 'hub.subscriptions',
        payload: { patterns: ['**'], snapshot: true },
        timestamp: Date.now(),
      });
      poll();
      return;
    }
    if (m.type === 'state') {
      if (m.payload.value === null) state.delete(m.path);
      else
        state.set(m.path, {
          value: m.payload.value,
          owner: m.payload.owner,
          stale: m.payload.stale === true,
        });
      queueRender();
      return;
    }
    if (m.type === 'ack' && pending.has(m.payload.commandId)) {
      const done = pending.get(m.payload.commandId);
      if (m.payload.status !== 'received') {
        pending.delete(m.payload.commandId);
        done(m.payload);
      }
      return;
    }
    if (m.type === 'error' && m.payload && pending.has(m.payload.relatedMessageId)) {
      const done = pending.get(m.payload.relatedMessageId);
      pending.delete(m.payload.relatedMessageId);
      done({ status: 'failed', error: { code: m.payload.code, message: m.payload.message } });
    }
  }

  // A ping every second: the pong proves the bridge still answers (SILENT_MS above).
  setInterval(() => send({ type: 'ping', timestamp: Date.now() }), 1000);

  // ------------------------------------------------------------------ rendering
  function queueRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      renderLink();
      renderSurface();
      renderKeys();
    });
  }

  function val(path) {
    const e = state.get(path);
    return e ? e.value : undefined;
  }

  function renderLink() {
    const rows = [];
    const st = val('companion.connection.state');
    const active = val('companion.connection.active');
    const caps = val('companion.capabilities') || {};
    rows.push(['State', st === undefined ? 'no Companion adapter' : st]);
    if (active)
      rows.push([
        'Active host',
        active.host + ':' + active.port + ' (' + active.role + (active.connected ? '' : ', down') + ')',
      ]);
    if (caps.companionVersion) rows.push(['Companion', caps.companionVersion + ' · API ' + caps.apiVersion]);
    const feats = caps.features ? Object.keys(caps.features).filter((k) => caps.features[k] === true) : [];
    if (feats.length) rows.push(['Capabilities', feats.join(', ')]);
    if (caps.bitmapFormat) rows.push(['Bitmaps', caps.bitmapFormat]);
    const err = val('companion.connection.lastError');
    if (err) rows.push(['Last error', err]);
    $('link').innerHTML = rows.map(([k, v]) => '<dt>' + esc(k) + '</dt><dd>' + esc(v) + '</dd>').join('');
    renderLinkEvents(st, active);
  }

  // One row per outage of the Companion link (docs/console.md "Link events"): while it lasts, a row that
  // says where it started and why; when Companion is back, the same row becomes the one `failover` or
  // `reconnected` record the bridge kept (`companion.connection.events`), however many attempts it took.
  const hostName = (h) => h.role + ' ' + h.host + ':' + h.port;
  function renderLinkEvents(st, active) {
    const events = val('companion.connection.events');
    const list = Array.isArray(events) ? events.slice().reverse() : [];
    const rows = [];
    if (active && !active.connected && st !== 'connected' && st !== undefined) {
      const since = active.since || Date.now();
      rows.push({
        cls: 'open',
        text:
          time(since) +
          ' Link lost: ' +
          hostName(active) +
          ' (' +
          (active.reason || 'unknown') +
          '); ' +
          st +
          ', ' +
          age(Date.now() - since) +
          ' so far',
      });
    }
    for (const e of list)
      rows.push({
        cls: e.kind,
        text:
          time(e.at) +
          (e.kind === 'failover'
            ? ' Failover: ' + hostName(e.from) + ' → ' + hostName(e.to)
            : ' Reconnected to ' + hostName(e.to)) +
          ' after ' +
          (e.durationMs / 1000).toFixed(1) +
          ' s (' +
          e.reason +
          (e.failedAttempts
            ? '; ' + e.failedAttempts + ' failed attempt' + (e.failedAttempts > 1 ? 's' : '')
            : '') +
          ')',
      });
    if (rows.length === 0) rows.push({ cls: 'none', text: 'No link outage recorded.' });
    const html = rows.map((r) => '<li class="' + esc(r.cls) + '">' + esc(r.text) + '</li>').join('');
    const ol = $('link-events');
    if (ol.innerHTML !== html) ol.innerHTML = html;
  }

  const keyEls = new Map();
  function renderSurface() {
    const keys = [];
    for (const [path, e] of state) {
      const m = /^companion\.device\.([a-z0-9_]+)\.key\.(\d+)$/.exec(path);
      if (m) keys.push({ path, dev: m[1], index: Number(m[2]), e });
    }
    keys.sort((a, b) => a.index - b.index);
    const host = $('surface');
    if (keys.length === 0) {
      host.textContent = 'No surface keys yet.';
      keyEls.clear();
      return;
    }
    if (keyEls.size === 0) host.textContent = '';
    const perRow = Math.max(1, Math.max(...keys.map((k) => (k.e.value.column || 0) + 1)));
    // Keys never shrink below a tappable size; a wide surface scrolls sideways on a phone instead.
    host.style.gridTemplateColumns = 'repeat(' + perRow + ', minmax(3.2rem, 1fr))';
    $('surface-name').textContent = keys[0].e.value.deviceId || '';
    for (const k of keys) {
      let el = keyEls.get(k.path);
      if (!el) {
        el = document.createElement('button');
        el.type = 'button';
        el.className = 'key';
        el.dataset.path = k.path;
        el.addEventListener('click', () => press(k.path));
        host.appendChild(el);
        keyEls.set(k.path, el);
      }
      const v = k.e.value;
      el.style.background = v.colour || '#000';
      el.style.color = v.textColour || '#fff';
      el.classList.toggle('stale', k.e.stale);
      el.classList.toggle('pressed', v.pressed === true);
      el.setAttribute(
        'aria-label',
        'Key ' + k.index + (v.text ? ': ' + v.text : '') + (k.e.stale ? ' (stale)' : ''),
      );
      const sig = (v.image || '') + '|' + (v.text || '');
      if (el.dataset.sig === sig) continue;
      el.dataset.sig = sig;
      el.textContent = '';
      if (v.image) el.appendChild(bitmap(v.image));
      const label = document.createElement('span');
      label.textContent = v.text || '';
      el.appendChild(label);
    }
  }

  // Satellite BITMAP: base64 of raw 8-bit RGB, square (Companion's Satellite API documentation).
  function bitmap(b64) {
    // png/webp come as a data URL (docs/companion.md "Handshake negotiation"); raw rgb as bare base64.
    if (/^data:image\/(png|webp);base64,/.test(b64)) {
      const im = document.createElement('img');
      im.alt = '';
      im.src = b64;
      return im;
    }
    const raw = atob(b64);
    const side = Math.round(Math.sqrt(raw.length / 3));
    const c = document.createElement('canvas');
    c.width = c.height = side;
    if (side * side * 3 !== raw.length || side === 0) return c;
    const ctx = c.getContext('2d');
    const img = ctx.createImageData(side, side);
    for (let i = 0, j = 0; i < raw.length; i += 3, j += 4) {
      img.data[j] = raw.charCodeAt(i);
      img.data[j + 1] = raw.charCodeAt(i + 1);
      img.data[j + 2] = raw.charCodeAt(i + 2);
      img.data[j + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return c;
  }

  function press(path) {
    const id = nextId();
    const out = $('press-result');
    out.textContent = 'Pressing ' + path + '…';
    pending.set(id, (p) => {
      out.textContent =
        p.status === 'completed'
          ? 'Pressed ' + path + ': completed.'
          : 'Press ' + path + ' ' + p.status + ': ' + ((p.error && p.error.message) || '');
      out.className = 'small st-' + p.status;
      poll();
    });
    send({
      id,
      type: 'command',
      target: 'companion',
      path,
      payload: { action: 'press' },
      timestamp: Date.now(),
      ttl: 10000,
    });
  }

  function renderKeys() {
    const pattern = $('filter').value.trim() || '**';
    let valid = true;
    try {
      valid = /^(\*\*|\*|[a-z0-9_]+)(\.(\*\*|\*|[a-z0-9_]+))*$/.test(pattern) && !/\*\*\./.test(pattern);
    } catch {
      valid = false;
    }
    $('filter').setAttribute('aria-invalid', String(!valid));
    if (!valid) {
      $('key-count').textContent = 'Not a valid pattern.';
      return;
    }
    const rows = [...state.keys()].filter((p) => matches(pattern, p)).sort();
    $('key-count').textContent =
      rows.length + ' of ' + state.size + ' keys' + (rows.length > 500 ? ' (first 500 shown)' : '');
    $('keys').tBodies[0].innerHTML = rows
      .slice(0, 500)
      .map((p) => {
        const e = state.get(p);
        const v =
          e.value && typeof e.value === 'object' && e.value.image
            ? { ...e.value, image: '[bitmap]' }
            : e.value;
        return (
          '<tr class="' +
          (e.stale ? 'stale' : '') +
          '" data-path="' +
          esc(p) +
          '"><td>' +
          esc(p) +
          (e.stale ? ' <em>(stale)</em>' : '') +
          '</td><td class="value">' +
          esc(short(v)) +
          '</td><td>' +
          esc(e.owner) +
          '</td></tr>'
        );
      })
      .join('');
  }
  $('filter').addEventListener('input', renderKeys);

  // ------------------------------------------------------------------ /api/hub
  async function poll() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, 2000);
    let res;
    try {
      res = await fetch('/api/hub', { headers: token ? { authorization: 'Bearer ' + token } : {} });
    } catch {
      goBlind('the bridge does not answer HTTP');
      return;
    }
    if (res.status === 401) {
      clearTimeout(pollTimer);
      showLogin('This bridge requires a token.');
      return;
    }
    if (!res.ok) return;
    const h = await res.json();
    $('clients').tBodies[0].innerHTML = h.clients
      .map(
        (c) =>
          '<tr><td>' +
          esc(c.namespace) +
          '</td><td>' +
          c.subscriptions
            .map((s) => esc(s.patterns.join(' ')) + ' <span class="muted">(' + esc(s.filter) + ')</span>')
            .join('<br>') +
          '</td><td>' +
          c.queuedMessages +
          ' msgs · ' +
          (c.queuedBytes + c.bufferedBytes) +
          ' B' +
          (c.coalescing ? ' · coalescing' : '') +
          '</td><td>' +
          c.offsetsBehind +
          '</td></tr>',
      )
      .join('');
    $('commands').tBodies[0].innerHTML = h.commands
      .slice(0, 30)
      .map(
        (c) =>
          '<tr><td>' +
          time(c.at) +
          '</td><td>' +
          esc(c.source) +
          '</td><td>' +
          esc(c.action) +
          (c.idempotencyKey ? ' <span class="muted">key ' + esc(c.idempotencyKey) + '</span>' : '') +
          '</td><td>' +
          esc(c.path) +
          '</td><td>' +
          c.acks
            .map((a) => '<span class="st-' + esc(a.status) + '">' + esc(a.status) + '</span>')
            .join(' → ') +
          '</td></tr>',
      )
      .join('');
    const l = h.eventLog;
    const rows = l.enabled
      ? [
          ['Epoch', l.epoch],
          ['Offset', l.offset],
          ['Segments', l.segments.length + ' (' + l.segments.reduce((a, s) => a + s.bytes, 0) + ' B used)'],
          ['Last sync', time(l.lastSyncAt)],
          ['Healthy', l.healthy ? 'yes' : 'NO'],
        ]
      : [
          ['Event log', 'disabled'],
          ['Offset', h.offset],
        ];
    $('eventlog').innerHTML = rows.map(([k, v]) => '<dt>' + esc(k) + '</dt><dd>' + esc(v) + '</dd>').join('');
    $('adapters').innerHTML = h.adapters
      .map(
        (a) =>
          '<li>' +
          esc(a.name) +
          ': <strong class="' +
          (a.connected ? 'st-completed' : 'st-failed') +
          '">' +
          (a.connected ? 'connected' : 'down') +
          '</strong></li>',
      )
      .join('');
  }

  renderBlind();
  connect();
})();
