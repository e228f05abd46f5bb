import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { stepTo } from '../../src/domain/correction.ts';
import { ServedClock, hostTimeSource } from '../../src/io/served-clock.ts';
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
