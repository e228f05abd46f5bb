// The pages in headless Chromium (Debian's chromium driven by playwright-core): one browser for all
// page tests. Screenshots are kept under packages/playout-monitor/.tmp/test-output/pages/ (gitignored).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { startRig, until, type Rig } from '../outputs/helpers.ts';

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/pages/', import.meta.url));

let browser: Browser;
let rig: Rig;
const extra: { close(): Promise<void> }[] = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
  rig = await startRig(3, { updateIntervalMs: 100 });
  await until(() => rig.service.view.list().every((d) => d.connected) || undefined, 5000, 'decks connected');
});

after(async () => {
  await browser?.close();
  for (const e of extra) await e.close();
  await rig?.close();
});

/** Console errors, uncaught exceptions and CSP violations of every page opened with newPage(). */
const problems: string[] = [];

async function newPage(url: string, size = { width: 1280, height: 720 }): Promise<Page> {
  const page = await browser.newPage({ viewport: size });
  await watchPage(page, problems, { label: url });
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

test('dashboard: 12 devices fit 1280x720 and 1920x1080 without scrolling; 1 device fills 1080p; OFFLINE never looks like STOP on any page', async () => {
  const own = await startRig(12);
  extra.push({ close: () => own.close() });
  await until(
    () => own.service.view.list().every((d) => d.connected) || undefined,
    10_000,
    '12 decks connected',
  );
  own.service.view.simulate(1, {
    state: 'play',
    filename: 'A_RATHER_LONG_CLIP_NAME_FOR_THE_EVENING_NEWS.mxf',
  });
  own.service.view.simulate(2, { state: 'rec', filename: 'Capture_0001.mov' });
  await own.sims[3]!.offline(); // device 4: a real offline (its deck went away)
  await until(() => own.service.view.get(4)?.state === 'offline' || undefined, 10_000, 'device 4 offline');
  const before = problems.length;
  for (const size of [
    { width: 1280, height: 720 },
    { width: 1920, height: 1080 },
  ]) {
    const page = await newPage(own.url + '/dashboard.html', size);
    await page.waitForSelector('.card[data-device="12"]', { timeout: 10_000 });
    await page.waitForSelector('.card[data-device="4"][data-state="offline"]', { timeout: 10_000 });
    const fit = await inPage<{
      sw: number;
      sh: number;
      w: number;
      h: number;
      overflowing: string[];
      tc: number;
    }>(
      page,
      `(() => { const d = document.documentElement;
        const overflowing = [...document.querySelectorAll('.card')].filter((c) =>
          c.scrollHeight > c.clientHeight + 1 || c.scrollWidth > c.clientWidth + 1
          || c.getBoundingClientRect().bottom > innerHeight || c.getBoundingClientRect().right > innerWidth)
          .map((c) => c.dataset.device);
        return { sw: d.scrollWidth, sh: d.scrollHeight, w: innerWidth, h: innerHeight, overflowing,
          tc: parseFloat(getComputedStyle(document.querySelector('.card .tc')).fontSize) }; })()`,
    );
    assert.ok(
      fit.sh <= fit.h && fit.sw <= fit.w,
      `no scroll at ${size.width}x${size.height}: ${JSON.stringify(fit)}`,
    );
    assert.deepEqual(fit.overflowing, [], `every card's content fits at ${size.width}x${size.height}`);
    assert.ok(
      fit.tc >= (size.height >= 1080 ? 40 : 28),
      `timecode ${fit.tc}px at ${size.width}x${size.height}`,
    );
    // OFFLINE and STOP differ in shape and colour, not only in their words.
    const look = await inPage<Record<string, string>[]>(
      page,
      `['4', '5'].map((id) => { const s = getComputedStyle(document.querySelector('.card[data-device="' + id + '"] .state'));
        const c = getComputedStyle(document.querySelector('.card[data-device="' + id + '"]'));
        return { bg: s.backgroundColor, border: s.borderTopStyle, card: c.borderTopStyle,
          text: document.querySelector('.card[data-device="' + id + '"] .state').textContent }; })`,
    );
    assert.equal(look[0]!['text'], 'OFFLINE');
    assert.equal(look[1]!['text'], 'STOP');
    assert.notEqual(look[0]!['bg'], look[1]!['bg']);
    assert.equal(look[0]!['card'], 'dashed');
    assert.notEqual(look[1]!['card'], 'dashed');
    await shot(page, `dashboard-12-${size.width}x${size.height}`);
    await page.close();
  }
  // One device on a 1080p screen fills it.
  const single = await startRig(1);
  extra.push({ close: () => single.close() });
  await until(() => single.service.view.get(1)?.connected || undefined, 5000, 'deck connected');
  single.service.view.simulate(1, { state: 'play', filename: 'ON AIR.mxf' });
  const one = await newPage(single.url + '/dashboard.html', { width: 1920, height: 1080 });
  await one.waitForSelector('.card[data-device="1"][data-state="play"]', { timeout: 10_000 });
  const area = await inPage<{ w: number; h: number; tc: number; sh: number }>(
    one,
    `(() => { const r = document.querySelector('.card').getBoundingClientRect();
      return { w: r.width, h: r.height, sh: document.documentElement.scrollHeight,
        tc: parseFloat(getComputedStyle(document.querySelector('.card .tc')).fontSize) }; })()`,
  );
  assert.ok(area.w > 1800 && area.h > 1000 && area.sh <= 1080, JSON.stringify(area));
  assert.ok(area.tc >= 150, `one device: timecode ${area.tc}px`);
  await shot(one, 'dashboard-1-1920x1080');
  await one.close();
  // Fullscreen and overlay: device index 3 is the offline deck, 4 a stopped one.
  const looks: Record<string, string>[] = [];
  for (const index of [3, 4]) {
    const gui = await newPage(own.url + `/gui.html?device=${index}`);
    await gui.waitForSelector(`#full[data-device="${index + 1}"]`, { timeout: 10_000 });
    const overlay = await newPage(own.url + `/overlay.html?device=${index}`);
    await overlay.waitForSelector('#box[data-state]:not([data-state="none"])', { timeout: 10_000 });
    looks.push({
      ...(await inPage<Record<string, string>>(
        gui,
        `(() => { const f = getComputedStyle(document.getElementById('full'));
          return { guiBorder: f.borderTopStyle + ' ' + f.borderTopColor, guiState: document.getElementById('state').textContent }; })()`,
      )),
      ...(await inPage<Record<string, string>>(
        overlay,
        `(() => { const b = getComputedStyle(document.getElementById('box'));
          return { boxBar: b.borderLeftStyle + ' ' + b.borderLeftColor, boxState: document.getElementById('st').textContent }; })()`,
      )),
    });
    await shot(gui, `gui-${index === 3 ? 'offline' : 'stop'}`);
    await shot(overlay, `overlay-${index === 3 ? 'offline' : 'stop'}`, true);
    await gui.close();
    await overlay.close();
  }
  const [offline, stop] = looks;
  assert.equal(offline!['guiState'], 'OFFLINE');
  assert.equal(stop!['guiState'], 'STOP');
  assert.notEqual(offline!['guiBorder'], stop!['guiBorder'], JSON.stringify(looks));
  assert.equal(offline!['boxState'], 'OFFLINE');
  assert.equal(stop!['boxState'], 'STOP');
  assert.notEqual(offline!['boxBar'], stop!['boxBar'], JSON.stringify(looks));
  assert.deepEqual(problems.slice(before), [], 'no console error or CSP violation');
});

test('no page opened through newPage logged a console error or a CSP violation', () => {
  assert.deepEqual(problems, []);
});
