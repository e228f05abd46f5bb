import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { startTestServer } from '../helpers.ts';
import { joinStepsOf } from '../join-page.ts';

/**
 * A peer's join page in Debian's chromium at 1440x900 and 390x844: the commands it shows are the ones in
 * its HTML with its own address as the join link (what test/interop/agent-e2e-download.test.ts runs), each with a Copy button that copies exactly that
 * text, the loopback base URL note is visible, and the phone never scrolls sideways. A console error or
 * CSP violation fails the test. Screenshots in .tmp/punch-join/ of the repository.
 */
const OUT = join(repoRoot, '.tmp/punch-join');

test('join page: the per-OS steps shown are the HTML commands, Copy copies them, no sideways scroll on a phone', async () => {
  mkdirSync(OUT, { recursive: true });
  const t = await startTestServer();
  const browser = await launchChromium();
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'join-1' } })).json;
    const peer = (
      await t.call('POST', '/api/session/join-1/token', { token: s.token, body: { label: 'cam' } })
    ).json.token as string;
    const url = `${t.url}/s/join-1?t=${peer}`;
    // What the page shows: its HTML's commands with its own address where the HTML has the placeholder.
    const steps = joinStepsOf((await t.call('GET', `/s/join-1?t=${peer}`)).text, url);
    const expected = [
      steps.download['linux macos'],
      steps.download['windows'],
      steps.send,
      steps.feed,
      steps.receive,
    ];
    for (const [width, height] of [
      [1440, 900],
      [390, 844],
    ] as const) {
      const context = await browser.newContext({ viewport: { width, height } });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
      const page = await context.newPage();
      const problems: string[] = [];
      await watchPage(page, problems);
      await page.goto(url);
      await page.getByText('Join this stream').waitFor({ timeout: 30_000 });
      const shown = await page.locator('.join-steps pre').allInnerTexts();
      assert.deepEqual(shown, expected, `${width}px: the commands shown are the page's own`);
      await page.getByText('only this machine reaches', { exact: false }).waitFor();
      // Copy next to the run command copies the run command.
      await page
        .locator('.join-steps .row', { has: page.locator('pre[data-step="send"]') })
        .getByRole('button')
        .click();
      assert.equal(String(await page.evaluate('navigator.clipboard.readText()')), steps.send);
      const sideways = Number(
        await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'),
      );
      assert.ok(sideways <= 0, `${width}px: ${sideways} px of horizontal scroll`);
      await page.screenshot({ path: join(OUT, `join-page-${width}.png`), fullPage: true });
      assert.deepEqual(problems, []);
      await context.close();
    }
  } finally {
    await browser.close();
    await t.close();
  }
});
