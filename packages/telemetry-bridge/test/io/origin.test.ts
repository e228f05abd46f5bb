/**
 * Host and Origin on the WebSocket upgrade (docs/protocol.md "Host and Origin"): a browser page from another
 * origin is refused with 403 before any handshake, the bridge's own origin and configured origins are let in,
 * a client without Origin (not a browser) is let in, a Host that does not name this host is refused with 421
 * like on the HTTP API; and the start warns when auth is off on a non-loopback address. The rule as a table:
 * test/app/origin.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { silentLogger } from '@broadcast-ops/core';
import { startTestBridge } from '../helpers.ts';
import { startBridge } from '../../src/app.ts';
import { testConfig } from '../helpers.ts';

/** Open a socket with these headers; resolves to the handshake's namespace, or `refused <status>`. */
function attempt(url: string, headers: Record<string, string>, origin?: string): Promise<string> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers, ...(origin !== undefined ? { origin } : {}) });
    ws.on('unexpected-response', (_req, res) => {
      resolve(`refused ${res.statusCode ?? 0}`);
      ws.terminate();
    });
    ws.on('error', () => resolve('error'));
    ws.on('open', () => ws.send(JSON.stringify({ type: 'handshake', name: 'probe', version: '1' })));
    ws.on('message', (data) => {
      const m = JSON.parse((data as Buffer).toString('utf8')) as { type: string; namespace?: string };
      if (m.type === 'handshake_response') {
        resolve(m.namespace ?? 'no namespace');
        ws.close();
      }
    });
  });
}

test('a foreign origin cannot upgrade; own, configured and absent origins can; a rebinding Host cannot', async () => {
  const tb = await startTestBridge({ clientTransport: { allowedOrigins: ['https://panel.example:8443'] } });
  try {
    const url = tb.bridge.clientUrl;
    const port = new URL(url).port;
    assert.equal(await attempt(url, {}), 'app.probe');
    assert.equal(await attempt(url, {}, `http://127.0.0.1:${port}`), 'app.probe');
    assert.equal(await attempt(url, {}, 'https://panel.example:8443'), 'app.probe');
    assert.equal(await attempt(url, {}, 'http://127.0.0.1:1'), 'refused 403');
    assert.equal(await attempt(url, {}, 'https://evil.example'), 'refused 403');
    assert.equal(await attempt(url, { host: `rebind.example:${port}` }), 'refused 421');
    const text = await tb.bridge.metrics.registry.metrics();
    const m = /telemetry_bridge_upgrades_refused_total\{reason="Origin not accepted"\} (\d+)/.exec(text);
    assert.equal(m?.[1], '2');
    assert.equal(tb.bridge.hub.stats().clients, 0, 'no refused socket became a client');
  } finally {
    await tb.close();
  }
});

test('start warns when auth is off on a non-loopback address, not on loopback', async () => {
  const warnings: string[] = [];
  const logger = silentLogger();
  const capture = new Proxy(logger, {
    get(target, prop, recv) {
      if (prop === 'warn') return (_o: unknown, msg?: string) => warnings.push(String(msg));
      if (prop === 'child') return () => capture;
      return Reflect.get(target, prop, recv) as unknown;
    },
  });
  for (const host of ['0.0.0.0', '127.0.0.1']) {
    const bridge = await startBridge({
      config: testConfig({ clientTransport: { host, port: 0 }, console: { enabled: false } }),
      logger: capture,
    });
    await bridge.close();
  }
  const hits = warnings.filter((w) => w.includes('requireAuth off'));
  assert.equal(hits.length, 1, `one warning for 0.0.0.0 only: ${JSON.stringify(warnings)}`);
});
