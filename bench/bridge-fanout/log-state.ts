/**
 * bench/bridge-fanout/log-state.ts: acked-write latency against retained state size, event log on.
 * For each retained state (a multiple of eventLog.maxFileSize, in 100 KB values), one client writes
 * `--writes` more 100 KB values (overwriting its own keys, so the state keeps its size), each awaited until
 * acked (acks wait for the fsync), and the bench prints the median, p99 and max latency, the rotations and
 * the segments. Anchor, measured in the same run: the same writes with no retained state.
 *
 *   npx tsx --conditions=source bench/bridge-fanout/log-state.ts [--max-file-mib 2] [--writes 100] [--states 0,0.5,1,3,6]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { silentLogger } from '@broadcast-ops/core';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { configSchema, listSegments, startBridge } from '@broadcast-ops/telemetry-bridge';

const { values } = parseArgs({
  options: {
    'max-file-mib': { type: 'string', default: '2' },
    writes: { type: 'string', default: '100' },
    states: { type: 'string', default: '0,0.5,1,3,6' },
  },
});
const MAX_FILE = Math.round(Number(values['max-file-mib']) * 1024 * 1024);
const WRITES = Number(values.writes);
const STATES = (values.states ?? '').split(',').map(Number);
const VALUE = 100 * 1024;

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};

async function run(stateFactor: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tb-bench-logstate-'));
  const config = configSchema.parse({
    clientTransport: { host: '127.0.0.1', port: 0, rateLimit: 1_000_000, maxMessageSize: 4 * 1024 * 1024 },
    metrics: { enabled: false },
    health: { enabled: false },
    console: { enabled: false },
    eventLog: { enabled: true, path: join(dir, 'events'), maxFileSize: MAX_FILE, maxFiles: 4 },
    logging: { level: 'silent' },
  });
  const bridge = await startBridge({ config, logger: silentLogger() });
  const client = new BridgeClient({ url: bridge.clientUrl, name: 'bench', reconnect: { enabled: false } });
  try {
    await client.connect();
    const keys = Math.round((stateFactor * MAX_FILE) / VALUE);
    for (let i = 0; i < keys; i++) await client.setState(`s${i}`, `${i}:`.padEnd(VALUE, 'x'));
    const log = bridge.eventLog;
    const before = log?.rotations ?? 0;
    const times: number[] = [];
    for (let i = 0; i < WRITES; i++) {
      const t0 = performance.now();
      await client.setState(`w${i % 20}`, `${i}:`.padEnd(VALUE, 'y'));
      times.push(performance.now() - t0);
    }
    const rotations = (log?.rotations ?? 0) - before;
    const segments = log ? listSegments(log.dir).length : 0;
    return (
      `state ${String(stateFactor).padStart(4)} × maxFileSize (${String(keys).padStart(4)} keys): acked write ` +
      `median ${pct(times, 50).toFixed(1)} ms, p99 ${pct(times, 99).toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms; ` +
      `${rotations} rotations for ${WRITES} writes, ${segments} segments`
    );
  } finally {
    await client.close();
    await bridge.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `bridge-fanout log-state: maxFileSize ${(MAX_FILE / 1048576).toFixed(1)} MiB, ${WRITES} writes of 100 KB each, ` +
    `load average ${loadavg()[0]?.toFixed(2)}`,
);
console.log(`anchor (no retained state): ${await run(0)}`);
for (const f of STATES.filter((x) => x > 0)) console.log(await run(f));
