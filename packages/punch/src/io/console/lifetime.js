// The lifetime bar of the Punch pages (README "Lifetime"), built once and updated in place every second.
import { el, setClass, setText } from './dom.js';

/** Warn this long before the session's expiry. */
const WARN_MS = 5 * 60_000;

const mmss = (ms) =>
  `${Math.floor(ms / 60_000)}:${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')}`;

/**
 * The expiry, a warning in the last five minutes, the overtime note past the TTL, and (admin) an Extend
 * button (PATCH, one hour from now). `o`: {admin, getView, isClosed, extend: () => Promise<string|null>}
 * where `extend` answers null on success or the reason it failed. Returns `update`, called on every view.
 */
export function lifetimeBar(o) {
  const bar = document.getElementById('lifetime');
  const text = document.getElementById('lifetime-text');
  let extendButton = null;
  const update = () => {
    const view = o.getView();
    if (!view) return;
    const left = view.expiresAt - Date.now();
    const at = new Date(view.expiresAt).toLocaleTimeString();
    setText(document.getElementById('expires'), `expires ${at}`);
    if (o.isClosed()) {
      bar.hidden = true;
      return;
    }
    let message = `Session expires at ${at}.`;
    let level = '';
    if (view.overtime || left <= 0) {
      message =
        'Past its lifetime: the running links stay up while media flows, but nobody new can join. Extend it to invite again.';
      level = 'warn';
    } else if (left <= WARN_MS) {
      message = `Session ends in ${mmss(left)} (at ${at}): running links stay up while media flows, but nobody new can join after that.`;
      level = 'warn';
    }
    bar.hidden = !o.admin && level === '';
    setClass(bar, `lifetime ${level}`.trim());
    setText(text, message);
    if (o.admin && !extendButton) {
      extendButton = el('button', { type: 'button', class: 'small', 'data-testid': 'extend' }, 'Extend 1 h');
      extendButton.addEventListener('click', async () => {
        const failed = await o.extend();
        if (failed === null) update();
        else text.textContent = `Extend failed: ${failed}`;
      });
      bar.append(extendButton);
    }
  };
  setInterval(update, 1000);
  return update;
}
