import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import WebSocket from 'ws';
import { repoRoot, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient, BridgeError } from '@broadcast-ops/bridge-client';
import { DEFAULT_CONFIG, envOverrides, loadBridgeConfig } from '../../src/config.ts';
import { record, startTestBridge } from '../helpers.ts';

const TOKEN = 'a-long-enough-token-0123456789';

function rawClient(
  url: string,
  headers: Record<string, string> = {},
): Promise<{
  ws: WebSocket;
  messages: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
}> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const messages: Record<string, unknown>[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.on('message', (d: Buffer) => messages.push(JSON.parse(d.toString()) as Record<string, unknown>));
    ws.on('open', () => resolve({ ws, messages, closed }));
    ws.on('error', reject);
  });
}

test('handshake rules and close codes: 4001, 4002, 4003, 4000, 1013; bearer header or authToken', async () => {
  const t = await startTestBridge({
    clientTransport: { requireAuth: true, authTokens: [TOKEN], handshakeTimeout: 200, maxClients: 3 },
  });
  try {
    const url = t.bridge.clientUrl;
    const a = await rawClient(url);
    a.ws.send(JSON.stringify({ type: 'subscribe' }));
    assert.equal((await a.closed).code, 4001);
    const b = await rawClient(url);
    b.ws.send(JSON.stringify({ type: 'handshake', name: 42 }));
    assert.equal((await b.closed).code, 4002);
    assert.equal(b.messages[0]!['success'], false);
    const c = await rawClient(url);
    c.ws.send(
      JSON.stringify({ type: 'handshake', name: 'x', version: '1', authToken: 'wrong-token-wrong-token' }),
    );
    assert.equal((await c.closed).code, 4003);
    assert.deepEqual(c.messages[0], {
      type: 'handshake_response',
      serverVersion: '0.1.0',
      protocolVersion: '0.1',
      success: false,
      error: 'Authentication failed',
    });
    const d = await rawClient(url);
    assert.equal((await d.closed).code, 4000, 'no handshake within handshakeTimeout');
    await assert.rejects(
      new BridgeClient({ url, name: 'nope', reconnect: { enabled: false } }).connect(),
      BridgeError,
    );
    const inBody = await t.client('body', { authToken: TOKEN });
    const inHeader = await t.client('header', { authToken: TOKEN, authInHeader: true });
    assert.equal(inBody.namespace, 'app.body');
    assert.equal(inHeader.namespace, 'app.header');
    const third = await t.client('third', { authToken: TOKEN });
    assert.ok(third.connected);
    const e = await rawClient(url);
    assert.equal((await e.closed).code, 1013, 'maxClients');
  } finally {
    await t.close();
  }
});

test('metrics: every declared metric is updated by traffic; health bodies', async () => {
  const t = await startTestBridge({ clientTransport: { rateLimit: 5, rateLimitWindow: 60_000 } });
  try {
    const c = await t.client('m');
    const r = record(c);
    await c.subscribe(['fake.**', 'app.**']);
    await c.setState('x', 1);
    t.adapter.set('fake.v', 1);
    await c.command('fake', 'fake.x', 'ok').done;
    await assert.rejects(c.setStatePath('fake.v', 2));
    for (let i = 0; i < 3; i++) c.sendRaw('{}');
    await waitFor(() => r.all.filter((x) => x.type === 'error').length >= 3);
    t.adapter.ctx!.reportReconnect();
    t.adapter.ctx!.reportLatency(0.002);
    const text = await (await fetch(t.bridge.metricsUrl!)).text();
    const nonZero = (name: string): boolean =>
      text
        .split('\n')
        .some((l) => l.startsWith(name) && !l.startsWith('#') && Number(l.split(' ').at(-1)) > 0);
    for (const name of [
      'telemetry_bridge_connections_current',
      'telemetry_bridge_connections_total',
      'telemetry_bridge_messages_received_total',
      'telemetry_bridge_messages_sent_total',
      'telemetry_bridge_message_errors_total',
      'telemetry_bridge_commands_total',
      'telemetry_bridge_command_duration_seconds_count',
      'telemetry_bridge_state_entries_current',
      'telemetry_bridge_state_updates_total',
      'telemetry_bridge_subscriptions_current',
      'telemetry_bridge_subscribers_current',
      'telemetry_bridge_rate_limit_hits_total',
      'telemetry_bridge_adapter_state',
      'telemetry_bridge_adapter_reconnects_total',
      'telemetry_bridge_adapter_latency_seconds_count',
    ]) {
      assert.ok(nonZero(name), `${name} has a non-zero sample`);
    }
    assert.match(text, /telemetry_bridge_queue_size_current\{queue="client_messages"\} 0/);
    await c.close();
    await waitFor(async () =>
      /telemetry_bridge_disconnections_total\{type="client",reason="client"\} 1/.test(
        await (await fetch(t.bridge.metricsUrl!)).text(),
      ),
    );

    const health = await fetch(`${t.bridge.healthUrl!}/health`);
    assert.equal(health.status, 200);
    const body = (await health.json()) as {
      status: string;
      dependencies: { name: string; status: string }[];
      version: string;
    };
    assert.equal(body.status, 'healthy');
    assert.equal(body.version, '0.1.0');
    assert.deepEqual(
      body.dependencies.map((d) => d.name),
      ['state_store', 'router', 'client_transport', 'fake.device'],
    );
    t.adapter.ctx!.setConnected(false);
    const degraded = (await (await fetch(`${t.bridge.healthUrl!}/health`)).json()) as { status: string };
    assert.equal(degraded.status, 'degraded');
    const ready = await fetch(`${t.bridge.healthUrl!}/health/ready`);
    assert.equal(ready.status, 200, 'a disconnected device keeps the bridge ready');
    assert.equal(((await ready.json()) as { ready: boolean }).ready, true);
    const live = (await (await fetch(`${t.bridge.healthUrl!}/health/live`)).json()) as { alive: boolean };
    assert.equal(live.alive, true);
  } finally {
    await t.close();
  }
});

test('config: the committed demo config parses; env overrides reach camelCase keys; unknown keys fail', () => {
  const demo = loadBridgeConfig(join(repoRoot, 'config/telemetry-bridge.demo.json'), {});
  assert.equal(demo.clientTransport.port, 8765);
  assert.equal(demo.metrics.port, 9090);
  assert.equal(demo.health.port, 9091);
  assert.equal(demo.companion.enabled, false);
  assert.equal(envOverrides()['BRIDGE_CLIENT_TRANSPORT_PORT']?.path, 'clientTransport.port');
  assert.equal(envOverrides()['BRIDGE_CLIENT_TRANSPORT_MAX_CLIENTS']?.path, 'clientTransport.maxClients');
  const env = loadBridgeConfig(undefined, {
    BRIDGE_CLIENT_TRANSPORT_PORT: '9999',
    BRIDGE_CLIENT_TRANSPORT_REQUIRE_AUTH: 'true',
    BRIDGE_CLIENT_TRANSPORT_AUTH_TOKENS: `${TOKEN}, ${TOKEN}x`,
    BRIDGE_LOGGING_LEVEL: 'debug',
    BRIDGE_COMPANION_HOST: '10.0.0.1',
  });
  assert.equal(env.clientTransport.port, 9999);
  assert.equal(env.clientTransport.requireAuth, true);
  assert.deepEqual(env.clientTransport.authTokens, [TOKEN, `${TOKEN}x`]);
  assert.equal(env.logging.level, 'debug');
  assert.equal(env.companion.host, '10.0.0.1');
  assert.equal(DEFAULT_CONFIG.clientTransport.rateLimit, 100);
  const dir = tempDir('tb-cfg-');
  try {
    const bad = join(dir.path, 'bad.json');
    writeFileSync(bad, JSON.stringify({ clientTransport: { prot: 1 } }));
    assert.throws(() => loadBridgeConfig(bad, {}), /unknown key "clientTransport\.prot"/);
    assert.throws(
      () => loadBridgeConfig(undefined, { BRIDGE_CLIENT_TRANSPORT_REQUIRE_AUTH: 'true' }),
      /authTokens is empty/,
    );
  } finally {
    dir.remove();
  }
});

test('CLI: `telemetry-bridge --config` serves clients, logs JSON with the spec fields, exits 0 on SIGTERM', async () => {
  const dir = tempDir('tb-cli-');
  const cfg = join(dir.path, 'c.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      clientTransport: { host: '127.0.0.1', port: 0 },
      metrics: { host: '127.0.0.1', port: 0 },
      health: { host: '127.0.0.1', port: 0 },
      eventLog: { path: join(dir.path, 'events') },
    }),
  );
  const p = startProcess(process.execPath, [
    join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'),
    '--config',
    cfg,
  ]);
  try {
    const m = await p.waitForOutput(/"clients":"(ws:\/\/[^"]+)"/, 20_000);
    const c = new BridgeClient({ url: m[1]!, name: 'cli', reconnect: { enabled: false } });
    await c.connect();
    await c.setState('hello', 'world');
    await c.close();
    const line = p
      .output()
      .split('\n')
      .find((l) => l.includes('telemetry bridge listening'))!;
    const rec = JSON.parse(line) as Record<string, unknown>;
    assert.equal(rec['level'], 30);
    assert.equal(rec['service'], 'telemetry-bridge');
    assert.match(String(rec['time']), /^\d{4}-\d\d-\d\dT/);
    const exit = await p.stop('SIGTERM');
    assert.equal(exit.code, 0);
    const help = startProcess(process.execPath, [
      join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'),
      'help',
    ]);
    await help.exited;
    assert.match(help.output(), /replay/);
  } finally {
    await p.stop('SIGKILL');
    dir.remove();
  }
});

test('app-level ping gets pong; a silent client is closed 4004 after idleTimeout', async () => {
  const t = await startTestBridge({ clientTransport: { idleTimeout: 1000 } });
  try {
    const c = await rawClient(t.bridge.clientUrl);
    c.ws.send(JSON.stringify({ type: 'handshake', name: 'quiet', version: '1' }));
    await waitFor(() => c.messages.length === 1);
    assert.equal(c.messages[0]!['namespace'], 'app.quiet');
    c.ws.send(JSON.stringify({ type: 'ping', timestamp: 1 }));
    await waitFor(() => c.messages.length === 2);
    assert.equal(c.messages[1]!['type'], 'pong');
    const closed = await c.closed;
    assert.equal(closed.code, 4004);
    assert.equal(closed.reason, 'Idle timeout');
  } finally {
    await t.close();
  }
});
