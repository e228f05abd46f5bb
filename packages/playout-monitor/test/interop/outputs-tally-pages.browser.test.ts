// The dashboard's mixer tally in headless Chromium (Debian's chromium via playwright-core): a vMix simulator
// speaking the TCP API feeds the whole service. Screenshots at 1920x1080 and on a phone are kept under
// packages/playout-monitor/.tmp/test-output/pages/ (gitignored).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { silentLogger } from '@broadcast-ops/core';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { PlayoutService } from '../../src/playout-service.ts';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import { makeConfig, vmixEntry } from '../helpers.ts';

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/pages/', import.meta.url));
const RED = 'rgb(212, 20, 28)';
const GREEN = 'rgb(18, 163, 58)';

let browser: Browser;
let sim: VmixSimulator;
let service: PlayoutService;
let url: string;
const problems: string[] = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
  sim = new VmixSimulator({ tcpPort: 0, titleInputs: 5 });
  await sim.start();
  service = new PlayoutService({
    // The pages are under test here, not the staleness rules: with the helper's 100 ms poll, a document
    // gap of two poll intervals (200 ms: docs/TALLY.md "Stale") or a poll slower than its 400 ms timeout
    // on a loaded machine (chromium rendering beside the suite) greys the mixer's tally, as it must, and
    // changes what the page shows between two looks. A 500 ms poll (stale after 1 s) with a 3 s timeout
    // keeps the tally steady; a stopped mixer still goes grey at once (its TCP link closes).
    config: makeConfig([vmixEntry(1, sim, { name: 'vMix studio', pollIntervalMs: 500, timeoutMs: 3000 })], {
      emberPlusPort: 0,
      updateIntervalMs: 100,
    }),
    logger: silentLogger(),
  });
  url = (await service.start({ http: 0, ember: 0 })).httpUrl;
});

after(async () => {
  await browser?.close();
  await service?.close();
  await sim?.close();
  assert.deepEqual(problems, [], 'no console error or CSP violation on any page');
});

async function dashboard(size: { width: number; height: number }): Promise<Page> {
  const page = await browser.newPage({ viewport: size });
  await watchPage(page, problems, { label: 'dashboard' });
  await page.goto(url + '/dashboard.html');
  return page;
}

const bg = (page: Page, selector: string): Promise<string> =>
  page.evaluate<string>(
    `(() => { const e = document.querySelector(${JSON.stringify(selector)}); return e ? getComputedStyle(e).backgroundColor : 'missing'; })()`,
  );

const input = (n: number, tally: string): string =>
  `.inputs [data-key="${sim.keyOf(n)}"][data-tally="${tally}"]`;

test('dashboard: the input strip shows program red and preview green, keyed by GUID; recording and streaming shown', async () => {
  sim.cut(1);
  sim.previewInput(2);
  sim.record(true);
  sim.stream(true);
  const page = await dashboard({ width: 1920, height: 1080 });
  await page.waitForSelector(input(1, 'program'), { timeout: 10_000 });
  await page.waitForSelector(input(2, 'preview'), { timeout: 5000 });
  await page.waitForSelector(input(3, 'off'));
  assert.equal(await bg(page, input(1, 'program')), RED, 'program is tally red');
  assert.equal(await bg(page, input(2, 'preview')), GREEN, 'preview is tally green');
  // Recording shows as the state (REC, amber), streaming as a badge.
  await page.waitForSelector('.card[data-device="1"][data-state="rec"]', { timeout: 5000 });
  await page.waitForSelector('[data-badge="streaming"]');
  assert.equal(await page.locator('.inputs .input').count(), 8, 'every input of the mixer');
  await page.screenshot({ path: join(SHOTS, 'tally-dashboard-1920x1080.png') });
  await page.close();
});

test('dashboard: fade to black shows FTB and takes program off air; preview stays green', async () => {
  sim.cut(1);
  sim.previewInput(2);
  const page = await dashboard({ width: 1920, height: 1080 });
  await page.waitForSelector(input(1, 'program'), { timeout: 10_000 });
  sim.fadeToBlack(true);
  await page.waitForSelector('[data-badge="ftb"]', { timeout: 5000 });
  await page.waitForSelector(input(1, 'off'), { timeout: 5000 });
  assert.equal(await bg(page, input(2, 'preview')), GREEN);
  assert.equal(await page.locator('.inputs [data-tally="program"]').count(), 0, 'nothing red under FTB');
  await page.screenshot({ path: join(SHOTS, 'tally-dashboard-ftb.png') });
  sim.fadeToBlack(false);
  await page.close();
});

test('dashboard on a phone; vMix stopped: every input grey (unknown), never its last colour', async () => {
  sim.cut(1);
  sim.previewInput(2);
  const page = await dashboard({ width: 390, height: 844 });
  await page.waitForSelector(input(1, 'program'), { timeout: 10_000 });
  await page.screenshot({ path: join(SHOTS, 'tally-dashboard-phone.png') });
  await sim.offline();
  await page.waitForSelector(input(1, 'unknown'), { timeout: 5000 });
  await page.waitForSelector(input(2, 'unknown'));
  assert.equal(
    await page.locator('.inputs [data-tally="program"], .inputs [data-tally="preview"]').count(),
    0,
  );
  assert.notEqual(await bg(page, input(1, 'unknown')), RED);
  await page.screenshot({ path: join(SHOTS, 'tally-dashboard-phone-unknown.png') });
  await sim.online();
  await page.close();
});
