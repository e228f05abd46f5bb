// Shared helpers of the Punch pages (README "Operator console"): plain browser JavaScript modules, no build.

/** `el('div', {class: 'x'}, child, …)`: an element with attributes and children (null children skipped). */
export const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};

/** Set an element's text only when it changed (no layout work, no lost selection for equal text). */
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** Set a class list only when it changed. */
export function setClass(node, className) {
  if (node.className !== className) node.className = className;
}

/**
 * Copy `text`: the Clipboard API where the page may use it, else a selected, off-screen textarea and
 * `execCommand('copy')` (phones and browsers that refuse the API). Resolves true when a copy happened.
 */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the selection copy
  }
  const area = el('textarea', { class: 'offscreen', readonly: '', 'aria-hidden': 'true' });
  area.value = text;
  document.body.append(area);
  area.select();
  area.setSelectionRange(0, text.length);
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A Copy button for `text` (a function is read at click time): says Copied, or how to copy by hand. */
export function copyButton(text) {
  const b = el('button', { class: 'small', type: 'button' }, 'Copy');
  b.addEventListener('click', async () => {
    const ok = await copyText(typeof text === 'function' ? text() : text);
    b.textContent = ok ? 'Copied' : 'Select and copy';
    setTimeout(() => (b.textContent = 'Copy'), 2000);
  });
  return b;
}

/**
 * The page's token and where it came from. The operator's admin token travels in the fragment (`#t=`),
 * which browsers never send to a server; a peer's join link keeps `?t=` (README "Operator console").
 */
export function pageToken() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('t');
  if (fromHash) return { token: fromHash, from: 'hash' };
  const fromQuery = new URLSearchParams(location.search).get('t');
  return fromQuery ? { token: fromQuery, from: 'query' } : { token: '', from: 'none' };
}

/** The claims of a token, unverified (the broker verifies it on every request): role and stream only. */
export function claimsOf(token) {
  const m = /^p_([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+$/.exec(token);
  if (!m) return null;
  try {
    const json = atob(m[1].replace(/-/g, '+').replace(/_/g, '/'));
    const c = JSON.parse(json);
    return c && typeof c === 'object' ? c : null;
  } catch {
    return null;
  }
}

/** The page once its session is closed: `children` say what happened and what to do; the badge says CLOSED. */
export function showClosed(...children) {
  document
    .getElementById('app')
    .replaceChildren(el('section', { class: 'card' }, el('h2', {}, 'Session closed'), ...children));
  const state = document.getElementById('state');
  setText(state, 'CLOSED');
  setClass(state, 'badge CLOSED');
}

/** The session view of a GET answer: 'closed' for 410 (the session is gone), null when not usable. */
export async function viewOf(r) {
  if (r.status === 410) return 'closed';
  return r.ok ? r.json() : null;
}

/** Session name from the page path `/s/<name>`. */
export const sessionName = () => decodeURIComponent(location.pathname.split('/')[2] || '');

/** `12 s`, `4 min 05 s`: an age for the operator. */
export function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}
