// The dashboard in Debian's chromium (playwright-core): log in, live state and chart, logs, add a peer as
// admin; a viewer sees no editor. Screenshots under packages/timesvc/.tmp/test-output/dashboard/.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { repoRoot } from '@broadcast-ops/core/testing';
import { loadTimesvcConfig } from '../../src/config.ts';
import { LAB_PASSWORD, LAB_USERNAME } from '../../src/io/web/lab-credential.ts';
import { startService } from '../helpers/service.ts';
import { PASSWORDS, startWebRig, type WebRig } from '../helpers/web.ts';

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/dashboard/', import.meta.url));

let browser: Browser;
let rig: WebRig;
let upstream: Awaited<ReturnType<typeof startService>>;

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
  upstream = await startService({ local_stratum: true, interface: '127.0.0.1' });
  rig = await startWebRig();
});
after(async () => {
  await browser?.close();
  await rig?.close();
  await upstream?.service.close();
});

async function open(size: { width: number; height: number }): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: size });
  const errors: string[] = [];
  await watchPage(page, errors);
  await page.goto(rig.url + '/');
  return { page, errors };
}

test('login page: no lab-credential note with a real user list', async () => {
  const { page, errors } = await open({ width: 1440, height: 900 });
  await page.waitForSelector('#login:not([hidden])');
  await page.waitForSelector('#labNote[data-checked="yes"]', { state: 'attached', timeout: 10_000 });
  assert.equal(await page.isHidden('#labNote'), true, 'no note when the users are real');
  assert.deepEqual(errors, []);
  await page.close();
});

test("login page with the demo config's credential: the note names it; stale data goes grey with its age", async () => {
  const demo = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {});
  const lab = await startWebRig({ web: { users: demo.web.users, jwt_secret: demo.web.jwt_secret } });
  let closed = false;
  try {
    for (const size of [
      { width: 1440, height: 900, name: 'login-lab-wall.png' },
      { width: 390, height: 844, name: 'login-lab-phone.png' },
    ]) {
      const page = await browser.newPage({ viewport: size });
      const errors: string[] = [];
      await watchPage(page, errors);
      await page.goto(lab.url + '/');
      await page.waitForSelector('#labNote:not([hidden])', { timeout: 10_000 });
      const note = (await page.textContent('#labNote')) ?? '';
      assert.match(note, new RegExp(`user ${LAB_USERNAME}, password ${LAB_PASSWORD}`), note);
      assert.match(note, /lab JWT secret/);
      await page.screenshot({ path: join(SHOTS, size.name) });
      if (size.width === 390) {
        await page.fill('#user', LAB_USERNAME);
        await page.fill('#password', LAB_PASSWORD);
        await page.click('#signin');
        await page.waitForSelector('#state[data-state="locked"]', { timeout: 30_000 });
        assert.equal(await page.isHidden('#banner'), false, 'the banner says so once logged in');
        await lab.close();
        closed = true;
        await page.waitForSelector('#stale:not([hidden])', { timeout: 10_000 });
        assert.match((await page.textContent('#stale')) ?? '', /STALE — .+ \d+ s ago/);
        assert.equal(
          await page.evaluate<boolean>(`document.getElementById('app').classList.contains('stale')`),
          true,
        );
        await page.screenshot({ path: join(SHOTS, 'phone-stale.png'), fullPage: true });
        // The reconnect attempts fail while the server is gone: only those are allowed as console errors.
        assert.deepEqual(
          errors.filter((e) => !/WebSocket connection .* failed|ERR_CONNECTION_REFUSED/.test(e)),
          [],
        );
      } else {
        assert.deepEqual(errors, []);
      }
      await page.close();
    }
  } finally {
    if (!closed) await lab.close();
  }
});

async function login(page: Page, user: keyof typeof PASSWORDS): Promise<void> {
  await page.waitForSelector('#login:not([hidden])');
  await page.fill('#user', user);
  await page.fill('#password', PASSWORDS[user]);
  await page.click('#signin');
  await page.waitForSelector('#app:not([hidden])', { timeout: 15_000 });
  assert.equal(await page.isVisible('#login'), false, 'the login form is gone once logged in');
}

test('admin: log in, state and chart move, logs shown, add a peer and see it in the sources table', async () => {
  const { page, errors } = await open({ width: 1440, height: 900 });
  await login(page, 'admin');
  await page.waitForSelector('#state[data-state="locked"]', { timeout: 15_000 });
  const fontSize = await page.evaluate<number>(
    `parseFloat(getComputedStyle(document.getElementById('state')).fontSize)`,
  );
  assert.ok(fontSize >= 40, `state readable across a room (${fontSize}px)`);
  await page.waitForSelector('#logs div', { timeout: 10_000 });
  // The log lines carry their fields: the state change says from, to and why.
  const stateLine = await page.textContent('#logs div:has-text("to=LOCKED")', { timeout: 10_000 });
  assert.match(stateLine ?? '', /clock: clock state from=\w+ to=LOCKED reason=/, `${stateLine}`);
  assert.equal(await page.isHidden('#stale'), true, 'fresh data is not marked stale');
  const chart1 = await page.evaluate<string>(`document.getElementById('chart').toDataURL()`);
  await page.waitForTimeout(2500);
  const chart2 = await page.evaluate<string>(`document.getElementById('chart').toDataURL()`);
  assert.notEqual(chart1, chart2, 'the chart moves');
  assert.equal(await page.isHidden('#admin'), false, 'the admin sees the editor');
  const address = `127.0.0.1:${upstream.port}`;
  await page.fill('#peerAddress', address);
  await page.click('#addPeerButton');
  await page.waitForSelector(`#sources tr[data-address="${address}"]`, { timeout: 10_000 });
  await page.waitForSelector(`#sources tr.selected[data-address="${address}"]`, { timeout: 30_000 });
  await page.waitForSelector('#logs div:has-text("reference")', { timeout: 10_000 });
  await page.evaluate('scrollTo(0, 0)');
  await page.screenshot({ path: join(SHOTS, 'wall-admin.png') });
  // The server keeps the chart's last five minutes: right after a reload the chart already holds more
  // points than the page could have gathered itself (one per second).
  const loaded = Date.now();
  await page.reload();
  await page.waitForSelector('#chart[data-points]', { timeout: 10_000 });
  const points = Number(await page.getAttribute('#chart', 'data-points'));
  const own = Math.ceil((Date.now() - loaded) / 1000) + 1;
  assert.ok(points >= 10 && points > own + 5, `${points} points after a reload (${own} s on the page)`);
  assert.deepEqual(errors, []);
  await page.close();
});

test('viewer on a phone: no editor, the panels say "not enabled"', async () => {
  const { page, errors } = await open({ width: 390, height: 844 });
  await login(page, 'viewer');
  await page.waitForSelector('#state[data-state="locked"]', { timeout: 15_000 });
  assert.equal(await page.isHidden('#admin'), true, 'a viewer sees no editor');
  assert.match((await page.textContent('#gpsdo')) ?? '', /GPSDO not enabled/);
  assert.match((await page.textContent('#ptp')) ?? '', /PTP not enabled/);
  const overflow = await page.evaluate<number>(`document.documentElement.scrollWidth - innerWidth`);
  assert.ok(overflow <= 1, `no sideways scrolling on a phone (${overflow}px)`);
  // The peer the admin added above: one card per source, each value beside its column name, and the
  // sources card does not scroll sideways either.
  await page.waitForSelector('#sources tbody tr[data-address] td[data-label="Offset"]', { timeout: 15_000 });
  const inner = await page.evaluate<number>(
    `(() => { const s = document.querySelector('#sources').parentElement; return s.scrollWidth - s.clientWidth; })()`,
  );
  assert.ok(inner <= 1, `the sources table fits the phone (${inner}px to scroll)`);
  await page.screenshot({ path: join(SHOTS, 'phone-viewer.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test('with the dummy GPSDO: stratum 1, the GPSDO panel with its lock time, a sky plot and signal bars', async () => {
  const gps = await startWebRig({
    ntp: { local_stratum: false, stratum: 1, ref_id: 'GPS' },
    gpsdo: { enabled: true, type: 'dummy' },
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const errors: string[] = [];
    await watchPage(page, errors);
    await page.goto(gps.url + '/');
    await login(page, 'viewer');
    await page.waitForSelector('#state[data-state="locked"]', { timeout: 20_000 });
    assert.equal((await page.textContent('#stratum'))?.trim(), '1');
    assert.match((await page.textContent('#gpsdo')) ?? '', /locked for/);
    await page.waitForSelector('#satellites svg.sky circle.sky-sat.used', { timeout: 15_000 });
    const sats = gps.service.gpsdo()?.apiSatellites() ?? [];
    assert.ok(sats.length > 0, 'the dummy receiver has satellites in view');
    const plotted = await page.locator('#satellites svg.sky circle.sky-sat').count();
    const bars = await page.locator('#satellites .snr-col').count();
    assert.equal(plotted, sats.filter((x) => x['elevation'] !== null && x['azimuth'] !== null).length);
    assert.equal(bars, sats.length);
    const used = await page.locator('#satellites circle.sky-sat.used').count();
    assert.equal(used, sats.filter((x) => x['used'] === true).length, 'used satellites are filled');
    await page.locator('#satellites').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'gpsdo-sky.png') });
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await gps.close();
  }
});
