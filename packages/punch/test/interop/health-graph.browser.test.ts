import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { startTestServer } from '../helpers.ts';
import { connect } from '../ws-helpers.ts';

/**
 * The health graph renderer (src/io/console/health-graph.js) in Debian's chromium, under the pages' CSP:
 * a link whose two ends report as `punch agent` does (counters, some loss, one burst of drops), the
 * renderer fed with `GET /api/session/:name/health`; it draws every row, updates the same SVG in place on
 * the next call, and greys out with the age once the newest report is older than 15 s. A console error or
 * CSP violation fails the test. Screenshots in .tmp/punch-health-graph/ (desktop and phone widths).
 */
const OUT = join(repoRoot, '.tmp/punch-health-graph');

/** Runs in the page (a string: the test sources have no DOM types): fetch the view, render twice. */
const IN_PAGE_DRAW = `async (token) => {
  const res = await fetch('/api/session/gr/health', { headers: { authorization: 'Bearer ' + token } });
  const view = await res.json();
  const box = document.createElement('div');
  box.id = 'graph';
  document.body.append(box);
  const now = Date.now();
  const first = PunchHealthGraph.render(box, view, now);
  box.querySelector('svg').mark = 1;
  const second = PunchHealthGraph.render(box, view, now + 1000);
  const same = box.querySelector('svg').mark === 1;
  const paths = [...box.querySelectorAll('path.series')].map((p) => p.getAttribute('d') || '');
  const labels = [...box.querySelectorAll('text.label')].map((x) => x.textContent);
  return { first, second, same, svgs: box.querySelectorAll('svg').length, paths, labels };
}`;
/** Runs in the page: render as if 20 s had passed since the newest report. */
const IN_PAGE_STALE = `async (token) => {
  const res = await fetch('/api/session/gr/health', { headers: { authorization: 'Bearer ' + token } });
  const box = document.getElementById('graph');
  const out = PunchHealthGraph.render(box, await res.json(), Date.now() + 20000);
  return { ...out, cls: box.querySelector('svg').getAttribute('class'), note: box.querySelector('.stale-note').textContent };
}`;
interface Drawn {
  first: { stale: boolean };
  same: boolean;
  svgs: number;
  paths: string[];
  labels: string[];
}
interface Stale {
  stale: boolean;
  cls: string;
  note: string;
}

test('health graph: draws the 10-minute history, updates in place, greys out when stale', async () => {
  mkdirSync(OUT, { recursive: true });
  const t = await startTestServer({ signalling: { healthReportMs: 0 } });
  const browser = await launchChromium();
  try {
    const admin = (await t.call('POST', '/api/session', { body: { name: 'gr', latency: 120 } })).json
      .token as string;
    const tok = async () =>
      (await t.call('POST', '/api/session/gr/token', { token: admin, body: {} })).json.token as string;
    const s = await connect(t.url, 'gr', { token: await tok() });
    const r = await connect(t.url, 'gr', { token: await tok() });
    s.send({ type: 'register', port: 9000, role: 'sender' });
    r.send({ type: 'register', port: 9000, role: 'receiver' });
    await r.next('peer');
    for (let i = 0; i < 8; i++) {
      const lost = i % 3 === 0 ? 6 : 2;
      const counts = { packets: 400 + lost, unique: 400, lost, retransmitted: lost };
      const base = { type: 'health', rtt: 20 + i, retransmit: 0, bitrate: 4e6, counts };
      r.send({ ...base, role: 'receiver', dropped: i === 5 ? 4 : 0, latency: 120 });
      s.send({ ...base, role: 'sender', dropped: 0 });
    }
    await new Promise((res) => setTimeout(res, 300));
    // The last report's arrival bounds the age the stale note may show below (rendered 20 s after now).
    const reportsSentMs = Date.now();
    for (const [width, height, tag] of [
      [1440, 900, 'desktop'],
      [390, 844, 'phone'],
    ] as const) {
      const context = await browser.newContext({ viewport: { width, height } });
      const page = await context.newPage();
      const problems: string[] = [];
      await watchPage(page, problems);
      await page.goto(`${t.url}/`);
      await page.addScriptTag({ url: '/assets/health-graph.js' });
      const drawn = await page.evaluate<Drawn>(`(${IN_PAGE_DRAW})(${JSON.stringify(admin)})`);
      assert.equal(drawn.first.stale, false);
      assert.equal(drawn.same, true, 'the second render updates the same SVG');
      assert.equal(drawn.svgs, 1);
      assert.equal(drawn.paths.length, 5);
      for (const d of drawn.paths) assert.match(d, /^M[\d.]+,[\d.]+( L[\d.]+,[\d.]+){7}$/, d);
      assert.match(drawn.labels[0] ?? '', /^Loss before ARQ \(receiver\), %: 0\.5/);
      assert.match(drawn.labels[4] ?? '', /^Dropped too late \(receiver\), packets: 0/);
      await page.screenshot({ path: join(OUT, `${tag}.png`), fullPage: true });
      const stale = await page.evaluate<Stale>(`(${IN_PAGE_STALE})(${JSON.stringify(admin)})`);
      assert.equal(stale.stale, true);
      assert.match(stale.cls ?? '', /stale/);
      // The age shown is the real one: at least the 20 s the render looks ahead, at most that plus the time
      // since the reports were sent (the phone pass runs after the desktop one; a loaded machine is slow).
      const age = Number(/^stale: last report (\d+) s ago$/.exec(stale.note ?? '')?.[1] ?? NaN);
      const sinceS = Math.ceil((Date.now() - reportsSentMs) / 1000);
      assert.ok(age >= 20 && age <= 20 + sinceS + 1, `note "${stale.note}", ${sinceS} s after the reports`);
      await page.screenshot({ path: join(OUT, `${tag}-stale.png`), fullPage: true });
      assert.deepEqual(problems, []);
      await context.close();
    }
    s.close();
    r.close();
  } finally {
    await browser.close();
    await t.close();
  }
});
