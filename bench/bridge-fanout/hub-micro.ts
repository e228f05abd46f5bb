/**
 * Hub-only cost, no sockets: N publishes of a ~270-byte state write fanned out to 100 subscribers whose sink
 * discards the data, with and without the event log. Shows what the hub adds on top of `ws.send`.
 *
 *   npx tsx bench/bridge-fanout/hub-micro.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { silentLogger, systemClock } from '@broadcast-ops/core';
import { Hub, EventLog, ClientSession } from '@broadcast-ops/telemetry-bridge';

/** A client as the transport sees it: frames go through the session (rate limit, parsing) into the hub. */
function connect(hub: Hub, name: string, send: (d: string) => void): ClientSession {
  const s = new ClientSession(
    hub,
    { bufferedAmount: () => 0, send, close: () => undefined, remote: 'bench' },
    systemClock,
    silentLogger(),
    {
      requireAuth: false,
      authTokens: [],
      handshakeTimeoutMs: 60_000,
      idleTimeoutMs: 3_600_000,
      serverVersion: 'bench',
    },
    undefined,
  );
  s.receive(JSON.stringify({ type: 'handshake', name, version: '1' }));
  return s;
}

const N = 50_000;
const SUBSCRIBERS = 100;
const pad = 'x'.repeat(120);

function run(withLog: boolean): void {
  const dir = mkdtempSync(join(tmpdir(), 'hub-micro-'));
  const log = new EventLog({
    dir,
    maxFileBytes: 64 << 20,
    maxFiles: 4,
    newEpoch: () => 'e',
    now: () => Date.now(),
  });
  log.open();
  const hub = new Hub({
    clock: systemClock,
    logger: silentLogger(),
    limits: { rateLimit: 1e9 },
    ...(withLog ? { log } : {}),
  });
  log.start(() => hub.store.checkpoint());
  let bytes = 0;
  const send = (d: string): void => {
    bytes += d.length;
  };
  const sub = JSON.stringify({
    id: 's',
    type: 'subscribe',
    path: 'hub.subscriptions',
    payload: { patterns: ['app.pub.custom.**'] },
    timestamp: 1,
  });
  for (let k = 0; k < SUBSCRIBERS; k++) connect(hub, `s${k}`, send).receive(sub);
  const pub = connect(hub, 'pub', send);
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    pub.receive(
      JSON.stringify({
        id: `p${i}`,
        type: 'state',
        path: `app.pub.custom.k${i % 50}`,
        payload: { value: { i, t: performance.now(), pad } },
        timestamp: Date.now(),
      }),
    );
  }
  const ms = performance.now() - t0;
  log.close();
  rmSync(dir, { recursive: true, force: true });
  console.log(
    `event log ${withLog ? 'on ' : 'off'}: ${((ms * 1000) / N).toFixed(1)} µs per publish to ${SUBSCRIBERS} subscribers ` +
      `(${((N * SUBSCRIBERS) / (ms / 1000)).toFixed(0)} deliveries/s without sockets; ${(bytes / N / SUBSCRIBERS).toFixed(0)} B each)`,
  );
}

async function snapshot(keys: number): Promise<void> {
  const hub = new Hub({ clock: systemClock, logger: silentLogger() });
  hub.store.claim('dev', 'dev.adapter');
  for (let k = 0; k < keys; k++)
    hub.writeState('dev.adapter', `dev.keys.k${k}`, { k, label: `key number ${k}` });
  let done = -1;
  let states = 0;
  const t0 = performance.now();
  const c = connect(hub, 'snap', (d) => {
    if (d.includes('"snapshot_complete"')) done = performance.now() - t0;
    else if (d.includes('"type":"state"')) states++;
  });
  c.receive(
    JSON.stringify({
      id: 's',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['dev.**'], snapshot: true },
      timestamp: 1,
    }),
  );
  while (done < 0) await new Promise((r) => setTimeout(r, 1));
  console.log(
    `snapshot: ${states} keys to one new subscriber in ${done.toFixed(1)} ms to snapshot_complete (target < 100 ms)`,
  );
}

run(false);
run(true);
await snapshot(10_000);
