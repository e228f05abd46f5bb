import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RefclockFilter, REFCLOCK_FILTER_LENGTH } from '../../src/domain/refclock-filter.ts';

/**
 * The GPSDO's median filter (docs/gpsdo.md "Samples: a median filter per poll"), against chrony's
 * samplefilt.c rules written out plainly here with arrays (select by dispersion, sort by offset, keep the
 * 60 % around the median, mean offset at the mean time).
 */
interface S {
  atMs: number;
  offsetS: number;
  dispS: number;
}

function chronyKept(samples: readonly S[]): S[] {
  let sel =
    samples.length > 4
      ? samples.filter((s) => s.dispS <= 1.5 * Math.min(...samples.map((x) => x.dispS)))
      : [];
  if (sel.length < 4) sel = [...samples];
  sel = [...sel].sort((a, b) => a.offsetS - b.offsetS);
  const j = sel.length;
  let from = 0;
  if (j > 2) from = Math.min(Math.max(1, Math.trunc((j * (1 - 0.6)) / 2)), Math.trunc((j - 1) / 2));
  return sel.slice(from, j - from);
}

test('one poll combines the samples closest to the median as chrony does: mean offset at the mean time', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          offsetS: fc.double({ min: -1e-3, max: 1e-3, noNaN: true }),
          dispS: fc.constantFrom(1e-6, 1.2e-6, 10e-3),
        }),
        { minLength: 1, maxLength: 40 },
      ),
      (raw) => {
        const samples = raw.map((r, i) => ({ ...r, atMs: 1000 + i * 1000 }));
        const f = new RefclockFilter();
        for (const s of samples) assert.ok(f.add(s.atMs, s.offsetS, s.dispS));
        const out = f.take();
        const kept = chronyKept(samples);
        assert.ok(out);
        assert.equal(out.kept, kept.length);
        assert.equal(out.stored, samples.length);
        const mean = kept.reduce((a, s) => a + s.offsetS, 0) / kept.length;
        const meanAt = kept.reduce((a, s) => a + s.atMs, 0) / kept.length;
        assert.ok(Math.abs(out.offsetS - mean) < 1e-12, `${out.offsetS} vs ${mean}`);
        assert.ok(Math.abs(out.atMs - meanAt) < 1e-6, `${out.atMs} vs ${meanAt}`);
        // At least the kept samples' mean dispersion (chrony: MAX(disp, mean peer dispersion)).
        const meanDisp = kept.reduce((a, s) => a + s.dispS, 0) / kept.length;
        assert.ok(out.dispersionS >= meanDisp - 1e-15);
        assert.equal(f.count, 0, 'the poll drops what it combined');
      },
    ),
    { numRuns: 300 },
  );
});

test('an outlier inside a poll is rejected by the median', () => {
  const f = new RefclockFilter();
  for (let i = 0; i < 16; i++) {
    // One receiver sample 0.5 s off (a corrupted label) among fifteen within a microsecond.
    const offsetS = i === 7 ? 0.5 : 1e-6 * Math.sin(i);
    f.add(i * 1000, offsetS, 1e-6);
  }
  const out = f.take();
  assert.ok(out);
  assert.equal(out.kept, 10, '16 samples: 3 dropped from each end (⌊16 · 0.4 / 2⌋)');
  assert.ok(Math.abs(out.offsetS) < 1e-6, `combined ${out.offsetS}`);
  assert.ok(out.dispersionS < 1e-5, `dispersion ${out.dispersionS}`);
});

test('the spread of the kept samples is the dispersion; samples of a much larger dispersion are left out', () => {
  const f = new RefclockFilter();
  // Eight PPS-grade samples at ±100 µs and eight serial-grade (10 ms dispersion) ones 5 ms off.
  for (let i = 0; i < 16; i++) {
    const pps = i % 2 === 0;
    f.add(i * 500, pps ? (i % 4 === 0 ? 100e-6 : -100e-6) : 5e-3, pps ? 1e-6 : 10e-3);
  }
  const out = f.take();
  assert.ok(out);
  assert.ok(Math.abs(out.offsetS) < 60e-6, `the serial samples left out: ${out.offsetS}`);
  assert.ok(out.dispersionS > 10e-6 && out.dispersionS < 200e-6, `dispersion ${out.dispersionS}`);
});

test('bounded: at most the filter length is kept between polls (the oldest overwritten); time order enforced', () => {
  const f = new RefclockFilter();
  for (let i = 0; i < 1000; i++) f.add(i, i < 1000 - REFCLOCK_FILTER_LENGTH ? 1 : 0, 1e-6);
  assert.equal(f.count, REFCLOCK_FILTER_LENGTH);
  const out = f.take();
  assert.equal(out?.offsetS, 0, 'only the newest 64 samples');
  assert.equal(f.add(999, 0, 1e-6), false, 'not after the newest sample: refused');
  assert.equal(f.add(1000, 0, 1e-6), true);
  f.drop();
  assert.equal(f.take(), undefined, 'dropped: nothing to combine');
});

test('a spread beyond maxDispersionS drops the combined sample (chrony maxdispersion)', () => {
  const f = new RefclockFilter({ maxDispersionS: 1e-3 });
  for (let i = 0; i < 8; i++) f.add(i * 1000, i % 2 === 0 ? 0.01 : -0.01, 1e-6);
  assert.equal(f.take(), undefined);
  for (let i = 10; i < 18; i++) f.add(i * 1000, 1e-6 * i, 1e-6);
  assert.ok(f.take());
});
