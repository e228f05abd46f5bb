import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkProbe, type ProbeRecord } from '../helpers/probe-check.ts';

/**
 * The loop tests' judge (helpers/offset-upstream.ts checkProbe) must itself be able to fail. Synthetic
 * probe records: a request every 200 ms, a 0.3 ms round trip, served time stamped half-way.
 */

const RATE = 500e-6 + 5000e-6; // MAXFREQ + the default slew rate

function records(served: (tMs: number) => number): ProbeRecord[] {
  const out: ProbeRecord[] = [];
  for (let i = 0; i < 20; i++) {
    const atMs = 1000 + i * 200;
    const t3S = 3_900_000_000 + served(atMs + 0.15) / 1000;
    out.push({
      atMs,
      recvMs: atMs + 0.3,
      leap: 0,
      stratum: 2,
      t3: BigInt(Math.round(t3S * 2 ** 32)),
      rootDelayS: 0,
      rootDispersionS: 0.001,
      errorS: 0,
      delayS: 0.0003,
      t21S: 0.00015,
      t32S: 0,
      knowable: true,
    });
  }
  return out;
}

test('a served clock running at its nominal rate, or slewing back at the documented rate, passes', () => {
  assert.equal(
    checkProbe(
      records((t) => t),
      RATE,
    ).worstBackwardS,
    0,
  );
  assert.equal(
    checkProbe(
      records((t) => t * (1 - 0.005)),
      RATE,
    ).worstBackwardS,
    0,
  );
});

test('a 3 ms backward step between two replies 200 ms apart is caught (T3 still rises by 197 ms)', () => {
  const stepped = records((t) => (t > 2000 ? t - 3 : t));
  // T3 never decreased, so "never decreases" alone cannot see it.
  assert.equal(checkProbe(stepped).worstBackwardS, 0);
  const c = checkProbe(stepped, RATE);
  assert.ok(c.worstBackwardS > 0.001, `shortfall ${c.worstBackwardS} s`);
});

test('slewing back faster than the documented rate (20,000 ppm) is caught', () => {
  assert.ok(
    checkProbe(
      records((t) => t * (1 - 0.02)),
      RATE,
    ).worstBackwardS > 0,
  );
});

test('a T3 that decreases is caught with or without a rate', () => {
  const back = records((t) => (t > 2000 ? t - 300 : t));
  assert.ok(checkProbe(back).worstBackwardS > 0.09);
  assert.ok(checkProbe(back, RATE).worstBackwardS > 0.09);
});

test('the error bound: |error| beyond root delay/2 + root dispersion + half the probe delay is reported', () => {
  const r = records((t) => t);
  const five = r[5]!;
  r[5] = { ...five, errorS: 0.0012 };
  assert.ok(Math.abs(checkProbe(r, RATE).worstBeyondBoundS - 0.00005) < 1e-9);
  r[5] = { ...five, errorS: 0.0012, knowable: false };
  assert.ok(
    checkProbe(r, RATE).worstBeyondBoundS < 0,
    'a reply the server could not have known about is not judged',
  );
});
