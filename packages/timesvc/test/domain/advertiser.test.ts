import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { Advertiser } from '../../src/domain/advertiser.ts';
import type { Estimate } from '../../src/domain/discipline.ts';
import type { ReferenceStatus } from '../../src/domain/reference-source.ts';
import { LEAP, MAXSTRAT, PHI } from '../../src/protocol/ntp-packet.ts';

/** The advertiser alone (advertiser.ts), on stub ports: what the reply fields are made of. */

const EST: Estimate = {
  phaseS: 0,
  t: 0,
  freq: 0,
  phaseErrorS: 2e-6,
  freqError: 1e-8,
  samples: 8,
  k: 3,
  kPhase: 1,
};

function setup(leap: number = LEAP.NONE) {
  const clock = new ManualClock();
  const served = { at: () => 0, remaining: () => 0, synced: true };
  let leapNow: number = leap;
  const adv = new Advertiser({
    clock,
    precision: -20,
    maxClockError: 1e-6,
    served,
    estimate: () => EST,
    leap: { indicator: () => leapNow, smearDeviation: () => 0 },
    servedUnixMs: (m) => clock.now() - (clock.monotonicMs() - m),
  });
  const status = (stratum: number): ReferenceStatus => ({
    usable: true,
    stratum,
    referenceId: 0x47505300,
    leap: 0,
    rootDelayS: 0.001,
    rootDispersionS: 0.002,
  });
  const sample = (atMs: number) => ({ offsetS: 0, delayS: 0.0004, dispersionS: 0.0001, jitterS: 1e-5, atMs });
  const facts = { state: 'LOCKED' as const, suspectS: 0, selectionJitterS: 0, disagreementS: 0 };
  return { clock, adv, served, status, sample, facts, setLeap: (l: number) => (leapNow = l) };
}

test('unsynchronised until a reference is followed; then stratum + 1, its refid and the summed root delay', () => {
  const { adv, status, sample, facts } = setup();
  assert.equal(adv.update(0, facts), false, 'nothing to advertise yet: stays LI 3');
  assert.equal(adv.serverState(0).leap, LEAP.UNSYNCHRONISED);
  assert.equal(adv.snapshot(0).stratum, MAXSTRAT);
  adv.noteSample(status(1), sample(0), [0.0006], 1e-5);
  assert.equal(adv.update(0, facts), true);
  const s = adv.serverState(0);
  assert.deepEqual([s.leap, s.stratum, s.referenceId], [LEAP.NONE, 2, 0x47505300]);
  assert.ok(Math.abs(s.rootDelayS - (0.001 + 0.0006)) < 1e-12, 'the run’s largest delay');
});

test('a stratum-15 reference is not advertised as stratum 16 with LI 0', () => {
  const { adv, status, sample, facts } = setup();
  adv.noteSample(status(15), sample(0), [], 1e-5);
  adv.update(0, facts);
  assert.equal(adv.serverState(0).leap, LEAP.UNSYNCHRONISED);
});

test('the root dispersion holds the selection jitter, a held-back level and the growth since the sample; faster in HOLDOVER', () => {
  const { adv, status, sample, facts } = setup();
  adv.noteSample(status(1), sample(0), [], 1e-5);
  adv.update(0, facts);
  const base = adv.serverState(0).rootDispersionS;
  adv.update(0, { ...facts, selectionJitterS: 0.003, disagreementS: 0.5 });
  assert.ok(Math.abs(adv.serverState(0).rootDispersionS - base - 0.503) < 1e-12);
  // The held-back level is not part of the LOCKED hysteresis bound.
  const st = adv.serverState(0);
  assert.ok(Math.abs(adv.advertisedBoundS(0) - (st.rootDelayS / 2 + st.rootDispersionS - 0.5)) < 1e-12);
  adv.update(10_000, facts);
  const locked = adv.serverState(10_000);
  adv.update(10_000, { ...facts, state: 'HOLDOVER' });
  const holdover = adv.serverState(10_000);
  assert.equal(locked.dispersionRateS, 1e-6 + EST.k * EST.freqError);
  assert.equal(holdover.dispersionRateS, PHI + EST.k * EST.freqError);
  assert.ok(holdover.rootDispersionS - locked.rootDispersionS > (PHI - 1e-6) * 10 * 0.99);
});

test('an announced leap is cleared from its instant on, even before the next update', () => {
  const { adv, status, sample, facts, setLeap } = setup(LEAP.ADD_SECOND);
  adv.noteSample(status(1), sample(0), [], 1e-5);
  adv.update(0, facts);
  assert.equal(adv.serverState(0).leap, LEAP.ADD_SECOND);
  setLeap(LEAP.NONE);
  assert.equal(adv.serverState(1000).leap, LEAP.NONE);
});
