import QRCode from 'qrcode';

/**
 * Minimal session pages (spec "Pages": behaviour not shown; reference §1.2 "Pages"). A mobile-first join
 * page and an SVG QR code. The page never embeds the passphrase; with a valid `?t=` it tells the operator
 * that the token in the URL is the credential to hand to the peer client.
 */
function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function renderSessionPage(name: string, token: string | undefined, exists: boolean): string {
  const title = `Punch session ${escapeHtml(name)}`;
  const body = !exists
    ? `<p>No live session named <b>${escapeHtml(name)}</b>. It may have been closed or expired.</p>`
    : token
      ? `<p>You hold an access token for this session. Start the Punch peer client with this page's URL, or ` +
        `scan the QR code with the device that runs the SRT encoder.</p>` +
        `<img alt="QR code of this page" src="/s/${encodeURIComponent(name)}/qr?t=${encodeURIComponent(token)}" width="240" height="240">`
      : `<p>Ask the session's operator for a link with an access token (<code>?t=…</code>) to join.</p>`;
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
