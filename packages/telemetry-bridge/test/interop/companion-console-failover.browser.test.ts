/**
 * A failover between Companions is one event on the console (docs/console.md "Link events"), in Debian's
 * chromium: the primary goes away while the backup is not yet listening, so the adapter fails several
 * attempts before the backup answers. Throughout, the console's link-event list holds one row for the
 * outage: "Link lost" while it lasts, then the same row as "Failover: primary → backup" with the time and
 * the failed attempts. A WebSocket client sees exactly one `failover` event. The surface asks for png
 * bitmaps, which Companion sends as data URLs: the mirror draws them as images. Screenshots under
 * packages/telemetry-bridge/.tmp/test-output/console/ (gitignored).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { waitFor } from '@broadcast-ops/core/testing';
import { watchPage } from '@broadcast-ops/core/testing/browser';
import { consoleBrowser, SHOTS } from '../companion/console-browser.ts';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import type { EventMessage } from '@broadcast-ops/bridge-client';
import { DEVICE, rig } from '../companion/harness.ts';

const chromium = consoleBrowser();

const rows = (page: Page): Promise<{ cls: string; text: string }[]> =>
  page.evaluate<{ cls: string; text: string }[]>(
    `[...document.querySelectorAll('#link-events li')].map((li) => ({ cls: li.className, text: li.textContent || '' }))`,
  );

test('console: a primary → backup failover with failed attempts is one row, and one event on the wire', async (t) => {
  const primary = new CompanionSimulator();
  const { ws: priPort } = await primary.listen({ tcp: null });
  // The backup's port is reserved, then closed: the first attempts on it are refused.
  const backup = new CompanionSimulator();
  const { ws: bakPort } = await backup.listen({ tcp: null });
  await backup.close();
  const r = await rig({
    sim: {},
    companion: {
      hosts: [
        { host: '127.0.0.1', port: priPort },
        { host: '127.0.0.1', port: bakPort },
      ],
      // png bitmaps (a data URL from Companion 1.12.0+): the mirror shows them as images.
      device: {
        deviceId: DEVICE,
        productName: 'Failover',
        keysTotal: 8,
        keysPerRow: 4,
        bitmaps: 8,
        bitmapFormat: 'png',
      },
      failoverDelay: 100,
      reconnectDelay: 200,
      maxReconnectDelay: 400,
      reconnectJitter: 0,
    },
  });
  const problems: string[] = [];
  try {
    const page = await chromium().newPage({ viewport: { width: 1280, height: 900 } });
    await watchPage(page, problems);
    await page.goto(r.bridge.consoleUrl as string);
    await page.waitForSelector('#conn.ok', { timeout: 15_000 });
    await waitFor(
      async () =>
        ((await rows(page)).some((x) => x.text === 'No link outage recorded.') &&
          ((await page.locator('#link').textContent()) ?? '').includes('primary')) ||
        undefined,
      { what: 'live on the primary' },
    );

    await waitFor(async () => (await page.locator('#surface .key img').count()) === 8 || undefined, {
      what: 'eight png bitmaps in the mirror',
    });
    const c = await r.client('watcher');
    const linkEvents: EventMessage[] = [];
    c.on('event', (m) => {
      if (m.path === 'companion.connection') linkEvents.push(m);
    });
    await c.subscribe(['companion.connection'], { filter: 'events' });

    await primary.close();
    const open = await waitFor(
      async () => {
        const x = await rows(page);
        return x.length === 1 && x[0]?.cls === 'open' ? x[0] : undefined;
      },
      { intervalMs: 20, what: 'the open outage row' },
    );
    assert.match(open.text, new RegExp(`Link lost: primary 127\\.0\\.0\\.1:${priPort} \\(`));
    // Let the adapter fail a few attempts on both hosts before the backup answers.
    await new Promise((res) => setTimeout(res, 900));
    assert.equal((await rows(page)).length, 1, 'still one row while attempts fail');
    await page.screenshot({ path: join(SHOTS, 'failover-0-open.png'), fullPage: true });
    await backup.listen({ ws: bakPort ?? 0, tcp: null });

    const done = await waitFor(
      async () => {
        const x = await rows(page);
        return x[0]?.cls === 'failover' ? x : undefined;
      },
      { timeoutMs: 10_000, what: 'the failover row' },
    );
    assert.equal(done.length, 1, JSON.stringify(done));
    const text = done[0]?.text ?? '';
    t.diagnostic(text);
    assert.match(
      text,
      new RegExp(
        `Failover: primary 127\\.0\\.0\\.1:${priPort} → backup 127\\.0\\.0\\.1:${bakPort} after \\d+\\.\\d s`,
      ),
    );
    assert.match(text, /; [1-9]\d* failed attempts?\)$/);
    await page.screenshot({ path: join(SHOTS, 'failover-1-done.png'), fullPage: true });

    await waitFor(() => linkEvents.length > 0 || undefined, { what: 'the failover event' });
    await new Promise((res) => setTimeout(res, 300));
    assert.deepEqual(
      linkEvents.map((e) => e.payload.event),
      ['failover'],
      'one event for the outage',
    );
    const data = linkEvents[0]?.payload.data as { failedAttempts: number; to: { port: number } };
    assert.ok(data.failedAttempts >= 1);
    assert.equal(data.to.port, bakPort);
    const kept = r.get('companion.connection.events')?.value as unknown[];
    assert.equal(kept.length, 1);
    await page.close();
    assert.deepEqual(problems, []);
  } finally {
    await r.close();
    await primary.close();
    await backup.close();
  }
});
