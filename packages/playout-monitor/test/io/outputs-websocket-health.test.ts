import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WebSocket } from 'ws';
import { startRig, until, type Rig } from '../outputs/helpers.ts';

interface Msg {
  type: string;
  timestamp?: number;
  data?: unknown;
  error?: { code: string };
}

let rig: Rig;
const INTERVAL = 200;

before(async () => {
  rig = await startRig(2, { updateIntervalMs: INTERVAL });
  await until(() => rig.service.view.list().every((d) => d.connected) || undefined, 5000, 'decks connected');
});
after(async () => rig?.close());

function open(path = '/ws', headers: Record<string, string> = {}): Promise<{ ws: WebSocket; msgs: Msg[] }> {
  const ws = new WebSocket(rig.url.replace(/^http/, 'ws') + path, { headers });
  const msgs: Msg[] = [];
  ws.on('message', (d: Buffer) => msgs.push(JSON.parse(d.toString('utf8')) as Msg));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, msgs }));
    ws.once('error', reject);
  });
}

async function healthJson(): Promise<{
  status: string;
  devices: { total: number; connected: number; list: { id: number; state: string }[] };
  protocols: {
    websocket: { clients: number };
    emberPlus: { enabled: boolean; running: boolean; port: number };
    tslUmd: { enabled: boolean; running: boolean; destinations: number };
  };
  memory: { heapUsed: number; heapTotal: number; unit: string };
  uptime: number;
  version: string;
}> {
  const res = await fetch(`${rig.url}/health`);
  assert.equal(res.status, 200);
  return (await res.json()) as Awaited<ReturnType<typeof healthJson>>;
}

test('the WebSocket sends the whole state on connect, on the pages\u2019 own origin at /ws (and /)', async () => {
  for (const path of ['/ws', '/']) {
    const { ws, msgs } = await open(path);
    const first = await until(() => msgs[0], 3000, 'first message');
    assert.equal(first.type, 'playoutStates');
    const data = first.data as {
      id: number;
      state: string;
      timecode: string;
      connected: boolean;
      staleAfterMs: number;
    }[];
    assert.deepEqual(
      data.map((d) => d.id),
      [1, 2],
    );
    for (const d of data) {
      assert.equal(d.connected, true);
      assert.match(d.timecode, /^\d\d:\d\d:\d\d:\d\d$/);
      assert.ok(d.staleAfterMs > 0);
    }
    assert.ok((first as { protocols?: { emberPlus?: { running?: boolean } } }).protocols?.emberPlus?.running);
    ws.close();
  }
});

test('other paths and cross-origin browsers are refused; same-origin browsers are accepted', async () => {
  await assert.rejects(open('/elsewhere'), /404/);
  const host = new URL(rig.url).host;
  const { ws: good, msgs } = await open('/ws', { origin: `http://${host}` });
  await until(() => msgs[0], 3000, 'same-origin snapshot');
  good.close();
  const { ws: bad } = await open('/ws', { origin: 'http://evil.example' });
  const code = await new Promise<number>((resolve) => bad.once('close', (c) => resolve(c)));
  assert.equal(code, 1008);
});

test('a device\u2019s updates are sent at most once per updateIntervalMs, and the last one carries the latest state', async () => {
  const { ws, msgs } = await open();
  await until(() => msgs[0], 3000, 'snapshot');
  // 40 state changes of device 1 as fast as possible (simulated states go through the same outputs).
  const states = ['play', 'stop', 'rec', 'offline'] as const;
  for (let i = 0; i < 40; i++) {
    rig.service.view.simulate(1, { state: states[i % 4]!, filename: `clip-${i}` });
    await new Promise((r) => setTimeout(r, 5));
  }
  await until(
    () =>
      msgs.some(
        (m) =>
          m.type === 'deviceState' && (m.data as { filename: string; id: number }).filename === 'clip-39',
      ) || undefined,
    3000,
    'the final state',
  );
  const sends = msgs
    .filter((m) => m.type === 'deviceState' && (m.data as { id: number }).id === 1)
    .map((m) => m.timestamp ?? 0);
  assert.ok(sends.length >= 2, `coalesced, not dropped: ${sends.length}`);
  assert.ok(sends.length < 40, `coalesced: ${sends.length} messages for 40 changes`);
  for (let i = 1; i < sends.length; i++) {
    // Send times (server clock, ms resolution): never closer than the interval.
    assert.ok(sends[i]! - sends[i - 1]! >= INTERVAL - 2, `gap ${sends[i]! - sends[i - 1]!} ms`);
  }
  const last = msgs.filter((m) => m.type === 'deviceState').at(-1)!.data as {
    filename: string;
    simulated: boolean;
  };
  assert.equal(last.filename, 'clip-39');
  assert.equal(last.simulated, true);
  rig.service.view.endSimulation(1);
  ws.close();
});

test('client messages: getConfig answers with the configuration (no secrets), anything else with an error; oversized frames close', async () => {
  const { ws, msgs } = await open();
  ws.send(JSON.stringify({ type: 'getConfig' }));
  const config = await until(() => msgs.find((m) => m.type === 'config'), 3000, 'config');
  assert.deepEqual(
    (config.data as { servers: { id: number }[] }).servers.map((s) => s.id),
    [1, 2],
  );
  ws.send('{"type":"updateSettings"}');
  const err = await until(() => msgs.find((m) => m.type === 'error'), 3000, 'error');
  assert.equal(err.error?.code, 'unsupported');
  ws.send('x'.repeat(10_000));
  const code = await new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
  assert.equal(code, 1009);
  // The server and other clients are unaffected.
  const { ws: again, msgs: m2 } = await open();
  await until(() => m2[0], 3000, 'snapshot after a bad client');
  again.close();
});

test('/health: healthy with a device connected, protocols and memory in MB; degraded when none is', async () => {
  const { ws } = await open();
  const h = await healthJson();
  assert.equal(h.status, 'healthy');
  assert.equal(h.devices.total, 2);
  assert.equal(h.devices.connected, 2);
  assert.ok(h.protocols.websocket.clients >= 1);
  const { enabled, running, port } = h.protocols.emberPlus;
  assert.deepEqual({ enabled, running, port }, { enabled: true, running: true, port: rig.emberPort });
  const t = h.protocols.tslUmd;
  assert.deepEqual([t.enabled, t.running, t.destinations], [false, false, 0]);
  assert.equal(h.memory.unit, 'MB');
  assert.ok(h.memory.heapUsed > 0 && h.memory.heapUsed < 4096);
  assert.ok(h.uptime > 0);
  ws.close();
  for (const s of rig.sims) await s.close();
  await until(async () => (await healthJson()).status === 'degraded' || undefined, 5000, 'degraded');
  const d = await healthJson();
  assert.equal(d.devices.connected, 0);
  assert.deepEqual(
    d.devices.list.map((x) => x.state),
    ['offline', 'offline'],
  );
});
