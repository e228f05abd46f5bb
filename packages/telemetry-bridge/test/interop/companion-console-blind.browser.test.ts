/**
 * The console says when it is blind (docs/console.md "When the console is blind"), in Debian's chromium:
 * the bridge runs as its own process against the Companion simulator; once the console is live the bridge
 * is SIGKILLed, and within 2 s (scaled by the machine's load; the figure printed) every panel is greyed
 * with the reason and the age of its data. The bridge comes back and the console is live again without a
 * reload. On a phone (390 px wide) the surface keys do not overlap and no text is below 15 px; the event
 * log shows the newest segment's used bytes, not its preallocated size. Screenshots under
 * packages/telemetry-bridge/.tmp/test-output/console/ (gitignored).
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { loadFactor, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { watchPage } from '@broadcast-ops/core/testing/browser';
import { consoleBrowser, SHOTS } from '../companion/console-browser.ts';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { listSegments } from '../../src/io/event-log.ts';
import { bridgeProcess, type BridgeProcess } from '../bridge-process.ts';

const DEVICE = 'tb-blind-01';

const chromium = consoleBrowser();

const blindState = (page: Page): Promise<{ sections: number; notes: string[]; blind: boolean }> =>
  page.evaluate<{ sections: number; notes: string[]; blind: boolean }>(`(() => {
    const sections = [...document.querySelectorAll('#main > section')];
    return {
      sections: sections.length,
      notes: sections.map((s) => {
        const n = s.querySelector(':scope > .blind-note');
        return n && !n.hidden ? n.textContent || '' : '';
      }),
      blind: document.getElementById('main').classList.contains('blind'),
    };
  })()`);

test('console: every panel grey with reason and age within 2 s of losing the bridge; phone layout', async (t) => {
  const dir = tempDir('tb-blind-');
  const sim = new CompanionSimulator();
  let proc: BridgeProcess | undefined;
  const problems: string[] = [];
  try {
    const { ws: simPort } = await sim.listen({ tcp: null });
    // A surface 8 keys wide, as in the review that found keys overlapping on a phone.
    proc = await bridgeProcess(dir.path, sim, simPort, DEVICE, {
      companion: { device: { keysTotal: 32, keysPerRow: 8 } },
    });
    for (let i = 0; i < 16; i++)
      sim.setButton(1, Math.floor(i / 8), i % 8, { text: `CAM ${i + 1}`, color: '#204060' });
    const bridge = await proc.start();
    const url = `http://127.0.0.1:${proc.port}/`;
    const page = await chromium().newPage({ viewport: { width: 1280, height: 900 } });
    await watchPage(page, problems);
    await page.goto(url);
    await page.waitForSelector('#conn.ok', { timeout: 15_000 });
    await waitFor(async () => (await page.locator('#surface .key').count()) === 32 || undefined, {
      what: 'the surface drawn',
    });
    const live = await blindState(page);
    assert.equal(live.blind, false);
    assert.ok(
      live.notes.every((n) => n === ''),
      'no note while live',
    );

    // Used bytes of the newest segment, not the preallocated file.
    await waitFor(
      async () => (await page.locator('#eventlog').textContent())?.includes('B used') || undefined,
      { what: 'event log panel' },
    );
    const hub = (await (await fetch(`${url}api/hub`)).json()) as {
      eventLog: { segments: { name: string; bytes: number }[] };
    };
    const newest = hub.eventLog.segments.at(-1);
    assert.ok(newest && newest.bytes > 0);
    const events = join(dir.path, 'events');
    assert.equal(newest.name, listSegments(events).at(-1)?.name);
    assert.ok(
      newest.bytes < statSync(join(events, newest.name)).size,
      `used ${newest.bytes} B, below the preallocated file`,
    );
    await page.screenshot({ path: join(SHOTS, 'blind-0-live.png'), fullPage: true });

    const before = problems.length;
    await bridge.stop('SIGKILL');
    const killedAt = Date.now();
    await waitFor(
      async () => {
        const s = await blindState(page);
        return (s.blind && s.notes.every((n) => n.startsWith('Not live'))) || undefined;
      },
      { timeoutMs: 5000, intervalMs: 20, what: 'every panel blind' },
    );
    const blindMs = Date.now() - killedAt;
    t.diagnostic(`bridge killed → every panel grey with the reason in ${blindMs} ms`);
    assert.ok(blindMs < 2000 * loadFactor(), `blind after ${blindMs} ms`);
    const blind = await blindState(page);
    assert.equal(blind.notes.length, blind.sections);
    for (const n of blind.notes) {
      assert.match(n, /lost the connection to the bridge|does not answer/);
      assert.match(n, /Showing data from .+ \(\d+ s old\)/);
    }
    // Greyed: every panel's content is desaturated.
    const filters = await page.evaluate<string[]>(
      `[...document.querySelectorAll('#main > section > :not(h2):not(.blind-note)')].map((e) => getComputedStyle(e).filter)`,
    );
    assert.ok(filters.length > 0 && filters.every((f) => f.includes('grayscale')), filters.join());
    await new Promise((r) => setTimeout(r, 1200));
    await page.screenshot({ path: join(SHOTS, 'blind-1-bridge-killed.png'), fullPage: true });
    // The age goes on counting.
    assert.match((await blindState(page)).notes[0] ?? '', /\([1-9]\d* s old\)/);

    // The bridge comes back: live again, without a reload.
    await proc.start();
    await page.waitForSelector('#conn.ok', { timeout: 20_000 });
    await waitFor(async () => !(await blindState(page)).blind || undefined, { what: 'live again' });
    // The refused reconnects and polls while the bridge was down are the only console errors.
    const mine = problems
      .splice(before)
      .filter(
        (p) => !/ERR_CONNECTION_REFUSED|WebSocket connection to .* failed|Failed to load resource/.test(p),
      );
    assert.deepEqual(mine, []);

    // Phone: keys do not overlap, text at least 15 px.
    const phone = await chromium().newPage({ viewport: { width: 390, height: 844 } });
    await watchPage(phone, problems);
    await phone.goto(url);
    await phone.waitForSelector('#conn.ok', { timeout: 15_000 });
    await waitFor(async () => (await phone.locator('#surface .key').count()) === 32 || undefined, {
      what: 'the surface on the phone',
    });
    type Box = { x: number; y: number; w: number; h: number };
    const boxes = await phone.evaluate<Box[]>(
      `[...document.querySelectorAll('#surface .key')].map((k) => {
        const r = k.getBoundingClientRect();
        return { x: r.x, y: r.y, w: r.width, h: r.height };
      })`,
    );
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i] as Box;
        const b = boxes[j] as Box;
        const overlap =
          a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
        assert.ok(!overlap, `keys ${i} and ${j} overlap: ${JSON.stringify([a, b])}`);
      }
    assert.ok(
      boxes.every((b) => b.w >= 44 && b.h >= 44),
      'every key at least 44 px',
    );
    // Every element with its own text, at its computed size.
    const small = await phone.evaluate<{ tag: string; size: number; text: string }[]>(
      `[...document.querySelectorAll('body *')]
        .filter((e) => [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== ''))
        .map((e) => ({ tag: e.tagName, size: parseFloat(getComputedStyle(e).fontSize), text: e.textContent.slice(0, 30) }))
        .filter((e) => e.size < 15)`,
    );
    assert.deepEqual(small, [], 'no text below 15 px');
    await phone.screenshot({ path: join(SHOTS, 'blind-2-phone.png'), fullPage: true });
    await phone.close();
    await page.close();
    assert.deepEqual(problems.splice(0), []);
  } finally {
    await proc?.killAll();
    await sim.close();
    dir.remove();
  }
});
