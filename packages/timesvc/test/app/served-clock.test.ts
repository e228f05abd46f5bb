import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { stepTo } from '../../src/domain/correction.ts';
import { ServedClock, findEdge, hostTimeSource, type TimeSource } from '../../src/io/served-clock.ts';
import { ntpToUnixMs } from '../../src/protocol/ntp-packet.ts';

test('raw clock agrees with Date.now() to its millisecond; the correction adds phase + freq·Δt', () => {
  const clock = new ServedClock();
  const now = Date.now();
  const raw = clock.rawUnixMs();
  // Date.now() truncates to the millisecond and is read first, so raw is never before it (the upper
  // bound only allows for preemption between the reads).
  assert.ok(raw >= now - 1 && raw < now + 50, `raw ${raw} vs Date.now() ${now}`);
  assert.ok(Number.isFinite(clock.anchorUncertaintyMs));
  const t0 = performance.now();
  clock.setCorrection(stepTo(t0, 1.5, 1e-3, 0));
  assert.ok(Math.abs(clock.servedUnixMs(t0) - clock.rawUnixMs(t0) - 1500) < 1e-6);
  // 1000 ms later the 1000 ppm frequency term has added 1 ms.
  assert.ok(Math.abs(clock.servedUnixMs(t0 + 1000) - clock.rawUnixMs(t0 + 1000) - 1501) < 1e-6);
  // read() and write() produce the same NTP timestamp, which maps back to the same Unix time.
  const ts = clock.read(true, t0 + 250);
  const buf = Buffer.alloc(8);
  clock.write(buf, 0, true, t0 + 250);
  assert.deepEqual({ seconds: buf.readUInt32BE(0), fraction: buf.readUInt32BE(4) }, ts);
  const back = ntpToUnixMs(ts, now);
  assert.ok(
    Math.abs(back - clock.servedUnixMs(t0 + 250)) < 1e-3,
    `${back} vs ${clock.servedUnixMs(t0 + 250)}`,
  );
  const rawTs = clock.read(false, t0 + 250);
  assert.ok(Math.abs(ntpToUnixMs(rawTs, now) - clock.rawUnixMs(t0 + 250)) < 1e-3);
});

test('a host clock step changes nothing served: detected, counted, measured as the host offset', () => {
  let stepMs = 0;
  const steps: number[] = [];
  const clock = new ServedClock({
    source: { wallMs: () => Date.now() + stepMs, monoMs: hostTimeSource.monoMs },
    onStep: (d) => steps.push(d),
  });
  const t = performance.now();
  const before = clock.servedUnixMs(t);
  const offsetBefore = clock.hostOffsetS();
  // Normally well under a microsecond; a busy machine can widen the millisecond-edge bracket.
  assert.ok(Math.abs(offsetBefore) < 0.01, `anchor within ${offsetBefore} s of the host clock`);
  clock.checkHostClock();
  assert.equal(clock.steps, 0);
  stepMs = -2500;
  clock.checkHostClock();
  assert.equal(clock.steps, 1);
  assert.ok(Math.abs(steps[0]! + 2500) < 2, `step ${steps[0]}`);
  assert.ok(Math.abs(clock.hostOffsetS() - offsetBefore + 2.5) < 0.002);
  assert.equal(clock.servedUnixMs(t), before, 'served time at the same monotonic instant is unchanged');
  // The kernel's realtime (for receive timestamps) is the real host clock, which did not step here.
  assert.ok(Math.abs(clock.kernelRealtimeMs() - Date.now()) < 2);
  clock.checkHostClock();
  assert.equal(clock.steps, 1, 'counted once');
});

/**
 * A time source made of counters: every monotonic read advances it by `stepUs`, and its wall clock is that
 * time truncated to the millisecond (as Date.now() is), starting half a millisecond before an edge. Its
 * brackets are four reads wide, so `stepUs` sets how narrow a search can find an edge.
 */
function counterSource(stepUs: number): { source: TimeSource; wallReads: () => number } {
  let mono = 0;
  let reads = 0;
  return {
    source: {
      monoMs: () => (mono += stepUs / 1000),
      wallMs: () => {
        reads++;
        return Math.floor(1_700_000_000_000.5 + mono);
      },
    },
    wallReads: () => reads,
  };
}

test('a start searches one millisecond edge when its bracket is narrow; the offset from raw is the anchor’s', () => {
  const one = counterSource(0.1);
  const alone = findEdge(one.source, 50);
  assert.ok(alone.widthMs < 0.002, `a search of this source brackets ${alone.widthMs} ms`);
  const perSearch = one.wallReads();

  const narrow = counterSource(0.1);
  const clock = new ServedClock({ source: narrow.source });
  // One search, not the three of before (two for the anchor, one more for the source's offset).
  assert.ok(
    narrow.wallReads() <= perSearch * 1.5,
    `${narrow.wallReads()} wall reads against ${perSearch} for one search`,
  );
  assert.equal(clock.anchorUncertaintyMs, alone.widthMs);
  assert.equal(clock.hostOffsetS(), 0);
  // The offset holds: no step is seen on the same source.
  clock.checkHostClock();
  assert.equal(clock.steps, 0);
});

test('a wide first bracket (a cold or preempted search) is searched again', () => {
  const one = counterSource(5);
  const alone = findEdge(one.source, 50);
  assert.ok(alone.widthMs >= 0.002, `a search of this source brackets ${alone.widthMs} ms`);
  const perSearch = one.wallReads();

  const wide = counterSource(5);
  const clock = new ServedClock({ source: wide.source });
  assert.ok(
    wide.wallReads() >= perSearch * 1.5 && wide.wallReads() <= perSearch * 2.5,
    `${wide.wallReads()} wall reads against ${perSearch} for one search: two searches`,
  );
  assert.ok(clock.anchorUncertaintyMs <= alone.widthMs);
});
