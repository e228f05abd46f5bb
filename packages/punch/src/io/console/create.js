// Punch start page: create a session and open its console with the admin token (README "Operator console").
'use strict';

const form = document.getElementById('create');
const out = document.getElementById('result');
form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const data = new FormData(form);
  const streams = String(data.get('streams') || '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const body = {
    name: String(data.get('name') || '').trim(),
    ...(streams.length ? { streams } : {}),
    latency: Number(data.get('latency')),
    ttl: Number(data.get('ttl')) * 60,
  };
  out.textContent = 'Creating…';
  const r = await fetch('/api/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await r.json().catch(() => ({}));
  if (r.status !== 201) {
    out.textContent = json.message || `The broker refused (${r.status}).`;
    out.className = 'error';
    return;
  }
  // The admin token goes in the fragment: browsers never send it to a server (README "Operator console").
  location.assign(`/s/${encodeURIComponent(json.session)}#t=${encodeURIComponent(json.token)}`);
});
