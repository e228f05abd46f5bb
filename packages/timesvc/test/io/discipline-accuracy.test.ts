import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import type { ClockState } from '../../src/domain/clock-state.ts';
import { MAXFREQ } from '../../src/domain/discipline.ts';
import { startProcess, tempDir } from '@broadcast-ops/core/testing';
import { OffsetUpstream, Probe, checkProbe, type ProbeRecord } from '../helpers/offset-upstream.ts';
import { startService } from '../helpers/service.ts';
import { startupFigures, startupPair } from '../helpers/startup-pair.ts';

/**
 * Accuracy with the default configuration (poll 64 s, iburst) over the first 10 minutes, through the first
 * poll increases, against a loopback upstream at +20 ms: noiseless, and with ±25 µs and ±100 µs of
 * simulated path noise (helpers/offset-upstream.ts `noiseS`), each beside a `chronyd -x` following the same
 * upstream with its default polls: over the first 6 minutes timesvc's median advertised root dispersion is
 * at most twice chronyd's, never above 50 ms after 10 s, no reply is outside its bound and the update age
 * stays within two polls (docs/clock-discipline.md "The advertised bound"). A fourth run moves its upstream
 * by −15 ms with two CPU hogs beside it. The four runs are concurrent.
 *
 * Long (10 minutes, the three scenarios at once): `npm test` runs it on this machine's own Node line
 * (scripts/test-matrix.ts sets TIMESVC_LONG_TESTS=1 there) and reports it skipped on the other lines;
 * `npm run test:unit` runs it only with TIMESVC_LONG_TESTS=1 (`TIMESVC_LONG_TESTS=1 npm run test:unit --
 * packages/timesvc/test/discipline-accuracy`).
 */

const LONG = process.env['TIMESVC_LONG_TESTS'] === '1';
const DURATION_MS = Number(process.env['TIMESVC_ACCURACY_MS'] ?? 600_000);

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

interface Figures {
  p50: number;
  p95: number;
  max: number;
  synchronised: number;
  /** The same over the replies whose exchange passed the probe's delay gate. */
  gated: { p50: number; p95: number; replies: number };
}

/**
 * Error figures over the synchronised replies, raw and over the exchanges whose round trip passes the
 * same delay gate the service applies to its own upstream (3× the lowest + 500 µs, domain/sample-run.ts):
 * on a loaded machine a reply whose send the scheduler held for milliseconds after T3 was read shows as
 * an error of half that delay, which says how long the probe's own exchange took, not where served time
 * is (measured: probe −1.1 ms at a 2.1 ms round trip while the served clock was 25 µs off,
 * docs/clock-discipline.md "Where the error came from"); any client's clock filter discards such an
 * exchange likewise (RFC 5905 §10).
 */
function figures(records: readonly ProbeRecord[]): Figures {
  const synced = records.filter((r) => r.leap !== 3);
  const abs = (rs: readonly ProbeRecord[]): number[] =>
    rs.map((r) => Math.abs(r.errorS)).sort((a, b) => a - b);
  const errs = abs(synced);
  const gate = 3 * Math.min(...synced.map((r) => r.delayS)) + 500e-6;
  const gated = abs(synced.filter((r) => r.delayS <= gate));
  return {
    p50: quantile(errs, 0.5),
    p95: quantile(errs, 0.95),
    max: errs[errs.length - 1] ?? Number.NaN,
    synchronised: errs.length,
    gated: { p50: quantile(gated, 0.5), p95: quantile(gated, 0.95), replies: gated.length },
  };
}

const STARTUP_S = 360;

async function scenario(name: string, noiseS: number, limits: { p50: number; p95: number }): Promise<void> {
  const dir = tempDir('timesvc-accuracy-');
  const pair = await startupPair(dir.path, noiseS, 500);
  const { service } = pair;
  const probe = pair.probes.timesvc;
  const states: ClockState[] = [];
  service.manager.on((e) => {
    if (e.type === 'state') states.push(e.to);
  });
  const polls: number[] = [];
  try {
    while (performance.now() - pair.t0 < DURATION_MS) {
      await new Promise((r) => setTimeout(r, 1000));
      const p = service.peers[0]?.peer.poll ?? 0;
      if (polls[polls.length - 1] !== p) polls.push(p);
    }
    const f = figures(probe.records);
    const c = checkProbe(probe.records, MAXFREQ + service.config.ntp.discipline.max_slew_rate_ppm * 1e-6);
    const start = startupFigures(pair, STARTUP_S);
    console.log(
      `${name}: ${f.synchronised} synchronised replies over ${(DURATION_MS / 1000).toFixed(0)} s, ` +
        `error p50 ${(f.p50 * 1e3).toFixed(3)} ms, p95 ${(f.p95 * 1e3).toFixed(3)} ms, max ${(f.max * 1e3).toFixed(3)} ms; ` +
        `over the ${f.gated.replies} exchanges within the delay gate p50 ${(f.gated.p50 * 1e3).toFixed(3)} ms, ` +
        `p95 ${(f.gated.p95 * 1e3).toFixed(3)} ms; ` +
        `polls ${polls.join('→')}; states ${states.join('→')}; worst |error| − bound ${(c.worstBeyondBoundS * 1e6).toFixed(1)} µs; ` +
        `first ${STARTUP_S} s beside chronyd -x: ${JSON.stringify(start)}; ` +
        `timesvc's reply fields [s, root delay µs, root dispersion µs, ppm] ${JSON.stringify(pair.fields)}`,
    );
    assert.deepEqual(states, ['SYNCING', 'LOCKED'], `${name}: the state flapped`);
    assert.equal(c.worstBackwardS, 0, `${name}: served time went backwards`);
    assert.ok(c.worstBeyondBoundS <= 0, `${name}: an error beyond its bound by ${c.worstBeyondBoundS} s`);
    assert.ok(f.gated.replies >= 0.9 * f.synchronised, `${name}: the delay gate left out over 10 %`);
    assert.ok(f.gated.p50 <= limits.p50, `${name}: p50 ${f.gated.p50} s > ${limits.p50} s`);
    assert.ok(f.gated.p95 <= limits.p95, `${name}: p95 ${f.gated.p95} s > ${limits.p95} s`);
    if (DURATION_MS >= 600_000) assert.ok(polls.length > 1, `${name}: the poll never rose`);
    // The start-up bound (docs/clock-discipline.md "The advertised bound"): beside chronyd -x following the
    // same upstream with its default polls, over the first 6 minutes.
    if (DURATION_MS >= STARTUP_S * 1000) {
      const t = start.timesvc;
      const ch = start.chronyd;
      assert.ok(
        t.medianRootDispersionMs <= 2 * ch.medianRootDispersionMs,
        `${name}: median root dispersion ${t.medianRootDispersionMs} ms > 2 × chronyd's ${ch.medianRootDispersionMs} ms; ` +
          `figures ${JSON.stringify(start)}; timesvc's reply fields [s, root delay µs, root dispersion µs, ppm] ` +
          JSON.stringify(pair.fields),
      );
      assert.ok(
        t.maxRootDispersionAfter10sMs <= 50,
        `${name}: root dispersion ${t.maxRootDispersionAfter10sMs} ms`,
      );
      assert.equal(t.outsideBound, 0, `${name}: replies outside their bound in the first ${STARTUP_S} s`);
      assert.ok(start.maxUpdateAgeInPolls <= 2, `${name}: update age ${start.maxUpdateAgeInPolls} polls`);
    }
  } finally {
    await pair.stop();
    dir.remove();
  }
}

/** A busy loop in its own process for `ms` (a CPU hog), ended by PID. */
function cpuHog(ms: number): ReturnType<typeof startProcess> {
  return startProcess(process.execPath, ['-e', `const end = Date.now() + ${ms}; while (Date.now() < end);`]);
}

/**
 * The upstream moves by −15 ms two minutes after start (default polls), with two CPU hogs beside the
 * service for the whole run: no synchronised reply outside its bound; within 1 ms of the new level 240 s
 * after the move, and staying there.
 */
async function moveUnderLoad(): Promise<void> {
  const MOVE_AFTER_MS = 120_000;
  const SETTLE_MS = 240_000;
  const hogs = [cpuHog(MOVE_AFTER_MS + SETTLE_MS + 90_000), cpuHog(MOVE_AFTER_MS + SETTLE_MS + 90_000)];
  const up = await OffsetUpstream.start(0.02);
  up.noiseS = 25e-6;
  const { service, port } = await startService({
    rate_limit: { enabled: false },
    upstream_peers: [{ address: up.address }],
  });
  const probe = new Probe(port, up, 500);
  await probe.start();
  const t0 = performance.now();
  try {
    await new Promise((r) => setTimeout(r, MOVE_AFTER_MS));
    up.move(-0.015);
    const movedAt = performance.now();
    while (performance.now() - movedAt < SETTLE_MS + 60_000) await new Promise((r) => setTimeout(r, 1000));
    const c = checkProbe(probe.records, MAXFREQ + service.config.ntp.discipline.max_slew_rate_ppm * 1e-6);
    const late = probe.records.filter((r) => r.leap !== 3 && r.atMs - movedAt >= SETTLE_MS);
    const within = probe.records.find(
      (r, i, all) =>
        r.atMs > movedAt && all.slice(i).every((x) => x.leap === 3 || Math.abs(x.errorS) <= 1e-3),
    );
    console.log(
      `−15 ms move under two CPU hogs: within 1 ms and staying ${within ? ((within.atMs - movedAt) / 1000).toFixed(1) : 'never'} s ` +
        `after the move (poll ${service.peers[0]?.peer.poll}); worst |error| − bound ${(c.worstBeyondBoundS * 1e6).toFixed(1)} µs ` +
        (c.worst
          ? JSON.stringify({
              atS: (c.worst.atMs - t0) / 1000,
              errorS: c.worst.errorS,
              disp: c.worst.rootDispersionS,
            })
          : ''),
    );
    assert.ok(c.worstBeyondBoundS <= 0, `an error beyond its bound by ${c.worstBeyondBoundS} s`);
    assert.equal(c.worstBackwardS, 0, 'served time went backwards');
    assert.ok(late.length > 60, `replies after ${SETTLE_MS / 1000} s: ${late.length}`);
    assert.ok(
      within !== undefined && within.atMs - movedAt <= SETTLE_MS,
      `not within 1 ms of the new level ${SETTLE_MS / 1000} s after the move`,
    );
  } finally {
    await probe.stop();
    await service.close();
    await up.close();
    await Promise.all(hogs.map((h) => h.stop()));
  }
}

describe(
  'accuracy with the default configuration over the first 10 minutes',
  {
    concurrency: true,
    skip: LONG
      ? false
      : "long: runs on the machine's own Node line in npm test, or with TIMESVC_LONG_TESTS=1",
  },
  () => {
    const timeout = DURATION_MS + 120_000;
    it('noiseless upstream at +20 ms: p50 ≤ 0.2 ms, p95 ≤ 0.5 ms, no state flap', { timeout }, () =>
      scenario('noiseless', 0, { p50: 0.2e-3, p95: 0.5e-3 }),
    );
    it('±25 µs of path noise: p50 ≤ 0.2 ms, p95 ≤ 0.5 ms, no state flap', { timeout }, () =>
      scenario('±25 µs', 25e-6, { p50: 0.2e-3, p95: 0.5e-3 }),
    );
    it('±100 µs of path noise: p50 ≤ 0.2 ms, p95 ≤ 0.5 ms, no state flap', { timeout }, () =>
      scenario('±100 µs', 100e-6, { p50: 0.2e-3, p95: 0.5e-3 }),
    );
    it(
      'the upstream moves −15 ms with two CPU hogs beside: every reply within its bound, within 1 ms in 240 s',
      { timeout },
      () => moveUnderLoad(),
    );
  },
);
