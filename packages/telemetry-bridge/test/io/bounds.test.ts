/**
 * Authentication failures and connections on a running bridge: logged (never the token) and counted. The
 * per-client bounds and honest failures of the hub (keys per client, departed keys, the replay ring, errors
 * instead of silence, commands in flight) run on a `ManualClock` in test/app/bounds.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient, BridgeError } from '@broadcast-ops/bridge-client';
import { startTestBridge } from '../helpers.ts';

test('authentication failures are logged (never the token) and counted; connects and disconnects logged', async () => {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'telemetry-bridge',
    destination: { write: (s: string) => void lines.push(s) },
  });
  const token = 'the-right-token-0123456789';
  const t = await startTestBridge(
    { clientTransport: { requireAuth: true, authTokens: [token] } },
    { logger },
  );
  try {
    const bad = new BridgeClient({
      url: t.bridge.clientUrl,
      name: 'intruder',
      authToken: 'wrong-token-abcdefghij',
      reconnect: { enabled: false },
    });
    await assert.rejects(bad.connect(), BridgeError);
    const good = await t.client('good', { authToken: token });
    await good.close();
    await waitFor(() => lines.some((l) => l.includes('"client disconnected"')));
    const failure = JSON.parse(lines.find((l) => l.includes('client authentication failed'))!) as Record<
      string,
      unknown
    >;
    assert.equal(failure['level'], 40);
    assert.match(String(failure['remote']), /^127\.0\.0\.1:\d+$/);
    assert.equal(failure['name'], 'intruder');
    assert.ok(
      !lines.some((l) => l.includes('wrong-token-abcdefghij') || l.includes(token)),
      'no token in the log',
    );
    const connected = JSON.parse(lines.find((l) => l.includes('"client connected"'))!) as Record<
      string,
      unknown
    >;
    assert.equal(connected['namespace'], 'app.good');
    const metrics = await (await fetch(t.bridge.metricsUrl!)).text();
    assert.match(metrics, /telemetry_bridge_auth_failures_total 1/);
    assert.match(metrics, /telemetry_bridge_disconnections_total\{type="client",reason="auth_failed"\} 1/);
  } finally {
    await t.close();
  }
});
