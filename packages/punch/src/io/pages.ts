import QRCode from 'qrcode';

/**
 * Minimal session pages: a mobile-first join page and an SVG QR code (README "Pages"). The page never
 * embeds the passphrase. A peer token's page shows the QR with that token for the device running the
 * encoder; an admin token's page shows no token-bearing QR and explains how to issue peer tokens.
 */
function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

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
      body = `<p>Ask the session's operator for a link with an access token (<code>?t=…</code>) to join.</p>`;
      break;
  }
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width,initial-scale=1"><title>${title}</title>` +
    `<style>body{font-family:system-ui,sans-serif;margin:1rem;max-width:40rem}img{max-width:100%}</style>` +
    `</head><body><h1>${title}</h1>${body}</body></html>`
  );
}

export async function renderQrSvg(text: string): Promise<string> {
  return QRCode.toString(text, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
}
