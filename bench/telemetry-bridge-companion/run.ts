/**
 * bench/telemetry-bridge-companion: the Companion path end to end, bridge and Companion simulator in this
 * process over loopback WebSocket (the Satellite transport), one client app:
 *   - draw → client: the simulator redraws a key (KEY-STATE) until the client has the delta;
 *   - output → client: a mapped output changes (VARIABLE-VALUE) until the client has the delta;
 *   - press round trip: client command → `completed` (two KEY-PRESS lines, each acknowledged by Companion).
 * Anchors printed beside the figures: "within 50 ms" (Companion change → client, the Companion adapter's
 * acceptance item) and p99 < 5 ms for the command round trip through the simulator (docs/companion.md).
 *
 *   npx tsx bench/telemetry-bridge-companion/run.ts [--samples 500]
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { silentLogger } from '@broadcast-ops/core';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { configSchema, startBridge } from '@broadcast-ops/telemetry-bridge';

const { values } = parseArgs({ options: { samples: { type: 'string', default: '500' } } });
const N = Number(values.samples);

const sim = new CompanionSimulator();
const ports = await sim.listen({ tcp: null, ws: 0 });
const config = configSchema.parse({
  clientTransport: { host: '127.0.0.1', port: 0, rateLimit: 1_000_000 },
  metrics: { enabled: false },
  health: { enabled: false },
  eventLog: { enabled: false },
  logging: { level: 'silent' },
  companion: {
    enabled: true,
    port: ports.ws,
    device: { deviceId: 'bench', variables: [{ id: 'internal:time_hms', type: 'output', name: 'Clock' }] },
  },
});
const bridge = await startBridge({ config, logger: silentLogger() });
const client = new BridgeClient({ url: bridge.clientUrl, name: 'bench', reconnect: { enabled: false } });
await client.connect();
let notify: ((path: string, value: unknown) => void) | undefined;
client.on('state', (m) => notify?.(m.path, (m.payload as { value: unknown }).value));
await client.subscribe(['companion.**'], { snapshot: true });
const until = (pred: (path: string, value: unknown) => boolean): Promise<void> =>
  new Promise((resolve) => {
    notify = (p, v) => {
      if (pred(p, v)) resolve();
    };
  });
await new Promise<void>((resolve) => {
  const t = setInterval(() => {
    if (bridge.hub.store.get('companion.connection.state')?.value === 'connected') {
      clearInterval(t);
      resolve();
    }
  }, 10);
});

const stats = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? 0;
  return `p50 ${q(0.5).toFixed(2)} ms  p99 ${q(0.99).toFixed(2)} ms  max ${(s.at(-1) ?? 0).toFixed(2)} ms`;
};

const draw: number[] = [];
const output: number[] = [];
const press: number[] = [];
for (let i = 0; i < N; i++) {
  const text = `T${i}`;
  const t0 = performance.now();
  const seen = until(
    (p, v) => p === 'companion.device.bench.key.0' && (v as { text?: string }).text === text,
  );
  sim.setButton(1, 0, 0, { text });
  await seen;
  draw.push(performance.now() - t0);
  const value = `v${i}`;
  const t1 = performance.now();
  const seenVar = until((p, v) => p === 'companion.variables.internal.time_hms' && v === value);
  sim.setOutput('internal:time_hms', value);
  await seenVar;
  output.push(performance.now() - t1);
  const t2 = performance.now();
  await client.command('companion', 'companion.device.bench.key.1', 'press').done;
  press.push(performance.now() - t2);
}
console.log(`telemetry-bridge Companion path, ${N} samples each, loadavg ${loadavg()[0]?.toFixed(2)}`);
console.log(`  draw (KEY-STATE) → client      ${stats(draw)}   anchor: within 50 ms`);
console.log(`  output (VARIABLE-VALUE) → client ${stats(output)}   anchor: within 50 ms`);
console.log(`  press round trip → completed   ${stats(press)}   anchor: p99 < 5 ms (2 lines, each acked)`);
await client.close();
await bridge.close();
await sim.close();
