// Control page: add, modify and remove devices, test connections, simulate states (README "Control API").
import { connectMonitor, el, STATE_LABEL } from './app.js';

const $ = (id) => document.getElementById(id);
const tokenInput = $('token');
// The monitor prints the control page's URL with `#token=…` once, at first start: take it from the
// fragment (never sent to a server), keep it for this tab, and remove it from the address bar.
const fromFragment = new URLSearchParams(location.hash.slice(1)).get('token');
if (fromFragment) {
  sessionStorage.setItem('playoutAdminToken', fromFragment);
  history.replaceState(null, '', location.pathname + location.search);
}
tokenInput.value = sessionStorage.getItem('playoutAdminToken') ?? '';
tokenInput.addEventListener('change', () => sessionStorage.setItem('playoutAdminToken', tokenInput.value));
let config = { servers: [] };
let live = new Map();

function show(text, ok = true) {
  const r = $('result');
  r.textContent = text;
  r.dataset.ok = String(ok);
}

/** A refusal in words an operator can act on. */
function explain(status, data, text) {
  const message = data?.message ?? text;
  switch (data?.error) {
    case 'UNAUTHORIZED':
      return 'The admin token was refused. Enter the token the monitor printed at its first start (also in admin-token in its data directory).';
    case 'STORAGE_FULL':
      return `Not saved: the monitor's disk is full. Nothing was changed. (${message})`;
    case 'CONFIG_WRITE_FAILED':
      return `Not saved: the configuration file could not be written. Nothing was changed. (${message})`;
    case 'CONFIG_INVALID':
    case 'INVALID_REQUEST':
      return `Not accepted: ${message}`;
    case 'DEVICE_CONFLICT':
      return `Refused: ${message}. Nothing was changed.`;
    case 'HOST_NOT_ALLOWED':
      return `Refused: open the control page through an address the monitor answers to. (${message})`;
    default:
      return `Error ${status}: ${message}`;
  }
}

async function api(method, path, body) {
  const headers = body === undefined ? {} : { 'content-type': 'application/json' };
  if (tokenInput.value) headers.authorization = `Bearer ${tokenInput.value}`;
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw new Error(explain(res.status, data, text));
  return data;
}

async function load() {
  config = await api('GET', 'api/config');
  render();
}

function render() {
  const tbody = $('devices').querySelector('tbody');
  tbody.replaceChildren(
    ...config.servers.map((s) => {
      const d = live.get(s.id);
      const state = d
        ? (d.isStale ? 'STALE' : STATE_LABEL[d.state]) + (d.simulated ? ' (simulated)' : '')
        : '';
      return el(
        'tr',
        { 'data-device': String(s.id) },
        el('td', {}, String(s.id)),
        el('td', {}, s.name),
        el('td', {}, s.type),
        el('td', {}, `${s.ip}:${s.port ?? config.settings.defaultPorts[s.type]}`),
        el('td', { class: 'live-state' }, state),
        el(
          'td',
          {},
          el('button', { type: 'button', 'data-action': 'test', onclick: () => test(s.id) }, 'Test'),
          el('button', { type: 'button', 'data-action': 'edit', onclick: () => edit(s) }, 'Edit'),
          el('button', { type: 'button', 'data-action': 'remove', onclick: () => remove(s.id) }, 'Remove'),
        ),
      );
    }),
  );
  const sel = $('simDevice');
  const chosen = sel.value;
  sel.replaceChildren(
    ...config.servers.map((s) => el('option', { value: String(s.id) }, `${s.id} ${s.name}`)),
  );
  if (chosen) sel.value = chosen;
}

/** Show only the options of the chosen device kind. */
function showOptions() {
  for (const f of document.querySelectorAll('fieldset[data-for]'))
    f.hidden = f.dataset.for !== $('type').value;
}
$('type').addEventListener('change', showOptions);

/** `"20, 30"` → [20, 30]; anything else is sent as typed, so the monitor names what is wrong. */
function layerList(text) {
  const parts = text.split(',').map((p) => p.trim());
  return parts.map((p) => (/^-?\d+$/.test(p) ? Number(p) : p));
}

function entryFromForm() {
  const entry = { name: $('name').value.trim(), type: $('type').value, ip: $('ip').value.trim() };
  if ($('port').value) entry.port = Number($('port').value);
  if (entry.type === 'osc_player') {
    if ($('channel').value) entry.channel = Number($('channel').value);
    if ($('layer').value) entry.layer = Number($('layer').value);
    if ($('layers').value.trim()) entry.layers = layerList($('layers').value);
    if ($('videoFormat').value.trim()) entry.videoFormat = $('videoFormat').value.trim();
  } else if (entry.type === 'http_mixer') {
    if ($('username').value) entry.username = $('username').value;
    // Empty = keep the saved password (the monitor never sends it back).
    if ($('password').value) entry.password = $('password').value;
  }
  return entry;
}

function testResult(label, r) {
  const why = r.ok ? 'OK' : `FAILED${r.cause ? ` (${r.cause})` : ''}`;
  show(`${label}: ${why}, ${r.detail} (${r.latencyMs} ms)`, r.ok);
}

function edit(s) {
  $('editId').value = String(s.id);
  $('formTitle').textContent = `Modify device ${s.id}`;
  $('name').value = s.name;
  $('type').value = s.type;
  $('ip').value = s.ip;
  $('port').value = s.port ?? '';
  $('channel').value = s.channel ?? '';
  $('layer').value = s.layer ?? '';
  $('layers').value = (s.layers ?? []).join(', ');
  $('videoFormat').value = s.videoFormat ?? '';
  $('username').value = s.username ?? '';
  $('password').value = '';
  $('password').placeholder = s.password ? '(saved; type to change)' : '';
  showOptions();
  $('cancelEdit').hidden = false;
}

function resetForm() {
  $('deviceForm').reset();
  $('editId').value = '';
  $('formTitle').textContent = 'Add a device';
  $('cancelEdit').hidden = true;
  showOptions();
}

$('cancelEdit').addEventListener('click', resetForm);
showOptions();

$('deviceForm').addEventListener('submit', async (e) => {
  e.preventDefault();
  const id = $('editId').value;
  try {
    if (id) {
      const current = config.servers.find((s) => String(s.id) === id) ?? {};
      const entry = { ...entryFromForm() };
      // Keep the type-specific options when the type is unchanged.
      const body = current.type === entry.type ? { ...current, ...entry } : { ...entry };
      if (!entry.port) delete body.port;
      if (entry.type === 'osc_player' && !entry.layers) delete body.layers;
      await api('PUT', `api/devices/${id}`, body);
      show(`Device ${id} saved and applied`);
    } else {
      const saved = await api('POST', 'api/devices', entryFromForm());
      show(`Device ${saved.id} added and applied`);
    }
    resetForm();
    await load();
  } catch (err) {
    show(err.message, false);
  }
});

async function test(id) {
  show(`Testing device ${id}…`);
  try {
    const r = await api('POST', `api/devices/${id}/test`, {});
    testResult(`Device ${id}`, r);
  } catch (err) {
    show(err.message, false);
  }
}

$('testNew').addEventListener('click', async () => {
  const entry = entryFromForm();
  show(`Testing ${entry.ip}…`);
  try {
    const r = await api('POST', 'api/test', {
      type: entry.type,
      ip: entry.ip,
      ...(entry.port ? { port: entry.port } : {}),
      ...(entry.username !== undefined ? { username: entry.username } : {}),
      ...(entry.password !== undefined ? { password: entry.password } : {}),
    });
    testResult(entry.ip, r);
  } catch (err) {
    show(err.message, false);
  }
});

async function remove(id) {
  if (!confirm(`Remove device ${id}?`)) return;
  try {
    await api('DELETE', `api/devices/${id}`);
    show(`Device ${id} removed`);
    await load();
  } catch (err) {
    show(err.message, false);
  }
}

$('simForm').addEventListener('submit', async (e) => {
  e.preventDefault();
  const id = $('simDevice').value;
  const body = { state: $('simState').value };
  if ($('simFile').value) body.filename = $('simFile').value;
  if ($('simSeconds').value) body.durationSec = Number($('simSeconds').value);
  try {
    await api('POST', `api/devices/${id}/simulate`, body);
    show(`Device ${id}: simulating ${body.state}`);
  } catch (err) {
    show(err.message, false);
  }
});

$('simEnd').addEventListener('click', async () => {
  const id = $('simDevice').value;
  try {
    await api('DELETE', `api/devices/${id}/simulate`);
    show(`Device ${id}: simulation ended`);
  } catch (err) {
    show(err.message, false);
  }
});

connectMonitor((devices) => {
  live = new Map(devices.map((d) => [d.id, d]));
  for (const row of document.querySelectorAll('#devices tbody tr')) {
    const d = live.get(Number(row.dataset.device));
    const cell = row.querySelector('.live-state');
    if (cell)
      cell.textContent = d
        ? (d.isStale ? 'STALE' : STATE_LABEL[d.state]) + (d.simulated ? ' (simulated)' : '')
        : '';
  }
});
load().catch((err) => show(err.message, false));
