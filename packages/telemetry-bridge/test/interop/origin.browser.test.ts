/**
 * In Debian's chromium (playwright-core): a page served from another origin (another port on 127.0.0.1)
 * tries to open the bridge's WebSocket and send a handshake; the upgrade is refused (docs/protocol.md
 * "Host and Origin"), so it never gets a handshake_response and no client appears on the hub. The console
 * from the bridge's own origin still connects. The foreign page's console is not watched (Chromium logs the
 * refused handshake there, which is the point); the console page is, and any error fails the test.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { waitFor } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { startTestBridge } from '../helpers.ts';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

function foreignSite(bridgeUrl: string): Promise<Server> {
  const html = `<!doctype html><title>foreign</title><script>
window.outcome = [];
const ws = new WebSocket(${JSON.stringify(bridgeUrl)});
ws.onopen = () => { window.outcome.push('open'); ws.send(JSON.stringify({ type: 'handshake', name: 'evil', version: '1' })); };
ws.onmessage = (e) => window.outcome.push('message ' + JSON.parse(e.data).type);
ws.onerror = () => window.outcome.push('error');
ws.onclose = (e) => window.outcome.push('close ' + e.code);
</script>`;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

test('a page from another origin cannot complete a handshake; the console from the own origin can', async () => {
  const tb = await startTestBridge();
  const site = await foreignSite(tb.bridge.clientUrl);
  try {
    const sitePort = (site.address() as AddressInfo).port;
    assert.notEqual(String(sitePort), new URL(tb.bridge.clientUrl).port);
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${sitePort}/`);
    await waitFor(
      async () =>
        (await page.evaluate<string[]>('window.outcome')).some((o) => o.startsWith('close')) || undefined,
      { timeoutMs: 10_000, intervalMs: 50, what: 'the foreign socket closed' },
    );
    const outcome = await page.evaluate<string[]>('window.outcome');
    assert.ok(!outcome.includes('open'), `never opened: ${outcome.join(', ')}`);
    assert.ok(!outcome.some((o) => o.startsWith('message')), `no message at all: ${outcome.join(', ')}`);
    assert.equal(tb.bridge.hub.clientViews().length, 0, 'no client on the hub');
    const refused = await tb.bridge.metrics.registry.metrics();
    assert.match(refused, /telemetry_bridge_upgrades_refused_total\{reason="Origin not accepted"\} 1/);

    const problems: string[] = [];
    const own = await browser.newPage();
    await watchPage(own, problems);
    await own.goto(tb.bridge.consoleUrl as string);
    await own.waitForSelector('#conn.ok', { timeout: 15_000 });
    assert.equal(tb.bridge.hub.clientViews().length, 1, 'the console is a client');
    assert.deepEqual(problems, []);
  } finally {
    await new Promise<void>((r) => site.close(() => r()));
    await tb.close();
  }
});
