/**
 * Bench: latency of the playout monitor's outputs. A HyperDeck simulator (a real TCP peer speaking the
 * HyperDeck protocol) changes transport state (play ↔ stop) N times; for each change we time, from the
 * simulator's change to:
 *   - the TSL UMD v5.0 datagram with the new tally received by a UDP socket,
 *   - the Ember+ consumer (emberplus-connection's EmberClient, subscribed) seeing `State` change,
 *   - a WebSocket client receiving the device's new state,
 * and, for reference, to the monitor's device store changing (the input side, which every output waits
 * for). Targets: TSL p99 < 5 ms, Ember+ p99 < 20 ms (one frame at 50 fps), WebSocket p99 <
 * updateIntervalMs + 10 ms. The monitor runs in this process; the simulator and the three consumers in a
 * child process (peers.ts), whose one monotonic clock times the output legs. The input leg compares the
 * two processes' high-resolution epoch clocks (performance.timeOrigin + now). The load average is printed
 * beside the figures, because the machine may be shared.
 *
 * Run: npx tsx bench/playout-latency/run.ts [--changes 500] [--spacing-ms 150]
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { silentLogger } from '@broadcast-ops/core';
import { configSchema } from '@broadcast-ops/playout-monitor';
import { PlayoutService } from '@broadcast-ops/playout-monitor/testing';

const { values } = parseArgs({ options: { changes: { type: 'string' }, 'spacing-ms': { type: 'string' } } });
const CHANGES = Math.max(500, Number(values.changes ?? 500));
const SPACING_MS = Math.max(20, Number(values['spacing-ms'] ?? 150));
const UPDATE_INTERVAL_MS = 100;
const TARGETS = { tsl: 5, ember: 20, ws: UPDATE_INTERVAL_MS + 10 } as const;
const FRAME_MS_50FPS = 20;

const child = spawn(
  process.execPath,
  ['--import', 'tsx', fileURLToPath(new URL('peers.ts', import.meta.url))],
  {
    stdio: ['pipe', 'pipe', 'inherit'],
  },
);
const lines = createInterface({ input: child.stdout });
const nextLine = (): Promise<string> => new Promise((resolve) => lines.once('line', resolve));

const peers = JSON.parse(await nextLine()) as { deckPort: number; tslPort: number };
const config = configSchema.parse({
  settings: {
    updateIntervalMs: UPDATE_INTERVAL_MS,
    tslUmdDestinations: [{ host: '127.0.0.1', port: peers.tslPort }],
  },
  servers: [{ id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: peers.deckPort }],
});
const service = new PlayoutService({ config, logger: silentLogger() });
const started = await service.start({ http: 0, ember: 0 });
for (let i = 0; i < 200 && !service.view.get(1)?.connected; i++) await new Promise((r) => setTimeout(r, 25));
if (!service.view.get(1)?.connected) throw new Error('the deck did not connect');

const storeChanges: { atEpoch: number; state: string }[] = [];
service.monitor.store.onChange((c) => {
  if (c.fields.includes('state'))
    storeChanges.push({ atEpoch: performance.timeOrigin + performance.now(), state: c.state.state });
});

child.stdin.write(
  JSON.stringify({
    httpUrl: started.httpUrl,
    emberPort: started.emberPort,
    changes: CHANGES,
    spacingMs: SPACING_MS,
  }) + '\n',
);
const result = JSON.parse(await nextLine()) as {
  samples: Record<'tsl' | 'ember' | 'ws', (number | null)[]>;
  t0: number[];
  lost: number;
};

// Input leg: the first store change after each t0 (before the next t0).
const input: number[] = [];
result.t0.forEach((t, i) => {
  const end = result.t0[i + 1] ?? Infinity;
  const c = storeChanges.find((s) => s.atEpoch >= t && s.atEpoch < end);
  if (c) input.push(c.atEpoch - t);
});

function pct(list: number[], p: number): number {
  const s = [...list].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}
const clean = (l: (number | null)[]): number[] => l.filter((v): v is number => v !== null);
const f = (n: number): string => n.toFixed(2).padStart(7);
const rows: [string, number[], number | undefined][] = [
  ['input: HyperDeck → store', input, undefined],
  ['TSL UMD datagram', clean(result.samples.tsl), TARGETS.tsl],
  ['Ember+ consumer update', clean(result.samples.ember), TARGETS.ember],
  ['WebSocket message', clean(result.samples.ws), TARGETS.ws],
];
console.log(
  `playout-latency: ${CHANGES} transport changes (play ↔ stop), spacing ${SPACING_MS} ms, updateIntervalMs ${UPDATE_INTERVAL_MS}, Node ${process.version}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(`anchor: one frame at 50 fps = ${FRAME_MS_50FPS} ms`);
console.log('path                          samples   p50 ms   p99 ms   max ms   target p99   verdict');
let ok = result.lost === 0;
for (const [label, l, target] of rows) {
  const p99 = pct(l, 99);
  const verdict = target === undefined ? '(reference, two clocks)' : p99 < target ? 'met' : 'MISSED';
  if (target !== undefined && !(p99 < target)) ok = false;
  console.log(
    `${label.padEnd(30)}${String(l.length).padStart(7)}  ${f(pct(l, 50))}  ${f(p99)}  ${f(Math.max(...l))}   ${
      target === undefined ? '       —' : `< ${String(target).padStart(3)} ms`
    }    ${verdict}`,
  );
}
if (result.lost > 0) console.log(`changes not seen on every output within 2 s: ${result.lost}`);

await new Promise<void>((resolve) => child.once('exit', () => resolve()));
await service.close();
process.exitCode = ok ? 0 : 1;
