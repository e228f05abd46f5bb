// The control page sets every input option (CasparCG channel, layer, further layers, video format; vMix
// username and password), shows a refused duplicate address and a connection test's named cause, in
// Debian's chromium (a console error or CSP violation fails the test).
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { watchPage } from '@broadcast-ops/core/testing/browser';
import { loadMonitorConfig } from '../../src/config.ts';
import { browserRig, SHOTS } from '../outputs/browser-rig.ts';
import type { Rig } from '../outputs/helpers.ts';

let browser: Browser;
let rig: Rig;
const problems: string[] = [];

before(async () => {
  ({ browser, rig } = await browserRig(1));
});
after(async () => {
  await browser?.close();
  await rig?.close();
});

/** A port that was just free: nothing listens there. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

test('control page: CasparCG and vMix options, a refused duplicate address, a named test failure', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await watchPage(page, problems, { label: 'control' });
  await page.goto(rig.url + '/control.html');
  await page.waitForSelector('#devices tbody tr[data-device="1"]', { timeout: 10_000 });

  // CasparCG: the options appear with the type and are saved as typed.
  assert.equal(await page.isVisible('#channel'), false, 'CasparCG options hidden for a HyperDeck');
  await page.fill('#name', 'Caspar A');
  await page.selectOption('#type', 'osc_player');
  assert.equal(await page.isVisible('#channel'), true);
  assert.equal(await page.isVisible('#username'), false);
  await page.fill('#ip', '10.1.2.3');
  await page.fill('#channel', '2');
  await page.fill('#layer', '10');
  await page.fill('#layers', '20, 30');
  await page.fill('#videoFormat', '1080x50');
  await page.click('#save');
  await page.waitForSelector('#result[data-ok="false"]:has-text("videoFormat")', { timeout: 5000 });
  await page.fill('#videoFormat', '1080i5000');
  await page.click('#save');
  await page.waitForSelector('#result[data-ok="true"]:has-text("added")', { timeout: 5000 });
  const caspar = loadMonitorConfig({ file: rig.configPath }).servers.find((s) => s.name === 'Caspar A');
  assert.ok(caspar?.type === 'osc_player');
  assert.deepEqual(
    [caspar.channel, caspar.layer, caspar.layers, caspar.videoFormat],
    [2, 10, [20, 30], '1080i5000'],
  );

  // vMix: credentials, the password never shown back, kept when the form leaves it empty.
  await page.fill('#name', 'Mixer');
  await page.selectOption('#type', 'http_mixer');
  await page.fill('#ip', '127.0.0.1');
  const refused = await closedPort();
  await page.fill('#port', String(refused));
  await page.fill('#username', 'operator');
  await page.fill('#password', 'pa55-secret');
  await page.click('#testNew');
  await page.waitForSelector('#result[data-ok="false"]:has-text("FAILED (refused)")', { timeout: 10_000 });
  assert.match(
    (await page.textContent('#result')) ?? '',
    new RegExp(`nothing listens on 127\\.0\\.0\\.1:${refused}`),
  );
  await page.click('#save');
  await page.waitForSelector('#result[data-ok="true"]:has-text("added")', { timeout: 5000 });
  const mixer = loadMonitorConfig({ file: rig.configPath }).servers.find((s) => s.name === 'Mixer');
  assert.ok(mixer?.type === 'http_mixer');
  assert.deepEqual([mixer.username, mixer.password], ['operator', 'pa55-secret']);
  await page.click(`#devices tbody tr[data-device="${mixer.id}"] button[data-action="edit"]`);
  assert.equal(await page.inputValue('#password'), '', 'the password is not shown');
  assert.equal(await page.inputValue('#username'), 'operator');
  await page.fill('#name', 'Mixer A');
  await page.click('#save');
  await page.waitForSelector('#result[data-ok="true"]:has-text("saved")', { timeout: 5000 });
  const kept = loadMonitorConfig({ file: rig.configPath }).servers.find((s) => s.id === mixer.id);
  assert.ok(kept?.type === 'http_mixer');
  assert.deepEqual([kept.name, kept.password], ['Mixer A', 'pa55-secret']);

  // A second device on the deck's address: refused, in words, nothing changed.
  const deck = rig.service.config.servers[0];
  assert.ok(deck);
  await page.fill('#name', 'Same deck');
  await page.selectOption('#type', 'tcp_recorder');
  await page.fill('#ip', '127.0.0.1');
  await page.fill('#port', String(deck.port));
  await page.click('#save');
  await page.waitForSelector('#result[data-ok="false"]:has-text("already used by device 1")', {
    timeout: 5000,
  });
  assert.equal(rig.service.config.servers.length, 3);
  await page.screenshot({ path: join(SHOTS, 'control-options.png'), fullPage: true });
  await page.close();
  // Chromium logs every non-2xx fetch as a console error: exactly the two refusals this test provoked
  // (the bad video format, 400; the used address, 409), and nothing else.
  assert.deepEqual(
    problems.map((p) => /status of (\d+)/.exec(p)?.[1] ?? p),
    ['400', '409'],
  );
});
