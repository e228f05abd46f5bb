/**
 * Where timesvc's CPU per NTS request goes at one rate, thread by thread, beside the floor's
 * (bench/timesvc-common/floor.c --nts): both offered the same requests by the C generator, in alternating
 * steps, with each thread's CPU time from /proc/<pid>/task/<tid>/schedstat (nanoseconds), and each
 * server's CPU while idle over the same length of time.
 *
 *   npx tsx --conditions=source bench/timesvc-nts/threads.ts [--rate 2000] [--step-ms 3000] [--rounds 3]
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { repoRoot, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import { buildNative, floorKeyFile, offerLoadC, settle, startFloor } from '../timesvc-common/load.ts';
import { loadLine } from '../timesvc-common/sweep.ts';
import {
  startTimesvcCli,
  NtsClientSession,
  ntsKeyExchange,
  freePort,
  makeCertificate,
} from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '2000' },
    'step-ms': { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '3' },
  },
});
const RATE = Number(values.rate);
const STEP_MS = Number(values['step-ms']);
const ROUNDS = Number(values.rounds);
const COOKIE_KEY = '5a'.repeat(32);

/** CPU ns of each thread of `pid`, by "name/tid" (the main thread "name/main"). */
function threads(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      out.set(`${name}/${Number(tid) === pid ? 'main' : tid}`, ns);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

function diff(a: Map<string, number>, b: Map<string, number>, per: number): string {
  return [...b.entries()]
    .map(([k, v]) => [k, (v - (a.get(k) ?? 0)) / 1000 / per] as const)
    .filter(([, v]) => v >= 0.05)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(', ');
}

execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs')], { stdio: 'inherit' });
const dir = tempDir('timesvc-nts-threads-');
const tools = buildNative(dir.path);
const children: RunningProcess[] = [];
process.on('exit', () => {
  for (const p of children) p.child.kill('SIGTERM');
});
try {
  const pair = makeCertificate(dir.path);
  const cfg = join(dir.path, 'timesvc.yaml');
  writeFileSync(
    cfg,
    [
      'ntp:',
      `  port: ${await freePort('udp')}`,
      '  interface: 127.0.0.1',
      '  local_stratum: true',
      '  stratum: 8',
      '  rate_limit:',
      '    enabled: false',
      'nts:',
      '  enabled: true',
      '  ke_port: 0',
      `  cert_path: ${pair.cert}`,
      `  key_path: ${pair.key}`,
      `  cookie_key: ${COOKIE_KEY}`,
      'web:',
      '  port: 0',
      '  bind_address: 127.0.0.1',
      'logging:',
      '  level: info',
      '',
    ].join('\n'),
  );
  const ts = startTimesvcCli(cfg);
  children.push(ts);
  const kePort = Number((await ts.waitForOutput(/"port":(\d+),"msg":"NTS-KE listening"/, 30_000))[1]);
  await ts.waitForOutput(/timesvc started/, 10_000);
  const keyFile = floorKeyFile(join(dir.path, 'keys.txt'), COOKIE_KEY);
  const flPort = await freePort('udp');
  const floor = await startFloor(tools, flPort, { keyFile });
  children.push(floor);
  const ke = await ntsKeyExchange({ host: '127.0.0.1', port: kePort, caFile: pair.cert });
  const requests: Buffer[] = [];
  for (let i = 0; i < Math.round((RATE * STEP_MS) / 1000); i++) {
    const cs = new NtsClientSession(ke, [...ke.cookies.slice(i % 8), ...ke.cookies.slice(0, i % 8)]);
    const h = Buffer.alloc(48);
    h[0] = 0x23;
    h.writeUInt32BE(0x7e57beef, 40);
    h.writeUInt32BE(i, 44);
    requests.push(cs.wrap(h)!);
  }
  const file = { path: join(dir.path, 'pool.bin'), size: requests[0]!.length };
  writeFileSync(file.path, Buffer.concat(requests));
  const tsPid = ts.child.pid ?? 0;
  const flPid = floor.child.pid ?? 0;
  await settle([
    { name: 'timesvc', pid: tsPid },
    { name: 'floor', pid: flPid },
  ]);
  console.log(`${RATE}/s NTS, ${STEP_MS} ms steps; µs of CPU per request by thread; ${loadLine()}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, pid, port] of [
      ['timesvc', tsPid, ke.ntpPort],
      ['floor', flPid, flPort],
    ] as const) {
      const i0 = threads(pid);
      await new Promise((r) => setTimeout(r, STEP_MS));
      const i1 = threads(pid);
      const r = await offerLoadC(tools, {
        port,
        pid,
        rate: RATE,
        ms: STEP_MS,
        requestFile: file,
        minReply: 85,
      });
      const t2 = threads(pid);
      const idle = [...i1.values()].reduce((a, b) => a + b, 0) - [...i0.values()].reduce((a, b) => a + b, 0);
      console.log(
        `  ${name.padEnd(7)} ${(r.cpuUs / r.received).toFixed(1)} µs/req (loss ${(100 * (1 - r.received / r.sent)).toFixed(3)} %): ` +
          `${diff(i1, t2, r.received)}; idle beforehand ${(idle / 1e3 / (STEP_MS / 1000) / 1000).toFixed(2)} ms/s ` +
          `(${diff(i0, i1, (STEP_MS / 1000) * 1000)} µs/ms)`,
      );
    }
  }
  console.log(`  ${loadLine()}`);
} finally {
  await Promise.all(children.map((p) => p.stop()));
  dir.remove();
}
