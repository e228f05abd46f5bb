/**
 * bench/bridge-fanout/durability.ts: what durability costs.
 *   1. Storage engines, same records, same group-commit pattern (N records, then one sync): the bridge's
 *      hand-written segment log (write() per record, fdatasync per batch) vs SQLite in WAL mode through
 *      better-sqlite3 (one transaction per batch, synchronous=FULL so a commit is durable), and each without
 *      any sync as the anchor. This is the measurement behind the choice documented in the README.
 *   2. End to end: acknowledged commands per second through a running bridge (WebSocket clients, a fake
 *      adapter that completes at once) with `eventLog.fsync` on (batched, before the `received` ack) and off.
 *
 *   npx tsx bench/bridge-fanout/durability.ts [--seconds 3] [--clients 8] [--window 16]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { silentLogger, systemClock } from '@broadcast-ops/core';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { configSchema, EventLog, startBridge } from '@broadcast-ops/telemetry-bridge';
import type { Adapter, AdapterResult } from '@broadcast-ops/telemetry-bridge';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    clients: { type: 'string', default: '8' },
    window: { type: 'string', default: '16' },
  },
});
const SECONDS = Number(values.seconds);
const CLIENTS = Number(values.clients);
const WINDOW = Number(values.window);

const record = (i: number): string =>
  JSON.stringify({
    id: `0190c3a2-${i}`,
    type: 'state',
    source: 'companion.satellite',
    path: `companion.variables.internal.v${i % 100}`,
    payload: { value: { i, text: 'x'.repeat(120) }, owner: 'companion.satellite', version: i },
    timestamp: Date.now(),
    sequence: i,
    offset: i,
  });

function engines(batch: number): void {
  const ms = SECONDS * 1000;
  const run = (
    name: string,
    setup: () => { write(i: number): void; commit(): void; close(): void },
  ): number => {
    const e = setup();
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < ms) {
      for (let k = 0; k < batch; k++) e.write(++n);
      e.commit();
    }
    const rate = n / ((performance.now() - t0) / 1000);
    e.close();
    console.log(`  ${name.padEnd(44)} ${rate.toFixed(0).padStart(9)} records/s`);
    return rate;
  };
  const logEngine = (sync: boolean) => () => {
    const dir = mkdtempSync(join(tmpdir(), 'dur-log-'));
    const log = new EventLog({
      dir,
      maxFileBytes: 64 << 20,
      maxFiles: 4,
      newEpoch: () => 'e',
      now: () => Date.now(),
      sync,
      syncIntervalMs: 1000,
    });
    log.open();
    log.start(() => []);
    return {
      write: (i: number) => log.append(i, Date.now(), 'state', record(i)),
      commit: () => log.whenDurable(() => undefined),
      close: () => {
        log.close();
        rmSync(dir, { recursive: true, force: true });
      },
      log,
    };
  };
  const sqliteEngine = (sync: boolean) => () => {
    const dir = mkdtempSync(join(tmpdir(), 'dur-sql-'));
    const db = new Database(join(dir, 'events.db'));
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${sync ? 'FULL' : 'OFF'}`);
    db.exec('CREATE TABLE log (o INTEGER PRIMARY KEY, t INTEGER, k TEXT, m TEXT)');
    const ins = db.prepare('INSERT INTO log (o, t, k, m) VALUES (?, ?, ?, ?)');
    let open = false;
    return {
      write: (i: number) => {
        if (!open) {
          db.exec('BEGIN');
          open = true;
        }
        ins.run(i, Date.now(), 'state', record(i));
      },
      commit: () => {
        if (open) db.exec('COMMIT');
        open = false;
      },
      close: () => {
        db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };
  console.log(`records of ~330 bytes, one sync per ${batch} record(s):`);
  // The hub's group commit syncs on the next turn of the event loop; here each batch is flushed at once so
  // both engines do exactly one sync per batch.
  const hand = run('hand-written log, fdatasync per batch', () => {
    const e = logEngine(true)();
    return { ...e, commit: () => e.log.flush() };
  });
  const handOff = run('hand-written log, no sync', logEngine(false));
  const sql = run('SQLite WAL (better-sqlite3), synchronous=FULL', sqliteEngine(true));
  const sqlOff = run('SQLite WAL (better-sqlite3), synchronous=OFF', sqliteEngine(false));
  console.log(
    `  durable: hand-written / SQLite = ${(hand / sql).toFixed(2)}; without sync: ${(handOff / sqlOff).toFixed(2)}`,
  );
}

class InstantAdapter implements Adapter {
  readonly name = 'bench.device';
  readonly targets = ['bench'];
  readonly owns = ['bench'];
  capabilities(): Record<string, boolean> {
    return {};
  }
  start(ctx: { setConnected(up: boolean): void }): void {
    ctx.setConnected(true);
  }
  stop(): void {
    return;
  }
  execute(): Promise<AdapterResult> {
    return Promise.resolve({ status: 'completed' });
  }
}

async function commands(fsync: boolean): Promise<{ rate: number; syncs: number; p99: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'dur-bridge-'));
  const config = configSchema.parse({
    clientTransport: { host: '127.0.0.1', port: 0, rateLimit: 1_000_000 },
    metrics: { enabled: false },
    health: { enabled: false },
    eventLog: { path: join(dir, 'events'), fsync, maxFileSize: 64 * 1024 * 1024 },
    logging: { level: 'silent' },
  });
  const bridge = await startBridge({
    config,
    logger: silentLogger(),
    clock: systemClock,
    adapters: [new InstantAdapter()],
  });
  const clients: BridgeClient[] = [];
  for (let k = 0; k < CLIENTS; k++) {
    const c = new BridgeClient({ url: bridge.clientUrl, name: `cmd${k}`, reconnect: { enabled: false } });
    await c.connect();
    clients.push(c);
  }
  let acked = 0;
  const lat: number[] = [];
  let stop = false;
  const t0 = performance.now();
  setTimeout(() => {
    stop = true;
  }, SECONDS * 1000);
  await Promise.all(
    clients.map(async (c) => {
      const lane = async (): Promise<void> => {
        while (!stop) {
          const s = performance.now();
          const h = c.command('bench', 'bench.key.1', 'press');
          await new Promise<void>((resolve, reject) => {
            const off = c.on('ack', (m) => {
              if (m.payload.commandId === h.id && m.payload.status === 'received') {
                off();
                resolve();
              }
            });
            h.done.catch(reject);
          });
          lat.push(performance.now() - s);
          acked++;
          await h.done;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  const rate = acked / ((performance.now() - t0) / 1000);
  const syncs = bridge.eventLog?.syncs ?? 0;
  for (const c of clients) await c.close();
  await bridge.close();
  rmSync(dir, { recursive: true, force: true });
  lat.sort((a, b) => a - b);
  return { rate, syncs, p99: lat[Math.floor(lat.length * 0.99)] ?? NaN };
}

console.log(
  `machine: ${cpus().length} cores, load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
engines(1);
engines(32);
console.log(
  `acknowledged commands through the bridge (${CLIENTS} clients × ${WINDOW} in flight, ${SECONDS} s each):`,
);
const on = await commands(true);
const off = await commands(false);
console.log(
  `  fsync batched (default): ${on.rate.toFixed(0).padStart(7)} received-acks/s, p99 ${on.p99.toFixed(2)} ms, ` +
    `${on.syncs} fsyncs (${((on.rate * SECONDS) / Math.max(1, on.syncs)).toFixed(1)} commands per fsync)`,
);
console.log(
  `  fsync off:               ${off.rate.toFixed(0).padStart(7)} received-acks/s, p99 ${off.p99.toFixed(2)} ms`,
);
console.log(`  ratio on/off: ${(on.rate / off.rate).toFixed(2)}`);
console.log(
  `load average after: ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
