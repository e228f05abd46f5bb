import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { loadFactor, waitFor } from '@broadcast-ops/core/testing';
import { hostTimeSource, type TimeSource } from '../../src/io/served-clock.ts';
import type { TimesvcService } from '../../src/io/service.ts';
import type { ClockState } from '../../src/domain/clock-state.ts';
import { MAXFREQ } from '../../src/domain/discipline.ts';
import { OffsetUpstream, Probe, checkProbe } from '../helpers/offset-upstream.ts';
import { startService } from '../helpers/service.ts';

/**
 * The discipline loop end to end, over real sockets: timesvc in this process follows test upstreams that
 * serve the host clock plus a controllable offset and frequency (helpers/offset-upstream.ts), and a probe
 * client polls timesvc every 200 ms, measuring it against the upstream's truth. Every scenario asserts that
 * served T3 never decreases between consecutive replies and that |error| ≤ root delay/2 + root dispersion
 * whenever LI ≠ 3 (checkProbe). The scenarios are independent and run concurrently; all but the default
 * acquisition use short polls (minpoll 0 = 1 s) because they are about the loop, not the poll schedule.
 */

const SHORT_POLL = { iburst: true, minpoll: 0, maxpoll: 1 };

interface Run {
  service: TimesvcService;
  probe: Probe;
  states: ClockState[];
  selections: (string | undefined)[];
  t0: number;
  close: () => Promise<void>;
}

async function run(truth: OffsetUpstream, ntp: Record<string, unknown>, source?: TimeSource): Promise<Run> {
  const t0 = performance.now();
  // The probe polls 5 times a second: no rate limit for it.
  const { service, port } = await startService(
    { rate_limit: { enabled: false }, ...ntp },
    source ? { timeSource: source } : {},
  );
  const states: ClockState[] = [];
  const selections: (string | undefined)[] = [];
  service.manager.on((e) => {
    if (e.type === 'state') states.push(e.to);
    if (e.type === 'selected') selections.push(e.to);
  });
  const probe = new Probe(port, truth);
  await probe.start();
  return {
    service,
    probe,
    states,
    selections,
    t0,
    close: async () => {
      await probe.stop();
      await service.close();
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The least rate the served clock may run at is 1 − (|frequency| + slew rate): checkProbe's monotonicity. */
function servedMaxRate(r: Run): number {
  return MAXFREQ + r.service.config.ntp.discipline.max_slew_rate_ppm * 1e-6;
}

function assertLoopProperties(name: string, r: Run): void {
  const records = r.probe.records;
  const c = checkProbe(records, servedMaxRate(r));
  console.log(
    `${name}: ${c.replies} replies (${c.synchronised} synchronised), worst backward step ${(c.worstBackwardS * 1e6).toFixed(1)} µs, ` +
      `worst |error| − bound ${(c.worstBeyondBoundS * 1e6).toFixed(1)} µs`,
  );
  assert.ok(c.replies > 10, `${name}: too few replies (${c.replies})`);
  assert.ok(c.synchronised > 0, `${name}: never synchronised`);
  assert.equal(c.worstBackwardS, 0, `${name}: served T3 went backwards by ${c.worstBackwardS} s`);
  assert.ok(
    c.worstBeyondBoundS <= 0,
    `${name}: |error| beyond the advertised bound by ${c.worstBeyondBoundS} s: ${JSON.stringify(c.worst, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`,
  );
}

/** Wait until the probe's latest synchronised reply is within `s` of the truth. */
async function settled(r: Run, s: number, timeoutMs: number, what: string): Promise<number> {
  const start = performance.now();
  await waitFor(
    () => {
      const l = r.probe.last;
      return l !== undefined && l.atMs > start && l.leap !== 3 && Math.abs(l.errorS) < s;
    },
    { timeoutMs, intervalMs: 100, what: `${what} (last error ${r.probe.last?.errorS})` },
  );
  return performance.now() - start;
}

describe('discipline loop against offset upstreams', { concurrency: true }, () => {
  it('acquisition at +20 ms with the default polls: LI 0 within 30 s, stepped while LI 3', async () => {
    const up = await OffsetUpstream.start(0.02);
    const r = await run(up, { upstream_peers: [{ address: up.address }] });
    try {
      const lockedAfterMs = await waitFor(() => (r.probe.last?.leap === 0 ? performance.now() - r.t0 : 0), {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: 'LI 0',
      });
      console.log(`default config: LI 0 after ${(lockedAfterMs / 1000).toFixed(1)} s`);
      assert.ok(lockedAfterMs <= 30_000);
      assert.equal(r.service.manager.state, 'LOCKED');
      // Minpoll (6 with poll_interval 64 s) was kept until LOCKED: no doubling while acquiring.
      assert.equal(r.service.peers[0]?.peer.poll, 6);
      await sleep(2000);
      const last = r.probe.last!;
      assert.ok(Math.abs(last.errorS) < 0.002, `error ${last.errorS}`);
      assert.deepEqual(r.states.slice(0, 2), ['SYNCING', 'LOCKED']);
      assert.equal(r.service.manager.snapshot().steps, 1, 'one step, from the burst');
      assertLoopProperties('acquisition +20 ms', r);
    } finally {
      await r.close();
      await up.close();
    }
  });

  it('a ±15 ms change of the reference while LOCKED is slewed, never stepped back, bound kept', async () => {
    const up = await OffsetUpstream.start(0.005);
    const r = await run(up, { upstream_peers: [{ address: up.address, ...SHORT_POLL }] });
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(3000);
      const beforeMoves = performance.now();
      up.move(-0.015);
      const downMs = await settled(r, 0.001, 20_000, 'within 1 ms after -15 ms');
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      up.move(0.015);
      const upMs = await settled(r, 0.001, 20_000, 'within 1 ms after +15 ms');
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      console.log(`move -15 ms: within 1 ms after ${downMs.toFixed(0)} ms; +15 ms: ${upMs.toFixed(0)} ms`);
      assert.ok(r.states.includes('SYNCING'), 'left LOCKED while slewing');
      assert.ok(!r.states.includes('FAULT'));
      // Replies stayed synchronised (LI 0 with a raised dispersion) through both moves.
      const after = r.probe.records.filter((x) => x.atMs > beforeMoves);
      assert.ok(
        after.every((x) => x.leap === 0),
        'LI stayed 0',
      );
      assertLoopProperties('±15 ms move', r);
    } finally {
      await r.close();
      await up.close();
    }
  });

  it('+10 ppm: the frequency is acquired and served time follows it within the bound', async () => {
    const up = await OffsetUpstream.start(0.003, 10e-6);
    const r = await run(up, { upstream_peers: [{ address: up.address, ...SHORT_POLL }] });
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(25_000);
      // ±2 ppm on a quiet machine; a loaded one delays the probes' timestamps, so the margin grows with the
      // run queue per core (core/testing loadFactor), at most ±5 ppm so that an unacquired 0 still fails. The
      // estimate only leaves its prior once the slope is beyond its own uncertainty (docs/clock-discipline.md
      // "Acquisition"), which takes more samples when the timestamps are noisy: up to 90 s more.
      const margin = Math.min(5_000, 2_000 * loadFactor());
      await waitFor(() => Math.abs(r.service.manager.snapshot().driftPpb - 10_000) < margin, {
        timeoutMs: 90_000,
        intervalMs: 500,
      }).catch(() => undefined);
      const snap = r.service.manager.snapshot();
      console.log(`+10 ppm: drift ${snap.driftPpb.toFixed(0)} ± ${snap.driftErrorPpb.toFixed(0)} ppb`);
      assert.ok(
        Math.abs(snap.driftPpb - 10_000) < margin,
        `drift ${snap.driftPpb} ppb (margin ${margin} ppb)`,
      );
      // Following the drift: within 0.5 ms at the end, plus what the probe itself cannot resolve (half its
      // round trip, RFC 5905 §8), which a loaded machine lengthens.
      const last = r.probe.last!;
      assert.ok(
        Math.abs(last.errorS) < 0.0005 + Math.max(0, last.delayS) / 2,
        `last probe error ${last.errorS} s, probe delay ${last.delayS} s`,
      );
      assertLoopProperties('+10 ppm', r);
    } finally {
      await r.close();
      await up.close();
    }
  });

  it('return after holdover with the same offset: HOLDOVER → LOCKED directly, LI never 3', async () => {
    const up = await OffsetUpstream.start(0.008);
    const r = await run(up, { upstream_peers: [{ address: up.address, ...SHORT_POLL }] });
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(8000);
      up.pause();
      await waitFor(() => r.service.manager.state === 'HOLDOVER', { timeoutMs: 30_000, intervalMs: 100 });
      const inHoldover = performance.now();
      await sleep(3000);
      up.resume();
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 30_000, intervalMs: 100 });
      const tail = r.states.slice(r.states.indexOf('HOLDOVER'));
      assert.deepEqual(tail.slice(0, 2), ['HOLDOVER', 'LOCKED'], `states ${r.states.join(' ')}`);
      const since = r.probe.records.filter((x) => x.atMs >= inHoldover);
      assert.ok(since.length > 10 && since.every((x) => x.leap === 0), 'no LI 3 window on return');
      await sleep(1500);
      assertLoopProperties('holdover, same offset', r);
    } finally {
      await r.close();
      await up.close();
    }
  });

  it('return after holdover with a different offset: slewed back (no backward step), then LOCKED', async () => {
    const up = await OffsetUpstream.start(0.008);
    const r = await run(up, { upstream_peers: [{ address: up.address, ...SHORT_POLL }] });
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(6000);
      up.pause();
      await waitFor(() => r.service.manager.state === 'HOLDOVER', { timeoutMs: 30_000, intervalMs: 100 });
      up.move(-0.006);
      up.resume();
      await waitFor(() => r.service.manager.state === 'LOCKED' && r.states.at(-2) === 'SYNCING', {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: `SYNCING then LOCKED (states ${r.states.join(' ')})`,
      });
      await settled(r, 0.001, 10_000, 'within 1 ms after the return');
      const tail = r.states.slice(r.states.indexOf('HOLDOVER'));
      assert.deepEqual(tail.slice(0, 3), ['HOLDOVER', 'SYNCING', 'LOCKED'], `states ${r.states.join(' ')}`);
      assert.equal(r.service.manager.snapshot().steps, 1, 'only the acquisition step');
      // The fit restarted after the outage: the frequency did not run away (true value 0; a few ppm of
      // estimation noise from a short window on a busy machine, against the ±500 ppm of a runaway).
      const drift = r.service.manager.snapshot().driftPpb;
      assert.ok(Math.abs(drift) < 20_000, `drift ${drift} ppb`);
      assertLoopProperties('holdover, -6 ms on return', r);
    } finally {
      await r.close();
      await up.close();
    }
  });

  it('a preferred falseticker (+100 ms) among three good servers is never selected, not even in warm-up', async () => {
    const [g0, g1, g2] = await Promise.all([
      OffsetUpstream.start(0.0002),
      OffsetUpstream.start(-0.0001),
      OffsetUpstream.start(0.0001),
    ]);
    const good = [g0, g1, g2];
    const liar = await OffsetUpstream.start(0.1);
    // The liar is listed first: its burst starts before the others'.
    const r = await run(g0, {
      upstream_peers: [
        { address: liar.address, prefer: true, ...SHORT_POLL },
        ...good.map((g) => ({ address: g.address, ...SHORT_POLL })),
      ],
    });
    const seen = new Set<string>();
    const watch = setInterval(() => {
      const s = r.service.manager.snapshot().selected;
      if (s) seen.add(s);
    }, 20);
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(6000);
      clearInterval(watch);
      const liarId = `NTP:127.0.0.1:${liar.port}`;
      assert.ok(!r.selections.includes(liarId), `selections ${r.selections.join(' ')}`);
      assert.ok(!seen.has(liarId), 'liar seen selected');
      const v = r.service.manager.snapshot().sources.find((s) => s.id === liarId);
      assert.equal(v?.verdict, 'falseticker');
      assert.ok(Math.abs(r.probe.last!.errorS) < 0.002, `error ${r.probe.last?.errorS}`);
      assertLoopProperties('preferred falseticker', r);
    } finally {
      clearInterval(watch);
      await r.close();
      await Promise.all([...good, liar].map((u) => u.close()));
    }
  });

  it('two good servers 0.5 ms apart: both truechimers, one kept as reference, LOCKED', async () => {
    const a = await OffsetUpstream.start(0.004);
    const b = await OffsetUpstream.start(0.0045);
    const r = await run(a, {
      upstream_peers: [
        { address: a.address, ...SHORT_POLL },
        { address: b.address, ...SHORT_POLL },
      ],
    });
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(8000);
      const snap = r.service.manager.snapshot();
      assert.deepEqual(
        snap.sources.map((s) => s.falseticker),
        [false, false],
        JSON.stringify(snap.sources),
      );
      assert.equal(
        r.selections.filter((x) => x !== undefined).length,
        1,
        `selections ${r.selections.join(' ')}`,
      );
      assert.ok(!r.states.includes('FAULT') && !r.states.includes('HOLDOVER'), r.states.join(' '));
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 10_000, intervalMs: 100 });
      // The truth of this probe is server a; if b was chosen the error is 0.5 ms, inside the bound.
      assertLoopProperties('two servers 0.5 ms apart', r);
    } finally {
      await r.close();
      await a.close();
      await b.close();
    }
  });

  it('a host clock step (+500 ms, injected through the time source) changes nothing clients see', async () => {
    const up = await OffsetUpstream.start(0.002);
    let stepMs = 0;
    const source: TimeSource = { wallMs: () => Date.now() + stepMs, monoMs: hostTimeSource.monoMs };
    const r = await run(up, { upstream_peers: [{ address: up.address, ...SHORT_POLL }] }, source);
    try {
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
      await sleep(3000);
      const offsetBefore = r.service.clock.hostOffsetS();
      stepMs = 500;
      await waitFor(() => r.service.clock.steps === 1, { timeoutMs: 5000, what: 'host step detected' });
      const measured = r.service.clock.hostOffsetS() - offsetBefore;
      assert.ok(Math.abs(measured - 0.5) < 0.002, `host step measured as ${measured} s`);
      await sleep(5000);
      assert.ok(!r.states.includes('FAULT') && !r.states.includes('HOLDOVER'), r.states.join(' '));
      assert.equal(r.service.manager.snapshot().steps, 1, 'only the acquisition step');
      await waitFor(() => r.service.manager.state === 'LOCKED', { timeoutMs: 10_000, intervalMs: 100 });
      assert.ok(Math.abs(r.probe.last!.errorS) < 0.002, `error ${r.probe.last?.errorS}`);
      const res = await r.service.app.inject({ method: 'GET', url: '/api/health' });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json<{ host_clock_steps: number }>().host_clock_steps, 1);
      assertLoopProperties('host clock step', r);
    } finally {
      await r.close();
      await up.close();
    }
  });
});
