// Work done on every tick was made to allocate less (docs/performance.md "At rest"): each rewritten piece
// answers exactly what the code before it did, checked here against that code kept as the reference.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { configSchema } from '../../src/config.ts';
import { Discipline } from '../../src/domain/discipline.ts';
import { nextMonthStartUnixMs } from '../../src/domain/leap.ts';
import type { ReferenceSample } from '../../src/domain/reference-source.ts';
import { ManualClock } from '@broadcast-ops/core/testing';
import { ReferenceSelection, type SourceEntry } from '../../src/domain/reference-selection.ts';
import { delayGate, runJitter } from '../../src/domain/sample-run.ts';
import { GpsdoSource } from '../../src/io/gpsdo.ts';
import type { Ticker } from '../../src/io/service-tick.ts';
import { DisciplineBefore, median } from '../helpers/discipline-before.ts';

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
  // A 1 s filter poll with a sample a second: each sample is handed on alone (docs/gpsdo.md "Samples").
  const config = configSchema.parse({ gpsdo: { enabled: true, type: 'dummy', filter_poll: 1 } }).gpsdo;
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
      const sats = [2, 5, 7, 9].map((prn) => ({ prn, elevation: 40, azimuth: 90, snr: 40, used: true }));
      for (const offsetS of offsets) {
        now += 1000;
        // The receiver's fix and satellites kept fresh (its own tick is not run here).
        source.model.satellitesSeen(sats, now);
        source.model.fix({ mode: 3, timeUnixMs: 1_800_000_000_000 + now }, now);
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

test("the discipline's refit with kept weights and its kept residual median estimate exactly as before", () => {
  // Runs of samples 0.1-2 s apart: noise, a frequency, level changes (spikes and new levels), delays that
  // weight the fit, resets with and without the frequency, and a prior frequency assumed.
  const step = fc.oneof(
    {
      weight: 20,
      arbitrary: fc.record({
        kind: fc.constant('add' as const),
        dt: fc.double({ min: 0.1, max: 2, noNaN: true }),
        noiseS: fc.double({ min: -1e-4, max: 1e-4, noNaN: true }),
        jumpS: fc.oneof(
          { weight: 9, arbitrary: fc.constant(0) },
          fc.double({ min: -0.01, max: 0.01, noNaN: true }),
        ),
        jitterS: fc.double({ min: 0, max: 1e-4, noNaN: true }),
        delayS: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 0.01, noNaN: true })),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const), keep: fc.boolean() }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('assume' as const),
        freq: fc.double({ min: -1e-5, max: 1e-5, noNaN: true }),
        error: fc.double({ min: 0, max: 1e-5, noNaN: true }),
      }),
    },
  );
  fc.assert(
    fc.property(
      fc.array(step, { maxLength: 120 }),
      fc.double({ min: -2e-5, max: 2e-5, noNaN: true }),
      fc.integer({ min: 4, max: 64 }),
      (steps, freq, window) => {
        const now = new Discipline({ window });
        const before = new DisciplineBefore({ window });
        let t = 1000;
        let level = 0;
        for (const s of steps) {
          if (s.kind === 'reset') {
            now.reset(s.keep);
            before.reset(s.keep);
          } else if (s.kind === 'assume') {
            now.assumeFrequency(s.freq, s.error);
            before.assumeFrequency(s.freq, s.error);
          } else {
            t += s.dt;
            level += s.jumpS;
            const offset = level + freq * t + s.noiseS + s.delayS / 2;
            assert.deepEqual(
              now.add(t, offset, s.jitterS, s.delayS),
              before.add(t, offset, s.jitterS, s.delayS),
            );
          }
          assert.deepEqual(now.estimate(), before.estimate());
          assert.equal(now.predictionError(t + 1), before.predictionError(t + 1));
          assert.equal(now.samples, before.samples);
        }
      },
    ),
    { numRuns: 300 },
  );
});

/** delayGate as it was written before: on a copy of the last 8 samples. */
function delayGateBefore(run: readonly ReferenceSample[]): number {
  let min = Number.POSITIVE_INFINITY;
  for (const s of run.slice(-8)) min = Math.min(min, s.delayS);
  return Number.isFinite(min) ? 3 * min + 500e-6 : Number.POSITIVE_INFINITY;
}

test('runJitter and delayGate over the first `end` samples of a run answer as on its copy', () => {
  const sample = fc.record({
    offsetS: fc.double({ min: -1, max: 1, noNaN: true }),
    jitterS: fc.double({ min: 0, max: 1e-3, noNaN: true }),
    delayS: fc.double({ min: 0, max: 0.1, noNaN: true }),
  });
  fc.assert(
    fc.property(
      fc.array(sample, { maxLength: 20 }),
      fc.nat(),
      fc.double({ min: 0, max: 1e-6, noNaN: true }),
      (xs, e, floor) => {
        const run = xs.map((x, i) => ({ ...x, dispersionS: 0, atMs: i * 1000 }));
        const end = e % (run.length + 1);
        const copy = run.slice(0, end);
        assert.equal(runJitter(run, floor, end), runJitterBefore(copy, floor));
        assert.equal(delayGate(run, end), delayGateBefore(copy));
        assert.equal(runJitter(run, floor), runJitterBefore(run, floor));
        assert.equal(delayGate(run), delayGateBefore(run));
      },
    ),
    { numRuns: 500 },
  );
});

/** ReferenceSelection.runSamples as it was written before: cut afresh at every call. */
function runSamplesBefore(entry: SourceEntry, now: number): ReferenceSample[] {
  const pollS = 2 ** (entry.source.status().pollLog2 ?? 0);
  const gapMs = Math.max(8000, 4 * pollS * 1000);
  const s = entry.samples;
  const newest = s[s.length - 1];
  if (newest === undefined || now - newest.atMs > gapMs) return [];
  let i = s.length - 1;
  while (i > 0 && (s[i]?.atMs ?? 0) - (s[i - 1]?.atMs ?? 0) <= gapMs) i--;
  return s.slice(i).filter((x) => x.atMs >= entry.levelSinceMs);
}

test("a source's run, kept until its samples, level or poll change, is the run cut afresh", () => {
  const op = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('sample' as const),
        gapMs: fc.integer({ min: 0, max: 70_000 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('ask' as const),
        laterMs: fc.integer({ min: 0, max: 70_000 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('level' as const),
        backMs: fc.integer({ min: 0, max: 20_000 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('poll' as const), pollLog2: fc.integer({ min: 0, max: 6 }) }),
    },
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
      const clock = new ManualClock();
      let pollLog2 = 0;
      const selection = new ReferenceSelection({
        clock,
        served: { at: () => 0, synced: false },
        emit: () => undefined,
        minSamples: 4,
        precision: -20,
        stepThresholdS: 0.128,
        stepoutMs: 900_000,
        primaryHoldoverMs: 0,
      });
      selection.register({
        id: 'NTP:a',
        kind: 'ntp',
        prefer: false,
        status: () => ({
          usable: true,
          stratum: 1,
          referenceId: 0,
          leap: 0,
          rootDelayS: 0,
          rootDispersionS: 0,
          pollLog2,
        }),
      });
      const entry = selection.entry('NTP:a');
      assert.ok(entry);
      let t = 0;
      for (const o of ops) {
        let now = t;
        if (o.kind === 'sample') {
          t += o.gapMs;
          now = t;
          selection.addSample(entry, { offsetS: 0, delayS: 0, dispersionS: 0, jitterS: 0, atMs: t });
        } else if (o.kind === 'ask') now = t + o.laterMs;
        else if (o.kind === 'level') entry.levelSinceMs = t - o.backMs;
        else pollLog2 = o.pollLog2;
        assert.deepEqual(selection.runSamples(entry, now), runSamplesBefore(entry, now));
        assert.deepEqual(selection.runSamples(entry, t), runSamplesBefore(entry, t));
      }
    }),
    { numRuns: 300 },
  );
});
