import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Discipline } from '../../src/domain/discipline.ts';

/**
 * The estimator alone (src/domain/discipline.ts), deterministic: a start-up burst of four samples 1 s apart
 * whose noise suggests a frequency that is not there, then samples every 64 s (the default poll).
 */

const BURST_MS = [20.025, 19.99, 20.005, 19.975];

test('a noisy burst does not fix a wrong frequency: the estimate converges within two polls', () => {
  const d = new Discipline();
  BURST_MS.forEach((ms, i) => d.add(i, ms / 1000, 15e-6));
  const afterBurst = d.estimate()!;
  // Whatever is served from the burst, its advertised frequency error must cover the truth (0).
  assert.ok(
    afterBurst.k * afterBurst.freqError >= Math.abs(afterBurst.freq),
    `burst frequency ${afterBurst.freq * 1e6} ppm beyond its own error ${afterBurst.k * afterBurst.freqError * 1e6} ppm`,
  );
  const outcomes: string[] = [];
  for (let poll = 1; poll <= 6; poll++) {
    const t = 3 + 64 * poll;
    // The truth is exactly +20 ms at every instant; the sample has no noise.
    const predicted = d.predict(t);
    const e = d.estimate()!;
    const predErr = Math.abs(predicted - 0.02);
    // Honest: the prediction's error is within the estimate's own error at that age.
    const allowed = e.k * Math.hypot(e.phaseErrorS, e.freqError * (t - e.t));
    assert.ok(predErr <= allowed, `poll ${poll}: prediction off by ${predErr} s, own error ${allowed} s`);
    if (poll > 2) {
      assert.ok(predErr < 20e-6, `poll ${poll}: prediction still off by ${(predErr * 1e6).toFixed(1)} µs`);
    }
    outcomes.push(d.add(t, 0.02, 15e-6).kind);
    if (poll >= 2) {
      assert.ok(Math.abs(d.frequency) < 0.5e-6, `after poll ${poll}: frequency ${d.frequency * 1e6} ppm`);
    }
  }
  // The samples that reveal a frequency error are not held back as spikes or taken as level changes.
  assert.deepEqual(outcomes, Array(6).fill('accepted'));
});

test('a real frequency error (+30 ppm) is learned within two polls, with the bound covering it meanwhile', () => {
  const d = new Discipline();
  const truth = (t: number): number => 0.02 + 30e-6 * t;
  const noise = [25e-6, -10e-6, 5e-6, -25e-6];
  for (let i = 0; i < 4; i++) d.add(i, truth(i) + (noise[i] ?? 0), 15e-6);
  const outcomes: string[] = [];
  for (let poll = 1; poll <= 5; poll++) {
    const t = 3 + 64 * poll;
    const e = d.estimate()!;
    const predErr = Math.abs(d.predict(t) - truth(t));
    const allowed = e.k * Math.hypot(e.phaseErrorS, e.freqError * (t - e.t));
    assert.ok(predErr <= allowed, `poll ${poll}: prediction off by ${predErr} s, own error ${allowed} s`);
    outcomes.push(d.add(t, truth(t), 15e-6).kind);
    if (poll >= 2) {
      assert.ok(Math.abs(d.frequency - 30e-6) < 0.5e-6, `after poll ${poll}: ${d.frequency * 1e6} ppm`);
    }
  }
  assert.deepEqual(outcomes, Array(5).fill('accepted'));
});

test('a level change restarts from both samples at the new level and keeps only a frequency it can trust', () => {
  const d = new Discipline();
  // A long, clean window at +10 ppm: the frequency is well known.
  for (let i = 0; i < 20; i++) d.add(i * 16, 0.001 + 10e-6 * i * 16 + (i % 2 ? 2e-6 : -2e-6), 2e-6);
  assert.ok(Math.abs(d.frequency - 10e-6) < 0.2e-6);
  const t1 = 20 * 16;
  assert.equal(d.add(t1, 0.001 + 10e-6 * t1 + 0.005, 2e-6).kind, 'spike');
  const t2 = 21 * 16;
  assert.equal(d.add(t2, 0.001 + 10e-6 * t2 + 0.005, 2e-6).kind, 'level');
  assert.equal(d.samples, 2, 'the held-back sample belongs to the new level');
  assert.ok(Math.abs(d.frequency - 10e-6) < 0.2e-6, 'a well-measured frequency is kept');
  const e = d.estimate()!;
  assert.ok(Math.abs(d.predict(t2) - (0.006 + 10e-6 * t2)) <= e.k * e.phaseErrorS + 1e-6);

  // A frequency from a burst alone is not kept as if it were known.
  const b = new Discipline();
  BURST_MS.forEach((ms, i) => b.add(i, ms / 1000, 15e-6));
  const before = b.estimate()!;
  b.reset(true);
  b.add(10, 0.02, 15e-6);
  const after = b.estimate()!;
  assert.ok(
    after.k * after.freqError >= before.k * before.freqError - 1e-12,
    `the reset narrowed the frequency's error: ${before.k * before.freqError} → ${after.k * after.freqError}`,
  );
});
