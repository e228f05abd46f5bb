/**
 * Bench: latency of the playout monitor's outputs. A HyperDeck simulator (a real TCP peer speaking the
 * HyperDeck protocol) changes transport state (play ↔ stop) N times; for each change we time, from the
 * simulator's change to:
 *   - the device store's change event (the input side, for reference: what the outputs start from),
 *   - the TSL UMD v5.0 datagram with the new tally received by a UDP socket,
 *   - the Ember+ consumer (emberplus-connection's EmberClient, subscribed) seeing `State` change,
 *   - a WebSocket client receiving the device's new state.
 * Targets: TSL p99 < 5 ms, Ember+ p99 < 20 ms (one frame at 50 fps), WebSocket p99 < updateIntervalMs +
 * 10 ms. Everything runs in this one process on loopback (times on one monotonic clock); the load average
 * is printed beside the figures, because the machine may be shared.
 *
 * Run: npx tsx bench/playout-latency/run.ts [--changes 500] [--spacing-ms 150]
 */
import { createSocket } from 'node:dgram';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { EmberClient, Model } from 'emberplus-connection';
import { WebSocket } from 'ws';
import { silentLogger } from '../../packages/core/src/index.ts';
import { configSchema } from '../../packages/playout-monitor/src/config.ts';
import { PlayoutService } from '../../packages/playout-monitor/src/playout-service.ts';
import { decodeTslPacket } from '../../packages/playout-monitor/src/protocol/tsl-umd.ts';
import { HyperdeckSimulator } from '../../packages/playout-monitor/src/simulators/hyperdeck-sim.ts';

const { values } = parseArgs({ options: { changes: { type: 'string' }, 'spacing-ms': { type: 'string' } } });
const CHANGES = Math.max(500, Number(values.changes ?? 500));
const SPACING_MS = Math.max(20, Number(values['spacing-ms'] ?? 150));
const UPDATE_INTERVAL_MS = 100;
const TARGETS = { tsl: 5, ember: 20, ws: UPDATE_INTERVAL_MS + 10 } as const;
const FRAME_MS_50FPS = 20;

const TALLY = { play: 0xc5, stop: 0xc0 } as const;

const rx = createSocket('udp4');
await new Promise<void>((resolve) => rx.bind(0, '127.0.0.1', () => resolve()));
const sim = new HyperdeckSimulator({ port: 0 });
const deckPort = await sim.start();
const config = configSchema.parse({
  settings: {
    updateIntervalMs: UPDATE_INTERVAL_MS,
    tslUmdDestinations: [{ host: '127.0.0.1', port: rx.address().port }],
  },
  servers: [{ id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: deckPort }],
});
const service = new PlayoutService({ config, logger: silentLogger() });
const started = await service.start({ http: 0, ember: 0 });

// Wait for the deck to be connected (stop).
for (let i = 0; i < 200 && !service.view.get(1)?.connected; i++) await new Promise((r) => setTimeout(r, 25));
if (!service.view.get(1)?.connected) throw new Error('the deck did not connect');

type Leg = 'input' | 'tsl' | 'ember' | 'ws';
let expected: 'play' | 'stop' = 'stop';
let t0 = 0;
let got: Partial<Record<Leg, number>> = {};
let settle: (() => void) | undefined;
const samples: Record<Leg, number[]> = { input: [], tsl: [], ember: [], ws: [] };
/** Per change: output time minus input time (what the outputs add after the store changed). */
const added: Record<Leg, number[]> = { input: [], tsl: [], ember: [], ws: [] };

function mark(leg: Leg, state: string): void {
  if (state !== expected || got[leg] !== undefined || t0 === 0) return;
  got[leg] = performance.now() - t0;
  if (got.input !== undefined && got.tsl !== undefined && got.ember !== undefined && got.ws !== undefined)
    settle?.();
}

service.monitor.store.onChange((c) => {
  if (c.fields.includes('state')) mark('input', c.state.state);
});
rx.on('message', (data) => {
  const d = decodeTslPacket(data);
  if ('error' in d) return;
  for (const m of d.messages) {
    if (m.index !== 1) continue;
    if (m.control === TALLY.play) mark('tsl', 'play');
    else if (m.control === TALLY.stop) mark('tsl', 'stop');
  }
});

const ember = new EmberClient('127.0.0.1', started.emberPort);
ember.on('error', () => undefined);
await ember.connect();
await (
  await ember.getDirectory(ember.tree)
).response;
const stateParam = (await ember.getElementByPath(
  'Devices.Device_1.State',
)) as Model.NumberedTreeNode<Model.Parameter>;
await (
  await ember.subscribe(stateParam, (n) => mark('ember', String((n.contents as Model.Parameter).value)))
).response;

const ws = new WebSocket(started.httpUrl.replace(/^http/, 'ws') + '/ws');
ws.on('message', (raw: Buffer) => {
  const msg = JSON.parse(raw.toString('utf8')) as { type: string; data: { id: number; state: string } };
  if (msg.type === 'deviceState' && msg.data.id === 1) mark('ws', msg.data.state);
});
await new Promise<void>((resolve) => ws.once('open', () => resolve()));

let lost = 0;
for (let i = 0; i < CHANGES; i++) {
  expected = expected === 'play' ? 'stop' : 'play';
  got = {};
  const done = new Promise<void>((resolve) => (settle = resolve));
  t0 = performance.now();
  if (expected === 'play') sim.play(1);
  else sim.stop();
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 2000));
  if ((await Promise.race([done, timeout])) === 'timeout') lost++;
  for (const leg of Object.keys(samples) as Leg[]) {
    const v = got[leg];
    if (v !== undefined) samples[leg].push(v);
    if (v !== undefined && got.input !== undefined) added[leg].push(v - got.input);
  }
  await new Promise((r) => setTimeout(r, SPACING_MS));
}

function pct(list: number[], p: number): number {
  const s = [...list].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}
const f = (n: number): string => n.toFixed(2).padStart(7);
const rows: [string, Leg, number | undefined][] = [
  ['input (HyperDeck → store)', 'input', undefined],
  ['TSL UMD datagram', 'tsl', TARGETS.tsl],
  ['Ember+ consumer update', 'ember', TARGETS.ember],
  ['WebSocket message', 'ws', TARGETS.ws],
];
console.log(
  `playout-latency: ${CHANGES} transport changes (play ↔ stop), spacing ${SPACING_MS} ms, updateIntervalMs ${UPDATE_INTERVAL_MS}, Node ${process.version}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(`anchor: one frame at 50 fps = ${FRAME_MS_50FPS} ms`);
console.log(
  'path                          samples   p50 ms   p99 ms   max ms   target p99   verdict      p50/p99 ms after the store changed',
);
let ok = lost === 0;
for (const [label, leg, target] of rows) {
  const l = samples[leg];
  const p99 = pct(l, 99);
  const verdict = target === undefined ? '(reference)' : p99 < target ? 'met' : 'MISSED';
  if (target !== undefined && !(p99 < target)) ok = false;
  console.log(
    `${label.padEnd(30)}${String(l.length).padStart(7)}  ${f(pct(l, 50))}  ${f(p99)}  ${f(Math.max(...l))}   ${target === undefined ? '       —' : `< ${String(target).padStart(3)} ms`}    ${verdict.padEnd(11)}  ${leg === 'input' ? '' : `${f(pct(added[leg], 50))} / ${f(pct(added[leg], 99))}`}`,
  );
}
if (lost > 0) console.log(`changes not seen on every output within 2 s: ${lost}`);

ws.close();
await ember.disconnect();
ember.discard();
await service.close();
await sim.close();
rx.close();
process.exitCode = ok ? 0 : 1;
