import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { createLogger } from '@broadcast-ops/core';
import { timingBound } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { MAXFREQ } from '../../src/domain/discipline.ts';
import { createTimesvc } from '../../src/io/service.ts';
import type { TimeSource } from '../../src/io/served-clock.ts';
import { OffsetUpstream, Probe, checkProbe } from '../helpers/offset-upstream.ts';

/**
 * The host's own leap second (docs/leap-seconds.md "The host's own leap"): the host's realtime clock
 * repeats (insertion) or skips (deletion) a second at a UTC midnight, as the kernel does when its time
 * daemon announced a leap, while the upstream, and so served time, has no leap. The host is simulated
 * through the injected time source: its realtime is the real one shifted to shortly before 2027-01-01
 * and stepped there, and the kernel timestamps of timesvc's sockets are carried onto the same stepped
 * scale (TimeSource.kernelStampMs), so a receive timestamp mapped through the realtime offset measured
 * before the leap is off by the second until the step is noticed, exactly as on a real host. A probe
 * polls every 20 ms through the leap. Asserted: no reply carries a receive timestamp off by the leap
 * (every reply's T2 lies between the probe's send and receipt within the reply's error, and T3 − T2 is
 * a handling time, not a second); served time unaffected (never backwards, every synchronised reply
 * within its bound); the leap detected once, counted in /api/health, logged as a leap second; the
 * replaced kernel timestamps counted.
 */

const EPOCH_MS = Date.UTC(2027, 0, 1);

async function hostLeap(deltaMs: -1000 | 1000): Promise<void> {
  const leadMs = 10_000;
  const shiftMs = Math.round(EPOCH_MS - Date.now() - leadMs);
  // Insertion: 23:59:59 is repeated, realtime steps back at midnight. Deletion: 23:59:59 is skipped,
  // realtime steps forward at 23:59:59.
  const stepAtMs = deltaMs < 0 ? EPOCH_MS : EPOCH_MS - 1000;
  const host = (realMs: number): number => {
    const t = realMs + shiftMs;
    return t >= stepAtMs ? t + (deltaMs < 0 ? -1000 : 1000) : t;
  };
  const leapPerf = performance.now() + (stepAtMs - (Date.now() + shiftMs));
  const source: TimeSource = {
    wallMs: () => host(Date.now()),
    monoMs: () => performance.now(),
    kernelStampMs: host,
  };
  const lines: { perf: number; line: string }[] = [];
  const logger = createLogger({
    service: 'timesvc-test',
    level: 'info',
    destination: { write: (s: string) => lines.push({ perf: performance.now(), line: s }) },
  });
  const up = await OffsetUpstream.start(shiftMs / 1000);
  const config = configSchema.parse({
    ntp: {
      port: 0,
      interface: '127.0.0.1',
      rate_limit: { enabled: false },
      upstream_peers: [{ address: up.address, iburst: true, minpoll: 0, maxpoll: 2 }],
    },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, logger, { timeSource: source });
  const states: string[] = [];
  service.manager.on((e) => {
    if (e.type === 'state') states.push(e.to);
  });
  await service.start();
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  // The host clock is checked every second from ServedClock.start(): restarted so that the leap falls
  // half-way between two checks, and the requests of the half second before it is noticed are judged.
  const phaseMs = (((leapPerf - 500 - performance.now()) % 1000) + 1000) % 1000;
  await new Promise((r) => setTimeout(r, phaseMs));
  service.clock.start();
  const probe = new Probe(service.server()?.addresses[0]?.port ?? 0, up, 20);
  await probe.start();
  try {
    await new Promise((r) => setTimeout(r, Math.max(0, leapPerf + 4000 - performance.now())));
    const detected = lines.find((l) => l.line.includes('host clock'));
    assert.ok(detected, 'the host step was logged');
    const entry = JSON.parse(detected.line) as { msg: string; hostLeapSecond: boolean; deltaMs: number };
    assert.equal(entry.msg, 'host clock leap second detected; the served clock is unaffected');
    assert.equal(entry.hostLeapSecond, true);
    assert.ok(Math.abs(entry.deltaMs - deltaMs) < 50, `step of ${entry.deltaMs} ms`);
    assert.equal(lines.filter((l) => l.line.includes('host clock')).length, 1, 'one step, logged once');
    const res = await service.app.inject({ method: 'GET', url: '/api/health' });
    const health = res.json<{ host_clock_steps: number; kernel_timestamps_replaced: number }>();
    assert.equal(health.host_clock_steps, 1);
    assert.equal(service.clock.steps, 1);

    const recs = probe.records;
    // Requests that reached timesvc after the host's step and before it was noticed: their kernel
    // receive timestamps were mapped through the stale offset and must have been replaced, and counted.
    const inWindow = recs.filter((r) => r.atMs > leapPerf + 1 && r.recvMs < detected.perf - 1);
    console.log(
      `host leap ${deltaMs > 0 ? 'deletion' : 'insertion'}: noticed ${(detected.perf - leapPerf).toFixed(0)} ms after it; ` +
        `${inWindow.length} probe requests in between, ${health.kernel_timestamps_replaced} kernel timestamps replaced`,
    );
    assert.ok(recs.filter((r) => r.atMs > leapPerf).length > 50, 'replies after the leap');
    // Every reply's timestamps are consistent with when the probe sent and received it: the receive
    // timestamp lies between T1 and T4 (on the upstream's truth) within the reply's error, and the server
    // held the request for a handling time, far below the second a stale mapping would add.
    const slackS = (await timingBound(25)) / 1000;
    for (const r of recs) {
      const errS = Math.abs(r.errorS) + r.rootDelayS / 2 + r.rootDispersionS + (r.leap === 3 ? 0.05 : 0);
      assert.ok(r.t21S > -errS - slackS, `T2 before T1 by ${-r.t21S} s (reply at ${r.atMs - leapPerf} ms)`);
      assert.ok(r.t21S < r.delayS + errS + slackS, `T2 after T4: T2 − T1 ${r.t21S} s`);
      assert.ok(r.t32S >= 0 && r.t32S < slackS, `T3 − T2 ${r.t32S} s (reply at ${r.atMs - leapPerf} ms)`);
    }
    assert.ok(inWindow.length > 0, 'requests between the leap and its detection');
    assert.ok(
      health.kernel_timestamps_replaced >= inWindow.length,
      `${inWindow.length} requests in the window, ${health.kernel_timestamps_replaced} timestamps replaced`,
    );
    // Served time unaffected: never backwards, every synchronised reply within its bound, no state lost.
    const c = checkProbe(recs, MAXFREQ + config.ntp.discipline.max_slew_rate_ppm * 1e-6);
    assert.equal(c.worstBackwardS, 0, 'served time went backwards');
    assert.ok(c.worstBeyondBoundS <= 0, `an error beyond its bound by ${c.worstBeyondBoundS} s`);
    const after = recs.filter((r) => r.atMs > leapPerf).map((r) => r.leap);
    assert.deepEqual([...new Set(after)], [0], 'LI 0 throughout after the host leap');
    assert.deepEqual(states, ['SYNCING', 'LOCKED'], 'no state change at the host leap');
  } finally {
    await probe.stop();
    await service.close();
    await up.close();
  }
}

describe('the host clock leaps; served time and replies do not', { concurrency: true }, () => {
  it('insertion: the host repeats 23:59:59', { timeout: 60_000 }, () => hostLeap(-1000));
  it('deletion: the host skips 23:59:59', { timeout: 60_000 }, () => hostLeap(1000));
});
