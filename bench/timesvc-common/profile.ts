/**
 * Profile the timesvc NTP server under load: starts `node --cpu-prof` on the service (source, via tsx),
 * offers plain (or NTS with --nts) requests at --rate for --ms from 16 loopback sources, stops it with SIGTERM
 * and prints where the .cpuprofile went plus a self-time summary by function (top 25).
 *
 *   npx tsx --conditions=source bench/timesvc-common/profile.ts [--rate 30000] [--ms 8000] [--dir /tmp/prof]
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startProcess, tempDir } from '@broadcast-ops/core/testing';
import { offerLoad } from './load.ts';
import { timesvcBin } from '../../packages/timesvc/test/helpers/cli.ts';
import { freePort } from '../../packages/timesvc/test/helpers/nts.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '30000' },
    ms: { type: 'string', default: '8000' },
    dir: { type: 'string', default: '/tmp/timesvc-prof' },
    'batched-io': { type: 'string' },
  },
});
const rate = Number(values.rate);
const ms = Number(values.ms);
const outDir = values.dir;
mkdirSync(outDir, { recursive: true });
const dir = tempDir('timesvc-prof-');
const port = await freePort('udp');
const cfg = join(dir.path, 'timesvc.yaml');
writeFileSync(
  cfg,
  [
    'ntp:',
    `  port: ${port}`,
    '  interface: 127.0.0.1',
    '  local_stratum: true',
    '  stratum: 8',
    ...(values['batched-io'] === undefined ? [] : [`  batched_io: ${values['batched-io']}`]),
    '  rate_limit:',
    '    enabled: false',
    'web:',
    '  port: 0',
    '  bind_address: 127.0.0.1',
    '',
  ].join('\n'),
);
const before = new Set(readdirSync(outDir));
const proc = startProcess(process.execPath, [
  '--conditions=source',
  '--cpu-prof',
  `--cpu-prof-dir=${outDir}`,
  timesvcBin,
  '--config',
  cfg,
]);
try {
  await proc.waitForOutput(/"to":"LOCKED"/, 30_000);
  const pid = proc.child.pid ?? 0;
  let received = 0;
  const total = Math.round((rate * ms) / 1000);
  const r = await offerLoad({
    port,
    pid,
    rate,
    total,
    request: (i) => {
      const req = Buffer.alloc(48);
      req[0] = 0x23;
      req.writeUInt32BE(i, 44);
      return req;
    },
    onReply: () => {
      received++;
    },
  });
  console.log(
    `offered ${rate}/s for ${ms} ms: sent ${r.sent}, answered ${received} (loss ${(100 * (1 - received / r.sent)).toFixed(3)} %), ` +
      `server CPU ${(r.cpuUs / Math.max(1, received)).toFixed(1)} µs/req; load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
} finally {
  await proc.stop();
  dir.remove();
}
const file = readdirSync(outDir).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
if (file) {
  const path = join(outDir, file);
  const prof = JSON.parse(readFileSync(path, 'utf8')) as {
    nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
    samples: number[];
    timeDeltas: number[];
    endTime: number;
  };
  // Only the load window: samples from the last (ms + 1 s) before the profile ends (start-up excluded).
  const times: number[] = [];
  let t = prof.endTime;
  for (let i = prof.timeDeltas.length - 1; i >= 0; i--) {
    times[i] = t;
    t -= prof.timeDeltas[i]!;
  }
  const from = prof.endTime - (ms + 1000) * 1000;
  const t0 = times.findIndex((x) => x >= from);
  prof.samples = prof.samples.slice(Math.max(0, t0));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (const s of prof.samples) {
    const n = byId.get(s);
    const f = n?.callFrame;
    const key = f
      ? `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`
      : '?';
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const idle = [...self.entries()].filter(([k]) => k.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
  const busy = prof.samples.length - idle;
  console.log(
    `${path}: ${prof.samples.length} samples, ${busy} busy; self time by function (share of busy):`,
  );
  for (const [k, v] of [...self.entries()]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)) {
    console.log(`  ${((100 * v) / busy).toFixed(1).padStart(5)} %  ${k}`);
  }
}
