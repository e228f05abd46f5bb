// Navigation page: polls /health every 5 s.
const status = document.getElementById('status');
const summary = document.getElementById('summary');
const protocols = document.getElementById('protocols');

async function poll() {
  try {
    const res = await fetch('health', { cache: 'no-store' });
    const h = await res.json();
    status.textContent = h.status.toUpperCase();
    status.className = 'state ' + (h.status === 'healthy' ? 'stop' : 'stale');
    status.dataset.status = h.status;
    summary.textContent = `${h.devices.connected} of ${h.devices.total} devices connected · version ${h.version} · up ${Math.round(h.uptime)} s`;
    const p = h.protocols;
    protocols.textContent = `WebSocket clients ${p.websocket.clients} · Ember+ ${p.emberPlus.running ? 'on port ' + p.emberPlus.port : 'not running'} · TSL UMD ${p.tslUmd.running ? p.tslUmd.destinations + ' destination(s)' : p.tslUmd.enabled ? 'not running' : 'no destinations'}`;
  } catch {
    status.textContent = 'UNREACHABLE';
    status.className = 'state stale';
    status.dataset.status = 'unreachable';
  }
}
poll();
setInterval(poll, 5000);
