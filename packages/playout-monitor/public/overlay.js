// Transparent overlay. Parameters: device (index, default 0); position (bottom-left, bottom-right,
// top-left, top-right; default bottom-left); opacity (0–1, default 0.85); fadeTimeout (seconds of stale
// data before the box fades, 0 disables; default 3).
import { connectMonitor, stateClass, STATE_LABEL } from './app.js';

const params = new URLSearchParams(location.search);
const index = Math.max(0, Number.parseInt(params.get('device') ?? '0', 10) || 0);
const POSITIONS = ['bottom-left', 'bottom-right', 'top-left', 'top-right'];
const position = POSITIONS.includes(params.get('position')) ? params.get('position') : 'bottom-left';
const rawOpacity = Number.parseFloat(params.get('opacity') ?? '0.85');
const opacity = Number.isFinite(rawOpacity) ? Math.min(1, Math.max(0, rawOpacity)) : 0.85;
const rawFade = Number.parseFloat(params.get('fadeTimeout') ?? '3');
const fadeTimeoutMs = Number.isFinite(rawFade) && rawFade >= 0 ? rawFade * 1000 : 3000;

const box = document.getElementById('box');
box.style.opacity = String(opacity);
box.dataset.position = position;
let staleSince; // performance.now() when the shown data became stale
const FADED_FRACTION = 0.35;

connectMonitor((devices, link) => {
  const d = devices[index];
  const $ = (id) => document.getElementById(id);
  let cls;
  let stale;
  if (!d) {
    $('name').textContent = 'No device';
    $('tc').textContent = '--:--:--:--';
    $('st').textContent = '';
    $('file').textContent = '';
    cls = 'offline';
    stale = devices.length === 0; // nothing from the monitor yet
  } else {
    cls = stateClass(d);
    stale = d.isStale;
    $('name').textContent = d.name;
    $('tc').textContent = d.timecode;
    $('st').replaceChildren();
    if (d.state === 'rec' && !stale)
      $('st').append(Object.assign(document.createElement('span'), { className: 'rec-dot' }));
    $('st').append(stale ? 'STALE' : STATE_LABEL[d.state]);
    $('file').textContent = d.filename;
  }
  box.className = `${position} ${cls}`;
  if (stale) staleSince ??= performance.now();
  else staleSince = undefined;
  // Fade when the device's data has been stale (the server's judgement, from the age of the device's own
  // data) for fadeTimeout, or when the link to the monitor is down. Message arrival alone never fades the
  // box: a steady device sends nothing between heartbeats, whatever fadeTimeout says.
  const faded =
    fadeTimeoutMs > 0 &&
    (!link.linkUp || (staleSince !== undefined && performance.now() - staleSince >= fadeTimeoutMs));
  // Faded is relative to the configured opacity (a third of it), never brighter than the box itself.
  box.style.opacity = String(faded ? opacity * FADED_FRACTION : opacity);
  box.classList.toggle('faded', faded);
  box.dataset.state = d ? d.state : 'none';
  box.dataset.stale = String(stale);
});
