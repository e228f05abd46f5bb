/**
 * Pages in Debian's chromium through playwright-core, the same way in every package's browser tests: one
 * set of launch flags (no sandbox for root, no GPU, nothing that reaches the network by itself), and one
 * watcher that turns a console error, an uncaught page error or a Content-Security-Policy violation into a
 * recorded problem the test asserts empty. Kept apart from `./index.ts` so tests without a browser never
 * load playwright.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { requireTool } from './index.ts';

/** Launch flags: headless in a container as root, and no background traffic (updates, sync, QUIC probes). */
export const CHROMIUM_FLAGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's chromium (installed by the test setup, `requireTool`), headless, with `CHROMIUM_FLAGS`. */
export function launchChromium(): Promise<Browser> {
  // headless: true adds --headless; playwright gives every launch a fresh temporary --user-data-dir.
  return chromium.launch({
    executablePath: requireTool('chromium'),
    headless: true,
    args: [...CHROMIUM_FLAGS],
  });
}

/**
 * Record into `problems` every console error (and warning, with `warnings`), uncaught page error and CSP
 * violation of `page`, each prefixed with `label`. Call before the first `goto`: the CSP listener is an init
 * script, installed in every document the page loads.
 */
export async function watchPage(
  page: Page,
  problems: string[],
  options: { label?: string; warnings?: boolean } = {},
): Promise<void> {
  const prefix = options.label ? `${options.label}: ` : '';
  page.on('pageerror', (err) => problems.push(`${prefix}uncaught ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || (options.warnings && m.type() === 'warning')) {
      problems.push(`${prefix}console ${m.type()}: ${m.text()}`);
    }
  });
  await page.addInitScript(
    `document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));`,
  );
}
