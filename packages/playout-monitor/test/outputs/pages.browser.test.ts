// The pages in headless Chromium (Debian's chromium driven by playwright-core): one browser for all
// page tests. Screenshots are kept under packages/playout-monitor/.tmp/test-output/pages/ (gitignored).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { requireTool } from '@broadcast-ops/core/testing';
import { HyperdeckSimulator } from '../../src/simulators/hyperdeck-sim.ts';
import { startRig, until, type Rig } from './helpers.ts';

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/pages/', import.meta.url));
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let browser: Browser;
let rig: Rig;
const extra: { close(): Promise<void> }[] = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // headless: true adds --headless; playwright gives every launch a fresh temporary --user-data-dir.
  browser = await chromium.launch({
    executablePath: requireTool('chromium'),
    headless: true,
    args: CHROMIUM_FLAGS,
  });
  rig = await startRig(3, { updateIntervalMs: 100 });
  await until(() => rig.service.view.list().every((d) => d.connected) || undefined, 5000, 'decks connected');
});

after(async () => {
  await browser?.close();
  for (const e of extra) await e.close();
  await rig?.close();
});

async function newPage(url: string, size = { width: 1280, height: 720 }): Promise<Page> {
  const page = await browser.newPage({ viewport: size });
  page.on('pageerror', (err) => {
    throw err;
  });
  await page.goto(url);
  return page;
}

/**
 * Run an expression in the page (a string: the test compiles without the DOM library). One synchronous
 * step, so a card the dashboard re-renders in between cannot be read half-way.
 */
const inPage = <T>(page: Page, expression: string): Promise<T> => page.evaluate<T>(expression);

const styleOf = (page: Page, selector: string, prop: 'backgroundColor' | 'fontSize'): Promise<string> =>
  inPage(
    page,
    `(() => { const e = document.querySelector(${JSON.stringify(selector)}); return e ? getComputedStyle(e).${prop} : 'missing'; })()`,
  );

const shot = (page: Page, name: string, omitBackground = false): Promise<Buffer> =>
  page.screenshot({ path: join(SHOTS, `${name}.png`), omitBackground });

test('navigation page: links to every page and live health', async () => {
  const page = await newPage(rig.url + '/');
  await page.waitForSelector('#status[data-status="healthy"]', { timeout: 10_000 });
  const links = await inPage<string[]>(
    page,
    `[...document.querySelectorAll('nav a')].map((a) => a.getAttribute('href'))`,
  );
  for (const p of [
    'dashboard.html',
    'gui.html?device=0',
    'overlay.html?device=0',
    'control.html',
    'health',
  ]) {
    assert.ok(links.includes(p), p);
  }
  await shot(page, 'index');
  await page.close();
});

test('dashboard: shows the devices and follows their state changes, in tally colours', async () => {
  const page = await newPage(rig.url + '/dashboard.html');
  await page.waitForSelector('.card[data-device="3"]', { timeout: 10_000 });
  assert.equal(await page.locator('.card').count(), 3);
  assert.equal(await page.getAttribute('.card[data-device="1"]', 'data-state'), 'stop');
  rig.sims[0]!.play(1);
  await page.waitForSelector('.card[data-device="1"][data-state="play"]', { timeout: 5000 });
  const colour = await styleOf(page, '.card[data-device="1"] .state', 'backgroundColor');
  assert.equal(colour, 'rgb(212, 20, 28)', 'play is tally red');
  rig.sims[1]!.record();
  await page.waitForSelector('.card[data-device="2"][data-state="rec"]', { timeout: 5000 });
  const amber = await styleOf(page, '.card[data-device="2"] .state', 'backgroundColor');
  assert.equal(amber, 'rgb(255, 159, 10)', 'rec is tally amber');
  const tc = await page.textContent('.card[data-device="1"] .tc');
  assert.match(tc ?? '', /^\d\d:\d\d:\d\d:\d\d$/);
  const size = parseFloat(await styleOf(page, '.card[data-device="1"] .tc', 'fontSize'));
  assert.ok(size >= 40, `timecode readable across a room (${size}px)`);
  await shot(page, 'dashboard');
  rig.sims[0]!.stop();
  rig.sims[1]!.stop();
  await page.waitForSelector('.card[data-device="1"][data-state="stop"]', { timeout: 5000 });
  await page.close();
});

test('gui.html: one device fullscreen; arrow keys switch device and keep the URL in step', async () => {
  const page = await newPage(rig.url + '/gui.html?device=0');
  await page.waitForSelector('#full[data-device="1"]', { timeout: 10_000 });
  await shot(page, 'gui-device-1');
  await page.keyboard.press('ArrowRight');
  await page.waitForSelector('#full[data-device="2"]');
  assert.match(page.url(), /device=1$/);
  assert.equal(await page.textContent('#name'), 'Deck 2');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowLeft');
  await page.waitForSelector('#full[data-device="3"]');
  assert.match(page.url(), /device=2$/);
  await shot(page, 'gui-device-3');
  await page.close();
});

test('control page: add a device, test it, simulate a state, and the dashboard follows', async () => {
  const sim = new HyperdeckSimulator({ port: 0, model: 'HyperDeck Studio Mini' });
  const port = await sim.start();
  extra.push(sim);
  const dashboard = await newPage(rig.url + '/dashboard.html');
  await dashboard.waitForSelector('.card[data-device="3"]', { timeout: 10_000 });
  const page = await newPage(rig.url + '/control.html');
  await page.waitForSelector('#devices tbody tr[data-device="3"]', { timeout: 10_000 });
  await page.fill('#name', 'Studio deck');
  await page.selectOption('#type', 'tcp_recorder');
  await page.fill('#ip', '127.0.0.1');
  await page.fill('#port', String(port));
  await page.click('#save');
  await page.waitForSelector('#devices tbody tr[data-device="4"]', { timeout: 10_000 });
  await until(() => rig.service.view.get(4)?.connected || undefined, 5000, 'new deck connected');
  await page.click('#devices tbody tr[data-device="4"] button[data-action="test"]');
  await page.waitForSelector('#result[data-ok="true"]:has-text("Device 4: OK")', { timeout: 10_000 });
  await page.selectOption('#simDevice', '4');
  await page.selectOption('#simState', 'play');
  await page.fill('#simFile', 'SIMULATED.mov');
  await page.click('#simStart');
  await page.waitForSelector('#result:has-text("simulating play")', { timeout: 5000 });
  await dashboard.waitForSelector('.card[data-device="4"][data-state="play"] [data-badge="simulated"]', {
    timeout: 5000,
  });
  assert.equal(await dashboard.textContent('.card[data-device="4"] .file'), 'SIMULATED.mov');
  await shot(page, 'control');
  await shot(dashboard, 'dashboard-simulated');
  await page.click('#simEnd');
  await page.waitForSelector('#result[data-ok="true"]:has-text("simulation ended")', { timeout: 5000 });
  await dashboard.waitForSelector('.card[data-device="4"][data-state="stop"]', { timeout: 5000 });
  await page.close();
  await dashboard.close();
});

test('overlay: transparent, positioned, opacity honoured; fades after fadeTimeout of stale data; dashboard marks it stale', async () => {
  // A monitor of its own, stopped mid-test (the link to the pages dies).
  const own = await startRig(1);
  let closed = false;
  extra.push({ close: async () => (closed ? undefined : own.close()) });
  await until(() => own.service.view.get(1)?.connected || undefined, 5000, 'deck connected');
  own.service.view.simulate(1, { state: 'play', filename: 'ON AIR.mxf' });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(own.url + '/overlay.html?device=0&position=top-right&opacity=0.5&fadeTimeout=1');
  await page.waitForSelector('#box[data-state="play"]', { timeout: 10_000 });
  const bg = await inPage<string[]>(
    page,
    `[getComputedStyle(document.documentElement).backgroundColor, getComputedStyle(document.body).backgroundColor]`,
  );
  assert.deepEqual(bg, ['rgba(0, 0, 0, 0)', 'rgba(0, 0, 0, 0)']);
  const box = await inPage<{ cls: string; opacity: string; right: number; top: number; left: number }>(
    page,
    `(() => { const e = document.getElementById('box'); const r = e.getBoundingClientRect();
      return { cls: e.className, opacity: e.style.opacity, right: innerWidth - r.right, top: r.top, left: r.left }; })()`,
  );
  assert.match(box.cls, /top-right/);
  assert.equal(box.opacity, '0.5');
  assert.ok(box.right < 100 && box.top < 100 && box.left > 400, JSON.stringify(box));
  assert.equal(await page.textContent('#file'), 'ON AIR.mxf');
  await shot(page, 'overlay', true);
  const dash = await browser.newPage();
  await dash.goto(own.url + '/dashboard.html');
  await dash.waitForSelector('.card[data-device="1"][data-state="play"][data-stale="false"]', {
    timeout: 10_000,
  });
  assert.equal(
    await inPage<boolean>(page, `document.getElementById('box').classList.contains('faded')`),
    false,
  );
  await own.close();
  closed = true;
  await page.waitForSelector('#box.faded', { timeout: 8000 });
  const faded = Number(await inPage<string>(page, `document.getElementById('box').style.opacity`));
  assert.ok(faded > 0 && faded < 0.5, `faded opacity ${faded} is below the configured 0.5`);
  await dash.waitForSelector('#banner.show', { timeout: 8000 });
  await dash.waitForSelector('.card[data-device="1"][data-stale="true"]', { timeout: 8000 });
  // Never the playing colour from stale data.
  assert.equal(
    await inPage<boolean>(
      dash,
      `document.querySelector('.card[data-device="1"] .state').classList.contains('play')`,
    ),
    false,
  );
  assert.equal(await dash.textContent('.card[data-device="1"] [data-badge="stale"]'), 'STALE');
  assert.equal(await dash.textContent('.card[data-device="1"] .state'), 'NO DATA');
  assert.match((await dash.textContent('.card[data-device="1"] .reason')) ?? '', /last known PLAY/);
  await shot(page, 'overlay-faded', true);
  await shot(dash, 'dashboard-stale');
  await page.close();
  await dash.close();
});

test('overlay: fadeTimeout=0.5 on a steady, healthy device never fades', async () => {
  const own = await startRig(1);
  extra.push({ close: () => own.close() });
  await until(() => own.service.view.get(1)?.connected || undefined, 5000, 'deck connected');
  own.sims[0]?.stop();
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(own.url + '/overlay.html?device=0&opacity=0.8&fadeTimeout=0.5');
  await page.waitForSelector('#box[data-state="stop"]', { timeout: 10_000 });
  // Sample for 4 s (several heartbeats with nothing changing): the box never fades.
  const samples = await inPage<string[]>(
    page,
    `new Promise((resolve) => { const out = []; const t = setInterval(() => {
       const e = document.getElementById('box'); out.push(e.classList.contains('faded') + ':' + e.style.opacity);
       if (out.length >= 40) { clearInterval(t); resolve(out); } }, 100); })`,
  );
  assert.deepEqual([...new Set(samples)], ['false:0.8'], samples.join(' '));
  await page.close();
});
