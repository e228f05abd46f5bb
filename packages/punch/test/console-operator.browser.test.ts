import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  loadFactor,
  repoRoot,
  startProcess,
  tempDir,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import type { Page } from 'playwright-core';
import { SECRET } from './helpers.ts';
import { request } from './redis-instances.ts';
import { connect, type WsClient } from './ws-helpers.ts';

/**
 * The operator console does not fight the operator (README "Pages and the operator console"), in Debian's
 * chromium at a desktop's 1440x900 and a phone's 390x844, against a `punch serve` child process (so that the
 * broker can be killed): a label typed while health flows is kept, with its focus; an open
 * connection-string section stays open (the same element) through 10 s of health reports; Copy works;
 * two invites are both listed with link and QR; revoking one refuses its token and disconnects its peer;
 * the tally buttons reach both peers; after a departed peer the stream shows "Waiting for the second peer"
 * without its old health badge; the page never scrolls sideways; the admin token never appears in a
 * request URL; the page greys out with the reason within 5 s of a SIGKILL of the broker. A console error or
 * CSP violation fails the test (after the kill, only the browser's own connection-refused lines are
 * expected). Screenshots go to .tmp/punch-console/ of the repository.
 */
const OUT = join(repoRoot, '.tmp/punch-console');

async function startBroker(dir: string): Promise<{ proc: RunningProcess; url: string }> {
  const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
    env: {
      PUNCH_SECRET: SECRET,
      PUNCH_HOST: '127.0.0.1',
      PUNCH_PORT: '0',
      PUNCH_DB: join(dir, 'punch.db'),
      LOG_LEVEL: 'info',
    },
  });
  const m = await proc.waitForOutput(
    /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*punch broker listening/,
    30_000,
  );
  return { proc, url: m[1] ?? '' };
}

/** No sideways scroll: the document is no wider than the viewport. */
async function assertNoSideScroll(page: Page, where: string): Promise<void> {
  const [scroll, inner] = await page.evaluate<[number, number]>(
    '[document.documentElement.scrollWidth, window.innerWidth]',
  );
  assert.ok(scroll <= inner, `${where}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

for (const [width, height] of [
  [1440, 900],
  [390, 844],
] as const) {
  test(`operator console at ${width}x${height}: typing, open sections, copy, invites, revoke, tally, broker loss`, async () => {
    mkdirSync(OUT, { recursive: true });
    const dir = tempDir('punch-console-');
    const broker = await startBroker(dir.path);
    const browser = await launchChromium();
    const peers: WsClient[] = [];
    let healthLoop: NodeJS.Timeout | undefined;
    const shot = (what: string) =>
      page.screenshot({ path: join(OUT, `operator-${width}-${what}.png`), fullPage: true });
    let page: Page;
    try {
      const name = `show-${width}`;
      const created = await request(broker.url, 'POST', '/api/session', {
        body: { name, streams: ['cam-1', 'cam-2'], latency: 200 },
      });
      assert.equal(created.status, 201, created.text);
      const admin = created.json.token as string;

      const phone = width < 600;
      const context = await browser.newContext({
        viewport: { width, height },
        ...(phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
      });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: broker.url });
      page = await context.newPage();
      const problems: string[] = [];
      await watchPage(page, problems);
      page.on('dialog', (d) => void d.accept());
      // The admin token never travels in a URL (it may in a header or the WebSocket subprotocol).
      const urls: string[] = [];
      page.on('request', (r) => urls.push(r.url()));
      page.on('websocket', (ws) => urls.push(ws.url()));

      await page.goto(`${broker.url}/s/${name}#t=${encodeURIComponent(admin)}`);
      await page.locator('#live', { hasText: /^live$/ }).waitFor({ timeout: 10_000 });
      const card = page.locator('section[data-stream="cam-1"]');
      await card.locator('[data-testid=stream-state]', { hasText: 'waiting' }).waitFor();

      // Two invites through the console: both listed, each with its label, link and QR.
      const label = card.locator('input[aria-label="Peer label"]');
      for (const l of ['Camera 1', 'Gallery']) {
        await label.fill(l);
        await card.locator('button', { hasText: 'Issue peer token' }).click();
        await card.locator('[data-testid=invites] li', { hasText: l }).waitFor();
      }
      const items = card.locator('[data-testid=invites] li');
      assert.equal(await items.count(), 2);
      const links = await card.locator('[data-testid=join-link]').allTextContents();
      assert.equal(links.length, 2);
      for (const l of links) assert.match(l, new RegExp(`/s/${name}\\?t=p_`));
      // The newest invite shows its QR at once; the image is served.
      await page.waitForFunction(
        `[...document.querySelectorAll('section[data-stream="cam-1"] details.qr-box[open] img.qr')].some((i) => i.complete && i.naturalWidth > 0)`,
      );
      await assertNoSideScroll(page, 'two invites');
      await shot('invites');

      // Two peers join with those links, as `punch agent` does, and report health every 500 ms.
      const tokens = links.map((l) => new URL(l).searchParams.get('t') ?? '');
      for (const [i, tok] of tokens.entries()) {
        const c = await connect(broker.url, name, { token: tok });
        peers.push(c);
        c.send({
          type: 'register',
          stream: 'cam-1',
          port: 9000,
          role: i === 0 ? 'sender' : 'receiver',
          meta: { label: i === 0 ? 'Camera 1' : 'Gallery' },
        });
      }
      for (const c of peers) await c.next('peer', 10_000);
      for (const c of peers) c.send({ type: 'status', stream: 'cam-1', srt: 'connected' });
      let n = 0;
      healthLoop = setInterval(() => {
        n++;
        for (const c of peers) {
          if (c.ws.readyState !== c.ws.OPEN) continue;
          c.send({
            type: 'health',
            stream: 'cam-1',
            rtt: 20 + (n % 5),
            retransmit: 0.2,
            bitrate: 4e6,
            dropped: 0,
            buffer: 60,
          });
        }
      }, 500);
      await page.locator('#state', { hasText: 'CONNECTED' }).waitFor({ timeout: 10_000 });
      await card.locator('[data-testid=health-status]', { hasText: 'healthy' }).waitFor({ timeout: 10_000 });
      await card
        .locator('[data-testid=invite-state]', { hasText: 'joined' })
        .nth(1)
        .waitFor({ timeout: 10_000 });

      // A label typed while health flows is kept, and so is the focus.
      await label.click();
      await label.pressSequentially('Camera 3 (half typed', { delay: 20 });
      const before = await card.locator('[data-testid=health-status]').textContent();
      await page.waitForTimeout(3000);
      assert.equal(await label.inputValue(), 'Camera 3 (half typed');
      assert.equal(await page.evaluate('document.activeElement?.getAttribute("aria-label")'), 'Peer label');
      assert.equal(await card.locator('[data-testid=health-status]').textContent(), before);

      // An open connection-string section stays open, the same element, through 10 s of health reports.
      const summary = card.locator('summary', { hasText: 'Connection strings for peer A' });
      await summary.click();
      await page.evaluate(
        `document.querySelector('section[data-stream="cam-1"] .strings details[open]').dataset.marked = 'yes'`,
      );
      // What the operator looks at stays where it is on the screen (no rebuild that scrolls the page).
      const top = `Math.round(document.querySelector('[data-marked=yes]').getBoundingClientRect().top)`;
      const placed = await page.evaluate<number>(top);
      await page.waitForTimeout(10_000);
      assert.ok(
        Math.abs((await page.evaluate<number>(top)) - placed) <= 2,
        'the open section kept its place',
      );
      const open = card.locator('details[open][data-marked=yes]');
      assert.equal(await open.count(), 1, 'the section is still open and was never rebuilt');
      assert.notEqual(await card.locator('.health .big').textContent(), null);
      assert.ok(n >= 20 / loadFactor(), `health kept flowing (${n} rounds)`);
      await assertNoSideScroll(page, 'connection strings open');
      await shot('connected');

      // Copy works (also on the phone).
      await open.locator('button', { hasText: 'Copy' }).first().click();
      await open.locator('button', { hasText: 'Copied' }).first().waitFor();
      assert.match(String(await page.evaluate('navigator.clipboard.readText()')), /rendezvous/);
      await card.locator('[data-testid=invites] li').first().locator('button', { hasText: 'Copy' }).click();
      assert.equal(String(await page.evaluate('navigator.clipboard.readText()')), links[0]);

      // Tally: Program reaches both peers and shows on the card.
      await card.locator('button[data-tally=program]').click();
      for (const c of peers) {
        const m = await c.next('tally', 5000);
        assert.deepEqual([m['stream'], m['state']], ['cam-1', 'program']);
      }
      await card.locator('[data-testid=tally-state]', { hasText: 'tally program' }).waitFor();
      assert.equal(await card.locator('button[data-tally=program]').getAttribute('aria-pressed'), 'true');
      await card.locator('button[data-tally=off]').click();
      for (const c of peers) assert.equal((await c.next('tally', 5000))['state'], 'off');

      // Revoke the first invite: its peer is disconnected, its token refused; the list says so.
      await items.first().locator('button', { hasText: 'Revoke' }).click();
      const first = peers[0];
      assert.ok(first);
      assert.equal((await first.closed).code, 4401);
      const refused = await request(broker.url, 'GET', `/api/session/${name}`, { token: tokens[0] ?? '' });
      assert.equal(refused.status, 401);
      await items.first().locator('[data-testid=invite-state]', { hasText: 'revoked' }).waitFor();
      // While the receiver still reports media the stream stays up (README "State from media"); once that
      // stops, the stream waits for its second peer, without the departed link's health badge.
      await card
        .locator('[data-testid=presence]', { hasText: 'signalling lost, media reported by the other end' })
        .waitFor({ timeout: 10_000 });
      // The receiver restarts without media: one peer present, the other gone.
      clearInterval(healthLoop);
      peers[1]?.close();
      await peers[1]?.closed;
      const back = await connect(broker.url, name, { token: tokens[1] ?? '' });
      peers.push(back);
      back.send({ type: 'register', stream: 'cam-1', port: 9000, role: 'receiver' });
      await card
        .locator('[data-testid=verdict]', { hasText: 'Waiting for the second peer' })
        .waitFor({ timeout: 10_000 });
      assert.equal(await card.locator('[data-testid=health-status]').isVisible(), false);
      await assertNoSideScroll(page, 'after revoke');
      await shot('revoked');
      assert.deepEqual(problems, [], problems.join('\n'));

      // The admin token never appeared in a URL the browser requested.
      assert.ok(urls.length > 5);
      // (Its signature identifies it: its claims segment starts like the peer tokens' of this session.)
      const signature = admin.slice(admin.lastIndexOf('.') + 1);
      for (const u of urls) assert.ok(!decodeURIComponent(u).includes(signature), `admin token in ${u}`);

      // The broker freezes (SIGSTOP: its sockets stay open): within 5 s the page is grey and says why; it
      // clears once the broker answers again.
      broker.proc.child.kill('SIGSTOP');
      try {
        await page
          .locator('body.stale #conn', { hasText: 'no answer from the broker' })
          .waitFor({ timeout: 5000 });
      } finally {
        broker.proc.child.kill('SIGCONT');
      }
      await page.locator('#live', { hasText: /^live$/ }).waitFor({ timeout: 10_000 });
      assert.equal(await page.locator('body.stale').count(), 0);

      // The broker dies: within 5 s the page is grey and says why, with the age.
      const killedAt = Date.now();
      await broker.proc.stop('SIGKILL');
      await page.locator('body.stale #conn', { hasText: 'Broker unreachable' }).waitFor({ timeout: 5000 });
      const greyAfter = Date.now() - killedAt;
      assert.ok(greyAfter <= 5000, `grey after ${greyAfter} ms`);
      await page.locator('#live', { hasText: 'not live' }).waitFor();
      await page.waitForTimeout(1500);
      await assertNoSideScroll(page, 'broker lost');
      await shot('broker-lost');
      // Only the browser's own lines about refused connections are expected now.
      const unexpected = problems.filter(
        (p) => !/ERR_CONNECTION_REFUSED|WebSocket connection to .* failed|Failed to load resource/.test(p),
      );
      assert.deepEqual(unexpected, [], unexpected.join('\n'));
      await context.close();
    } finally {
      clearInterval(healthLoop);
      for (const c of peers) c.close();
      await browser.close();
      await broker.proc.stop('SIGKILL').catch(() => undefined);
      dir.remove();
    }
  });
}
