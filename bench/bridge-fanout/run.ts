/**
 * bench/bridge-fanout: deliveries per second and publish→receive latency for 100 subscribers, for the bridge
 * and for a bare `ws` broadcast server in the same run (the anchor), each in its own process; clients in this
 * process. Two phases per target:
 *   1. steady: 200 messages/s × 100 subscribers = 20,000 deliveries/s (target: p99 < 10 ms);
 *   2. saturation: a closed loop (at most WINDOW messages in flight) for the maximum deliveries/s;
 *      ratio = bridge / bare (target ≥ 0.9; the spec's floor is 0.6), and the steady phase's p99 of the
 *      bridge at most 1.2× bare `ws`'s in the same rounds.
 * The bridge runs with its event log on (a temp dir), as in production.
 *
 *   npx tsx bench/bridge-fanout/run.ts [--subscribers 100] [--rate 200] [--seconds 6] [--saturate-seconds 4] [--rounds 3]
 * The machine is shared: both targets run in every round, in alternating order, and medians are reported.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { repoRoot, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';

const { values } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '100' },
    rate: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '6' },
    'saturate-seconds': { type: 'string', default: '4' },
    rounds: { type: 'string', default: '3' },
    // alternate (default) | bare-first | bridge-first
    order: { type: 'string', default: 'alternate' },
  },
});
const SUBSCRIBERS = Number(values.subscribers);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const SAT_SECONDS = Number(values['saturate-seconds']);
const ROUNDS = Number(values.rounds);
const WARMUP_MS = 2000;
const WINDOW = 20;
const PAD = 'x'.repeat(120);

interface Target {
  name: 'bridge' | 'bare-ws';
  url: string;
  proc: RunningProcess;
  /** Open a subscriber socket, resolved once it will receive broadcasts. */
  subscriber(onMessage: (text: string) => void): Promise<WebSocket>;
  publisher(): Promise<{ send(i: number): void; close(): void }>;
}

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

function firstMessage(
  ws: WebSocket,
  pred: (m: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const on = (d: Buffer): void => {
      const m = JSON.parse(d.toString()) as Record<string, unknown>;
      if (pred(m)) {
        ws.off('message', on);
        resolve(m);
      }
    };
    ws.on('message', on);
  });
}

const value = (i: number): { i: number; t: number; pad: string } => ({ i, t: performance.now(), pad: PAD });

async function startBridgeTarget(dir: string): Promise<Target> {
  mkdirSync(dir, { recursive: true });
  const cfg = join(dir, 'bridge.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      clientTransport: { host: '127.0.0.1', port: 0, rateLimit: 1_000_000, maxClients: 1000 },
      metrics: { enabled: false },
      health: { enabled: false },
      eventLog: { path: join(dir, 'events'), maxFileSize: 64 * 1024 * 1024, maxFiles: 4 },
      logging: { level: 'warn' },
    }),
  );
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the bridge process there (for finding hot spots).
  const prof = process.env['BENCH_CPU_PROF'];
  const nodeArgs = prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [];
  const proc = startProcess(
    process.execPath,
    [...nodeArgs, join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'), '--config', cfg],
    {
      env: {
        BRIDGE_LOGGING_LEVEL: 'info',
      },
    },
  );
  const m = await proc.waitForOutput(/"clients":"(ws:\/\/[^"]+)"/, 30_000);
  const url = m[1]!;
  let n = 0;
  const handshake = async (name: string): Promise<WebSocket> => {
    const ws = await open(url);
    const resp = firstMessage(ws, (x) => x['type'] === 'handshake_response');
    ws.send(JSON.stringify({ type: 'handshake', name, version: '1' }));
    await resp;
    return ws;
  };
  return {
    name: 'bridge',
    url,
    proc,
    async subscriber(onMessage) {
      const ws = await handshake(`sub${n++}`);
      const id = `s-${n}`;
      const ack = firstMessage(ws, (x) => x['type'] === 'ack');
      ws.send(
        JSON.stringify({
          id,
          type: 'subscribe',
          path: 'hub.subscriptions',
          payload: { patterns: ['app.pub.custom.**'] },
          timestamp: Date.now(),
        }),
      );
      await ack;
      ws.on('message', (d: Buffer) => onMessage(d.toString()));
      return ws;
    },
    async publisher() {
      const ws = await handshake('pub');
      ws.on('message', () => undefined); // acks
      return {
        send(i) {
          ws.send(
            JSON.stringify({
              id: `p${i}`,
              type: 'state',
              path: `app.pub.custom.k${i % 50}`,
              payload: { value: value(i) },
              timestamp: Date.now(),
            }),
          );
        },
        close: () => ws.close(),
      };
    },
  };
}

async function startBareTarget(): Promise<Target> {
  const proc = startProcess(process.execPath, [
    '--import',
    'tsx',
    join(repoRoot, 'bench/bridge-fanout/bare-server.ts'),
  ]);
  const m = await proc.waitForOutput(/bare-ws listening (\d+)/, 30_000);
  const url = `ws://127.0.0.1:${m[1]!}/`;
  let seq = 0;
  return {
    name: 'bare-ws',
    url,
    proc,
    async subscriber(onMessage) {
      const ws = await open(url);
      ws.on('message', (d: Buffer) => onMessage(d.toString()));
      return ws;
    },
    async publisher() {
      const ws = await open(url);
      return {
        send(i) {
          // Same shape and size as the bridge's delivered state envelope.
          ws.send(
            JSON.stringify({
              id: '01a20615-fd22-7000-a7db-d5a6239651fe',
              type: 'state',
              source: 'app.pub',
              path: `app.pub.custom.k${i % 50}`,
              payload: { value: value(i), owner: 'app.pub', version: i },
              timestamp: Date.now(),
              correlationId: `p${i}`,
              sequence: ++seq,
              offset: i,
            }),
          );
        },
        close: () => ws.close(),
      };
    },
  };
}

interface PhaseResult {
  deliveriesPerSec: number;
  p50: number;
  p99: number;
  max: number;
  sent: number;
  lost: number;
}

function quantile(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

async function runTarget(target: Target): Promise<{ steady: PhaseResult; saturated: PhaseResult }> {
  const lat: number[] = [];
  let measuring = false;
  let delivered = 0;
  // Steady phase counts only messages published inside the measured window (by index), wherever they land.
  let fromIndex = Number.MAX_SAFE_INTEGER;
  let toIndex = Number.MAX_SAFE_INTEGER;
  let lastSeenByFirst = -1;
  const subs: WebSocket[] = [];
  for (let k = 0; k < SUBSCRIBERS; k++) {
    const first = k === 0;
    subs.push(
      await target.subscriber((text) => {
        const m = JSON.parse(text) as { type?: string; payload?: { value?: { i: number; t: number } } };
        const v = m.payload?.value;
        if (m.type !== 'state' || !v) return;
        if (first) lastSeenByFirst = v.i;
        if (!measuring || v.i < fromIndex || v.i >= toIndex) return;
        delivered++;
        lat.push(performance.now() - v.t);
      }),
    );
  }
  const pub = await target.publisher();
  let i = 0;

  // Phase 1: steady rate.
  const steady = await new Promise<PhaseResult>((resolve) => {
    const t0 = performance.now();
    let sent = 0;
    const timer = setInterval(() => {
      const elapsed = performance.now() - t0;
      const due = Math.floor((elapsed / 1000) * RATE);
      while (sent < due) {
        pub.send(i++);
        sent++;
      }
      if (!measuring && elapsed >= WARMUP_MS) {
        measuring = true;
        delivered = 0;
        lat.length = 0;
        fromIndex = i;
        setTimeout(() => {
          clearInterval(timer);
          toIndex = i;
          const measuredSent = toIndex - fromIndex;
          // Let in-flight messages land before counting.
          setTimeout(() => {
            measuring = false;
            const sorted = Float64Array.from(lat).sort();
            resolve({
              deliveriesPerSec: delivered / SECONDS,
              p50: quantile(sorted, 0.5),
              p99: quantile(sorted, 0.99),
              max: sorted[sorted.length - 1] ?? NaN,
              sent: measuredSent,
              lost: measuredSent * SUBSCRIBERS - delivered,
            });
          }, 500);
        }, SECONDS * 1000);
      }
    }, 2);
  });

  // Phase 2: saturation, closed loop on the first subscriber.
  await new Promise((r) => setTimeout(r, 300));
  const saturated = await new Promise<PhaseResult>((resolve) => {
    lat.length = 0;
    delivered = 0;
    fromIndex = 0;
    toIndex = Number.MAX_SAFE_INTEGER;
    measuring = true;
    const t0 = performance.now();
    let sent = 0;
    const pump = (): void => {
      const elapsed = performance.now() - t0;
      if (elapsed >= SAT_SECONDS * 1000) {
        measuring = false;
        const sorted = Float64Array.from(lat).sort();
        resolve({
          deliveriesPerSec: delivered / (elapsed / 1000),
          p50: quantile(sorted, 0.5),
          p99: quantile(sorted, 0.99),
          max: sorted[sorted.length - 1] ?? NaN,
          sent,
          lost: 0,
        });
        return;
      }
      while (i - 1 - lastSeenByFirst < WINDOW) {
        pub.send(i++);
        sent++;
      }
      setImmediate(pump);
    };
    pump();
  });
  pub.close();
  for (const s of subs) s.terminate();
  return { steady, saturated };
}

const fmt = (n: number): string => n.toFixed(2).padStart(7);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};
const dir = mkdtempSync(join(tmpdir(), 'bridge-fanout-'));
const rounds: Record<'bridge' | 'bare-ws', { steady: PhaseResult; saturated: PhaseResult }>[] = [];
try {
  console.log(
    `bridge-fanout: ${SUBSCRIBERS} subscribers, steady ${RATE} msg/s (${RATE * SUBSCRIBERS} deliveries/s) for ${SECONDS}s, ` +
      `saturation ${SAT_SECONDS}s (window ${WINDOW}), ${ROUNDS} round(s), order ${values.order}; ` +
      `node ${process.version}, ${cpus().length} cores, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  console.log('\nround target    phase        deliveries/s      p50 ms   p99 ms   max ms   lost');
  for (let r = 0; r < ROUNDS; r++) {
    const round: Partial<Record<'bridge' | 'bare-ws', { steady: PhaseResult; saturated: PhaseResult }>> = {};
    const bareFirst = values.order === 'bare-first' || (values.order !== 'bridge-first' && r % 2 === 0);
    const order = bareFirst
      ? [() => startBareTarget(), () => startBridgeTarget(join(dir, `r${r}`))]
      : [() => startBridgeTarget(join(dir, `r${r}`)), () => startBareTarget()];
    for (const start of order) {
      const target = await start();
      try {
        const res = await runTarget(target);
        round[target.name] = res;
        for (const [phase, p] of Object.entries(res)) {
          console.log(
            `${String(r + 1).padStart(5)} ${target.name.padEnd(9)} ${phase.padEnd(10)} ${p.deliveriesPerSec.toFixed(0).padStart(14)} ${fmt(p.p50)}  ${fmt(p.p99)}  ${fmt(p.max)}  ${String(p.lost).padStart(5)}`,
          );
        }
      } finally {
        await target.proc.stop('SIGTERM');
      }
    }
    rounds.push(round as Record<'bridge' | 'bare-ws', { steady: PhaseResult; saturated: PhaseResult }>);
  }
  const ratios = rounds.map(
    (x) => x.bridge.saturated.deliveriesPerSec / x['bare-ws'].saturated.deliveriesPerSec,
  );
  const ratio = median(ratios);
  const p99s = rounds.map((x) => x.bridge.steady.p99);
  const bareP99s = rounds.map((x) => x['bare-ws'].steady.p99);
  const p99 = median(p99s);
  const steadyRate = median(rounds.map((x) => x.bridge.steady.deliveriesPerSec));
  const bareP99 = median(bareP99s);
  console.log(
    `\nratio bridge/bare deliveries/s at saturation, per round: ${ratios.map((x) => x.toFixed(2)).join(', ')}; ` +
      `median ${ratio.toFixed(2)} (target ≥ 0.90: ${ratio >= 0.9 ? 'met' : 'NOT met'}; spec floor ≥ 0.60: ` +
      `${ratio >= 0.6 ? 'met' : 'NOT met'})`,
  );
  console.log(
    `bridge p99 at ${steadyRate.toFixed(0)} deliveries/s, per round: ${p99s.map((x) => x.toFixed(2)).join(', ')} ms; ` +
      `median ${p99.toFixed(2)} ms (target < 10 ms at 20,000/s: ${p99 < 10 && steadyRate >= 0.98 * RATE * SUBSCRIBERS ? 'met' : 'NOT met'}); ` +
      `bare-ws p99 in the same rounds: ${bareP99s.map((x) => x.toFixed(2)).join(', ')} ms, median ${bareP99.toFixed(2)} ms`,
  );
  console.log(
    `p99 bridge/bare-ws (medians of the same rounds): ${(p99 / bareP99).toFixed(2)}× ` +
      `(target ≤ 1.2×: ${p99 <= 1.2 * bareP99 ? 'met' : 'NOT met'})`,
  );
  console.log(
    `load average after the run: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (other processes share these cores)`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
