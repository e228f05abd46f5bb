import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { ServedClock } from '../src/io/served-clock.ts';
import { ntpToUnixMs } from '../src/protocol/ntp-packet.ts';

test('raw clock agrees with Date.now() to its millisecond; the correction adds phase + freq·Δt', () => {
  const clock = new ServedClock();
  const now = Date.now();
  const raw = clock.rawUnixMs();
  // Date.now() truncates to the millisecond and is read first, so raw is never before it (the upper
  // bound only allows for preemption between the reads).
  assert.ok(raw >= now - 1 && raw < now + 50, `raw ${raw} vs Date.now() ${now}`);
  assert.ok(Number.isFinite(clock.anchorUncertaintyMs));
  const t0 = performance.now();
  clock.setCorrection({ phaseS: 1.5, freq: 1e-3, t0Ms: t0 });
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
