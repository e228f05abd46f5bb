/**
 * The web console in Debian's chromium (playwright-core), against the real Companion adapter and the
 * Satellite simulator: the surface mirror draws Companion's keys and follows a change live, the key browser
 * filters by pattern, a tap on the mirror presses the key and the KEY-PRESS reaches the Satellite server.
 * Any console error, page error or CSP violation fails the test. Screenshots are kept under
 * packages/telemetry-bridge/.tmp/test-output/console/ (gitignored).
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { waitFor } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { DEVICE, rig, type Rig } from '../companion/harness.ts';
import { startTestBridge } from '../helpers.ts';

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/console/', import.meta.url));

let browser: Browser;
const problems: string[] = [];
const pages: Page[] = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

async function open(url: string, size = { width: 1280, height: 900 }): Promise<Page> {
  const page = await browser.newPage({ viewport: size });
  pages.push(page);
  await watchPage(page, problems, { warnings: true });
  await page.goto(url);
  return page;
}

const inPage = <T>(page: Page, expression: string): Promise<T> => page.evaluate<T>(expression);

async function until(pred: () => Promise<boolean> | boolean, what: string, ms = 10_000): Promise<void> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  await waitFor(async () => (await pred()) || undefined, { timeoutMs: ms, intervalMs: 50, what });
}

test('console: live surface mirror, key filter, press from the mirror reaches the Satellite server', async () => {
  const r: Rig = await rig({
    companion: {
      device: { deviceId: DEVICE, productName: 'Console test', keysTotal: 8, keysPerRow: 4, bitmaps: 72 },
    },
  });
  try {
    r.sim.setButton(1, 0, 0, { text: 'CAM 1', color: '#c00000' });
    r.sim.setButton(1, 0, 1, { text: 'CAM 2', color: '#006000' });
    const page = await open(r.bridge.consoleUrl as string);
    await page.waitForSelector('#conn.ok', { timeout: 15_000 });
    await until(
      async () => (await inPage<number>(page, `document.querySelectorAll('#surface .key').length`)) === 8,
      '8 keys on the mirror',
    ).catch(async (err: unknown) => {
      await page.screenshot({ path: join(SHOTS, 'failed.png'), fullPage: true });
      throw new Error(`${(err as Error).message}; ${problems.join(' | ')}`);
    });
    await until(
      async () =>
        (await inPage<string>(page, `document.getElementById('link').textContent`)).includes('connected'),
      'link state shown',
    );
    // Live: Companion redraws a key; the mirror follows without a reload.
    r.sim.setButton(1, 0, 2, { text: 'LIVE', color: '#0050ff' });
    const key2 = `[data-path="companion.device.tb_test_01.key.2"]`;
    await until(
      async () =>
        (await inPage<string>(page, `document.querySelector('${key2}')?.textContent ?? ''`)) === 'LIVE',
      'key 2 redrawn live',
    );
    const bitmaps = await inPage<number>(page, `document.querySelectorAll('#surface .key canvas').length`);
    assert.equal(bitmaps, 8, 'bitmaps drawn');

    // Key browser: pattern filter.
    await page.fill('#filter', 'companion.connection.*');
    const paths = await inPage<string[]>(
      page,
      `[...document.querySelectorAll('#keys tbody tr')].map((tr) => tr.dataset.path)`,
    );
    assert.ok(paths.length >= 2, paths.join());
    assert.ok(
      paths.every((p) => /^companion\.connection\.[A-Za-z_]+$/.test(p)),
      paths.join(),
    );
    await page.fill('#filter', `companion.device.*.key.**`);
    await until(
      async () => (await inPage<number>(page, `document.querySelectorAll('#keys tbody tr').length`)) === 8,
      'filter to keys',
    );

    // Press from the mirror: the KEY-PRESS reaches the Satellite server, the result is shown.
    const before = r.sim.linesNamed('KEY-PRESS').length;
    await page.click(key2);
    await until(() => r.sim.linesNamed('KEY-PRESS').length >= before + 2, 'KEY-PRESS at the server');
    const lines = r.sim
      .linesNamed('KEY-PRESS')
      .slice(before)
      .map((l) => l.line);
    assert.ok(
      lines.some((l) => l.includes(`DEVICEID="${DEVICE}" KEY=2 PRESSED=1`)),
      lines.join('\n'),
    );
    await until(
      async () =>
        (await inPage<string>(page, `document.getElementById('press-result').textContent`)).includes(
          'completed',
        ),
      'press result shown',
    );
    // Recent commands and clients from /api/hub.
    await until(
      async () =>
        (await inPage<string>(page, `document.getElementById('commands').textContent`)).includes('press'),
      'command listed',
    );
    await until(
      async () =>
        (await inPage<string>(page, `document.getElementById('clients').textContent`)).includes(
          'app.console',
        ),
      'console client listed',
    );
    await page.screenshot({ path: join(SHOTS, 'console-desktop.png'), fullPage: true });
    const phone = await open(r.bridge.consoleUrl as string, { width: 390, height: 844 });
    await phone.waitForSelector('#surface .key', { timeout: 15_000 });
    await phone.screenshot({ path: join(SHOTS, 'console-phone.png'), fullPage: true });
    await phone.close();
    await page.close();
    assert.deepEqual(problems, []);
  } finally {
    for (const p of pages.splice(0)) await p.close();
    await r.close();
  }
});

test('console with requireAuth: asks for the token, refuses a wrong one, then goes live', async () => {
  const token = 'console-token-0123456789';
  const t = await startTestBridge({ clientTransport: { requireAuth: true, authTokens: [token] } });
  try {
    t.adapter.set('fake.studio.tally', 'on air');
    const before = problems.length;
    const page = await open(t.bridge.consoleUrl as string);
    await page.waitForSelector('#login:not([hidden])', { timeout: 15_000 });
    await page.fill('#token', 'wrong-token-0123456789');
    await page.click('#login button');
    await page.waitForSelector('#login:not([hidden])', { timeout: 15_000 });
    await page.fill('#token', token);
    await page.click('#login button');
    await page.waitForSelector('#conn.ok', { timeout: 15_000 });
    await page.fill('#filter', 'fake.**');
    await until(
      async () =>
        (await inPage<string>(page, `document.getElementById('keys').textContent`)).includes('on air'),
      'key shown after login',
    );
    await page.screenshot({ path: join(SHOTS, 'console-auth.png'), fullPage: true });
    await page.close();
    // The refused API call and WebSocket are expected network errors, nothing else.
    const mine = problems.splice(before).filter((p) => !/401|Unauthorized|status of 401/.test(p));
    assert.deepEqual(mine, []);
  } finally {
    for (const p of pages.splice(0)) await p.close();
    await t.close();
  }
});
