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
import { SECRET } from '../helpers.ts';
import { request } from '../redis-instances.ts';
import { connect, type WsClient } from '../ws-helpers.ts';

/**
 * The operator console does not fight the operator (README "Pages and the operator console"), in Debian's
 * chromium at a desktop's 1440x900 and a phone's 390x844, against a `punch serve` child process (so that the
 * broker can be killed): a label typed while health flows is kept, with its focus; an open
 * connection-string section stays open (the same element) through 10 s of health reports; Copy works;
 * two invites are both listed with link and QR; revoking one refuses its token and disconnects its peer;
 * the tally buttons reach both peers; health as `punch agent` reports it (counters, role, latency) shows
 * both ends labelled sender and receiver over 10 s and 60 s with the advice, never a "buffer headroom" or a
 * "raise it to", and the 10-minute graph; drops raise an alarm (a row on the stream, a beep once the
 * sound is on, a browser notification once permitted) that clears when the window is clean again; after a
 * departed peer the stream shows "Waiting for the second peer" without its old health badge, and the graph
 * greys with the age of its last report; the page never scrolls sideways; the admin token never appears in a
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

/**
 * Spies on the browser's alarm outputs (calling through to the real APIs): the titles of the notifications
 * constructed, and the oscillators the alarm sound started. Injected before the page's scripts.
 */
const SPY_ALARMS = `(() => {
  window.__notes = [];
  window.__beeps = 0;
  const N = window.Notification;
  if (N) {
    const Spy = function (title, options) {
      window.__notes.push(title + ' | ' + ((options && options.body) || ''));
      return new N(title, options);
    };
    Object.defineProperty(Spy, 'permission', { get: () => N.permission });
    Spy.requestPermission = (...a) => N.requestPermission(...a);
    window.Notification = Spy;
  }
  const osc = AudioContext.prototype.createOscillator;
  AudioContext.prototype.createOscillator = function () {
    window.__beeps++;
    return osc.call(this);
  };
})()`;

/** Never a "buffer headroom" or "raise it to" (the latency is fixed at creation: docs/health.md "Advice"). */
async function assertNoHeadroom(page: Page): Promise<void> {
  const text = String(await page.evaluate('document.body.innerText'));
  assert.doesNotMatch(text, /headroom|raise it to|raise the latency/i);
}

/**
 * Waits until `expr` (evaluated in the page over CDP) is true, polling every 200 ms for at most `ms`.
 * (page.waitForFunction polls through eval inside the page, which the pages' CSP refuses.)
 */
async function until(page: Page, expr: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await page.evaluate<boolean>(`Boolean(${expr})`))) {
    assert.ok(Date.now() < end, `not within ${ms} ms: ${expr}`);
    await page.waitForTimeout(200);
  }
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
      await context.grantPermissions(['clipboard-read', 'clipboard-write', 'notifications'], {
        origin: broker.url,
      });
      await context.addInitScript(SPY_ALARMS);
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
      // The alarm sound needs a user gesture (autoplay rules): the operator turns it on.
      await page.locator('[data-testid=alarm-sound]').click();
      await page
        .locator('[data-testid=alarm-sound][aria-pressed=true]', { hasText: 'Alarm sound on' })
        .waitFor();
      await page.locator('[data-testid=alarm-notify]', { hasText: 'Notifications on' }).waitFor();
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
      // As `punch agent` reports (docs/health.md "What the agent sends"): role, counters summed over the
      // period, the receiver's latency; 2 of 1000 packets lost and repaired; `drops` rounds with drops.
      let n = 0;
      let drops = 0;
      healthLoop = setInterval(() => {
        n++;
        const counts = { packets: 1002, unique: 1000, lost: 2, retransmitted: 2 };
        for (const [i, c] of peers.entries()) {
          if (c.ws.readyState !== c.ws.OPEN) continue;
          const receiver = i === 1;
          c.send({
            type: 'health',
            stream: 'cam-1',
            role: receiver ? 'receiver' : 'sender',
            rtt: 20 + (n % 5),
            retransmit: 0.2,
            bitrate: 4e6,
            dropped: receiver && drops > 0 ? 3 : 0,
            counts,
            ...(receiver ? { latency: 200, buffer: 15 } : {}),
          });
        }
        if (drops > 0) drops--;
      }, 500);
      await page.locator('#state', { hasText: 'CONNECTED' }).waitFor({ timeout: 10_000 });
      await card.locator('[data-testid=health-status]', { hasText: 'healthy' }).waitFor({ timeout: 10_000 });
      await card
        .locator('[data-testid=invite-state]', { hasText: 'joined' })
        .nth(1)
        .waitFor({ timeout: 10_000 });

      // Both ends, labelled sender and receiver, over the broker's 10 s and 60 s windows.
      const cell = (end: string, figure: string, col: number) =>
        card.locator(`[data-end=${end}] tbody tr`, { hasText: figure }).locator('td').nth(col);
      await cell('receiver', 'Margin', 0)
        .filter({ hasText: /^\+\d+ ms/ })
        .waitFor({ timeout: 10_000 });
      for (const end of ['sender', 'receiver']) {
        const heads = await card.locator(`[data-end=${end}] thead th`).allTextContents();
        assert.deepEqual(heads, [end === 'sender' ? 'Sender' : 'Receiver', '10 s', '60 s']);
        for (const col of [0, 1]) {
          const rtt = (await cell(end, 'RTT min/avg/max', col).textContent()) ?? '';
          assert.match(rtt, /^2\d\.\d\/2\d\.\d\/2\d\.\d$/, `${end} RTT`);
          // 2 of 1000 originals lost (loss before ARQ); 2 of 1002 packets were retransmissions.
          assert.equal(await cell(end, 'Loss before ARQ', col).textContent(), '0.20 %');
          assert.equal(await cell(end, 'Retransmitted', col).textContent(), '0.20 %');
          assert.equal(await cell(end, 'Dropped too late', col).textContent(), '0 pkt');
        }
      }
      // Margin = latency − (4 × RTT avg + swing): 200 − (4 × 20…24 + up to 4).
      const margin = Number(
        /^\+(\d+) ms$/.exec((await cell('receiver', 'Margin', 1).textContent()) ?? '')?.[1],
      );
      assert.ok(margin >= 100 && margin <= 120, `margin ${margin}`);
      assert.match((await cell('receiver', 'Latency / needed', 1).textContent()) ?? '', /^200 \/ \d+ ms$/);
      assert.equal(await card.locator('[data-end=sender] tr', { hasText: 'Margin' }).isVisible(), false);
      await card
        .locator('[data-testid=advice] li', { hasText: 'Healthy: latency 200 ms covers 4 × RTT' })
        .waitFor();
      await card.locator('[data-testid=verdict]', { hasText: /^Healthy: RTT 2\d\.\d ms/ }).waitFor();
      assert.equal(await card.locator('[data-testid=alarms]').isVisible(), false);
      await assertNoHeadroom(page);
      // The 10-minute graph of the link, fetched with the admin token, current (not grey).
      const graph = card.locator('[data-testid=health-graph] svg.health-graph');
      await graph.waitFor({ timeout: 10_000 });
      assert.equal(await graph.locator('path.series').count(), 5);
      await until(
        page,
        `[...document.querySelectorAll('section[data-stream="cam-1"] svg.health-graph path.series')].every((p) => /^M[\\d.]+,[\\d.]+ L/.test(p.getAttribute('d') || ''))`,
        10_000,
      );
      assert.doesNotMatch((await graph.getAttribute('class')) ?? '', /stale/);

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
      // A stale tally (the mixer's monitor lost its mixer: README "Tally") is unknown, not off; a known one
      // brings the colour back.
      const monitor = await connect(broker.url, name, { token: admin });
      monitor.send({ type: 'tally', stream: 'cam-1', state: 'off', stale: true });
      await card
        .locator('[data-testid=tally-state]', { hasText: 'tally unknown (mixer data stale)' })
        .waitFor();
      assert.equal(await card.locator('button[data-tally=off]').getAttribute('aria-pressed'), 'false');
      monitor.send({ type: 'tally', stream: 'cam-1', state: 'preview' });
      await card.locator('[data-testid=tally-state]', { hasText: 'tally preview' }).waitFor();
      monitor.close();
      for (const c of peers) {
        assert.equal((await c.next('tally', 5000))['stale'], true);
        assert.equal((await c.next('tally', 5000))['state'], 'preview');
      }

      // Drops: the alarm shows on the stream, beeps and notifies; it clears once the 10 s window is clean.
      const beepsBefore = Number(await page.evaluate('window.__beeps'));
      assert.ok(beepsBefore >= 1, 'turning the sound on played it once');
      drops = 3;
      const alarmRow = card.locator('[data-testid=alarms] .alarm-row[data-alarm=drops]');
      await alarmRow.waitFor({ timeout: 10_000 });
      assert.match((await alarmRow.textContent()) ?? '', /^Drops since .*arrived too late to play/);
      assert.equal(await card.locator('[data-testid=alarm-badge]').isVisible(), true);
      await card
        .locator('[data-testid=verdict]', { hasText: /^Glitching: \d+ packets dropped too late/ })
        .waitFor();
      await until(page, 'window.__notes.length > 0', 5000);
      const notes = await page.evaluate<string[]>('window.__notes');
      assert.match(
        notes[0] ?? '',
        new RegExp(`^Punch ${name}: cam-1 drops \\| \\d+ packets arrived too late`),
      );
      assert.ok(Number(await page.evaluate('window.__beeps')) > beepsBefore, 'the alarm beeped');
      await cell('receiver', 'Dropped too late', 0)
        .filter({ hasText: /^[1-9]\d* pkt$/ })
        .waitFor();
      await assertNoHeadroom(page);
      await assertNoSideScroll(page, 'alarm');
      await shot('alarm');
      await alarmRow.waitFor({ state: 'detached', timeout: 30_000 });
      assert.equal(await card.locator('[data-testid=alarm-badge]').isVisible(), false);
      assert.equal(
        (await page.evaluate<string[]>('window.__notes')).length,
        1,
        'one notification per raised alarm',
      );

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
      // The link's graph stays, grey with the age of its last report.
      await card.locator('svg.health-graph.stale').waitFor({ timeout: 30_000 });
      assert.match(
        (await card.locator('svg.health-graph .stale-note').textContent()) ?? '',
        /^stale: last report \d+ s ago$/,
      );
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
