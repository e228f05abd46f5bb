/**
 * Where timesvc's error comes from (diagnostic, not a bench row): one upstream at +20 ms, one timesvc and one
 * `chronyd -x` with default polls, probes every 500 ms. Because the upstream and timesvc share this process
 * and its monotonic clock, the served clock's exact error (served − truth at the same instant) and each
 * upstream sample's exact error (measured offset − true offset) are known without any network measurement;
 * printed beside the probe's figures.
 *
 *   npx tsx bench/timesvc-discipline/diag.ts [--seconds 600] [--noise-us 0]
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { silentLogger } from '@broadcast-ops/core';
import { requireTool, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { configSchema, createTimesvc } from '@broadcast-ops/timesvc';
import { OffsetUpstream, Probe, writeFollowerConf, freePort } from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string' },
    'noise-us': { type: 'string' },
    'no-chrony': { type: 'boolean' },
  },
});
const SECONDS = Number(values.seconds ?? 600);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const q = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? Number.NaN;
};
const us = (s: number): string => (s * 1e6).toFixed(1).padStart(8);

const up = await OffsetUpstream.start(0.02);
up.noiseS = Number(values['noise-us'] ?? 0) * 1e-6;
const chronySock = await up.listen();
const dir = tempDir('timesvc-diag-');
const chronyPort = await freePort('udp');
const conf = writeFollowerConf(dir.path, up.portOf(chronySock), chronyPort);
const config = configSchema.parse({
  ntp: {
    port: 0,
    interface: '127.0.0.1',
    rate_limit: { enabled: false },
    upstream_peers: [{ address: up.address }],
  },
  web: { port: 0, bind_address: '127.0.0.1' },
});
const chrony = values['no-chrony']
  ? undefined
  : startProcess(requireTool('chronyd'), ['-x', '-d', '-u', 'root', '-f', conf]);
const svc = await createTimesvc(config, silentLogger());
const t0 = performance.now();
const samples: { at: number; err: number; delay: number }[] = [];
const origAdd = svc.manager.addSample.bind(svc.manager);
svc.manager.addSample = (id, sample) => {
  const trueOffset = (up.clock.servedUnixMs(sample.atMs) - svc.clock.rawUnixMs(sample.atMs)) / 1000;
  samples.push({ at: (sample.atMs - t0) / 1000, err: sample.offsetS - trueOffset, delay: sample.delayS });
  origAdd(id, sample);
};
await svc.start();
const probe = new Probe(svc.server()?.addresses[0]?.port ?? 0, up, 500);
const chronyProbe = chrony ? new Probe(chronyPort, up, 500, chronySock) : undefined;
await Promise.all([probe.start(), chronyProbe?.start()]);
// Exact served error every 100 ms.
const exact: { at: number; err: number; li: number }[] = [];
const timer = setInterval(() => {
  const p = performance.now();
  exact.push({
    at: (p - t0) / 1000,
    err: (svc.clock.servedUnixMs(p) - up.clock.servedUnixMs(p)) / 1000,
    li: svc.manager.state === 'INIT' ? 3 : 0,
  });
}, 100);
await sleep(SECONDS * 1000);
clearInterval(timer);
await Promise.all([probe.stop(), chronyProbe?.stop()]);
await svc.close();
await chrony?.stop('SIGTERM');
await up.close();
dir.remove();

console.log('samples (time s, exact sample error µs, delay µs):');
for (const s of samples) console.log(`  ${s.at.toFixed(1).padStart(7)} ${us(s.err)} ${us(s.delay)}`);
// Probe error vs exact served error at the probe's mid-exchange.
const synced = probe.records.filter((r) => r.leap !== 3);
const firstSync = synced[0]?.atMs ?? Number.POSITIVE_INFINITY;
const probeDiff = synced.map((r) => {
  const mid = (r.atMs + r.recvMs) / 2;
  const ex = (svc.clock.servedUnixMs(mid) - up.clock.servedUnixMs(mid)) / 1000;
  return r.errorS - ex;
});
const ex = exact.filter((e) => e.at * 1000 + t0 >= firstSync).map((e) => Math.abs(e.err));
const pe = synced.map((r) => Math.abs(r.errorS));
console.log(`timesvc exact served |error| p50/p95 µs: ${us(q(ex, 0.5))} ${us(q(ex, 0.95))}`);
console.log(`timesvc probe |error|        p50/p95 µs: ${us(q(pe, 0.5))} ${us(q(pe, 0.95))}`);
console.log(
  `probe − exact (timesvc) p5/p50/p95 µs: ${us(q(probeDiff, 0.05))} ${us(q(probeDiff, 0.5))} ${us(q(probeDiff, 0.95))}`,
);
const se = samples.map((s) => s.err);
console.log(`sample error p5/p50/p95 µs: ${us(q(se, 0.05))} ${us(q(se, 0.5))} ${us(q(se, 0.95))}`);
if (chronyProbe) {
  const ce = chronyProbe.records.filter((r) => r.leap !== 3).map((r) => Math.abs(r.errorS));
  const cs = chronyProbe.records.filter((r) => r.leap !== 3).map((r) => r.errorS);
  console.log(
    `chronyd probe |error| p50/p95 µs: ${us(q(ce, 0.5))} ${us(q(ce, 0.95))}; signed p50 ${us(q(cs, 0.5))}`,
  );
  const pd = probe.records.map((r) => r.delayS);
  const cd = chronyProbe.records.map((r) => r.delayS);
  console.log(`probe delay p50 µs: timesvc ${us(q(pd, 0.5))} chronyd ${us(q(cd, 0.5))}`);
}
const signedProbe = synced.map((r) => r.errorS);
console.log(`timesvc probe signed p50 µs: ${us(q(signedProbe, 0.5))}`);
// Exact error over time (every 10 s).
console.log('exact served error over time (s, µs):');
for (const e of exact.filter((_, i) => i % 100 === 0))
  console.log(`  ${e.at.toFixed(0).padStart(5)} ${us(e.err)}`);
// Probe replies beyond 0.3 ms, with the exact error at the same instant and the probe's delay.
console.log('probe replies with |error| > 0.3 ms (s, probe error µs, exact µs, probe delay µs):');
for (const r of synced.filter((x) => Math.abs(x.errorS) > 0.3e-3)) {
  const mid = (r.atMs + r.recvMs) / 2;
  const ex = (svc.clock.servedUnixMs(mid) - up.clock.servedUnixMs(mid)) / 1000;
  console.log(`  ${((r.atMs - t0) / 1000).toFixed(1).padStart(7)} ${us(r.errorS)} ${us(ex)} ${us(r.delayS)}`);
}
