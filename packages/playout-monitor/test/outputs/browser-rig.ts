// Helper of the page tests (not a test file itself): Debian's chromium and a service whose HyperDeck
// simulators are all connected; screenshots go to packages/playout-monitor/.tmp/test-output/pages/.
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium } from '@broadcast-ops/core/testing/browser';
import { startRig, until, type Rig } from './helpers.ts';

export const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/pages/', import.meta.url));

export async function browserRig(
  decks: number,
  settings: Record<string, unknown> = {},
): Promise<{ browser: Browser; rig: Rig }> {
  mkdirSync(SHOTS, { recursive: true });
  const browser = await launchChromium();
  const rig = await startRig(decks, settings);
  await until(
    () => rig.service.view.list().every((d) => d.connected) || undefined,
    10_000,
    'decks connected',
  );
  return { browser, rig };
}
