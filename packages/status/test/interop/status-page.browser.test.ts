/**
 * The status page in Debian's chromium at 1920x1080 (a control-room screen) and on a phone: every service
 * green with a link to its page, no console error or CSP violation, nothing wider than the screen; a
 * SIGSTOPped service turns red on the page without a reload while the others stay green; when the status
 * service itself stops, every card turns grey ("STALE") with the age of what it shows.
 * Screenshots go to .tmp/test-output/status/.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { startRig } from '../helpers.ts';

const SHOTS = join(repoRoot, '.tmp/test-output/status');

test('status page: green wall, a hung service red live, grey with age when the status service is gone', async () => {
  mkdirSync(SHOTS, { recursive: true });
  const rig = await startRig(1000, 600);
  const browser = await launchChromium();
  const errors: string[] = [];
  try {
    const wall = await browser.newPage({ viewport: { width: 1920, height: 1080 } });
    const phone = await browser.newPage({
      viewport: { width: 390, height: 844 },
      isMobile: true,
      hasTouch: true,
    });
    for (const [name, page] of [
      ['wall', wall],
      ['phone', phone],
    ] as const) {
      await watchPage(page, errors, { label: name, warnings: true });
      await page.goto(rig.url);
      await page.locator('body[data-overall="green"]').waitFor({ timeout: 30_000 });
      assert.equal(await page.locator('.card[data-level="green"]').count(), 4);
      const link = page.locator('.card[data-service="timesvc"] .name a');
      assert.equal(await link.getAttribute('href'), `http://127.0.0.1:${rig.fakes.get('timesvc')?.port}/`);
      assert.match(
        await page.locator('.card[data-service="timesvc"] .figures').innerText(),
        /estimated error\s+12 µs/,
      );
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - window.innerWidth',
      );
      assert.ok(overflow <= 0, `${name}: ${overflow}px wider than the screen`);
      await page.screenshot({ path: join(SHOTS, `status-${name}-green.png`), fullPage: true });
    }
    // On the wall: all four cards visible at once, without scrolling.
    const bottom = await wall.evaluate<number>(
      "Math.max(...[...document.querySelectorAll('.card')].map((c) => c.getBoundingClientRect().bottom))",
    );
    assert.ok(bottom <= 1080, `cards end at ${bottom}px`);
    // Reason text large enough to read across a room (CSS px at 1920 wide).
    const size = await wall.evaluate<number>(
      "parseFloat(getComputedStyle(document.querySelector('.card .reason')).fontSize)",
    );
    assert.ok(size >= 24, `reason font ${size}px`);

    const pid = rig.fakes.get('playout-monitor')?.proc.child.pid;
    assert.ok(pid);
    process.kill(pid, 'SIGSTOP');
    const redCard = wall.locator('.card[data-service="playout-monitor"][data-level="red"]');
    await redCard.waitFor({ timeout: 20_000 });
    assert.match(
      await redCard.locator('.reason').innerText(),
      /no answer: nothing within 600 ms \([2-9]\d* polls in a row/,
    );
    assert.equal(await redCard.locator('.badge').innerText(), 'DOWN');
    assert.equal(await wall.locator('.card[data-level="green"]').count(), 3);
    await phone
      .locator('.card[data-service="playout-monitor"][data-level="red"]')
      .waitFor({ timeout: 20_000 });
    await wall.screenshot({ path: join(SHOTS, 'status-wall-red.png'), fullPage: true });
    await phone.screenshot({ path: join(SHOTS, 'status-phone-red.png'), fullPage: true });
    assert.deepEqual(errors, []);

    // The status service goes away: the page cannot know anything any more, so it claims nothing.
    await rig.status.stop('SIGKILL');
    await wall.locator('body[data-stale="true"]').waitFor({ timeout: 20_000 });
    await wall
      .locator('.card[data-service="timesvc"] .badge', { hasText: 'STALE' })
      .waitFor({ timeout: 5000 });
    assert.match(
      await wall.locator('#freshness').innerText(),
      /status service not reachable.*: showing what it said \d+ s ago/,
    );
    assert.match(
      await wall.locator('.card[data-service="timesvc"] .age').innerText(),
      /^last known: OK, checked \d+ s ago$/,
    );
    const border = await wall.evaluate<string>(
      'getComputedStyle(document.querySelector(\'.card[data-service="timesvc"]\')).borderTopColor',
    );
    assert.equal(border, 'rgb(89, 99, 110)'); // --grey
    await wall.screenshot({ path: join(SHOTS, 'status-wall-stale.png'), fullPage: true });
    await phone.locator('body[data-stale="true"]').waitFor({ timeout: 20_000 });
    await phone.screenshot({ path: join(SHOTS, 'status-phone-stale.png'), fullPage: true });
  } finally {
    await browser.close();
    await rig.stop();
  }
});
