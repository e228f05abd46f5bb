/**
 * Pages in Debian's chromium through playwright-core, the same way in every package's browser tests: one
 * set of launch flags (no sandbox for root, no GPU, nothing that reaches the network by itself), and one
 * watcher that turns a console error, an uncaught page error or a Content-Security-Policy violation into a
 * recorded problem the test asserts empty. Kept apart from `./index.ts` so tests without a browser never
 * load playwright.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/**
 * Debian's chromium (installed by the test setup, `requireTool`), headless, with `CHROMIUM_FLAGS`; with
 * `netns`, inside that network namespace.
 */
export async function launchChromium(options: { netns?: string } = {}): Promise<Browser> {
  const bin = requireTool('chromium');
  let wrapper: { dir: string; file: string } | undefined;
  if (options.netns !== undefined) {
    // A page served inside a network namespace the test created: chromium runs in it through
    // `ip netns exec` (playwright's pipe, fds 3 and 4, passes through the exec).
    const dir = mkdtempSync(join(tmpdir(), 'chromium-netns-'));
    const file = join(dir, 'chromium');
    writeFileSync(file, `#!/bin/sh\nexec ${requireTool('ip')} netns exec ${options.netns} ${bin} "$@"\n`, {
      mode: 0o755,
    });
    wrapper = { dir, file };
  }
  // headless: true adds --headless; playwright gives every launch a fresh temporary --user-data-dir.
  const browser = await chromium.launch({
    executablePath: wrapper?.file ?? bin,
    headless: true,
    args: [...CHROMIUM_FLAGS],
  });
  if (wrapper) {
    const dir = wrapper.dir;
    browser.on('disconnected', () => rmSync(dir, { recursive: true, force: true }));
  }
  return browser;
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
