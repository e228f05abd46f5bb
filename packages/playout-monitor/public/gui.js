// One device fullscreen; ?device=<index> (0-based, default 0); ArrowLeft/ArrowRight cycle devices.
import { connectMonitor, staleReason, formatRemaining, stateClass, STATE_LABEL } from './app.js';

const params = new URLSearchParams(location.search);
let index = Math.max(0, Number.parseInt(params.get('device') ?? '0', 10) || 0);
let last = [];
const $ = (id) => document.getElementById(id);

function render() {
  const full = $('full');
  const d = last[index];
  full.dataset.index = String(index);
  if (!d) {
    full.className = 'full offline';
    full.dataset.device = '';
    $('name').textContent = last.length ? `No device ${index}` : 'Waiting for the monitor…';
    $('state').textContent = '—';
    $('state').className = 'state offline';
    $('tc').textContent = '--:--:--:--';
    $('file').textContent = '';
    $('badges').replaceChildren();
    return;
  }
  const cls = stateClass(d);
  full.className = `full ${cls}`;
  full.dataset.device = String(d.id);
  full.dataset.state = d.state;
  full.dataset.stale = String(d.isStale);
  $('name').textContent = d.name;
  $('state').textContent = d.isStale ? 'NO DATA' : STATE_LABEL[d.state];
  $('state').className = `state ${cls}`;
  const badges = [];
  if (d.isStale)
    badges.push(Object.assign(document.createElement('span'), { className: 'badge', textContent: 'STALE' }));
  if (d.simulated)
    badges.push(
      Object.assign(document.createElement('span'), { className: 'badge sim', textContent: 'SIMULATED' }),
    );
  $('badges').replaceChildren(...badges);
  $('tc').textContent = d.timecode;
  $('file').textContent = d.state === 'offline' && !d.filename ? 'NO SIGNAL' : d.filename || '\u2014';
  const hasBar = d.durationMs > 0 && d.positionMs !== undefined;
  $('progress').hidden = !hasBar;
  if (hasBar) $('bar').style.width = `${Math.min(100, (100 * d.positionMs) / d.durationMs)}%`;
  $('remaining').textContent = d.remainingMs !== undefined ? `\u2212${formatRemaining(d.remainingMs)}` : '';
  $('reason').textContent = staleReason(d);
}

function go(step) {
  if (last.length === 0) return;
  index = (index + step + last.length) % last.length;
  const url = new URL(location.href);
  url.searchParams.set('device', String(index));
  history.replaceState(null, '', url);
  render();
}

document.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowRight') go(1);
  else if (e.key === 'ArrowLeft') go(-1);
});

connectMonitor((devices) => {
  last = devices;
  render();
});
