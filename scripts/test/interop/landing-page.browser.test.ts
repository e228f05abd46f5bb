/**
 * The landing page `npm start` serves (the status service's page), in Debian's chromium: no console error or CSP violation, a card per
 * service whose health badge turns "OK" without a reload, the demo's lab credential and base-URL note shown, and changes live when the service dies.
 * Screenshots (desktop and phone) go to .tmp/test-output/landing/.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { repoRoot, startProcess, freePort } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';

const fixtures = fileURLToPath(new URL('../fixtures/packages', import.meta.url));
const SHOTS = join(repoRoot, '.tmp/test-output/landing');

test('landing page: live health per service, no console error, readable on a phone', async () => {
  mkdirSync(SHOTS, { recursive: true });
  const landing = await freePort('tcp');
  const offset = landing - 8600; // LANDING_PORT in scripts/start-stack.ts
  let demo = await freePort('tcp');
  while (demo - offset < 1) demo = await freePort('tcp');
  const launcher = startProcess(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/start-stack.ts'), '--packages', fixtures],
    {
      env: {
        DEMO_PORT: String(demo - offset),
        DEMO_MARKER: '/dev/null',
        BROADCAST_OPS_PORT_OFFSET: String(offset),
      },
    },
  );
  const browser = await launchChromium();
  const errors: string[] = [];
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 60_000);
    for (const [name, viewport] of [
      ['desktop', { width: 1600, height: 1000 }],
      ['phone', { width: 390, height: 844 }],
    ] as const) {
      const page = await browser.newPage({ viewport });
      await watchPage(page, errors, { label: name, warnings: true });
      await page.goto(`http://127.0.0.1:${landing}/`);
      const badge = page.locator('.card[data-service="demo-service"] .badge');
      await badge.filter({ hasText: /^OK$/ }).waitFor({ timeout: 30_000 });
      const links = page.locator('.card[data-service="demo-service"] .about');
      assert.equal(await links.locator(`a[href="http://127.0.0.1:${demo}/"]`).count(), 1);
      assert.match(await links.innerText(), /item\/<id>/); // a template link is shown as text
      // The demo's timesvc lab credential and the base-URL note, visible without scrolling sideways.
      const credential = page.locator('#note-credential');
      assert.ok(await credential.isVisible());
      assert.match(await credential.innerText(), /user admin, password timesvc-lab/);
      const baseUrl = page.locator('#note-base-url');
      assert.ok(await baseUrl.isVisible());
      assert.match(await baseUrl.innerText(), /127\.0\.0\.1/);
      assert.match(
        await baseUrl.innerText(),
        /PUNCH_BASE_URL=http:\/\/<this machine's address>:8787 npm start/,
      );
      // Nothing wider than the screen on a phone.
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - window.innerWidth',
      );
      assert.ok(overflow <= 0, `${name}: page is ${overflow}px wider than the viewport`);
      await page.screenshot({ path: join(SHOTS, `landing-${name}.png`), fullPage: true });
      if (name === 'phone') {
        assert.deepEqual(errors, []);
        // Live: the service dies and the badge says so without a reload. The launcher then stops the stack
        // and the status service too, so the page's next fetch fails (a console error expected from here).
        const pid = Number(/demo-service\s+up\s+\(pid (\d+), log/.exec(launcher.output())?.[1]);
        process.kill(pid, 'SIGKILL');
        await badge.filter({ hasText: /WARNING|DOWN|STALE/ }).waitFor({ timeout: 30_000 });
      }
      await page.close();
    }
  } finally {
    await browser.close();
    await launcher.stop('SIGKILL');
  }
});
