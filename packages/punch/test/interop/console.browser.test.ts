import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import jsQR from 'jsqr';
import { repoRoot, requireTool } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { startTestServer } from '../helpers.ts';
import { connect, type WsClient } from '../ws-helpers.ts';

/**
 * The operator console in Debian's chromium (playwright-core): create a session through `/`, watch two
 * peers appear (signalling clients that register, report `connected` and send health as `punch agent`
 * does), the state become CONNECTED and the health update with a verdict, copy a connection string, issue
 * a peer token with its QR, close the session. A console error or CSP violation fails the test. The
 * screenshots are kept in .tmp/punch-console/ of the repository.
 */
const OUT = join(repoRoot, '.tmp/punch-console');

// jsqr's type declarations do not resolve under this project's module settings: its documented signature.
const decodeQr = jsQR as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

/** PNG → RGBA with ffmpeg (size from the IHDR chunk, PNG spec §11.2.2), then jsqr. */
function decodePng(buf: Buffer): string | undefined {
  const width = buf.readUInt32BE(16);
  const height = buf.readUInt32BE(20);
  const rgba = execFileSync(
    'ffmpeg',
    ['-v', 'error', '-f', 'png_pipe', '-i', '-', '-f', 'rawvideo', '-pix_fmt', 'rgba', '-'],
    {
      input: buf,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  assert.equal(rgba.length, width * height * 4);
  return decodeQr(new Uint8ClampedArray(rgba), width, height)?.data;
}

test('QR: the PNG encodes the page URL, with t= only for a valid peer token', async () => {
  requireTool('ffmpeg');
  const t = await startTestServer();
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'qr-1' } })).json;
    const peer = (await t.call('POST', '/api/session/qr-1/token', { token: s.token, body: {} })).json.token;
    const png = async (q: string) => {
      const r = await fetch(`${t.url}/s/qr-1/qr?format=png${q}`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'image/png');
      return decodePng(Buffer.from(await r.arrayBuffer()));
    };
    const page = `${t.url.replace('127.0.0.1', 'localhost')}/s/qr-1`;
    const bare = await png('');
    assert.ok(bare?.endsWith('/s/qr-1'), bare);
    assert.equal(new URL(bare ?? '').pathname, new URL(page).pathname);
    assert.equal(await png(`&t=${encodeURIComponent(s.token)}`), bare, 'never an admin token in a QR');
    assert.equal(await png(`&t=${encodeURIComponent(`${peer}x`)}`), bare, 'an invalid token is left out');
    assert.equal(await png(`&t=${encodeURIComponent(peer)}`), `${bare}?t=${encodeURIComponent(peer)}`);
  } finally {
    await t.close();
  }
});

test('console: create, two peers, CONNECTED, health verdict, copy, peer token with QR, close', async () => {
  mkdirSync(OUT, { recursive: true });
  const t = await startTestServer({ signalling: { healthReportMs: 0 } });
  const browser = await launchChromium();
  const peers: WsClient[] = [];
  try {
    const context = await browser.newContext({ viewport: { width: 412, height: 915 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
    const page = await context.newPage();
    const problems: string[] = [];
    await watchPage(page, problems);
    page.on('dialog', (d) => void d.accept());

    await page.goto(`${t.url}/`);
    await page.fill('#name', 'studio-1');
    await page.fill('#latency', '120');
    await page.click('button[type=submit]');
    // The admin token is in the fragment: the browser never sends it to a server.
    await page.waitForURL(/\/s\/studio-1#t=p_/);
    const admin = new URLSearchParams(new URL(page.url()).hash.slice(1)).get('t') ?? '';
    await page.locator('#live', { hasText: 'live' }).waitFor();
    await page.locator('[data-testid=stream-state]', { hasText: 'waiting' }).waitFor();

    // Two peers join (as `punch agent` does): register, SRT up, health.
    const tokens: string[] = [];
    for (const label of ['Camera 1', 'Gallery']) {
      const r = await t.call('POST', '/api/session/studio-1/token', { token: admin, body: { label } });
      tokens.push(r.json.token as string);
    }
    for (const [i, tok] of tokens.entries()) {
      const c = await connect(t.url, 'studio-1', { token: tok });
      peers.push(c);
      c.send({
        type: 'register',
        port: 9000,
        role: i === 0 ? 'sender' : 'receiver',
        meta: { label: i === 0 ? 'Camera 1' : 'Gallery' },
      });
      await c.next('session');
    }
    for (const c of peers) await c.next('peer');
    peers[0]?.send({ type: 'status', srt: 'connected' });
    await page.locator('#state', { hasText: 'CONNECTED' }).waitFor({ timeout: 10_000 });
    await page.locator('td', { hasText: 'Camera 1' }).waitFor();
    await page.locator('td', { hasText: 'Gallery' }).waitFor();
    // RTT 45 ms with latency 120 ms: below 4 × RTT. The latency is fixed at creation (docs/health.md
    // "Advice"): the verdict names the latency a new session needs, never "raise it".
    peers[1]?.send({ type: 'health', rtt: 45, retransmit: 0.4, bitrate: 6e6, dropped: 0, buffer: 35 });
    await page
      .locator('[data-testid=verdict]', { hasText: 'create a new session with latency 180 ms or more' })
      .waitFor({ timeout: 10_000 });
    // A client without counters: its latest report, labelled by its role, and no windows.
    await page
      .locator('[data-testid=latest-reports]', { hasText: 'Receiver (latest report): RTT 45.0 ms' })
      .waitFor();
    assert.doesNotMatch(String(await page.evaluate('document.body.innerText')), /headroom|raise it to/i);
    await page.locator('[data-testid=health-status]', { hasText: 'healthy' }).waitFor();
    // With counters and its latency (as `punch agent` reports), the margin alarm (docs/health.md "Alarms"):
    // 120 − 4 × 45 = −60 ms; a row on the stream, the verdict says "At risk", the receiver's table says so.
    peers[1]?.send({
      type: 'health',
      role: 'receiver',
      rtt: 45,
      retransmit: 0,
      bitrate: 6e6,
      dropped: 0,
      latency: 120,
      counts: { packets: 1000, unique: 1000, lost: 0, retransmitted: 0 },
    });
    await page
      .locator('[data-testid=alarms] .alarm-row[data-alarm=margin]', {
        hasText: 'Latency 120 ms is below 4 × RTT plus its swing (180 ms needed)',
      })
      .waitFor({ timeout: 10_000 });
    await page
      .locator('[data-testid=verdict]', { hasText: /^At risk: the latency does not cover/ })
      .waitFor();
    const margin = page.locator('[data-end=receiver] tbody tr', { hasText: 'Margin' }).locator('td');
    assert.deepEqual(await margin.allTextContents(), ['-60 ms', '-60 ms']);
    assert.equal(await page.locator('[data-end=sender]').isVisible(), false, 'the sender sent no counters');
    // The graph draws the margin below zero (never clipped to 0).
    await page
      .locator('svg.health-graph .row.marginMs text.label', { hasText: ': -60 (scale -60 to 100)' })
      .waitFor({ timeout: 10_000 });
    await page.screenshot({ path: join(OUT, 'console-connected.png'), fullPage: true });

    // Copy a connection string.
    await page.locator('summary', { hasText: 'peer A' }).click();
    const copy = page.locator('.strings details[open] button', { hasText: 'Copy' }).first();
    await copy.click();
    await page.locator('.strings details[open] button', { hasText: 'Copied' }).first().waitFor();
    const copied = String(await page.evaluate('navigator.clipboard.readText()'));
    assert.match(copied, /rendezvous/);

    // Issue a peer token: join link and its QR.
    await page.fill('input[aria-label="Peer label"]', 'Camera 2');
    await page.click('button:has-text("Issue peer token")');
    // Every invite is listed (the two issued over the API and this one); the newest shows its QR.
    await page.locator('[data-testid=invites] li', { hasText: 'Camera 2' }).waitFor();
    assert.equal(await page.locator('[data-testid=invites] li').count(), 3);
    const link = await page.locator('[data-testid=join-link]').last().textContent();
    assert.match(link ?? '', /\/s\/studio-1\?t=p_/);
    const qr = page.locator('details.qr-box[open] img.qr');
    await qr.waitFor();
    await page.waitForFunction("document.querySelector('details.qr-box[open] img.qr')?.complete === true");
    await page.screenshot({ path: join(OUT, 'console-token.png'), fullPage: true });

    // The peer's page.
    const peerPage = await context.newPage();
    peerPage.on('console', (m) => {
      if (m.type() === 'error') problems.push(`peer page: ${m.text()}`);
    });
    await peerPage.goto(link ?? '');
    await peerPage.locator('text=node punch-agent.mjs').first().waitFor();
    await peerPage.screenshot({ path: join(OUT, 'peer-page.png'), fullPage: true });
    // (Closed before the session: its next poll would get the 410 of a closed session, which chromium
    // reports as a console error for any failed fetch.)
    await peerPage.close();

    // Close the session: both peers are told.
    await page.click('button:has-text("Close session")');
    await page.locator('h2', { hasText: 'Session closed' }).waitFor();
    for (const c of peers) assert.equal((await c.next('session_closed'))['reason'], 'admin_closed');
    assert.deepEqual(problems, [], problems.join('\n'));
  } finally {
    for (const c of peers) c.close();
    await browser.close();
    await t.close();
  }
});

test('console lifetime: a warning in the last 5 minutes, Extend (PATCH) shows the new expiry, at 1440x900 and 390x844', async () => {
  mkdirSync(OUT, { recursive: true });
  const t = await startTestServer();
  const browser = await launchChromium();
  try {
    for (const [width, height] of [
      [1440, 900],
      [390, 844],
    ] as const) {
      const name = `life-${width}`;
      // Four minutes left: inside the 5-minute warning.
      const s = (await t.call('POST', '/api/session', { body: { name, ttl: 240 } })).json;
      const context = await browser.newContext({ viewport: { width, height } });
      const page = await context.newPage();
      const problems: string[] = [];
      await watchPage(page, problems);
      // The console's link keeps the admin token in the fragment; an older `?t=` link (tried at 1440) still
      // opens it, and the page moves the token out of the query at once.
      const where = width === 1440 ? '?t=' : '#t=';
      await page.goto(`${t.url}/s/${name}${where}${encodeURIComponent(s.token as string)}`);
      await page.waitForURL((u) => u.search === '' && u.hash.startsWith('#t=p_'));
      const bar = page.locator('#lifetime.warn');
      await bar.locator('#lifetime-text', { hasText: 'Session ends in' }).waitFor({ timeout: 10_000 });
      await page.screenshot({ path: join(OUT, `lifetime-warning-${width}.png`), fullPage: true });
      await page.click('[data-testid=extend]');
      await page.locator('#lifetime:not(.warn)').waitFor({ timeout: 10_000 });
      const view = await t.call('GET', `/api/session/${name}`, { token: s.token as string });
      const expiresAt = view.json.expiresAt as number;
      assert.ok(expiresAt >= (s.expiresAt as number) + 3_000_000, 'extended by about an hour');
      // The page shows the expiry the server now has (rendered in the browser's locale and time zone).
      const shown = await page.evaluate(`new Date(${expiresAt}).toLocaleTimeString()`);
      await page.locator('#expires', { hasText: String(shown) }).waitFor({ timeout: 5000 });
      await page.locator('#lifetime-text', { hasText: `Session expires at ${String(shown)}` }).waitFor();
      await page.screenshot({ path: join(OUT, `lifetime-extended-${width}.png`), fullPage: true });
      assert.deepEqual(problems, [], problems.join('\n'));
      await context.close();
    }
  } finally {
    await browser.close();
    await t.close();
  }
});

test('closed-session page: 410, styled from this origin, no CSP violation', async () => {
  const t = await startTestServer();
  const browser = await launchChromium();
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'gone-1' } })).json;
    assert.equal((await t.call('DELETE', '/api/session/gone-1', { token: s.token as string })).status, 204);
    const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    const problems: string[] = [];
    await watchPage(page, problems);
    const r = await page.goto(`${t.url}/s/gone-1?t=${encodeURIComponent(s.token as string)}`);
    assert.equal(r?.status(), 410);
    await page.locator('text=closed or expired').waitFor();
    await page.screenshot({ path: join(OUT, 'closed-page.png'), fullPage: true });
    // watchPage records the 410 of the document itself as a console error; only CSP problems count here.
    const csp = problems.filter((p) => /Content Security Policy|Refused to apply/i.test(p));
    assert.deepEqual(csp, [], problems.join('\n'));
  } finally {
    await browser.close();
    await t.close();
  }
});
