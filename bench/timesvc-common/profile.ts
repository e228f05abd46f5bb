/**
 * Profile the timesvc NTP server under load: starts `node --cpu-prof` on the service (source, via tsx),
 * offers plain requests at --rate for --ms from 16 loopback sources, stops it with SIGTERM
 * and prints where the .cpuprofile went plus a self-time summary by function (top 25).
 *
 *   npx tsx --conditions=source bench/timesvc-common/profile.ts [--rate 30000] [--ms 8000] [--dir /tmp/prof]
 *     [--batched-io false] [--no-prof]
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { procStat, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { offerLoad } from './load.ts';
import {
  timesvcBin,
  freePort,
  makeCertificate,
  NtsClientSession,
  ntsKeyExchange,
} from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '30000' },
    ms: { type: 'string', default: '8000' },
    dir: { type: 'string', default: '/tmp/timesvc-prof' },
    'batched-io': { type: 'string' },
    /** Without the profiler: the server CPU per request alone (the profiler's sampling costs CPU too). */
    'no-prof': { type: 'boolean', default: false },
    /** NTS-protected requests (228 bytes, as bench/timesvc-nts) instead of plain ones. */
    nts: { type: 'boolean', default: false },
  },
});
const rate = Number(values.rate);

/** utime + stime ticks of each thread of `pid` (proc(5) /proc/<pid>/task/<tid>/stat), by "tid name". */
function threadTicks(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = procStat(`/proc/${pid}/task/${tid}`);
      out.set(`${tid} ${st.name}`, st.user + st.sys);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}
const ms = Number(values.ms);
const outDir = values.dir;
mkdirSync(outDir, { recursive: true });
const dir = tempDir('timesvc-prof-');
const port = await freePort('udp');
const cfg = join(dir.path, 'timesvc.yaml');
const pair = values.nts ? makeCertificate(dir.path) : undefined;
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
    ...(pair
      ? [
          'nts:',
          '  enabled: true',
          '  ke_port: 0',
          `  cert_path: ${pair.cert}`,
          `  key_path: ${pair.key}`,
          `  cookie_key: ${'5a'.repeat(32)}`,
        ]
      : []),
    'web:',
    '  port: 0',
    '  bind_address: 127.0.0.1',
    '',
  ].join('\n'),
);
const before = new Set(readdirSync(outDir));
const proc = startProcess(process.execPath, [
  '--conditions=source',
  ...(values['no-prof'] ? [] : ['--cpu-prof', `--cpu-prof-dir=${outDir}`]),
  timesvcBin,
  '--config',
  cfg,
]);
try {
  await proc.waitForOutput(/"to":"LOCKED"/, 30_000);
  const pid = proc.child.pid ?? 0;
  const requests: Buffer[] = [];
  if (pair) {
    const kePort = Number((await proc.waitForOutput(/"port":(\d+),"msg":"NTS-KE listening"/, 30_000))[1]);
    const ke = await ntsKeyExchange({ host: '127.0.0.1', port: kePort, caFile: pair.cert });
    // Distinct requests (chrony drops repeats; timesvc does not care), built before the clock starts.
    for (let i = 0; i < Math.min(20_000, Math.round((rate * ms) / 1000)); i++) {
      const cs = new NtsClientSession(ke, [...ke.cookies.slice(i % 8), ...ke.cookies.slice(0, i % 8)]);
      const h = Buffer.alloc(48);
      h[0] = 0x23;
      h.writeUInt32BE(i, 44);
      requests.push(cs.wrap(h)!);
    }
  }
  let received = 0;
  const total = Math.round((rate * ms) / 1000);
  const threads0 = threadTicks(pid);
  const r = await offerLoad({
    port,
    pid,
    rate,
    total,
    request: (i) => {
      if (requests.length > 0) return requests[i % requests.length]!;
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
  const threads1 = threadTicks(pid);
  console.log('CPU ticks (10 ms) per thread during the load:');
  for (const [t, v] of threads1) {
    const d = v - (threads0.get(t) ?? 0);
    if (d > 0) console.log(`  ${t}: ${d}`);
  }
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
