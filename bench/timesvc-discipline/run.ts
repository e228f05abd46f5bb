/**
 * timesvc discipline benchmark: one scenario, run in the same process at the same time against timesvc
 * and against `chronyd -x` as the server under test, both following the same offset upstream.
 *
 *   npx tsx bench/timesvc-discipline/run.ts [--poll 2] [--outage-s 60]
 *
 * Scenario: start with the upstream at host + 20 ms; once both serve LI 0 and have settled (20 s), the
 * upstream moves by −15 ms; 40 s later it goes silent for 60 s (an outage), then answers again for 40 s.
 * A probe client polls each server every 250 ms and measures it against the upstream's truth
 * (packages/timesvc/test/helpers/offset-upstream.ts). Printed side by side: time to LI 0, time to within
 * 1 ms after the move (and staying there until the outage), worst backward step of the served T3 between
 * consecutive replies (any rise below the server's least rate times the time between them), worst |error| beyond the advertised bound (root delay/2 + root dispersion, plus half
 * the probe's own round trip; replies sent before a server could have measured a change are not judged).
 *
 * Alongside, in the same run (`--accuracy-s`, default 600): a second upstream at +20 ms followed by a
 * timesvc and a `chronyd -x` with their **default** polls (timesvc: poll 64 s, iburst; chrony: minpoll 6,
 * maxpoll 10, iburst), probed every 500 ms: error p50/p95 over the first 10 minutes (LI ≠ 3 replies) and each
 * server's median advertised root dispersion (bench/timesvc-discipline/startup.ts: the first 6 minutes of
 * three such pairs with path noise). And
 * a leap-second row: a third upstream announces and applies an insertion (LI 1, then the second repeated)
 * at a UTC midnight, with timesvc on a host clock shifted to shortly before it (default polls). chronyd -x
 * cannot be put on a leap day without stepping or faking its clock, so that row is timesvc's only.
 *
 * First it checks that chronyd with -x serves its corrected time (not the host clock): its error against
 * the +20 ms truth must be well under the 20 ms it corrects. chronyd runs with -x (never touches the
 * clock), its own config, pidfile and driftfile, no command port, and is ended by PID.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { silentLogger } from '@broadcast-ops/core';
import { requireTool, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { configSchema, createTimesvc } from '@broadcast-ops/timesvc';
import {
  MAXFREQ,
  OffsetUpstream,
  Probe,
  checkProbe,
  type ProbeRecord,
  writeFollowerConf,
  freePort,
  startupPair,
} from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: { poll: { type: 'string' }, 'outage-s': { type: 'string' }, 'accuracy-s': { type: 'string' } },
});
const POLL = Number(values.poll ?? 2);
const OUTAGE_S = Number(values['outage-s'] ?? 60);
const ACCURACY_S = Number(values['accuracy-s'] ?? 600);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const up = await OffsetUpstream.start(0.02);
// A second socket of the same upstream (same truth) for chronyd, so each server's "could it know yet"
// window is judged from the replies it received itself.
const chronyUpSocket = await up.listen();
const dir = tempDir('timesvc-discipline-bench-');
const chronyPort = await freePort('udp');
const conf = writeFollowerConf(
  dir.path,
  up.portOf(chronyUpSocket),
  chronyPort,
  `minpoll ${POLL} maxpoll ${POLL}`,
);

const config = configSchema.parse({
  ntp: {
    port: 0,
    interface: '127.0.0.1',
    rate_limit: { enabled: false },
    upstream_peers: [{ address: up.address, iburst: true, minpoll: POLL, maxpoll: POLL }],
  },
  web: { port: 0, bind_address: '127.0.0.1' },
});
// Accuracy with the defaults: its own upstream, timesvc and chronyd -x.
const accPair = await startupPair(join(dir.path, 'acc'), 0, 500);
const accT0 = accPair.t0;
const accProbes = accPair.probes;

// Leap second (insertion) with the default polls: timesvc on a host clock 30 s before 2027-01-01.
const LEAP_EPOCH_S = Date.UTC(2027, 0, 1) / 1000;
const leapShiftMs = Math.round(LEAP_EPOCH_S * 1000 - Date.now() - 30_000);
const leapUp = await OffsetUpstream.start(leapShiftMs / 1000 + 0.02);
const leapAtMs = leapUp.scheduleLeap(LEAP_EPOCH_S, -1);
const leapConfig = configSchema.parse({
  ntp: {
    port: 0,
    interface: '127.0.0.1',
    rate_limit: { enabled: false },
    upstream_peers: [{ address: leapUp.address }],
  },
  web: { port: 0, bind_address: '127.0.0.1' },
});
const leapSvc = await createTimesvc(leapConfig, silentLogger(), {
  timeSource: { wallMs: () => Date.now() + leapShiftMs, monoMs: () => performance.now() },
});
await leapSvc.start();
const leapProbe = new Probe(leapSvc.server()?.addresses[0]?.port ?? 0, leapUp, 250);
await leapProbe.start();
const leapStates: string[] = [];
leapSvc.manager.on((e) => {
  if (e.type === 'state') leapStates.push(e.to);
});
setTimeout(
  () => {
    void leapProbe.stop().then(() => leapSvc.close());
  },
  Math.max(0, leapAtMs + 45_000 - performance.now()),
).unref();

const t0 = performance.now();
const chrony = startProcess(requireTool('chronyd'), ['-x', '-d', '-u', 'root', '-f', conf]);
const service = await createTimesvc(config, silentLogger());
await service.start();
const tsPort = service.server()?.addresses[0]?.port ?? 0;
const probes = {
  timesvc: new Probe(tsPort, up, 250),
  chronyd: new Probe(chronyPort, up, 250, chronyUpSocket),
};
await Promise.all([probes.timesvc.start(), probes.chronyd.start()]);

const firstLi0 = (p: Probe): number | undefined => p.records.find((r) => r.leap !== 3)?.atMs;
const deadline = performance.now() + 90_000;
while (performance.now() < deadline && (!firstLi0(probes.timesvc) || !firstLi0(probes.chronyd)))
  await sleep(200);
await sleep(20_000);

// Does chronyd -x serve its corrected time? Its upstream is 20 ms ahead of the host clock.
const chronyNow = probes.chronyd.records.filter((r) => r.leap !== 3).slice(-8);
const chronyErr = chronyNow.length
  ? chronyNow.reduce((a, r) => a + Math.abs(r.errorS), 0) / chronyNow.length
  : NaN;
const chronyServesCorrected = chronyErr < 0.005;

const tMove = performance.now();
up.move(-0.015);
await sleep(40_000);
const tOutage = performance.now();
up.pause();
await sleep(OUTAGE_S * 1000);
const tReturn = performance.now();
up.resume();
await sleep(40_000);

await Promise.all([probes.timesvc.stop(), probes.chronyd.stop()]);
await service.close();
await chrony.stop('SIGTERM');
await up.close();
await sleep(Math.max(0, accT0 + ACCURACY_S * 1000 - performance.now()));
await accPair.stop();
await sleep(Math.max(0, leapAtMs + 46_000 - performance.now()));
await leapUp.close();
dir.remove();

/** From when on (after `from`, before `until`) every reply stays within `s` of the truth; ms after `from`. */
function settleTime(
  records: readonly ProbeRecord[],
  from: number,
  until: number,
  s: number,
): number | undefined {
  const window = records.filter((r) => r.atMs > from && r.atMs < until);
  let since: number | undefined;
  for (const r of window) {
    if (!r.knowable) continue; // an exchange spanning a change of the truth measures nothing
    // The probe's own measurement is exact to half its round trip (RFC 5905 §8): judged with that benefit.
    if (r.leap !== 3 && Math.abs(r.errorS) - Math.max(0, r.delayS) / 2 < s) since ??= r.atMs;
    else since = undefined;
  }
  return since === undefined ? undefined : since - from;
}

function statesDuring(records: readonly ProbeRecord[], from: number, until: number): string {
  const w = records.filter((r) => r.atMs > from && r.atMs < until);
  const li3 = w.filter((r) => r.leap === 3).length;
  return `${w.length - li3}/${w.length} LI 0`;
}

/**
 * The least rate each served clock may run at, for checkProbe's monotonicity (probes are 250 ms apart, so
 * "T3 never decreased" alone would miss backward steps under 250 ms): 1 − (|frequency| + slew rate).
 * timesvc: MAXFREQ + max_slew_rate_ppm; chronyd: maxslewrate 83,333 ppm + maxdrift 500 ppm (chrony.conf(5)).
 */
const MAX_RATE = {
  timesvc: MAXFREQ + config.ntp.discipline.max_slew_rate_ppm * 1e-6,
  chronyd: 83_333e-6 + 500e-6,
} as const;

const rows: [string, string, string][] = [];
const fmt = (v: number | undefined, unit: string, digits = 1): string =>
  v === undefined || !Number.isFinite(v) ? 'never' : `${v.toFixed(digits)} ${unit}`;
const result = Object.fromEntries(
  (['timesvc', 'chronyd'] as const).map((name) => {
    const recs = probes[name].records;
    const c = checkProbe(recs, MAX_RATE[name]);
    const li0 = firstLi0(probes[name]);
    return [
      name,
      {
        li0S: li0 === undefined ? undefined : (li0 - t0) / 1000,
        within1msS: (() => {
          const t = settleTime(recs, tMove, tOutage, 0.001);
          return t === undefined ? undefined : t / 1000;
        })(),
        backwardUs: c.worstBackwardS * 1e6,
        beyondUs: Math.max(0, c.worstBeyondBoundS) * 1e6,
        beyondRawUs: c.worstBeyondBoundS * 1e6,
        outage: statesDuring(recs, tOutage, tReturn),
        afterReturn: (() => {
          const t = settleTime(recs, tReturn, Number.POSITIVE_INFINITY, 0.001);
          return t === undefined ? undefined : t / 1000;
        })(),
        replies: c.replies,
      },
    ];
  }),
);
const ts = result['timesvc']!;
const ch = result['chronyd']!;
rows.push(['time to LI 0 (s)', fmt(ts.li0S, 's'), fmt(ch.li0S, 's')]);
rows.push(['within 1 ms after the -15 ms move', fmt(ts.within1msS, 's'), fmt(ch.within1msS, 's')]);
rows.push(['worst backward step of T3', fmt(ts.backwardUs, 'µs'), fmt(ch.backwardUs, 'µs')]);
rows.push(['worst |error| beyond advertised bound', fmt(ts.beyondUs, 'µs'), fmt(ch.beyondUs, 'µs')]);
rows.push(['  (margin: |error| − bound, max)', fmt(ts.beyondRawUs, 'µs'), fmt(ch.beyondRawUs, 'µs')]);
rows.push([`replies during the ${OUTAGE_S} s outage`, ts.outage, ch.outage]);
rows.push(['within 1 ms after the outage', fmt(ts.afterReturn, 's'), fmt(ch.afterReturn, 's')]);
rows.push(['probe replies', String(ts.replies), String(ch.replies)]);

console.log(
  `timesvc-discipline bench: upstream +20 ms, polls 2^${POLL} s (iburst) for both, probe every 250 ms`,
);
console.log(
  `chronyd -x serves its corrected time: ${chronyServesCorrected ? 'yes' : 'NO'} (mean |error| ${(chronyErr * 1e6).toFixed(0)} µs against an upstream 20 ms ahead of the host clock)`,
);
const w = [40, 16, 16];
console.log(`${'metric'.padEnd(w[0]!)}${'timesvc'.padStart(w[1]!)}${'chronyd -x'.padStart(w[2]!)}`);
for (const [m, a, b] of rows) console.log(`${m.padEnd(w[0]!)}${a.padStart(w[1]!)}${b.padStart(w[2]!)}`);
const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};
const accErr = (p: Probe): number[] => p.records.filter((r) => r.leap !== 3).map((r) => Math.abs(r.errorS));
/** The bound each server advertised (docs/clock-discipline.md "The advertised bound"), over its LI ≠ 3 replies. */
const medianDisp = (p: Probe): number =>
  quantile(
    p.records.filter((r) => r.leap !== 3).map((r) => r.rootDispersionS),
    0.5,
  );
const acc = {
  timesvc: accErr(accProbes.timesvc),
  chronyd: accErr(accProbes.chronyd),
};
console.log(
  `\naccuracy with the default configuration, first ${ACCURACY_S} s, upstream +20 ms, probe every 500 ms:`,
);
const accRows: [string, string, string][] = [
  [
    'error p50 (LI != 3 replies)',
    fmt(quantile(acc.timesvc, 0.5) * 1e3, 'ms', 3),
    fmt(quantile(acc.chronyd, 0.5) * 1e3, 'ms', 3),
  ],
  [
    'error p95',
    fmt(quantile(acc.timesvc, 0.95) * 1e3, 'ms', 3),
    fmt(quantile(acc.chronyd, 0.95) * 1e3, 'ms', 3),
  ],
  ['synchronised replies', String(acc.timesvc.length), String(acc.chronyd.length)],
  [
    'median advertised root dispersion',
    fmt(medianDisp(accProbes.timesvc) * 1e3, 'ms', 3),
    fmt(medianDisp(accProbes.chronyd) * 1e3, 'ms', 3),
  ],
];
for (const [m, a, b] of accRows) console.log(`${m.padEnd(w[0]!)}${a.padStart(w[1]!)}${b.padStart(w[2]!)}`);
const accRatio = quantile(acc.timesvc, 0.5) / quantile(acc.chronyd, 0.5);

// Leap second row (timesvc only).
const lr = leapProbe.records;
const lFirst = lr.findIndex((r) => r.leap !== 3);
const lAfterSync = lFirst < 0 ? [] : lr.slice(lFirst);
const lBefore = lAfterSync.filter((r) => r.recvMs < leapAtMs);
const lPast = lAfterSync.filter((r) => r.atMs > leapAtMs + 50);
const lc = checkProbe(lr, MAX_RATE.timesvc);
const across = lr.findIndex((r) => r.atMs >= leapAtMs);
const jump = across > 0 ? Number((lr[across]?.t3 ?? 0n) - (lr[across - 1]?.t3 ?? 0n)) / 2 ** 32 : Number.NaN;
const gap = across > 0 ? ((lr[across]?.atMs ?? 0) - (lr[across - 1]?.atMs ?? 0)) / 1000 : Number.NaN;
console.log(
  `\nleap second (insertion at 2027-01-01T00:00:00Z, default polls, timesvc only): ` +
    `${lBefore.filter((r) => r.leap === 1).length}/${lBefore.length} replies before it LI 1, ` +
    `${lPast.filter((r) => r.leap === 0).length}/${lPast.length} after it LI 0, ` +
    `${lAfterSync.filter((r) => r.leap === 3).length} LI 3 after synchronisation; states ${leapStates.join('→')}; ` +
    `T3 moved ${jump.toFixed(3)} s in ${gap.toFixed(3)} s at the leap; worst |error| − bound ${(lc.worstBeyondBoundS * 1e6).toFixed(0)} µs`,
);
const ratio = ts.li0S !== undefined && ch.li0S !== undefined ? ts.li0S / ch.li0S : Number.NaN;
const phase = (t: number): string => {
  const at = (x: number, name: string): string => `${name} ${((t - x) / 1000).toFixed(1)} s`;
  if (t >= tReturn) return at(tReturn, 'return +');
  if (t >= tOutage) return at(tOutage, 'outage +');
  if (t >= tMove) return at(tMove, 'move +');
  return at(t0, 'start +');
};
for (const name of ['timesvc', 'chronyd'] as const) {
  const c = checkProbe(probes[name].records, MAX_RATE[name]);
  if (c.worst && c.worstBeyondBoundS > 0) {
    const r = c.worst;
    console.log(
      `  ${name} worst reply: ${phase(r.atMs)}, error ${(r.errorS * 1e6).toFixed(0)} µs, root delay ${(r.rootDelayS * 1e6).toFixed(0)} µs, root dispersion ${(r.rootDispersionS * 1e6).toFixed(0)} µs, probe delay ${(r.delayS * 1e6).toFixed(0)} µs`,
    );
  }
}
console.log('targets:');
console.log(`  time to LI 0 <= 2x chrony's: ${ratio.toFixed(2)}x -> ${ratio <= 2 ? 'met' : 'MISSED'}`);
console.log(`  no backward step: ${ts.backwardUs === 0 ? 'met' : 'MISSED'}`);
console.log(`  error never beyond the bound: ${ts.beyondUs === 0 ? 'met' : 'MISSED'}`);
console.log(`  accuracy p50 <= 2x chrony's: ${accRatio.toFixed(2)}x -> ${accRatio <= 2 ? 'met' : 'MISSED'}`);
const dispRatio = medianDisp(accProbes.timesvc) / medianDisp(accProbes.chronyd);
console.log(
  `  median root dispersion <= 2x chrony's: ${dispRatio.toFixed(2)}x -> ${dispRatio <= 2 ? 'met' : 'MISSED'}`,
);
