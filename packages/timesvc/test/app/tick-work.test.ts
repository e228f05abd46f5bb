// Work done on every tick was made to allocate less (docs/performance.md "At rest"): each rewritten piece
// answers exactly what the code before it did, checked here against that code kept as the reference.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { configSchema } from '../../src/config.ts';
import { median } from '../../src/domain/discipline.ts';
import { nextMonthStartUnixMs } from '../../src/domain/leap.ts';
import type { ReferenceSample } from '../../src/domain/reference-source.ts';
import { runJitter } from '../../src/domain/sample-run.ts';
import { GpsdoSource } from '../../src/io/gpsdo.ts';
import type { Ticker } from '../../src/io/service-tick.ts';

/** runJitter as it was written before: on a copy of the last 8 samples. */
function runJitterBefore(run: readonly ReferenceSample[], floorS: number): number {
  const recent = run.slice(-8);
  if (recent.length < 2) return Math.max(floorS, recent[0]?.jitterS ?? floorS);
  const diffs: number[] = [];
  recent.forEach((s, i) => {
    const prev = recent[i - 1];
    if (prev) diffs.push(Math.abs(s.offsetS - prev.offsetS));
  });
  return Math.max(floorS, (1.4826 * median(diffs)) / Math.SQRT2);
}

/** The GPSDO's sample jitter as it was computed before (io/gpsdo.ts #sample). */
function gpsdoJitterBefore(offsets: readonly number[], dispersionS: number): number {
  const diffs = offsets.slice(1).map((x, i) => Math.abs(x - (offsets[i] ?? x)));
  diffs.sort((a, b) => a - b);
  return Math.max(dispersionS, diffs.length ? (diffs[diffs.length >> 1] ?? 0) : dispersionS);
}

test('runJitter reads the last 8 samples in place and answers as it did on a copy', () => {
  const sample = fc.record({
    offsetS: fc.double({ min: -1, max: 1, noNaN: true }),
    jitterS: fc.double({ min: 0, max: 1e-3, noNaN: true }),
  });
  fc.assert(
    fc.property(
      fc.array(sample, { maxLength: 20 }),
      fc.double({ min: 0, max: 1e-6, noNaN: true }),
      (xs, floor) => {
        const run = xs.map((x, i) => ({ ...x, delayS: 0, dispersionS: 0, atMs: i * 1000 }));
        assert.equal(runJitter(run, floor), runJitterBefore(run, floor));
      },
    ),
    { numRuns: 500 },
  );
});

test("the GPSDO's sample jitter (upper median of the last 7 differences) is what it was", () => {
  const config = configSchema.parse({ gpsdo: { enabled: true, type: 'dummy' } }).gpsdo;
  fc.assert(
    fc.property(fc.array(fc.double({ min: -1e-3, max: 1e-3, noNaN: true }), { maxLength: 30 }), (offsets) => {
      let now = 0;
      const seen: number[] = [];
      const tasks: (() => void)[] = [];
      const tick: Ticker = {
        every: (fn) => {
          tasks.push(fn);
          return () => undefined;
        },
      };
      const source = new GpsdoSource({
        config,
        referenceId: 0,
        logger: silentLogger(),
        monoMs: () => now,
        wallMs: () => 1_800_000_000_000 + now,
        onSample: (_id, s) => seen.push(s.jitterS),
      });
      // The dummy receiver locks at start (its first sample at offset_ns, 0); then samples at `offsets`.
      source.start(tick);
      const fed = [config.dummy.offset_ns / 1e9];
      for (const offsetS of offsets) {
        now += 100;
        source.model.timeSample(offsetS, now, 1e-6, true);
        fed.push(offsetS);
      }
      const expected = fed.map((_, i) => gpsdoJitterBefore(fed.slice(Math.max(0, i - 7), i + 1), 1e-6));
      assert.deepEqual(seen, expected);
      void source.close();
    }),
    { numRuns: 200 },
  );
});

test('nextMonthStartUnixMs asked again and again (the leap plan asks every second) answers as afresh', () => {
  const fresh = (ms: number): number => {
    const d = new Date(ms);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  };
  // Across month ends, forwards and back, and at the instants on either side of a month's start.
  const end = Date.UTC(2026, 11, 1);
  for (const ms of [end - 1, end, end - 1, end + 86_400_000, end - 86_400_000 * 40, end, end + 1]) {
    assert.equal(nextMonthStartUnixMs(ms), fresh(ms), new Date(ms).toISOString());
  }
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 4_102_444_800_000 }), { maxLength: 50 }), (instants) => {
      for (const ms of instants) {
        assert.equal(nextMonthStartUnixMs(ms), fresh(ms));
        assert.equal(nextMonthStartUnixMs(ms + 1000), fresh(ms + 1000));
      }
    }),
    { numRuns: 200 },
  );
});
