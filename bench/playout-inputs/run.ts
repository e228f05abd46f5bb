/**
 * Bench: CPU time per second of the playout monitor's inputs with 12 devices on loopback, four of them
 * CasparCG at 50 fps (two 2.2+ layout, two 2.0.7 layout), four vMix polled every 250 ms, four HyperDecks
 * (transport info polled every 500 ms). Target (issue 6): under 10 % of one core.
 * The simulators run in a child process, so their CPU is measured separately from the monitor's.
 *
 * Run: npx tsx bench/playout-inputs/run.ts [--seconds 20]
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { silentLogger } from '../../packages/core/src/index.ts';
import { configSchema } from '../../packages/playout-monitor/src/config.ts';
import { Monitor } from '../../packages/playout-monitor/src/monitor.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string' } } });
const seconds = Math.min(120, Math.max(5, Number(values.seconds ?? 20)));
const TARGET_PERCENT = 10;

const child = spawn(
  process.execPath,
  ['--import', 'tsx', fileURLToPath(new URL('simulators.ts', import.meta.url))],
  {
    stdio: ['pipe', 'pipe', 'inherit'],
  },
);
const lines = createInterface({ input: child.stdout });
const waiting: ((v: Record<string, unknown>) => void)[] = [];
lines.on('line', (l) => waiting.shift()?.(JSON.parse(l) as Record<string, unknown>));
const next = (): Promise<Record<string, unknown>> => new Promise((r) => waiting.push(r));
const ask = (o: unknown): Promise<Record<string, unknown>> => {
  const p = next();
  child.stdin.write(JSON.stringify(o) + '\n');
  return p;
};
const hardStop = setTimeout(
  () => {
    console.error('bench: took too long, stopping');
    child.kill('SIGKILL');
    process.exit(1);
  },
  (seconds + 60) * 1000,
);

try {
  const ready = (await next())['ready'] as { vmix: number[]; hyperdeck: number[] };
  const servers = [
    ...[0, 1, 2, 3].map((i) => ({
      id: i + 1,
      name: `CasparCG ${i + 1}`,
      type: 'osc_player',
      ip: `127.0.0.${i + 2}`,
      port: 0,
    })),
    ...ready.vmix.map((port, i) => ({
      id: i + 5,
      name: `vMix ${i + 1}`,
      type: 'http_mixer',
      ip: '127.0.0.1',
      port,
    })),
    ...ready.hyperdeck.map((port, i) => ({
      id: i + 9,
      name: `Deck ${i + 1}`,
      type: 'tcp_recorder',
      ip: '127.0.0.1',
      port,
    })),
  ];
  const config = configSchema.parse({ settings: { webSocketPort: 0, bindAddress: '127.0.0.1' }, servers });
  const monitor = new Monitor({ config, logger: silentLogger() });
  let changes = 0;
  monitor.store.onChange(() => changes++);
  const started = await monitor.start(0);
  await ask({ osc: [...started.oscPorts.values()][0] });

  // Warm up until every device is connected and playing.
  const warmDeadline = Date.now() + 15_000;
  while (!monitor.store.list().every((d) => d.connected && d.state === 'play')) {
    if (Date.now() > warmDeadline)
      throw new Error(
        `devices not all playing: ${JSON.stringify(monitor.store.list().map((d) => [d.name, d.state, d.reason]))}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 2000));

  const loop = monitorEventLoopDelay({ resolution: 10 });
  const childBefore = (await ask({ report: true })) as { cpu: NodeJS.CpuUsage; datagrams: number };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const changes0 = changes;
  loop.enable();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  loop.disable();
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const childAfter = (await ask({ report: true })) as { cpu: NodeJS.CpuUsage; datagrams: number };

  const monitorPercent = ((cpu.user + cpu.system) / 1000 / wallMs) * 100;
  const childCpu =
    childAfter.cpu.user + childAfter.cpu.system - (childBefore.cpu.user + childBefore.cpu.system);
  const simPercent = (childCpu / 1000 / wallMs) * 100;
  const datagramsPerSec = ((childAfter.datagrams - childBefore.datagrams) * 1000) / wallMs;
  const list = monitor.store.list();
  console.log(`playout-inputs bench: 12 devices on loopback for ${(wallMs / 1000).toFixed(1)} s`);
  console.log(
    `  devices: ${list.filter((d) => d.connected).length}/12 connected; states ${[...new Set(list.map((d) => `${d.type}=${d.state}`))].join(', ')}`,
  );
  console.log(
    `  CasparCG: 4 senders at 50 fps (2× 2.2+, 2× 2.0.7 layout), ${datagramsPerSec.toFixed(0)} OSC datagrams/s sent to the monitor`,
  );
  console.log(`  vMix: 4 × GET /api every 250 ms; HyperDeck: 4 × transport info every 500 ms`);
  console.log(
    `  change events: ${(((changes - changes0) * 1000) / wallMs).toFixed(0)}/s; event-loop delay p99 ${(loop.percentile(99) / 1e6).toFixed(1)} ms`,
  );
  console.log(
    `  monitor CPU: ${monitorPercent.toFixed(2)} % of one core (user ${(cpu.user / 1000).toFixed(0)} ms, system ${(cpu.system / 1000).toFixed(0)} ms)`,
  );
  console.log(`  simulators (child process, not counted): ${simPercent.toFixed(2)} % of one core`);
  console.log(
    `  target: < ${TARGET_PERCENT} % of one core -> ${monitorPercent < TARGET_PERCENT ? 'PASS' : 'FAIL'}`,
  );
  await monitor.close();
  const exited = new Promise((r) => child.once('exit', r));
  child.stdin.write(JSON.stringify({ quit: true }) + '\n');
  await exited;
  process.exitCode = monitorPercent < TARGET_PERCENT ? 0 : 1;
} catch (err) {
  console.error('bench failed:', err);
  process.exitCode = 1;
} finally {
  clearTimeout(hardStop);
  if (child.exitCode === null) child.kill('SIGTERM');
}
