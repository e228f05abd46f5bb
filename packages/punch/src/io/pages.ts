import { readFileSync } from 'node:fs';

/**
 * Minimal session pages: a mobile-first join page and an SVG QR code (README "Pages"). The page never
 * embeds the passphrase. A peer token's page shows the QR with that token for the device running the
 * encoder; an admin token's page shows no token-bearing QR and explains how to issue peer tokens.
 */
function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const JOIN_HINT =
  `<p>This page needs the link the session's operator gave you: it ends in <code>?t=…</code> (an ` +
  `access token). Ask the operator to issue a peer token for your stream in the Punch console and ` +
  `send you its join link or QR code.</p>`;

export type PageView =
  { kind: 'join' } | { kind: 'closed' } | { kind: 'admin' } | { kind: 'peer'; token: string };

export function renderSessionPage(name: string, view: PageView): string {
  const title = `Punch session ${escapeHtml(name)}`;
  const path = `/s/${encodeURIComponent(name)}`;
  let body: string;
  switch (view.kind) {
    case 'closed':
      body = `<p>Session <b>${escapeHtml(name)}</b> is closed or expired. Ask its operator for a new link.</p>`;
      break;
    case 'admin':
      body =
        `<p>This link carries the session's <b>admin</b> token: keep it to yourself. Do not give it to an ` +
        `encoder or an operator: it can close the session and read the passphrase.</p>` +
        `<p>For each encoder, issue a peer token (<code>POST /api/session/${escapeHtml(name)}/token</code> ` +
        `with <code>{"stream": "…"}</code>) and share the <code>url</code> or <code>qr</code> it returns.</p>`;
      break;
    case 'peer':
      body =
        `<p>You hold a peer token for this session. Start the Punch peer client with this page's URL, or ` +
        `scan the QR code with the device that runs the SRT encoder.</p>` +
        `<img alt="QR code of this page" src="${path}/qr?t=${encodeURIComponent(view.token)}" width="240" height="240">`;
      break;
    case 'join':
      // The same page serves the operator's console link (`#t=<admin>`, a fragment the server never sees):
      // operator.js replaces this text with the console when the fragment holds an admin token.
      return renderConsole(name, '', `<section class="card">${JOIN_HINT}</section>`);
  }
  // The console's stylesheet, never an inline style: the page's CSP allows styles from this origin only.
  return shell(
    `Punch session ${name}`,
    `<header><h1>${title}</h1></header><main><section class="card">${body}</section></main>`,
  );
}

/**
 * The QR encoder (and its PNG writer) loads on the first QR code asked for, not at start: an idle broker
 * never draws one (docs/at-rest.md).
 */
let qrcode: Promise<typeof import('qrcode')> | undefined;
async function loadQrCode(): Promise<typeof import('qrcode')> {
  qrcode ??= import('qrcode').then((m) => m.default);
  return qrcode;
}

export async function renderQrSvg(text: string): Promise<string> {
  const QRCode = await loadQrCode();
  return QRCode.toString(text, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
}

/** The console's static files (plain JS and CSS, no build step), read once at start. */
export const ASSETS: Record<string, { type: string; body: string }> = Object.fromEntries(
  (
    [
      ['console.js', 'text/javascript; charset=utf-8'],
      ['operator.js', 'text/javascript; charset=utf-8'],
      ['dom.js', 'text/javascript; charset=utf-8'],
      ['lifetime.js', 'text/javascript; charset=utf-8'],
      ['create.js', 'text/javascript; charset=utf-8'],
      ['health-graph.js', 'text/javascript; charset=utf-8'],
      ['health-view.js', 'text/javascript; charset=utf-8'],
      ['alarm-notify.js', 'text/javascript; charset=utf-8'],
      ['tally-light.js', 'text/javascript; charset=utf-8'],
      ['console.css', 'text/css; charset=utf-8'],
    ] as const
  ).map(([file, type]) => [
    file,
    { type, body: readFileSync(new URL(`./console/${file}`, import.meta.url), 'utf8') },
  ]),
);

/** Pages load scripts and styles from this origin only; the console talks to this origin's API and WebSocket. */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

function shell(title: string, body: string, role = ''): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title>` +
    `<link rel="stylesheet" href="/assets/console.css"></head><body data-role="${role}">${body}</body></html>`
  );
}

/** The loopback base URL note (src/io/join-steps.ts) as a paragraph, or nothing. */
const baseNote = (note: string | undefined): string =>
  note ? `<p class="warn-note" data-testid="base-url-note">${escapeHtml(note)}</p>` : '';

/** `GET /`: create a session (name, streams, latency, TTL) and land on its console. */
export function renderCreatePage(note?: string): string {
  return shell(
    'Punch: new SRT session',
    `<header><h1>Punch: new SRT session</h1></header>` +
      baseNote(note) +
      `<form class="create" id="create">` +
      `<label for="name">Session name</label><input id="name" name="name" required maxlength="64" pattern="[A-Za-z0-9._~\\-]+" placeholder="e.g. match-day-cam1" autocomplete="off">` +
      `<label for="streams">Streams (comma-separated, optional)</label><input id="streams" name="streams" placeholder="e.g. cam-1, cam-2">` +
      `<label for="latency">SRT latency (ms)</label><input id="latency" name="latency" type="number" min="20" max="8000" value="200">` +
      `<label for="ttl">Lifetime (minutes)</label><input id="ttl" name="ttl" type="number" min="1" max="1440" value="30">` +
      `<p><button type="submit">Create session</button></p><p id="result" role="status"></p>` +
      `<p class="muted">The console that opens holds the session's admin token in its address (after <code>#</code>, ` +
      `a part the browser never sends to a server): keep that link to yourself and invite each device with a ` +
      `peer token from the console.</p></form>` +
      `<script src="/assets/create.js"></script>`,
  );
}

/**
/**
 * `GET /s/<name>?t=…` with a valid token: the console (admin, operator.js) or the join page (peer,
 * console.js); data over the API. Role '' is the page without a token in the query: the join hint, and the
 * console once operator.js finds an admin token in the fragment. `extra.note` (the base-URL note) goes on
 * the admin's page; `extra.joinSteps` (a peer's page, src/io/join-steps.ts) into a `<template>` the page
 * script shows.
 */
export function renderConsole(
  name: string,
  role: 'admin' | 'peer' | '',
  content = '',
  extra: { note?: string | undefined; joinSteps?: string | undefined } = {},
): string {
  return shell(
    `Punch ${name}`,
    `<header><h1>${escapeHtml(name)}</h1><span id="state" class="badge" hidden>…</span>` +
      `<span id="live" class="live" hidden>connecting…</span>` +
      `<span id="expires" class="muted"></span><span id="session-tools" class="session-tools"></span></header>` +
      (role === 'admin' ? baseNote(extra.note) : '') +
      (extra.joinSteps ? `<template id="join-steps">${extra.joinSteps}</template>` : '') +
      `<div id="conn" class="conn" role="status" hidden></div>` +
      `<div id="lifetime" class="lifetime" hidden><span id="lifetime-text"></span></div>` +
      `<main id="app">${content}</main>` +
      `<script type="module" src="/assets/${role === 'peer' ? 'console' : 'operator'}.js"></script>`,
    role,
  );
}

/** `GET /s/<name>` for a name that has no live or recently closed session. */
export function renderUnknown(name: string): string {
  return shell(
    'Punch: no such session',
    `<header><h1>No session "${escapeHtml(name)}"</h1></header><main><section class="card">` +
      `<p>There is no session of this name on this broker (it may have expired long ago, or the link is ` +
      `mistyped).</p><p><a href="/">Create a session</a></p></section></main>`,
  );
}

export async function renderQrPng(text: string): Promise<Buffer> {
  const QRCode = await loadQrCode();
  return QRCode.toBuffer(text, { type: 'png', errorCorrectionLevel: 'M', margin: 2, width: 360 });
}
