// timesvc dashboard: plain browser JS, same origin only (README "Web API"). Token kept in sessionStorage.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const history = []; // {t, off, jit, err} seconds, last 5 minutes
  const WINDOW_MS = 5 * 60 * 1000;
  let token = sessionStorage.getItem('timesvc-token');
  let role = sessionStorage.getItem('timesvc-role');
  let statusWs, logsWs, retry;

  const fmt = (s, signed = true) => {
    if (s === null || s === undefined || !Number.isFinite(s)) return '—';
    const a = Math.abs(s);
    const sign = signed ? (s < 0 ? '−' : '+') : '';
    if (a < 1e-6) return `${sign}${(a * 1e9).toFixed(0)} ns`;
    if (a < 1e-3) return `${sign}${(a * 1e6).toFixed(1)} µs`;
    if (a < 1) return `${sign}${(a * 1e3).toFixed(2)} ms`;
    return `${sign}${a.toFixed(3)} s`;
  };
  const api = async (method, path, body) => {
    const res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.json().catch(() => ({}));
    if (res.status === 401) logout();
    return { ok: res.ok, status: res.status, json };
  };
  const kv = (el, obj, notEnabled) => {
    el.replaceChildren();
    if (!obj || obj.message) {
      const d = document.createElement('div');
      d.className = 'na';
      d.textContent = notEnabled;
      el.append(d);
      return;
    }
    for (const [k, v] of Object.entries(obj)) {
      if (v === null || v === undefined || typeof v === 'object') continue;
      const d = document.createElement('div');
      const a = document.createElement('span');
      const b = document.createElement('span');
      a.textContent = k.replaceAll('_', ' ');
      b.textContent = String(v);
      d.append(a, b);
      el.append(d);
    }
  };

  function showLogin() {
    $('app').hidden = true;
    $('login').hidden = false;
    void showLabNote();
  }
  // The documented lab credential, named while the server uses it (public route; nothing with real users).
  async function showLabNote() {
    const note = $('labNote');
    const res = await fetch('/api/auth/lab-credential').catch(() => null);
    const lab = res && res.ok ? await res.json().catch(() => null) : null;
    note.hidden = !lab || !lab.in_use;
    note.dataset.checked = lab ? 'yes' : 'failed';
    if (note.hidden) return;
    note.replaceChildren();
    const add = (text, strong) => {
      const el = document.createElement(strong ? 'code' : 'span');
      el.textContent = text;
      note.append(el);
    };
    if (lab.users.length) {
      add('Lab credential in use: user ');
      add(lab.users.join(', '), true);
      add(', password ');
      add(lab.password, true);
      add('. ');
    }
    if (lab.jwt_secret) add('The documented lab JWT secret is in use. ');
    add('Anyone can log in; change it before production use.');
  }
  function logout() {
    sessionStorage.clear();
    token = null;
    statusWs?.close();
    logsWs?.close();
    clearTimeout(retry);
    showLogin();
  }
  $('logout').addEventListener('click', logout);
  $('login').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('loginError').textContent = '';
    const res = await fetch('/api/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: $('user').value, password: $('password').value }),
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      $('loginError').textContent = body.message || `login failed (${res.status})`;
      return;
    }
    token = body.token;
    role = body.user.role;
    sessionStorage.setItem('timesvc-token', token);
    sessionStorage.setItem('timesvc-role', role);
    sessionStorage.setItem('timesvc-user', body.user.username);
    $('password').value = '';
    start();
  });

  function wsUrl(path) {
    return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;
  }

  function start() {
    $('login').hidden = true;
    $('app').hidden = false;
    $('whoami').textContent = `${sessionStorage.getItem('timesvc-user') || ''} ${role}`;
    $('admin').hidden = role !== 'admin';
    if (role === 'admin') loadConfig();
    connectStatus();
    connectLogs();
  }

  function connectStatus() {
    statusWs?.close();
    statusWs = new WebSocket(wsUrl('/api/ws/status'));
    statusWs.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === 'history') loadHistory(msg.data);
      if (msg.type === 'status') render(msg.data);
    };
    statusWs.onclose = (e) => {
      staleReason = 'connection to the server lost; reconnecting';
      checkStale();
      if (token && e.code !== 1000) retry = setTimeout(connectStatus, 2000);
    };
  }

  // Stale: no status for 3 s (or the stream closed): grey, with the reason and the age of what is shown.
  let lastStatusAt = 0;
  let staleReason = '';
  function checkStale() {
    if (!token || !lastStatusAt) return;
    const age = (Date.now() - lastStatusAt) / 1000;
    const stale = age > 3 || (statusWs && statusWs.readyState !== WebSocket.OPEN);
    $('app').classList.toggle('stale', Boolean(stale));
    $('stale').hidden = !stale;
    if (stale) {
      const why =
        statusWs && statusWs.readyState === WebSocket.OPEN ? 'no update from the server' : staleReason;
      $('stale').textContent = `STALE — ${why}; showing data from ${Math.round(age)} s ago`;
    }
  }
  setInterval(checkStale, 1000);

  // The server keeps the chart's last five minutes (one point per second): a reload starts with them.
  function loadHistory(points) {
    if (!Array.isArray(points)) return;
    history.length = 0;
    for (const p of points) history.push({ t: p.t, off: -p.offset_s, jit: p.jitter_s, err: p.error_s });
    drawChart();
  }

  function connectLogs() {
    logsWs?.close();
    $('logs').replaceChildren();
    logsWs = new WebSocket(wsUrl(`/api/ws/logs?level=${$('logLevel').value}`));
    logsWs.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type !== 'logs') return;
      const box = $('logs');
      const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      for (const e of msg.entries) {
        const d = document.createElement('div');
        d.className = e.level;
        d.dataset.seq = e.seq;
        d.textContent = `${e.timestamp.slice(11, 23)} ${e.level.padEnd(7)} ${e.component}: ${e.message}`;
        const fields = logFields(e.fields);
        if (fields) d.append(' ', fields);
        box.append(d);
      }
      while (box.childElementCount > 500) box.firstElementChild.remove();
      if (atBottom) box.scrollTop = box.scrollHeight;
    };
  }
  $('logLevel').addEventListener('change', connectLogs);
  // A log entry's fields (from/to/reason, source, offset …) as key=value after the message: they carry
  // what happened. Objects are shown as compact JSON.
  function logFields(fields) {
    if (!fields || typeof fields !== 'object') return null;
    const span = document.createElement('span');
    span.className = 'fields';
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      const key = document.createElement('b');
      key.textContent = k;
      const text = typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v);
      span.append(span.childNodes.length ? ' ' : '', key, `=${text}`);
    }
    return span.childNodes.length ? span : null;
  }

  function render(s) {
    $('banner').hidden = !s.default_credential;
    const c = s.clock;
    $('state').textContent = c.state;
    $('state').dataset.state = c.state;
    // Offsets in chronyc's sign (docs/cli.md "Signs"): served clock − reference, positive when ahead.
    $('offset').textContent = fmt(-c.offset_ns / 1e9);
    $('error').textContent =
      c.estimated_error_ns === null ? 'unsynchronised' : `± ${fmt(c.estimated_error_ns / 1e9, false)}`;
    $('stratum').textContent = s.ntp ? String(s.ntp.stratum) : '—';
    $('reference').textContent = c.active_reference || c.last_reference || 'none';
    lastStatusAt = Date.now();
    checkStale();
    const now = Date.parse(s.time);
    if (history.length && history[history.length - 1].t >= now) history.pop();
    history.push({
      t: now,
      off: -c.offset_ns / 1e9,
      jit: c.jitter_ns / 1e9,
      err: c.estimated_error_ns === null ? null : c.estimated_error_ns / 1e9,
    });
    while (history.length && history[0].t < now - WINDOW_MS) history.shift();
    drawChart();
    renderSources(s.peers || []);
    const rate = requestRate(s.ntp);
    kv(
      $('ntp'),
      s.ntp && {
        stratum: s.ntp.stratum,
        ref_id: s.ntp.ref_id,
        requests_per_s: rate,
        requests: s.ntp.request_count,
        rx_timestamps: s.ntp.rx_timestamps,
        root_delay_ms: s.ntp.root_delay_ms.toFixed(3),
        root_dispersion_ms: s.ntp.root_dispersion_ms.toFixed(3),
      },
      'NTP not enabled',
    );
    kv(
      $('nts'),
      s.nts && s.nts.running ? { ...s.nts, ke_requests_per_s: keRate(s.nts) } : null,
      'NTS not enabled',
    );
    kv($('gpsdo'), gpsdoView(s.gpsdo, Date.parse(s.time)), 'GPSDO not enabled');
    kv($('ptp'), ptpView(s.ptp), 'PTP not enabled');
    renderSky(s.gpsdo);
  }

  // The PTP panel (docs/ptp.md "Status"): the port state and why, the grandmaster the network follows (ours
  // or the better one the BMCA stepped aside for), the profile; counters after.
  const ptpView = (p) => {
    if (!p || p.message) return p;
    const gm = p.grandmaster;
    const hex = (n) => (typeof n === 'number' ? '0x' + n.toString(16) : n);
    return {
      state: p.port_state + (p.listen_only ? ' (listener)' : ''),
      why: p.state_reason || p.error,
      grandmaster: gm ? `${gm.identity}${gm.ours ? ' (this server)' : ''}` : 'none heard',
      gm_class_accuracy: gm ? `${gm.clock_class} / ${hex(gm.clock_accuracy)}` : undefined,
      gm_priority1_2: gm ? `${gm.priority1} / ${gm.priority2}` : undefined,
      ts_refclk: p.ts_refclk,
      offset_from_kernel:
        typeof p.offset_from_kernel_ns === 'number'
          ? `${(p.offset_from_kernel_ns / 1000).toFixed(1)} µs`
          : undefined,
      profile: p.profile_title || p.profile,
      domain: p.domain,
      intervals_log2: `announce ${p.log_announce_interval}, sync ${p.log_sync_interval}, delay ${p.log_min_delay_req_interval}`,
      dscp: p.dscp
        ? `event ${p.dscp.event}, general ${p.dscp.general}${p.dscp.marked ? '' : ' (not set)'}`
        : undefined,
      our_class_accuracy: `${p.clock_class} / ${hex(p.clock_accuracy)}`,
      interface: p.interface,
      delay_mechanism: p.delay_mechanism,
      timestamps: `${p.timestamping}, rx ${p.rx_timestamps}${p.tx_timestamps ? ', tx ' + p.tx_timestamps : ''}`,
      clock_id: p.clock_id,
      sync_count: p.sync_count,
      announce_count: p.announce_count,
      delay_req_count: p.delay_mechanism === 'P2P' ? p.pdelay_req_count : p.delay_req_count,
    };
  };

  // The GPSDO panel: lock duration (ns in the API, docs/gpsdo.md) as a duration people read.
  const duration = (sec) => {
    const d = Math.floor(sec / 86400);
    const h = Math.floor((sec % 86400) / 3600);
    const m = Math.floor((sec % 3600) / 60);
    const x = Math.floor(sec % 60);
    return d ? `${d} d ${h} h` : h ? `${h} h ${m} min` : m ? `${m} min ${x} s` : `${x} s`;
  };
  // Last PPS / NMEA as an age on the served clock ("0.4 s ago"): a wall of ISO stamps wraps and hides staleness.
  const ago = (iso, now) => {
    const t = iso ? Date.parse(iso) : NaN;
    return Number.isFinite(t) ? `${Math.max(0, (now - t) / 1000).toFixed(1)} s ago` : '—';
  };
  function gpsdoView(g, now) {
    if (!g || g.message || typeof g.lock_duration !== 'number') return g;
    const { lock_duration: ns, fix_mode: mode, last_pps: pps, last_nmea: nmea, ...rest } = g;
    // NMEA GSA fix modes; without a valid fix the server reports 1 (docs/gpsdo.md).
    const fix = g.fix ? (['', 'none', '2D', '3D'][mode] ?? String(mode)) : 'none';
    return {
      ...rest,
      fix,
      last_pps: ago(pps, now),
      last_nmea: ago(nmea, now),
      locked_for: g.locked ? duration(ns / 1e9) : '—',
    };
  }

  // GPS satellites as a sky plot (centre = zenith, rim = horizon, north up; filled = used in the fix) and one
  // signal bar per satellite, from /api/satellites every 5 s: a glance tells whether the antenna sees the sky.
  let skyAt = 0;
  function renderSky(gpsdo) {
    const box = $('satellites');
    if (!gpsdo || gpsdo.message) {
      skyAt = 0;
      kv(box, null, 'GPS not enabled');
      return;
    }
    if (Date.now() - skyAt < 5000) return;
    skyAt = Date.now();
    void api('GET', '/api/satellites').then((r) => {
      if (r.ok && Array.isArray(r.json)) drawSky(box, r.json);
    });
  }
  const SVG = 'http://www.w3.org/2000/svg';
  const svgEl = (name, attrs) => {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  };
  const snrClass = (snr) =>
    snr === null ? 'snr-none' : snr >= 35 ? 'snr-good' : snr >= 25 ? 'snr-fair' : 'snr-poor';
  function drawSky(box, sats) {
    box.replaceChildren();
    box.classList.add('sky-box');
    const used = sats.filter((x) => x.used).length;
    const head = document.createElement('div');
    head.className = 'sky-head';
    head.textContent = `${used} used of ${sats.length} in view`;
    const plot = svgEl('svg', { viewBox: '-110 -110 220 220', class: 'sky', role: 'img' });
    plot.append(svgEl('title', {}));
    plot.firstChild.textContent = `Sky plot: ${used} satellites used of ${sats.length} in view`;
    for (const r of [100, 66.7, 33.3]) plot.append(svgEl('circle', { cx: 0, cy: 0, r, class: 'sky-ring' }));
    plot.append(svgEl('line', { x1: 0, y1: -100, x2: 0, y2: 100, class: 'sky-ring' }));
    plot.append(svgEl('line', { x1: -100, y1: 0, x2: 100, y2: 0, class: 'sky-ring' }));
    const n = svgEl('text', { x: 0, y: -103, class: 'sky-n' });
    n.textContent = 'N';
    plot.append(n);
    for (const x of sats) {
      if (x.elevation === null || x.azimuth === null) continue;
      const r = 100 * (1 - Math.max(0, Math.min(90, x.elevation)) / 90);
      const a = (x.azimuth * Math.PI) / 180;
      const cx = r * Math.sin(a);
      const cy = -r * Math.cos(a);
      plot.append(
        svgEl('circle', { cx, cy, r: 9, class: `sky-sat ${snrClass(x.snr)}${x.used ? ' used' : ''}` }),
      );
      const t = svgEl('text', { x: cx, y: cy + 3.5, class: 'sky-prn' });
      t.textContent = String(x.prn);
      plot.append(t);
    }
    const bars = document.createElement('div');
    bars.className = 'snr-bars';
    for (const x of [...sats].sort((p, q) => p.prn - q.prn)) {
      const col = document.createElement('div');
      col.className = `snr-col${x.used ? ' used' : ''}`;
      col.title = `PRN ${x.prn}: ${x.snr === null ? 'not tracked' : `${x.snr} dB-Hz`}${x.used ? ', used' : ''}`;
      const bar = document.createElement('div');
      bar.className = `snr-bar ${snrClass(x.snr)}`;
      bar.style.height = `${Math.min(100, ((x.snr ?? 0) / 50) * 100)}%`;
      const label = document.createElement('span');
      label.textContent = String(x.prn);
      col.append(bar, label);
      bars.append(col);
    }
    box.append(head, plot, bars);
  }

  let lastReq, lastKe;
  function requestRate(ntp) {
    if (!ntp) return '—';
    const now = Date.now();
    const r = lastReq && now > lastReq.t ? (ntp.request_count - lastReq.n) / ((now - lastReq.t) / 1000) : 0;
    lastReq = { t: now, n: ntp.request_count };
    return r.toFixed(1);
  }
  function keRate(nts) {
    const now = Date.now();
    const r = lastKe && now > lastKe.t ? (nts.total_ke_requests - lastKe.n) / ((now - lastKe.t) / 1000) : 0;
    lastKe = { t: now, n: nts.total_ke_requests };
    return r.toFixed(1);
  }

  const SOURCE_LABELS = [
    '',
    'Address',
    'Stratum',
    'Reach',
    'Offset',
    'Delay',
    'Jitter',
    'LastRx',
    'Verdict',
    'NTS',
  ];
  function renderSources(peers) {
    const body = $('sources').querySelector('tbody');
    body.replaceChildren();
    if (!peers.length) {
      const tr = document.createElement('tr');
      const td = document.createElement('td');
      td.colSpan = 10;
      td.className = 'na';
      td.textContent = 'No upstream peers';
      tr.append(td);
      body.append(tr);
    }
    for (const p of peers) {
      const tr = document.createElement('tr');
      tr.dataset.address = p.address;
      if (p.selected) tr.className = 'selected';
      // chronyc's marks: * system peer, - truechimer on standby (timesvc combines none, so no +),
      // x falseticker or held back, ? unusable.
      const mark = p.selected
        ? '*'
        : !p.reachable
          ? '?'
          : p.verdict === 'candidate'
            ? '-'
            : p.verdict === 'falseticker' || p.verdict === 'held'
              ? 'x'
              : '?';
      const reach = p.reach.toString(2).padStart(8, '0').replaceAll('1', '●').replaceAll('0', '○');
      const cells = [
        mark,
        p.address,
        p.stratum,
        reach,
        fmt(p.offset_us === null ? null : -p.offset_us / 1e6),
        fmt(p.delay_us === null ? null : p.delay_us / 1e6, false),
        fmt(p.jitter_us === null ? null : p.jitter_us / 1e6, false),
        p.last_rx_age_s == null ? '—' : `${Math.round(p.last_rx_age_s)} s`,
        p.verdict_reason,
        p.nts_enabled ? 'yes' : 'no',
      ];
      cells.forEach((v, i) => {
        const td = document.createElement('td');
        td.textContent = String(v);
        // The column name, shown beside the value where the table becomes one card per source (phone).
        td.dataset.label = SOURCE_LABELS[i] ?? '';
        if (i === 0) td.className = 'mark';
        if (i === 3) td.className = 'reach';
        td.title = i === 3 ? `reach ${p.reach_octal} (octal)` : '';
        tr.append(td);
      });
      body.append(tr);
    }
  }

  function drawChart() {
    const cv = $('chart');
    const w = (cv.width = cv.clientWidth * devicePixelRatio);
    const h = (cv.height = cv.clientHeight * devicePixelRatio);
    const g = cv.getContext('2d');
    g.clearRect(0, 0, w, h);
    cv.dataset.points = String(history.length);
    if (history.length < 2) return;
    // The axis ends at the newest point (served time), so the browser's own clock does not shift it.
    const now = history[history.length - 1].t;
    let max = 1e-6;
    for (const p of history) max = Math.max(max, Math.abs(p.off) + p.jit, p.err ?? 0);
    const x = (t) => ((t - (now - WINDOW_MS)) / WINDOW_MS) * w;
    const y = (v) => h / 2 - (v / max) * (h / 2 - 10);
    g.strokeStyle = '#30363d';
    g.beginPath();
    g.moveTo(0, h / 2);
    g.lineTo(w, h / 2);
    g.stroke();
    const band = (get, colour) => {
      g.fillStyle = colour;
      g.beginPath();
      history.forEach((p, i) => (i ? g.lineTo(x(p.t), y(get(p))) : g.moveTo(x(p.t), y(get(p)))));
      for (let i = history.length - 1; i >= 0; i--) g.lineTo(x(history[i].t), y(-get(history[i])));
      g.closePath();
      g.fill();
    };
    band((p) => p.err ?? 0, 'rgba(240,136,62,0.18)');
    band((p) => p.jit, 'rgba(210,168,255,0.35)');
    g.strokeStyle = '#58a6ff';
    g.lineWidth = 2 * devicePixelRatio;
    g.beginPath();
    history.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p.off)) : g.moveTo(x(p.t), y(p.off))));
    g.stroke();
    g.fillStyle = '#8b949e';
    g.font = `${12 * devicePixelRatio}px system-ui`;
    g.fillText(`± ${fmt(max, false)}`, 6, 14 * devicePixelRatio);
  }

  async function loadConfig() {
    const r = await api('GET', '/api/config');
    $('configText').value = r.ok ? JSON.stringify(r.json, null, 2) : '';
    $('configResult').textContent = r.ok ? '' : r.json.message || `error ${r.status}`;
  }
  $('reloadConfig').addEventListener('click', loadConfig);
  $('saveConfig').addEventListener('click', async () => {
    let doc;
    try {
      doc = JSON.parse($('configText').value);
    } catch (err) {
      $('configResult').textContent = `not JSON: ${err.message}`;
      return;
    }
    const r = await api('PUT', '/api/config', doc);
    $('configResult').textContent = r.json.message || `error ${r.status}`;
  });
  $('addPeer').addEventListener('submit', async (e) => {
    e.preventDefault();
    const r = await api('POST', '/api/config/ntp/peers', {
      address: $('peerAddress').value.trim(),
      prefer: $('peerPrefer').checked,
    });
    $('configResult').textContent = r.json.message || `error ${r.status}`;
    if (r.ok) {
      $('peerAddress').value = '';
      loadConfig();
    }
  });

  if (token) start();
  else showLogin();
})();
