// How the console gets the operator's attention when a health alarm is raised (docs/health.md "Alarms"):
// a beep (Web Audio; browsers start audio only after a user gesture, so the operator turns it on with a
// button) and a browser notification (once the operator granted the permission, asked for with a button).
import { el, setText } from './dom.js';

/** Three short beeps on an AudioContext that a click created (autoplay rules: a gesture first). */
function beep(ctx) {
  const t0 = ctx.currentTime + 0.02;
  const osc = ctx.createOscillator();
  const gain = ctx.createGain();
  osc.type = 'square';
  osc.frequency.value = 880;
  gain.gain.setValueAtTime(0, t0);
  for (let i = 0; i < 3; i++) {
    gain.gain.setValueAtTime(0.15, t0 + i * 0.25);
    gain.gain.setValueAtTime(0, t0 + i * 0.25 + 0.15);
  }
  osc.connect(gain).connect(ctx.destination);
  osc.start(t0);
  osc.stop(t0 + 0.8);
}

/**
 * The header's alarm controls and `raise(title, body, tag)`, called once per raised alarm: beeps when the
 * sound is on, notifies when permitted. Returns the controls' element.
 */
export function alarmNotifier() {
  let ctx = null;
  const sound = el(
    'button',
    { type: 'button', class: 'small', 'aria-pressed': 'false', 'data-testid': 'alarm-sound' },
    'Enable alarm sound',
  );
  sound.addEventListener('click', async () => {
    if (ctx) {
      await ctx.close().catch(() => undefined);
      ctx = null;
    } else {
      const Ctx = globalThis.AudioContext || globalThis.webkitAudioContext;
      if (!Ctx) {
        setText(sound, 'No sound in this browser');
        sound.disabled = true;
        return;
      }
      ctx = new Ctx();
      beep(ctx); // what the alarm sounds like, and proof that it can play
    }
    sound.setAttribute('aria-pressed', String(Boolean(ctx)));
    setText(sound, ctx ? 'Alarm sound on' : 'Enable alarm sound');
  });

  const notify = el('button', { type: 'button', class: 'small', 'data-testid': 'alarm-notify' });
  const paintNotify = () => {
    if (!('Notification' in globalThis)) {
      setText(notify, 'No notifications (needs HTTPS)');
      notify.disabled = true;
      return;
    }
    const p = Notification.permission;
    setText(
      notify,
      p === 'granted' ? 'Notifications on' : p === 'denied' ? 'Notifications blocked' : 'Allow notifications',
    );
    notify.disabled = p !== 'default';
  };
  notify.addEventListener('click', async () => {
    await Notification.requestPermission().catch(() => undefined);
    paintNotify();
  });
  paintNotify();

  const raise = (title, body, tag) => {
    if (ctx) beep(ctx);
    if ('Notification' in globalThis && Notification.permission === 'granted') {
      try {
        new Notification(title, { body, tag });
      } catch {
        // a browser that allows notifications only from a service worker (Android): the row and beep remain
      }
    }
  };
  return { root: el('span', { class: 'alarm-tools' }, sound, notify), raise };
}
