import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { assertOnlyRefusedConnections, startTestServer } from '../helpers.ts';
import { connect } from '../ws-helpers.ts';

/**
 * The join page as a tally light (README "Tally"), in Debian's chromium at 1920x1080 (a wall), 1440x900
 * and 390x844 (a phone), fed by a live broker: an admin's tally turns the same light element program red,
 * preview green, off dark, and a stale tally (what a playout monitor sends when it lost the mixer) grey
 * with its reason and age; the page takes no peer slot; a broker that stops answering the page's poll, and
 * a broker gone, turn it grey. A console error or CSP violation fails the test (except the browser's own
 * lines about the refused connections once the broker is gone). Screenshots in .tmp/punch-tally/ of the
 * repository.
 */
const OUT = join(repoRoot, '.tmp/punch-tally');

const COLOURS: Record<string, string> = {
  program: 'rgb(224, 17, 11)',
  preview: 'rgb(18, 163, 59)',
  off: 'rgb(11, 13, 16)',
  unknown: 'rgb(75, 80, 88)',
};

for (const [width, height] of [
  [1920, 1080],
  [1440, 900],
  [390, 844],
] as const) {
  test(`join page tally light at ${width}x${height}: program, preview, off, unknown in place, live`, async () => {
    mkdirSync(OUT, { recursive: true });
    const t = await startTestServer();
    const browser = await launchChromium();
    let serverUp = true;
    try {
      const s = (
        await t.call('POST', '/api/session', { body: { name: 'light-1', streams: ['cam-1', 'cam-2'] } })
      ).json;
      const admin = s.token as string;
      const peer = String(
        (
          await t.call('POST', '/api/session/light-1/token', {
            token: admin,
            body: { stream: 'cam-1', label: 'camera 1' },
          })
        ).json.token,
      );
      const obs = await connect(t.url, 'light-1', { token: admin });
      const context = await browser.newContext({ viewport: { width, height } });
      const page = await context.newPage();
      const problems: string[] = [];
      await watchPage(page, problems);
      await page.goto(`${t.url}/s/light-1?t=${peer}`);
      const light = page.locator('[data-testid=tally-light]');
      await light.waitFor({ timeout: 30_000 });
      await page
        .locator('[data-tally=unknown] [data-testid=tally-detail]', {
          hasText: 'no tally from the mixer yet',
        })
        .waitFor();
      // The same element all along: updated in place, never rebuilt.
      await page.evaluate(`window.__light = document.querySelector('[data-testid=tally-light]')`);
      const shot = (name: string) =>
        page.screenshot({ path: join(OUT, `tally-${name}-${width}.png`), fullPage: false });

      const expectLight = async (state: string, word: string, timeout = 10_000) => {
        await page.locator(`[data-testid=tally-light][data-tally=${state}]`).waitFor({ timeout });
        assert.equal(await page.locator('[data-testid=tally-word]').innerText(), word);
        const bg = String(
          await page.evaluate(
            `getComputedStyle(document.querySelector('[data-testid=tally-light]')).backgroundColor`,
          ),
        );
        assert.equal(bg, COLOURS[state], `${state} background`);
        assert.equal(
          await page.evaluate(`window.__light === document.querySelector('[data-testid=tally-light]')`),
          true,
          'the light element is updated in place',
        );
        // Readable across a room: the word is at least 48 px tall and the light fills most of the view.
        const box = await light.boundingBox();
        assert.ok(box && box.height >= height * 0.6, `light ${box?.height} px tall`);
        assert.ok(box && box.width <= width, 'no sideways overflow');
        const size = Number(
          await page.evaluate(
            `parseFloat(getComputedStyle(document.querySelector('[data-testid=tally-word]')).fontSize)`,
          ),
        );
        assert.ok(size >= 48, `word ${size} px`);
      };

      obs.send({ type: 'tally', stream: 'cam-1', state: 'program' });
      await expectLight('program', 'PROGRAM');
      await shot('program');
      obs.send({ type: 'tally', stream: 'cam-1', state: 'preview' });
      await expectLight('preview', 'PREVIEW');
      await shot('preview');
      // Another stream's tally does not touch this light.
      obs.send({ type: 'tally', stream: 'cam-2', state: 'program' });
      obs.send({ type: 'tally', stream: 'cam-1', state: 'off' });
      await expectLight('off', 'OFF');
      await shot('off');
      obs.send({ type: 'tally', stream: 'cam-1', state: 'off', stale: true });
      await expectLight('unknown', 'UNKNOWN');
      await page
        .locator('[data-testid=tally-detail]', { hasText: /stale at the sender\) · for [1-9] s/ })
        .waitFor({ timeout: 5000 });
      await shot('unknown');
      obs.send({ type: 'tally', stream: 'cam-1', state: 'program' });
      await expectLight('program', 'PROGRAM');
      // The page only watches: the stream's slots are still free for the agent.
      const view = (await t.call('GET', '/api/session/light-1', { token: admin })).json;
      assert.equal((view['streams'] as Record<string, { peer_a: unknown }>)['cam-1']?.peer_a, null);
      const sideways = Number(
        await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'),
      );
      assert.ok(sideways <= 0, `${sideways} px of horizontal scroll`);
      assert.deepEqual(problems, [], problems.join('\n'));

      // The broker stops answering while its WebSocket stays open (a frozen process, a cut path the socket
      // has not noticed yet): the page's poll gets no answer within 5 s, the light goes grey with the
      // reason, and the last tally comes back once the broker answers again.
      await page.route('**/api/session/**', () => undefined); // requests never answered
      await expectLight('unknown', 'UNKNOWN', 12_000);
      await page
        .locator('[data-testid=tally-detail]', { hasText: /no answer from the broker · for ([5-9]|\d\d) s/ })
        .waitFor();
      await shot('no-answer');
      await page.unroute('**/api/session/**');
      await expectLight('program', 'PROGRAM', 12_000);
      assert.deepEqual(problems, [], problems.join('\n'));

      // The broker goes away: grey with the reason, never the last colour.
      obs.close();
      await t.close();
      serverUp = false;
      await expectLight('unknown', 'UNKNOWN');
      await page
        .locator('[data-testid=tally-detail]', {
          hasText: /connection to the broker lost|no answer from the broker/,
        })
        .waitFor({ timeout: 5000 });
      await shot('broker-lost');
      assertOnlyRefusedConnections(problems);
      await context.close();
    } finally {
      await browser.close();
      if (serverUp) await t.close();
    }
  });
}
