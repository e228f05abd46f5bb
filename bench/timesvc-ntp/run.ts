/**
 * timesvc NTP benchmark: the same bounded load against timesvc, chronyd and the floor (a minimal C
 * responder with timesvc's recvmmsg/sendmmsg loop and kernel timestamps answering a fixed reply,
 * bench/timesvc-common/floor.c) serving NTP on loopback, in one run. The load comes from a generator in C
 * (bench/timesvc-common/gen.c), whose own ceiling is measured and printed first.
 *
 *   npx tsx bench/timesvc-ntp/run.ts [--step-ms 2000] [--rates 5000,10000,...] [--queries 9] [--repeat 3]
 *
 * Prints, for each server: the highest offered rate answered with < 0.1 % loss, the server's CPU time per
 * request at each rate (schedstat, load.ts cpuUs), the ratios timesvc/floor and timesvc/chronyd; and the median
 * offset `chronyd -Q` measures against timesvc and against chronyd (both serve the same host clock), for
 * timesvc with its default receive timestamps (kernel, where the addon is built) and with
 * `kernel_rx_timestamps: false`. Each timesvc's receive-timestamp mode is read from its `/api/health`.
 * chronyd runs with -x (never touches the clock), its own config/pidfile/driftfile, no command port.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { repoRoot, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import {
  buildNative,
  generatorCeiling,
  offerLoadC,
  settle,
  startFloor,
  type NativeTools,
} from '../timesvc-common/load.ts';
import {
  startTimesvcCli,
  chronyQuery,
  medianOf,
  startChronyServer,
  type ChronyServer,
  freePort,
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
    rates: { type: 'string' },
    queries: { type: 'string' },
    repeat: { type: 'string' },
  },
});
const STEP_MS = Number(values['step-ms'] ?? 2000);
const RATES = (values.rates ?? '5000,10000,20000,30000,40000,50000,60000,80000,100000,120000,150000')
  .split(',')
  .map(Number);
const QUERIES = Number(values.queries ?? 9);
/** Steps per server and rate, interleaved; the median CPU per request is kept (sweep.ts). */
const REPEAT = Number(values.repeat ?? 3);
const LOSS_LIMIT = 0.001;
/** CPU per request, timesvc / chronyd, at most this at every rate of the sweep. */
const CPU_RATIO_TARGET = 1.2;
/** CPU per request, timesvc / the floor, at most this at every rate both serve with < 0.1 % loss. */
const FLOOR_RATIO_TARGET = 1.2;

interface StepResult {
  rate: number;
  sent: number;
  received: number;
  loss: number;
  achievedRate: number;
  cpuUsPerReq: number;
  /** The generator's own CPU time per second of sending (ms/s: 1000 is a whole core). */
  genCpuMsPerS: number;
  lateMaxUs: number;
}

/**
 * Offer `rate` plain requests/s for STEP_MS from 16 loopback source addresses with the C generator
 * (gen.c counts each sequence number's reply once).
 */
async function loadStep(tools: NativeTools, port: number, pid: number, rate: number): Promise<StepResult> {
  const r = await offerLoadC(tools, { port, pid, rate, ms: STEP_MS });
  return {
    rate,
    sent: r.sent,
    received: r.received,
    loss: 1 - r.received / r.sent,
    achievedRate: (r.sent / Math.max(r.sendMs, STEP_MS - 1000 / rate)) * 1000,
    cpuUsPerReq: r.received > 0 ? r.cpuUs / r.received : NaN,
    genCpuMsPerS: (r.genCpuMs / Math.max(1, r.sendMs)) * 1000,
    lateMaxUs: r.lateMaxUs,
  };
}

const detail = (r: StepResult): string =>
  `loss ${(r.loss * 100).toFixed(3)} %, server CPU ${r.cpuUsPerReq.toFixed(1)} µs/req ` +
  `(generator CPU ${r.genCpuMsPerS.toFixed(0)} ms/s, at worst ${(r.lateMaxUs / 1000).toFixed(1)} ms behind schedule)`;
const best = (results: StepResult[]): StepResult | undefined => bestStep(results, LOSS_LIMIT);

// The servers run bin/timesvc.mjs, which runs the compiled dist/ (as deployed) unless the child itself has
// the source condition: compile first (incremental, scripts/build.mjs), so the bench measures this tree.
execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs')], { stdio: 'inherit' });

const dir = tempDir('timesvc-bench-');
const tools = buildNative(dir.path);
const children: RunningProcess[] = [];
let ch: ChronyServer | undefined;
// Each child is ended by its own handle (PID), also if the bench is left by an uncaught error.
process.on('exit', () => {
  for (const p of [...children, ch?.proc]) p?.child.kill('SIGTERM');
});
try {
  const tsPort = await freePort('udp');
  const chPort = await freePort('udp');
  const userPort = await freePort('udp');
  const smallPort = await freePort('udp');
  const flPort = await freePort('udp');
  const rmemDefault = Number(readFileSync('/proc/sys/net/core/rmem_default', 'utf8').trim());
  /** Start one timesvc; resolves once it is LOCKED, with its receive-timestamp mode from /api/health. */
  const startTimesvc = async (
    name: string,
    port: number,
    kernelRx: boolean,
    recvBuffer = 4 * 1024 * 1024,
  ): Promise<{ proc: RunningProcess; pid: number; rx: string }> => {
    const file = join(dir.path, `${name}.yaml`);
    writeFileSync(
      file,
      [
        'ntp:',
        `  port: ${port}`,
        '  interface: 127.0.0.1',
        '  local_stratum: true',
        '  stratum: 8',
        `  kernel_rx_timestamps: ${kernelRx}`,
        `  socket_receive_buffer: ${recvBuffer}`,
        '  rate_limit:',
        '    enabled: false',
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
    await proc.waitForOutput(/"to":"LOCKED"/, 30_000);
    const web = (await proc.waitForOutput(/"web":"(http[^"]+)"/, 5_000))[1] ?? '';
    const health = (await (await fetch(`${web}/api/health`)).json()) as { rx_timestamps?: string };
    return { proc, pid: proc.child.pid ?? 0, rx: health.rx_timestamps ?? 'unknown' };
  };
  // Started together (each needs a few seconds to lock on its local reference).
  const [ts, tsUser, tsSmall] = await Promise.all([
    startTimesvc('timesvc', tsPort, true),
    startTimesvc('timesvc-userspace', userPort, false),
    // Like for like with chronyd, which leaves SO_RCVBUF at the kernel default.
    startTimesvc('timesvc-smallbuf', smallPort, true, rmemDefault),
  ]);
  // The load generator sends from 127.0.1.x.
  ch = await startChronyServer(dir.path, chPort, { extra: ['allow 127.0.0.0/8'] });
  const chPid = ch.proc.child.pid ?? 0;
  const floor = await startFloor(tools, flPort);
  children.push(floor);
  const flPid = floor.child.pid ?? 0;

  console.log(
    `timesvc pid ${ts.pid} on 127.0.0.1:${tsPort} (rx_timestamps: ${ts.rx}); ` +
      `timesvc kernel_rx_timestamps:false pid ${tsUser.pid} (rx_timestamps: ${tsUser.rx}); ` +
      `timesvc* pid ${tsSmall.pid} (rx_timestamps: ${tsSmall.rx}); chronyd pid ${chPid} on 127.0.0.1:${chPort}; ` +
      `floor pid ${flPid} on 127.0.0.1:${flPort}`,
  );
  console.log(`Offset measured by chronyd -Q (${QUERIES} alternating runs each, idle servers):`);
  const offTs: number[] = [];
  const offUser: number[] = [];
  const offCh: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const a = (await chronyQuery('127.0.0.1', tsPort)).offsetS;
    const b = (await chronyQuery('127.0.0.1', chPort)).offsetS;
    const c = (await chronyQuery('127.0.0.1', userPort)).offsetS;
    if (a !== undefined) offTs.push(a);
    if (b !== undefined) offCh.push(b);
    if (c !== undefined) offUser.push(c);
  }
  const medTs = medianOf(offTs);
  const medCh = medianOf(offCh);
  const medUser = medianOf(offUser);
  const show = (name: string, v: number[], m: number): void => {
    console.log(
      `  ${name}: ${v.map((o) => (o * 1e6).toFixed(0)).join(' ')} µs -> median ${(m * 1e6).toFixed(1)} µs`,
    );
  };
  show(`timesvc (default, rx_timestamps ${ts.rx})`, offTs, medTs);
  show(`timesvc (kernel_rx_timestamps: false, rx_timestamps ${tsUser.rx})`, offUser, medUser);
  show('chronyd', offCh, medCh);

  console.log(`Load: ${STEP_MS} ms per step, 16 source addresses, loss limit ${LOSS_LIMIT * 100} %`);
  const ceiling = generatorCeiling(tools);
  console.log(
    `  generator (gen.c) ceiling: ${ceiling.rate.toFixed(0)} requests/s sent with nothing answering ` +
      `(its CPU ${ceiling.cpuMs.toFixed(0)} ms in 1 s)`,
  );
  // Every server settled first (load.ts settle: past its start-up garbage collections, idle).
  const settled = await settle([
    { name: 'timesvc', pid: ts.pid },
    { name: 'chronyd', pid: chPid },
    { name: 'timesvc*', pid: tsSmall.pid },
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
      { name: 'timesvc', step: (rate) => loadStep(tools, tsPort, ts.pid, rate) },
      { name: 'chronyd', step: (rate) => loadStep(tools, chPort, chPid, rate) },
      { name: 'timesvc*', step: (rate) => loadStep(tools, smallPort, tsSmall.pid, rate) },
      { name: 'floor', step: (rate) => loadStep(tools, flPort, flPid, rate) },
    ],
    RATES,
    LOSS_LIMIT,
    detail,
    { times: REPEAT, key: (r) => r.cpuUsPerReq },
  );
  console.log(`  at end: ${loadLine()}`);
  console.log(
    `  (timesvc* = timesvc with socket_receive_buffer ${rmemDefault}, the kernel default chronyd uses)`,
  );
  compareToAnchors(
    { name: 'timesvc', results: tsResults },
    [
      { name: 'floor', results: flResults, target: FLOOR_RATIO_TARGET },
      { name: 'chronyd', results: chResults, target: CPU_RATIO_TARGET },
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
  console.log('Summary');
  console.log(
    `  timesvc: ${bt ? bt.rate : 0} req/s at < 0.1 % loss, ${bt ? bt.cpuUsPerReq.toFixed(1) : '-'} µs CPU/req`,
  );
  console.log(
    `  chronyd: ${bc ? bc.rate : 0} req/s at < 0.1 % loss, ${bc ? bc.cpuUsPerReq.toFixed(1) : '-'} µs CPU/req` +
      (bc &&
      bc.rate === Math.max(...chResults.filter((r) => r.achievedRate >= r.rate * 0.97).map((r) => r.rate))
        ? ` (highest rate the generator delivered; chronyd was not saturated, generator max ≈ ${genMax.toFixed(0)}/s)`
        : ''),
  );
  if (bt && bc) {
    console.log(`  rate ratio timesvc/chronyd: ${(bt.rate / bc.rate).toFixed(2)} (target >= 0.5)`);
    console.log(`  CPU per request ratio timesvc/chronyd: ${(bt.cpuUsPerReq / bc.cpuUsPerReq).toFixed(1)}x`);
  }
  console.log(`  highest rate at < 0.1 % loss: timesvc ${bt ? bt.rate : 0}/s, chronyd ${bc ? bc.rate : 0}/s`);
  const bs = best(smallResults);
  if (bs && bc) {
    console.log(
      `  timesvc with chronyd's receive buffer: ${bs.rate} req/s at < 0.1 % loss, ${bs.cpuUsPerReq.toFixed(1)} µs CPU/req; ` +
        `rate ratio ${(bs.rate / bc.rate).toFixed(2)}`,
    );
  }
  console.log(
    `  offset median: timesvc ${(medTs * 1e6).toFixed(1)} µs vs chronyd ${(medCh * 1e6).toFixed(1)} µs, ` +
      `difference ${((medTs - medCh) * 1e6).toFixed(1)} µs (target within 50 µs; rx_timestamps ${ts.rx}); ` +
      `with kernel_rx_timestamps: false (rx_timestamps ${tsUser.rx}): ${(medUser * 1e6).toFixed(1)} µs, ` +
      `difference ${((medUser - medCh) * 1e6).toFixed(1)} µs`,
  );
  console.log(
    '  note: timesvc asks for a 4 MiB socket receive buffer by default (net.core.rmem_max allows it); chronyd ' +
      'keeps the kernel default, so it drops bursts earlier when it is descheduled; timesvc* above uses the same.',
  );
} finally {
  await Promise.all([...children.map((p) => p.stop()), ch?.stop()]);
  dir.remove();
}
