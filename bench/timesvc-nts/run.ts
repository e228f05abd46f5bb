/**
 * timesvc NTS benchmark: NTS-protected NTP requests against timesvc, chronyd's NTS server and the floor
 * (bench/timesvc-common/floor.c --nts: timesvc's recvmmsg/sendmmsg loop and the AEAD work RFC 8915 asks
 * for, once per request, with nothing else) under the same bounded load, in one run, on loopback. The
 * load comes from the C generator (bench/timesvc-common/gen.c), whose own ceiling is printed first.
 *
 *   npx tsx bench/timesvc-nts/run.ts [--step-ms 2000] [--rates 2000,5000,...] [--pool 4096] [--repeat 3]
 *     [--min-requests 20000×repeat]
 *
 * For each server: one NTS-KE (timesvc's client, certificate checked against a throwaway self-signed CA),
 * then a pool of distinct 228-byte requests (header + UID + cookie + authenticator, the layout chrony
 * sends) built before the clock starts; each step offers a fixed rate for step-ms from 16 loopback source
 * addresses, in --repeat paired rounds (more at the low rates: --min-requests, `roundsAt`), and counts
 * authentic replies (size and mark; the S2C authenticator verified on every 64th).
 * Prints the highest rate answered with < 0.1 % loss with the generator's limit, the server's CPU time per
 * request (schedstat, load.ts cpuUs) and the ratios timesvc/chronyd and timesvc/floor. The floor holds
 * timesvc's cookie master keys (same nts.cookie_key), so it is offered the very requests timesvc is.
 * chronyd runs with -x, its own files, no command port.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { repoRoot, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import {
  buildNative,
  floorKeyFile,
  generatorCeiling,
  offerLoadC,
  settle,
  startFloor,
  type NativeTools,
} from '../timesvc-common/load.ts';
import {
  startTimesvcCli,
  NtsClientSession,
  ntsKeyExchange,
  type KeClientResult,
  startChronyServer,
  type ChronyServer,
  freePort,
  makeCertificate,
} from '@broadcast-ops/timesvc/testing';
import {
  best as bestStep,
  compareToAnchors,
  highestRates,
  loadLine,
  sweepTogether,
} from '../timesvc-common/sweep.ts';

const { values } = parseArgs({
  options: {
    'step-ms': { type: 'string' },
    'min-requests': { type: 'string' },
    rates: { type: 'string' },
    pool: { type: 'string' },
    repeat: { type: 'string' },
  },
});
const STEP_MS = Number(values['step-ms'] ?? 2000);
const RATES = (values.rates ?? '2000,5000,10000,15000,20000,30000,40000,60000').split(',').map(Number);
/** Distinct requests: by default enough that no request repeats within a step (chrony drops repeats). */
const POOL = Number(values.pool ?? Math.max(...RATES.map((r) => Math.round((r * STEP_MS) / 1000))));
/** Steps per server and rate, interleaved; the median CPU per request is kept (sweep.ts). */
const REPEAT = Number(values.repeat ?? 3);
/**
 * A rate's rounds hold at least this many requests per server: a low rate gets more rounds. At 2,000/s
 * one 2 s step is 4,000 requests, about 40 ms of a server's CPU, and on a 2-vCPU VM the same server's
 * steps there differ by ±20-50 % (a request is a wake-up of an idle vCPU), where from 10,000/s they agree
 * within a few per cent. Longer steps did not narrow it (10 s steps at 2,000/s spread as 2 s ones do); more
 * paired rounds do, each pair being seconds apart (docs/performance.md "Quiet machine, the full sweeps").
 */
const MIN_REQUESTS = Number(values['min-requests'] ?? 20_000 * REPEAT);
const roundsAt = (rate: number): number =>
  Math.max(REPEAT, Math.ceil(MIN_REQUESTS / ((rate * STEP_MS) / 1000)));
const LOSS_LIMIT = 0.001;
/** CPU per request, timesvc / chronyd, at most this at every rate both serve with < 0.1 % loss. */
const CPU_RATIO_TARGET = 1.0;
/** CPU per request, timesvc / the floor (reported; the floor is what the kernel path and the AEADs cost). */
const FLOOR_RATIO_TARGET = 1.2;
const COOKIE_KEY = '5a'.repeat(32);
/** Highest rate at < 0.1 % loss, timesvc / chronyd, at least this. */
const TARGET = 0.8;

let poolFiles = 0;

/** Distinct NTS requests for one session; `check` verifies a reply to request i. */
function buildPool(ke: KeClientResult): {
  requests: Buffer[];
  uidIndex: Map<string, number>;
  sessions: NtsClientSession[];
  /** The requests back to back, for the generator (all the same size). */
  file: { path: string; size: number };
  /** Requests whose reply has been verified (a session accepts one reply per request). */
  verifiedOnce: Set<number>;
} {
  const requests: Buffer[] = [];
  const uidIndex = new Map<string, number>();
  const sessions: NtsClientSession[] = [];
  for (let i = 0; i < POOL; i++) {
    // One session per request so each keeps its own UID in flight for the sample check; cookies reused
    // (both servers are stateless: any of the eight cookies stays valid).
    // A full jar (the eight cookies, rotated) so the request carries no placeholders: 228 bytes.
    const s = new NtsClientSession(ke, [...ke.cookies.slice(i % 8), ...ke.cookies.slice(0, i % 8)]);
    const h = Buffer.alloc(48);
    h[0] = 0x23;
    h[2] = 6;
    h.writeUInt32BE(0x7e57beef, 40);
    h.writeUInt32BE(i, 44);
    const req = s.wrap(h)!;
    requests.push(req);
    sessions.push(s);
    uidIndex.set(req.subarray(52, 84).toString('hex'), i);
  }
  const size = requests[0]!.length;
  if (requests.some((r) => r.length !== size)) throw new Error('NTS requests of different sizes');
  const path = join(dir.path, `pool-${poolFiles++}.bin`);
  writeFileSync(path, Buffer.concat(requests));
  return { requests, uidIndex, sessions, file: { path, size }, verifiedOnce: new Set() };
}

interface StepResult {
  rate: number;
  sent: number;
  received: number;
  loss: number;
  achievedRate: number;
  /** Authentic replies per second of the step. */
  answeredRate: number;
  cpuUsPerReq: number;
  verified: number;
  sampled: number;
  genCpuMsPerS: number;
  lateMaxUs: number;
}

async function loadStep(
  tools: NativeTools,
  port: number,
  pid: number,
  rate: number,
  pool: ReturnType<typeof buildPool>,
): Promise<StepResult> {
  // An authentic reply is longer than an NTSN kiss (84 bytes) and carries the mark (gen.c).
  const r = await offerLoadC(tools, {
    port,
    pid,
    rate,
    ms: STEP_MS,
    requestFile: pool.file,
    minReply: 85,
    sampleFile: join(dir.path, `sample-${port}.bin`),
  });
  // Every 64th counted reply verified cryptographically (the rest by size and mark). A session accepts one
  // reply per request, so a request whose reply was verified in an earlier step is not checked again.
  let verified = 0;
  let sampled = 0;
  for (const m of r.samples) {
    const idx = pool.uidIndex.get(m.subarray(52, 84).toString('hex'));
    if (idx !== undefined && pool.verifiedOnce.has(idx)) continue;
    sampled++;
    if (idx !== undefined && pool.sessions[idx]!.unwrap(m).kind === 'authentic') {
      verified++;
      pool.verifiedOnce.add(idx);
    }
  }
  return {
    rate,
    sent: r.sent,
    received: r.received,
    loss: 1 - r.received / r.sent,
    achievedRate: (r.sent / Math.max(r.sendMs, STEP_MS - 1000 / rate)) * 1000,
    answeredRate: (r.received / Math.max(r.sendMs, 1)) * 1000,
    cpuUsPerReq: r.received > 0 ? r.cpuUs / r.received : NaN,
    verified,
    sampled,
    genCpuMsPerS: (r.genCpuMs / Math.max(1, r.sendMs)) * 1000,
    lateMaxUs: r.lateMaxUs,
  };
}

const detail = (r: StepResult): string =>
  `loss ${(r.loss * 100).toFixed(3)} %, answered ${r.answeredRate.toFixed(0)}/s, server CPU ${r.cpuUsPerReq.toFixed(1)} µs/req, ` +
  `${r.verified}/${r.sampled} sampled replies verified (generator CPU ${r.genCpuMsPerS.toFixed(0)} ms/s, ` +
  `at worst ${(r.lateMaxUs / 1000).toFixed(1)} ms behind schedule)`;
const best = (results: StepResult[]): StepResult | undefined => bestStep(results, LOSS_LIMIT);

// The servers run bin/timesvc.mjs, which runs the compiled dist/ (as deployed) unless the child itself has
// the source condition: compile first (incremental, scripts/build.mjs), so the bench measures this tree.
execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs')], { stdio: 'inherit' });

const dir = tempDir('timesvc-nts-bench-');
const tools = buildNative(dir.path);
const children: RunningProcess[] = [];
let ch: ChronyServer | undefined;
// Each child is ended by its own handle (PID), also if the bench is left by an uncaught error.
process.on('exit', () => {
  for (const p of [...children, ch?.proc]) p?.child.kill('SIGTERM');
});
try {
  const pair = makeCertificate(dir.path);
  const chPort = await freePort('udp');
  const chKe = await freePort('tcp');
  const rmemDefault = Number(readFileSync('/proc/sys/net/core/rmem_default', 'utf8').trim());
  const startTimesvc = async (
    name: string,
    recvBuffer: number,
  ): Promise<{ proc: RunningProcess; ke: number }> => {
    const file = join(dir.path, `${name}.yaml`);
    writeFileSync(
      file,
      [
        'ntp:',
        `  port: ${await freePort('udp')}`,
        '  interface: 127.0.0.1',
        '  local_stratum: true',
        '  stratum: 8',
        `  socket_receive_buffer: ${recvBuffer}`,
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
    // The service process itself (bin/timesvc.mjs imports main.ts in-process, no npx wrapper), so
    // /proc/<pid>/stat is the server's CPU.
    const proc = startTimesvcCli(file);
    children.push(proc);
    const ke = Number((await proc.waitForOutput(/"port":(\d+),"msg":"NTS-KE listening"/, 30_000))[1]);
    await proc.waitForOutput(/timesvc started/, 10_000);
    return { proc, ke };
  };
  const [ts, tsSmall] = await Promise.all([
    startTimesvc('timesvc', 4 * 1024 * 1024),
    startTimesvc('timesvc-smallbuf', rmemDefault),
  ]);
  ch = await startChronyServer(dir.path, chPort, {
    extra: [
      'allow 127.0.0.0/8',
      `ntsport ${chKe}`,
      `ntsserverkey ${pair.key}`,
      `ntsservercert ${pair.cert}`,
      'ntsprocesses 0',
    ],
  });
  // The floor holds timesvc's master keys (nts-cookies.ts: derived from the same cookie_key).
  const keyFile = floorKeyFile(join(dir.path, 'floor-keys.txt'), COOKIE_KEY);
  const flPort = await freePort('udp');
  const floor = await startFloor(tools, flPort, { keyFile });
  children.push(floor);
  const flPid = floor.child.pid ?? 0;
  const tsPid = ts.proc.child.pid ?? 0;
  const tsSmallPid = tsSmall.proc.child.pid ?? 0;
  const chPid = ch.proc.child.pid ?? 0;
  const keTs = await ntsKeyExchange({ host: '127.0.0.1', port: ts.ke, caFile: pair.cert });
  const keSmall = await ntsKeyExchange({ host: '127.0.0.1', port: tsSmall.ke, caFile: pair.cert });
  const keCh = await ntsKeyExchange({ host: '127.0.0.1', port: chKe, caFile: pair.cert });
  console.log(
    `timesvc pid ${tsPid} NTP 127.0.0.1:${keTs.ntpPort} (NTS-KE ${ts.ke}, ${keTs.cookies.length} cookies of ${keTs.cookies[0]?.length} B); ` +
      `chronyd pid ${chPid} NTP 127.0.0.1:${keCh.ntpPort} (NTS-KE ${chKe}, ${keCh.cookies.length} cookies of ${keCh.cookies[0]?.length} B); ` +
      `floor pid ${flPid} NTP 127.0.0.1:${flPort} (timesvc's cookies)`,
  );
  const poolTs = buildPool(keTs);
  const poolCh = buildPool(keCh);
  const poolSmall = buildPool(keSmall);
  // Requests like timesvc's (its cookies), each with its own session for the verification.
  const poolFloor = buildPool(keTs);
  console.log(
    `Load: ${STEP_MS} ms per step, paired rounds per rate ${RATES.map((r) => `${r}/s ${roundsAt(r)}`).join(', ')} (at least ${MIN_REQUESTS} requests), 16 source addresses, ${POOL} distinct ${poolTs.requests[0]?.length}-byte requests, loss limit ${LOSS_LIMIT * 100} %`,
  );
  const ceiling = generatorCeiling(tools, 1000, poolTs.file);
  console.log(
    `  generator (gen.c) ceiling: ${ceiling.rate.toFixed(0)} requests/s sent with nothing answering ` +
      `(its CPU ${ceiling.cpuMs.toFixed(0)} ms in 1 s)`,
  );
  // Every server settled first (load.ts settle: past its start-up garbage collections, idle).
  const settled = await settle([
    { name: 'timesvc', pid: tsPid },
    { name: 'chronyd', pid: chPid },
    { name: 'timesvc*', pid: tsSmallPid },
    { name: 'floor', pid: flPid },
  ]);
  console.log(
    `  settled: ${settled.map((x) => `${x.name} idle ${(x.idleUsPerS / 1000).toFixed(1)} ms CPU/s`).join(', ')} ` +
      `(after ${(Math.max(...settled.map((x) => x.waitedMs)) / 1000).toFixed(0)} s)`,
  );
  console.log(`  at start: ${loadLine()}`);
  // Interleaved: at each rate timesvc, chronyd and timesvc* in turn (sweep.ts sweepTogether).
  const [tsResults = [], chResults = [], smallResults = [], flResults = []] = await sweepTogether(
    [
      { name: 'timesvc', step: (rate) => loadStep(tools, keTs.ntpPort, tsPid, rate, poolTs) },
      { name: 'chronyd', step: (rate) => loadStep(tools, keCh.ntpPort, chPid, rate, poolCh) },
      { name: 'timesvc*', step: (rate) => loadStep(tools, keSmall.ntpPort, tsSmallPid, rate, poolSmall) },
      { name: 'floor', step: (rate) => loadStep(tools, flPort, flPid, rate, poolFloor) },
    ],
    RATES,
    LOSS_LIMIT,
    detail,
    { times: roundsAt, key: (r) => r.cpuUsPerReq },
  );
  console.log(`  at end: ${loadLine()}`);
  console.log(
    `  (timesvc* = timesvc with socket_receive_buffer ${rmemDefault}, the kernel default chronyd uses)`,
  );
  compareToAnchors(
    { name: 'timesvc', results: tsResults },
    [
      { name: 'chronyd', results: chResults, target: CPU_RATIO_TARGET },
      { name: 'floor', results: flResults, target: FLOOR_RATIO_TARGET },
    ],
    LOSS_LIMIT,
  );
  highestRates(
    [
      { name: 'timesvc', results: tsResults },
      { name: 'chronyd', results: chResults },
      { name: 'floor', results: flResults },
      { name: 'timesvc*', results: smallResults },
    ],
    RATES,
    LOSS_LIMIT,
    ceiling,
  );

  const bt = best(tsResults);
  const bc = best(chResults);
  const genMax = Math.max(...[...tsResults, ...chResults].map((r) => r.achievedRate));
  console.log('Summary (NTS-protected requests)');
  console.log(
    `  timesvc: ${bt ? bt.rate : 0} req/s at < 0.1 % loss, ${bt ? bt.cpuUsPerReq.toFixed(1) : '-'} µs CPU/req`,
  );
  console.log(
    `  chronyd: ${bc ? bc.rate : 0} req/s at < 0.1 % loss, ${bc ? bc.cpuUsPerReq.toFixed(1) : '-'} µs CPU/req` +
      (bc &&
      bc.rate === Math.max(...chResults.filter((r) => r.achievedRate >= r.rate * 0.97).map((r) => r.rate))
        ? ` (highest rate the generator delivered; chronyd not saturated, generator max ≈ ${genMax.toFixed(0)}/s)`
        : ''),
  );
  const peak = (rs: StepResult[]): StepResult | undefined =>
    [...rs].sort((a, b) => b.answeredRate - a.answeredRate)[0];
  const pt = peak(tsResults);
  const pc = peak(chResults);
  const bs = best(smallResults);
  if (bs)
    console.log(`  timesvc*: ${bs.rate} req/s at < 0.1 % loss, ${bs.cpuUsPerReq.toFixed(1)} µs CPU/req`);
  if (pt && pc) {
    console.log(
      `  peak answered rate (any loss): timesvc ${pt.answeredRate.toFixed(0)}/s (offered ${pt.rate}/s), ` +
        `chronyd ${pc.answeredRate.toFixed(0)}/s (offered ${pc.rate}/s); ratio ${(pt.answeredRate / pc.answeredRate).toFixed(2)} (target >= ${TARGET})`,
    );
  }
  if (bt && bc) {
    const ratio = bt.rate / bc.rate;
    console.log(
      `  rate ratio timesvc/chronyd: ${ratio.toFixed(2)} (target >= ${TARGET}) ${ratio >= TARGET ? 'MET' : 'MISSED'}`,
    );
    console.log(`  CPU per request ratio timesvc/chronyd: ${(bt.cpuUsPerReq / bc.cpuUsPerReq).toFixed(1)}x`);
  }
} finally {
  await Promise.all([...children.map((p) => p.stop()), ch?.stop()]);
  dir.remove();
}
