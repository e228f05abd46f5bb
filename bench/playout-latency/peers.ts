/**
 * The bench's peers, in their own process (so the monitor's work never delays their clocks): a HyperDeck
 * simulator, a TSL UMD receiver (UDP), an Ember+ consumer (emberplus-connection's EmberClient, subscribed)
 * and a WebSocket client. Talks to run.ts with JSON lines on stdin/stdout:
 *   → {"deckPort", "tslPort"}        ← {"httpUrl", "emberPort", "changes", "spacingMs"}
 *   → {"samples": {tsl, ember, ws}, "t0": [epoch ms…], "lost"}
 * Every time here is on this process's monotonic clock; `t0` is also given as epoch ms
 * (performance.timeOrigin + now) so run.ts can place the monitor's store change on the same axis.
 */
import { createSocket } from 'node:dgram';
import { createInterface } from 'node:readline';
import { EmberClient, Model } from 'emberplus-connection';
import { WebSocket } from 'ws';
import { decodeTslPacket } from '@broadcast-ops/playout-monitor/testing';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';

const TALLY = { play: 0xc5, stop: 0xc0 } as const;
type Leg = 'tsl' | 'ember' | 'ws';

const lines = createInterface({ input: process.stdin });
const nextLine = (): Promise<string> => new Promise((resolve) => lines.once('line', resolve));
const send = (o: unknown): void => void process.stdout.write(JSON.stringify(o) + '\n');

const rx = createSocket('udp4');
await new Promise<void>((resolve) => rx.bind(0, '127.0.0.1', () => resolve()));
const sim = new HyperdeckSimulator({ port: 0 });
const deckPort = await sim.start();
send({ deckPort, tslPort: rx.address().port });
const setup = JSON.parse(await nextLine()) as {
  httpUrl: string;
  emberPort: number;
  changes: number;
  spacingMs: number;
};

let expected: 'play' | 'stop' = 'stop';
let t0 = 0;
let got: Partial<Record<Leg, number>> = {};
let settle: (() => void) | undefined;
const samples: Record<Leg, (number | null)[]> = { tsl: [], ember: [], ws: [] };
const starts: number[] = [];

function mark(leg: Leg, state: string): void {
  if (state !== expected || got[leg] !== undefined || t0 === 0) return;
  got[leg] = performance.now() - t0;
  if (got.tsl !== undefined && got.ember !== undefined && got.ws !== undefined) settle?.();
}

rx.on('message', (data) => {
  const d = decodeTslPacket(data);
  if (!d.ok) return;
  for (const m of d.value.messages) {
    if (m.index !== 1) continue;
    if (m.control === TALLY.play) mark('tsl', 'play');
    else if (m.control === TALLY.stop) mark('tsl', 'stop');
  }
});

const ember = new EmberClient('127.0.0.1', setup.emberPort);
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

const ws = new WebSocket(setup.httpUrl.replace(/^http/, 'ws') + '/ws');
ws.on('message', (raw: Buffer) => {
  const msg = JSON.parse(raw.toString('utf8')) as { type: string; data: { id: number; state: string } };
  if (msg.type === 'deviceState' && msg.data.id === 1) mark('ws', msg.data.state);
});
await new Promise<void>((resolve) => ws.once('open', () => resolve()));
// The deck is connected and stopped before the first change.
await new Promise((r) => setTimeout(r, 500));

let lost = 0;
for (let i = 0; i < setup.changes; i++) {
  expected = expected === 'play' ? 'stop' : 'play';
  got = {};
  const done = new Promise<void>((resolve) => (settle = resolve));
  t0 = performance.now();
  starts.push(performance.timeOrigin + t0);
  if (expected === 'play') sim.play(1);
  else sim.stop();
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 2000));
  if ((await Promise.race([done, timeout])) === 'timeout') lost++;
  for (const leg of Object.keys(samples) as Leg[]) samples[leg].push(got[leg] ?? null);
  await new Promise((r) => setTimeout(r, setup.spacingMs));
}

send({ samples, t0: starts, lost });
ws.close();
await ember.disconnect();
ember.discard();
await sim.close();
rx.close();
lines.close();
