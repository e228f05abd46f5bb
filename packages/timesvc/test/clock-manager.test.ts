import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import {
  ClockManager,
  ipv4RefId,
  type ClockManagerEvent,
  type ReferenceSource,
  type ReferenceStatus,
  type SourceKind,
} from '../src/domain/clock-manager.ts';
import { asciiRefId } from '../src/protocol/ntp-packet.ts';

/**
 * Simulated references: the reference time is raw + x0 + freq·t (the host oscillator's offset and
 * frequency error), measured with deterministic pseudo-random jitter.
 */
class SimSource implements ReferenceSource {
  usable = true;
  constructor(
    readonly id: string,
    readonly kind: SourceKind,
    readonly prefer: boolean,
    public stratum: number,
    public x0: number,
    public freq = 0,
    public jitter = 20e-6,
    private seed = 1,
  ) {}
  status(): ReferenceStatus {
    return {
      usable: this.usable,
      stratum: this.stratum,
      referenceId: this.kind === 'gpsdo' ? asciiRefId('GPS') : ipv4RefId(this.id.split(':')[1] ?? '0.0.0.0'),
      leap: 0,
      rootDelayS: 0.001,
      rootDispersionS: 0.001,
    };
  }
  #rand(): number {
    // xorshift: deterministic noise in [-1, 1)
    let x = this.seed;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.seed = x >>> 0;
    return (this.seed / 2 ** 32) * 2 - 1;
  }
  trueOffset(tMs: number): number {
    return this.x0 + (this.freq * tMs) / 1000;
  }
  sample(m: ClockManager, clock: ManualClock): void {
    const t = clock.monotonicMs();
    m.addSample(this.id, {
      offsetS: this.trueOffset(t) + this.jitter * this.#rand(),
      delayS: 0.0005,
      dispersionS: 0.0001,
      jitterS: this.jitter,
      atMs: t,
    });
  }
}

function setup(options: Partial<ConstructorParameters<typeof ClockManager>[0]> = {}) {
  const clock = new ManualClock();
  const m = new ClockManager({ clock, precision: -23, ...options });
  const events: ClockManagerEvent[] = [];
  m.on((e) => events.push(e));
  const states = () => events.filter((e) => e.type === 'state').map((e) => (e.type === 'state' ? e.to : ''));
  return { clock, m, events, states };
}

/** Advance `seconds`, ticking every second and sampling the given sources every `poll` seconds. */
function run(clock: ManualClock, m: ClockManager, seconds: number, sources: SimSource[], poll = 1): void {
  for (let s = 1; s <= seconds; s++) {
    clock.advance(1000);
    if (s % poll === 0) for (const src of sources) if (src.usable) src.sample(m, clock);
    m.tick();
  }
}

test('INIT → SYNCING → LOCKED needs 4 samples within 100 µs; the served clock takes the peer offset', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.003);
  m.register(peer);
  m.tick();
  assert.equal(m.state, 'INIT');
  assert.equal(m.serverState.leap, 3);
  assert.equal(m.serverState.stratum, 0);
  run(clock, m, 4, [peer]);
  assert.equal(m.state, 'SYNCING', 'first sample steps, then only 3 residuals');
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.deepEqual(states(), ['SYNCING', 'LOCKED']);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.003) < 50e-6);
  const s = m.serverState;
  assert.equal(s.leap, 0);
  assert.equal(s.stratum, 3, 'reference stratum + 1');
  assert.equal(s.referenceId, ipv4RefId('192.0.2.1'));
  assert.ok(s.rootDelayS > 0.001 && s.rootDispersionS >= 0.005);
  const snap = m.snapshot();
  assert.equal(snap.selected, 'NTP:192.0.2.1:123');
  assert.equal(snap.stratum, 3);
});

test('a noisy peer (1 ms jitter) never locks at the 100 µs threshold scale unless its median agrees', () => {
  const { clock, m } = setup({ lockThresholdS: 100e-6 });
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0, 0, 0.2);
  m.register(peer);
  run(clock, m, 10, [peer]);
  assert.equal(m.state, 'SYNCING', '±200 ms noise: residual medians far above any threshold');
});

test('holdover keeps time with the learned frequency (10 ppm oscillator error), then times out to FAULT', () => {
  const { clock, m, states } = setup({ holdoverTimeoutMs: 2 * 3600_000 });
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 1, 0.002, 10e-6, 20e-6, 7);
  m.register(peer);
  // 32 samples at 16 s polls: 8.5 minutes of training.
  run(clock, m, 32 * 16, [peer], 16);
  assert.equal(m.state, 'LOCKED');
  const drift = m.snapshot().driftPpb;
  assert.ok(Math.abs(drift - 10_000) < 100, `drift ${drift} ppb ≈ 10000`);
  peer.usable = false;
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  assert.equal(m.serverState.leap, 0, 'holdover still serves time');
  assert.equal(m.serverState.stratum, 2);
  run(clock, m, 3600, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  const t = clock.monotonicMs();
  const error = Math.abs(m.correctionAt(t) - peer.trueOffset(t));
  // Without the frequency estimate the error would be 36 ms after one hour.
  assert.ok(error < 1e-3, `holdover error after 1 h = ${error * 1e6} µs`);
  assert.ok(m.snapshot().holdoverRemainingMs! <= 3600_000);
  run(clock, m, 3601, [peer]);
  assert.equal(m.state, 'FAULT');
  assert.equal(m.serverState.leap, 3);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'HOLDOVER', 'FAULT']);
  // FAULT → SYNCING when a reference returns; offset and drift samples are reset.
  peer.usable = true;
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'SYNCING');
  assert.equal(m.snapshot().driftPpb, 0);
  run(clock, m, 8, [peer]);
  assert.equal(m.state, 'LOCKED');
});

test('HOLDOVER → SYNCING when the reference returns; SYNCING → FAULT when it is lost while syncing', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.usable = false;
  run(clock, m, 5, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  peer.usable = true;
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'SYNCING');
  peer.usable = false;
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'FAULT');
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'HOLDOVER', 'SYNCING', 'FAULT']);
});

test('LOCKED → FAULT when the offset jumps by more than 1 s, then resynchronises', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.x0 = 2.5;
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'FAULT');
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 2.5) < 1e-4);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'FAULT', 'SYNCING', 'LOCKED']);
});

test('falseticker rejection with three or more peers, even when the falseticker is preferred', () => {
  const { clock, m } = setup();
  const good = [
    new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.0001, 0, 20e-6, 3),
    new SimSource('NTP:192.0.2.2:123', 'ntp', false, 2, -0.0002, 0, 20e-6, 5),
    new SimSource('NTP:192.0.2.3:123', 'ntp', false, 3, 0.0003, 0, 20e-6, 9),
  ];
  const liar = new SimSource('NTP:192.0.2.66:123', 'ntp', true, 1, 0.25, 0, 20e-6, 11);
  for (const s of [...good, liar]) m.register(s);
  run(clock, m, 8, [...good, liar]);
  const snap = m.snapshot();
  const byId = new Map(snap.sources.map((s) => [s.id, s]));
  assert.equal(byId.get(liar.id)?.falseticker, true);
  assert.ok(good.every((g) => byId.get(g.id)?.falseticker === false));
  assert.notEqual(snap.selected, liar.id);
  // Lowest stratum among the truechimers wins (priority stratum + 10).
  assert.ok(snap.selected === good[0]!.id || snap.selected === good[1]!.id);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs())) < 0.001);
});

test('with two peers nothing is discarded and prefer decides; a GPSDO source wins over peers', () => {
  const { clock, m } = setup();
  const a = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 1, 0);
  const b = new SimSource('NTP:192.0.2.2:123', 'ntp', true, 4, 0.01);
  m.register(a);
  m.register(b);
  run(clock, m, 3, [a, b]);
  assert.equal(m.snapshot().selected, b.id, 'prefer beats a lower stratum');
  assert.equal(m.snapshot().sources.filter((s) => s.falseticker).length, 0);
  const gps = new SimSource('GPSDO:Dummy', 'gpsdo', false, 0, 0.0105);
  m.register(gps);
  run(clock, m, 10, [a, b, gps]);
  assert.equal(m.snapshot().selected, 'GPSDO:Dummy');
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.stratum, 1);
  assert.equal(m.serverState.referenceId, asciiRefId('GPS'));
});

test('local-stratum mode: LOCKED on the host clock at the configured stratum; a peer takes over', () => {
  const { clock, m } = setup({ local: { stratum: 10, referenceId: asciiRefId('LOCL') } });
  m.tick();
  assert.equal(m.state, 'SYNCING');
  for (let i = 0; i < 5; i++) {
    clock.advance(1000);
    m.tick();
  }
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.stratum, 10);
  assert.equal(m.serverState.referenceId, asciiRefId('LOCL'));
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.00002);
  m.register(peer);
  run(clock, m, 3, [peer]);
  assert.equal(m.snapshot().selected, peer.id);
  assert.equal(m.serverState.stratum, 3);
  peer.usable = false;
  run(clock, m, 2, [peer]);
  assert.equal(m.snapshot().selected, 'LOCAL');
  assert.equal(m.state, 'LOCKED', 'local stratum is the last resort, not holdover');
  assert.equal(m.serverState.stratum, 10);
});

test('the periodic tick runs on the injected clock', () => {
  const { clock, m } = setup({ local: { stratum: 9, referenceId: asciiRefId('LOCL') } });
  m.start();
  clock.advance(6000);
  assert.equal(m.state, 'LOCKED');
  m.stop();
  assert.equal(clock.pendingTimers, 0);
});

test('a single spike is suppressed (no state change, correction unmoved); a persistent change is followed', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.001, 0, 10e-6);
  m.register(peer);
  run(clock, m, 8, [peer]);
  assert.equal(m.state, 'LOCKED');
  const before = m.correctionAt(clock.monotonicMs());
  peer.x0 = 0.004; // one 3 ms spike
  run(clock, m, 1, [peer]);
  peer.x0 = 0.001;
  assert.equal(m.snapshot().spikes, 1);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - before) < 20e-6);
  run(clock, m, 3, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.x0 = 0.0015; // a real 0.5 ms change: accepted from the second sample on
  run(clock, m, 12, [peer]);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.0015) < 50e-6);
  assert.equal(m.snapshot().spikes, 2);
});

test('a stratum-15 reference is not served as stratum 16 with LI 0: the server stays unsynchronised', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.9:123', 'ntp', false, 15, 0.001);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.leap, 3);
  assert.equal(m.serverState.stratum, 0);
  assert.equal(m.snapshot().stratum, 16);
  peer.stratum = 14;
  run(clock, m, 1, [peer]);
  assert.equal(m.serverState.leap, 0);
  assert.equal(m.serverState.stratum, 15);
  assert.equal(m.snapshot().stratum, 15);
});
