/**
 * One chromium for a console browser test file (core/testing's launchChromium), started before its tests and
 * closed after them, and the folder its screenshots go to (.tmp/test-output/console/, gitignored).
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium } from '@broadcast-ops/core/testing/browser';

export const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/console/', import.meta.url));

/** Registers the launch and the close with node:test; call the result inside a test. */
export function consoleBrowser(): () => Browser {
  let browser: Browser | undefined;
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });
  return () => {
    if (!browser) throw new Error('chromium is not running (call consoleBrowser() at the top of the file)');
    return browser;
  };
}
