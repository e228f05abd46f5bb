import assert from 'node:assert/strict';
import { test } from 'node:test';
import { join } from 'node:path';
import { repoRoot } from '@broadcast-ops/core/testing';
import { loadMonitorConfig, MAX_DEVICES, serverPort } from '../../src/config.ts';

const demo = join(repoRoot, 'config', 'playout-monitor.demo.json');

test('the committed demo config parses: one device of each kind on the npm start ports', () => {
  const c = loadMonitorConfig({ file: demo, environment: {} });
  assert.equal(c.settings.webSocketPort, 8100);
  assert.deepEqual(
    c.servers.map((s) => [s.type, s.ip, serverPort(s, c.settings)]),
    [
      ['osc_player', '127.0.0.1', 6250],
      ['http_mixer', '127.0.0.1', 18088],
      ['tcp_recorder', '127.0.0.1', 19993],
    ],
  );
});

test('defaults fill in: ports per type, framerate 50, updateIntervalMs 100, channel 1 layer 10', () => {
  const c = loadMonitorConfig({
    data: {
      settings: {},
      servers: [
        { id: 1, name: 'A', type: 'osc_player', ip: '10.0.0.1' },
        { id: 2, name: 'B', type: 'tcp_recorder', ip: '10.0.0.2' },
      ],
    },
    environment: {},
  });
  assert.equal(c.settings.defaultFramerate, 50);
  assert.equal(c.settings.updateIntervalMs, 100);
  assert.equal(c.settings.webSocketPort, 3050);
  const [a, b] = c.servers;
  assert.ok(a?.type === 'osc_player');
  assert.deepEqual([a.channel, a.layer, a.staleTimeoutMs, serverPort(a, c.settings)], [1, 10, 5000, 6250]);
  assert.ok(b?.type === 'tcp_recorder');
  assert.equal(serverPort(b, c.settings), 9993);
  // README "Configuration": an absent deck is retried up to every 5 s, so one that returns is seen within 5 s.
  assert.deepEqual([b.reconnectMinMs, b.reconnectMaxMs], [1000, 5000]);
});

test('invalid configs fail with the key named', () => {
  const server = (id: number) => ({ id, name: `D${id}`, type: 'http_mixer', ip: '10.0.0.1' });
  const bad: [unknown, RegExp][] = [
    [{ servers: [server(1)] }, /settings/],
    [{ settings: {} }, /servers/],
    [{ settings: {}, servers: [] }, /servers/],
    [{ settings: {}, servers: Array.from({ length: MAX_DEVICES + 1 }, (_, i) => server(i + 1)) }, /servers/],
    [{ settings: {}, servers: [server(1), server(1)] }, /duplicate id 1/],
    [{ settings: { webSocketPrt: 1 }, servers: [server(1)] }, /unknown key "settings.webSocketPrt"/],
    [{ settings: {}, servers: [{ ...server(1), type: 'atem' }] }, /servers\.0\.type/],
    [{ settings: {}, servers: [{ ...server(1), channel: 2 }] }, /channel/],
    [
      {
        settings: {},
        servers: [{ id: 1, name: 'C', type: 'osc_player', ip: '10.0.0.1', videoFormat: '1080x50' }],
      },
      /servers\.0\.videoFormat.*not a CasparCG video-mode/s,
    ],
  ];
  for (const [data, re] of bad)
    assert.throws(() => loadMonitorConfig({ data, environment: {} }), re, JSON.stringify(data).slice(0, 80));
  assert.throws(() => loadMonitorConfig({ environment: {} }), /--config/);
});

test('osc_player videoFormat takes CasparCG video-mode names', () => {
  const c = loadMonitorConfig({
    data: {
      settings: {},
      servers: [{ id: 1, name: 'C', type: 'osc_player', ip: '10.0.0.1', videoFormat: '1080i5000' }],
    },
    environment: {},
  });
  assert.equal(c.servers[0]?.type === 'osc_player' ? c.servers[0].videoFormat : undefined, '1080i5000');
});

test('environment overrides the HTTP port', () => {
  const c = loadMonitorConfig({ file: demo, environment: { PLAYOUT_MONITOR_PORT: '8200' } });
  assert.equal(c.settings.webSocketPort, 8200);
});
