import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { correctionAt, slewTowards, stepTo } from '../../src/domain/correction.ts';
import {
  ClockManager,
  ipv4RefId,
  type ClockManagerEvent,
  type ReferenceSource,
  type ReferenceStatus,
  type SourceKind,
} from '../../src/domain/clock-manager.ts';
import { asciiRefId, ntpToUnixMs } from '../../src/protocol/ntp-packet.ts';

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
    public pollLog2 = 0,
  ) {}
  /** Round-trip delay of the next exchanges. */
  delayS = 0.0005;
  status(): ReferenceStatus {
    return {
      usable: this.usable,
      stratum: this.stratum,
      referenceId: this.kind === 'gpsdo' ? asciiRefId('GPS') : ipv4RefId(this.id.split(':')[1] ?? '0.0.0.0'),
      leap: 0,
      rootDelayS: 0.001,
      rootDispersionS: 0.001,
      pollLog2: this.pollLog2,
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
      delayS: this.delayS,
      dispersionS: 0.0001,
      jitterS: this.jitter,
      atMs: t,
    });
  }
}

/** The served-correction rules for a single reference that is followed at once (stepout 0). */
const STEPOUT_OFF = { stepoutMs: 0 };

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

test('correction formula: slews at the bounded rate, continuous when re-planned, never decreasing', () => {
  const c0 = stepTo(0, 0.01, 10e-6, 5000e-6);
  assert.equal(correctionAt(c0, 0), 0.01);
  assert.ok(Math.abs(correctionAt(c0, 1000) - (0.01 + 10e-6)) < 1e-12);
  // Re-plan at t = 1 s towards -5 ms: starts where c0 stands, moves at 5 ms/s, then follows the frequency.
  const c1 = slewTowards(c0, 1000, -0.005, 10e-6, 5000e-6);
  assert.equal(correctionAt(c1, 1000), correctionAt(c0, 1000));
  assert.ok(Math.abs(correctionAt(c1, 2000) - (correctionAt(c0, 1000) + 10e-6 - 0.005)) < 1e-12);
  assert.ok(Math.abs(correctionAt(c1, 10_000) - (-0.005 + 9 * 10e-6)) < 1e-9);
  // Served time = raw + c: over any interval it advances by at least (1 − 5000 ppm − 10 ppm) of it.
  for (let t = 1000; t < 10_000; t += 137) {
    const served = (ms: number): number => ms / 1000 + correctionAt(c1, ms);
    assert.ok(served(t + 1) > served(t));
  }
});

test('INIT → SYNCING → LOCKED from the first 4 samples (an iburst): stepped while LI 3, then served', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.003);
  m.register(peer);
  m.tick();
  assert.equal(m.state, 'INIT');
  assert.equal(m.serverState.leap, 3);
  assert.equal(m.serverState.stratum, 0);
  run(clock, m, 3, [peer]);
  assert.equal(m.state, 'INIT', 'no selection before 4 samples');
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.deepEqual(states(), ['SYNCING', 'LOCKED']);
  assert.equal(m.snapshot().steps, 1);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.003) < 50e-6);
  const s = m.serverState;
  assert.equal(s.leap, 0);
  assert.equal(s.stratum, 3, 'reference stratum + 1');
  assert.equal(s.referenceId, ipv4RefId('192.0.2.1'));
  assert.ok(s.rootDelayS >= 0.0015, 'reference root delay + our delay');
  assert.ok(s.rootDispersionS >= 0.001, 'at least the reference root dispersion');
  const snap = m.snapshot();
  assert.equal(snap.selected, 'NTP:192.0.2.1:123');
  assert.equal(snap.stratum, 3);
});

test('a noisy peer (±20 ms) is served with a dispersion that covers its noise', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0, 0, 0.02);
  m.register(peer);
  run(clock, m, 20, [peer]);
  const s = m.serverState;
  assert.equal(s.leap, 0);
  const err = Math.abs(m.correctionAt(clock.monotonicMs()));
  assert.ok(
    s.rootDelayS / 2 + m.rootDispersionS() >= err,
    `advertised ${m.rootDispersionS()} vs error ${err}`,
  );
  assert.ok(s.rootDispersionS > 0.005, 'the noise shows in the dispersion');
});

test('holdover keeps time with the learned frequency (10 ppm), grows its dispersion, then times out to FAULT', () => {
  const { clock, m, states } = setup({ holdoverTimeoutMs: 2 * 3600_000 });
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 1, 0.002, 10e-6, 20e-6, 7, 4);
  m.register(peer);
  run(clock, m, 32 * 16, [peer], 16);
  assert.equal(m.state, 'LOCKED');
  const drift = m.snapshot().driftPpb;
  assert.ok(Math.abs(drift - 10_000) < 100, `drift ${drift} ppb ≈ 10000`);
  peer.usable = false;
  run(clock, m, 70, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  assert.equal(m.serverState.leap, 0, 'holdover still serves time');
  assert.equal(m.serverState.stratum, 2);
  const d0 = m.rootDispersionS();
  run(clock, m, 3600, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  assert.ok(m.rootDispersionS() > d0 + 3600 * 15e-6, 'dispersion grows at least with PHI');
  const t = clock.monotonicMs();
  const error = Math.abs(m.correctionAt(t) - peer.trueOffset(t));
  // Without the frequency estimate the error would be 36 ms after one hour.
  assert.ok(error < 1e-3, `holdover error after 1 h = ${error * 1e6} µs`);
  assert.ok(error < m.rootDispersionS(), 'within what is advertised');
  run(clock, m, 3601, [peer]);
  assert.equal(m.state, 'FAULT');
  assert.equal(m.serverState.leap, 3);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'HOLDOVER', 'FAULT']);
  // FAULT → SYNCING when the reference returns; phase and frequency start again from its new samples.
  peer.usable = true;
  run(clock, m, 8 * 16, [peer], 16);
  assert.equal(m.state, 'LOCKED');
  assert.deepEqual(states().slice(-2), ['SYNCING', 'LOCKED']);
});

test('HOLDOVER → LOCKED directly when the reference returns agreeing; → SYNCING (slew, LI 0) when it does not', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 10, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.usable = false;
  run(clock, m, 10, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  peer.usable = true;
  run(clock, m, 4, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'HOLDOVER', 'LOCKED']);
  peer.usable = false;
  run(clock, m, 10, [peer]);
  assert.equal(m.state, 'HOLDOVER');
  peer.x0 = -0.005;
  peer.usable = true;
  run(clock, m, 4, [peer]);
  assert.equal(m.state, 'SYNCING');
  assert.equal(m.serverState.leap, 0, 'still serving, with the remaining slew in the dispersion');
  assert.ok(m.rootDispersionS() >= 0.004);
  run(clock, m, 3, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) + 0.005) < 100e-6);
  assert.equal(m.snapshot().steps, 1, 'slewed, not stepped');
});

test('SYNCING → FAULT when the reference is lost before the estimate is usable again (after a FAULT)', () => {
  const { clock, m, states } = setup(STEPOUT_OFF);
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 6, [peer]);
  peer.x0 = 3;
  run(clock, m, 2, [peer]);
  assert.equal(m.state, 'SYNCING', 'FAULT, then SYNCING with a new fit (LI 3)');
  peer.usable = false;
  run(clock, m, 1, [peer]);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'FAULT', 'SYNCING', 'FAULT']);
  assert.equal(m.serverState.leap, 3);
});

test('a backward correction beyond the step threshold: LI 3 is served first, then the step', () => {
  const { clock, m } = setup(STEPOUT_OFF);
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 8, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.x0 = -0.3;
  run(clock, m, 2, [peer]); // a spike, then the level change
  assert.equal(m.serverState.leap, 3, 'unsynchronised before stepping back');
  const before = m.correctionAt(clock.monotonicMs());
  assert.ok(Math.abs(before) < 0.001, 'not stepped yet');
  // The step waits for a usable estimate at the new level (4 samples: the held-back one, the one that
  // confirmed the level change, two more), served as LI 3 meanwhile.
  run(clock, m, 1, [peer]);
  assert.equal(m.serverState.leap, 3);
  run(clock, m, 1, [peer]);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) + 0.3) < 0.001, 'stepped back');
  run(clock, m, 1, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.leap, 0);
});

test('a forward correction beyond the step threshold is stepped while serving', () => {
  const { clock, m } = setup(STEPOUT_OFF);
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 8, [peer]);
  peer.x0 = 0.3;
  run(clock, m, 2, [peer]);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.3) < 0.001);
  assert.equal(m.snapshot().steps, 2);
});

test('LOCKED → FAULT when the offset jumps by more than 1 s, then resynchronises from scratch', () => {
  const { clock, m, states } = setup(STEPOUT_OFF);
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.x0 = 2.5;
  run(clock, m, 2, [peer]);
  assert.equal(m.state, 'SYNCING');
  assert.equal(m.serverState.leap, 3);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 2.5) < 1e-4);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED', 'FAULT', 'SYNCING', 'LOCKED']);
});

test('the frequency estimate is bounded to ±500 ppm', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0, 800e-6, 1e-6);
  m.register(peer);
  run(clock, m, 60, [peer]);
  assert.ok(Math.abs(m.snapshot().driftPpb) <= 500_000, `${m.snapshot().driftPpb}`);
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
  // The liar's burst completes first: selection waits for the others' bursts.
  run(clock, m, 4, [liar]);
  assert.equal(m.snapshot().selected, undefined, 'waiting for the other bursts');
  run(clock, m, 8, [...good, liar]);
  const snap = m.snapshot();
  const byId = new Map(snap.sources.map((s) => [s.id, s]));
  assert.equal(byId.get(liar.id)?.falseticker, true);
  assert.ok(good.every((g) => byId.get(g.id)?.falseticker === false));
  assert.notEqual(snap.selected, liar.id);
  assert.ok(snap.selected === good[0]!.id || snap.selected === good[1]!.id);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs())) < 0.001);
});

test('with two agreeing peers nothing is discarded and prefer decides; a GPSDO source wins over peers', () => {
  const { clock, m } = setup();
  const a = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 1, 0);
  const b = new SimSource('NTP:192.0.2.2:123', 'ntp', true, 4, 0.003);
  m.register(a);
  m.register(b);
  run(clock, m, 5, [a, b]);
  assert.equal(m.snapshot().selected, b.id, 'prefer beats a lower stratum');
  assert.equal(m.snapshot().sources.filter((s) => s.falseticker).length, 0);
  // The disagreement between the truechimers is part of the advertised dispersion (selection jitter).
  assert.ok(m.rootDispersionS() >= 0.003);
  const gps = new SimSource('GPSDO:Dummy', 'gpsdo', false, 0, 0.0035);
  m.register(gps);
  run(clock, m, 10, [a, b, gps]);
  assert.equal(m.snapshot().selected, 'GPSDO:Dummy');
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.stratum, 1);
  assert.equal(m.serverState.referenceId, asciiRefId('GPS'));
});

test('two peers that disagree beyond their root distances: no majority, nothing selected', () => {
  const { clock, m } = setup();
  const a = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0);
  const b = new SimSource('NTP:192.0.2.2:123', 'ntp', true, 2, 0.05);
  m.register(a);
  m.register(b);
  run(clock, m, 6, [a, b]);
  assert.equal(m.snapshot().selected, undefined);
  assert.equal(m.serverState.leap, 3);
});

test('a reference change (also through none) restarts the fit from the new run', () => {
  const { clock, m, events } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.001);
  m.register(peer);
  run(clock, m, 10, [peer]);
  peer.usable = false;
  run(clock, m, 10, [peer]);
  assert.equal(m.snapshot().selected, undefined);
  peer.usable = true;
  run(clock, m, 4, [peer]);
  const selections = events
    .filter((e) => e.type === 'selected')
    .map((e) => (e.type === 'selected' ? e.to : ''));
  assert.deepEqual(selections, [peer.id, undefined, peer.id]);
  assert.equal(m.state, 'LOCKED');
});

test('local-stratum mode: LOCKED on the host clock at the configured stratum; a peer takes over', () => {
  let hostOffset = 0;
  const { clock, m } = setup({
    local: { stratum: 10, referenceId: asciiRefId('LOCL'), offsetS: () => hostOffset },
  });
  m.tick();
  assert.equal(m.state, 'LOCKED', 'the local reference is exact: locked at the first tick');
  assert.equal(m.serverState.stratum, 10);
  assert.equal(m.serverState.referenceId, asciiRefId('LOCL'));
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.00002);
  m.register(peer);
  run(clock, m, 5, [peer]);
  assert.equal(m.snapshot().selected, peer.id);
  assert.equal(m.serverState.stratum, 3);
  peer.usable = false;
  run(clock, m, 10, [peer]);
  assert.equal(m.snapshot().selected, 'LOCAL');
  assert.equal(m.state, 'LOCKED', 'local stratum is the last resort, not holdover');
  assert.equal(m.serverState.stratum, 10);
  // The host clock is the reference here: when it steps forward, the served clock follows.
  hostOffset = 0.5;
  run(clock, m, 3, []);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.5) < 1e-3);
});

test('high-delay samples are left out at most once in a row: no update age beyond two polls while replies arrive', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.0001, 0, 10e-6, 7, 6);
  m.register(peer);
  run(clock, m, 8, [peer]); // an iburst-like start at 1 s
  assert.equal(m.state, 'LOCKED');
  // Then polls of 64 s, five replies in a row with 20 ms round trips (a loaded path), then normal ones.
  for (let i = 0; i < 8; i++) {
    clock.advance(64_000);
    const t = clock.monotonicMs();
    m.addSample(peer.id, {
      offsetS: 0.0001,
      delayS: i < 5 ? 0.02 : 0.0005,
      dispersionS: 0.0001,
      jitterS: 10e-6,
      atMs: t,
    });
    m.tick();
    const age = t - (m.snapshot().lastUpdateMs ?? 0);
    assert.ok(age <= 2 * 64_000, `update age ${age / 1000} s after reply ${i}`);
  }
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.0001) < 100e-6);
});

test('the periodic tick runs on the injected clock', () => {
  const { clock, m } = setup({ local: { stratum: 9, referenceId: asciiRefId('LOCL') } });
  m.start();
  clock.advance(2000);
  assert.equal(m.state, 'LOCKED');
  m.stop();
  assert.equal(clock.pendingTimers, 0);
});

/** A manager LOCKED on one NTP peer 1 ms off (2 s polls, 10 µs noise): its correction and root dispersion then. */
function lockedOnOnePeer() {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.001, 0, 10e-6);
  m.register(peer);
  run(clock, m, 8, [peer]);
  assert.equal(m.state, 'LOCKED');
  return {
    clock,
    m,
    peer,
    before: m.correctionAt(clock.monotonicMs()),
    dispBefore: m.rootDispersionS(),
  };
}

test('a single spike is held back but raises the dispersion; a persistent change is followed', () => {
  const { clock, m, peer, before, dispBefore } = lockedOnOnePeer();
  peer.x0 = 0.004; // one 3 ms spike
  run(clock, m, 1, [peer]);
  assert.equal(m.snapshot().spikes, 1);
  assert.ok(m.rootDispersionS() >= dispBefore + 0.0029, 'the suspect sample is advertised');
  peer.x0 = 0.001;
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - before) < 20e-6);
  run(clock, m, 3, [peer]);
  assert.equal(m.state, 'LOCKED');
  peer.x0 = 0.0015; // a real 0.5 ms change: followed from the second sample on
  run(clock, m, 12, [peer]);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - 0.0015) < 50e-6);
  assert.equal(m.snapshot().spikes, 2);
});

test('a stalled exchange (one path 350 ms late) is held back without ballooning the dispersion: its delay explains it', () => {
  const { clock, m, peer, before, dispBefore } = lockedOnOnePeer();
  // A busy host: no reply for two polls, then one that waited 350 ms on its way back (delay +350 ms, offset
  // −174.75 ms, half the extra delay). Past a poll without an update the delay gate lets it through
  // (docs/clock-discipline.md "Delay gate"), so the discipline judges it.
  run(clock, m, 2, []);
  peer.x0 = 0.001 - 0.17475;
  peer.delayS = 0.3505;
  run(clock, m, 1, [peer]);
  assert.equal(m.snapshot().spikes, 1, 'held back');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - before) < 20e-6, 'not followed');
  // The stall is advertised as delay (root delay / 2 covers the 174.75 ms), not as dispersion.
  assert.ok(m.rootDispersionS() < dispBefore + 0.001, `root dispersion ${m.rootDispersionS()} s`);
  assert.ok(m.serverState.rootDelayS / 2 >= 0.17475, `root delay ${m.serverState.rootDelayS} s`);
  peer.x0 = 0.001;
  peer.delayS = 0.0005;
  run(clock, m, 3, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs()) - before) < 20e-6);
});

test('a stratum-15 reference is not served as stratum 16 with LI 0: the server stays unsynchronised', () => {
  const { clock, m } = setup();
  const peer = new SimSource('NTP:192.0.2.9:123', 'ntp', false, 14, 0.001);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  assert.equal(m.serverState.leap, 0);
  assert.equal(m.serverState.stratum, 15);
  peer.stratum = 15;
  run(clock, m, 1, [peer]);
  assert.equal(m.serverState.leap, 3);
  assert.equal(m.serverState.stratum, 0);
  assert.equal(m.snapshot().stratum, 16);
});

test('the reference timestamp is served time: a host realtime step does not reach it (never after T3)', () => {
  const rawStartMs = Date.UTC(2026, 0, 1);
  const { clock, m } = setup({ rawUnixMs: (monoMs) => rawStartMs + monoMs });
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 2, 0.003);
  m.register(peer);
  run(clock, m, 6, [peer]);
  assert.equal(m.state, 'LOCKED');
  // The host's realtime clock jumps 500 ms ahead; monotonic (and the served clock anchored to it) does not.
  clock.stepWall(500);
  run(clock, m, 3, [peer]);
  const now = clock.monotonicMs();
  const servedNowMs = rawStartMs + now + m.correctionAt(now) * 1000;
  const refMs = ntpToUnixMs(m.serverState.referenceTimestamp, servedNowMs);
  // The last update was the sample taken at `now` (run samples, then ticks), so reftime ≈ served time now.
  assert.ok(refMs <= servedNowMs + 0.001, `reference ${refMs - servedNowMs} ms after served time`);
  assert.ok(servedNowMs - refMs < 1001, `reference ${servedNowMs - refMs} ms before served time`);
});

test('entering HOLDOVER keeps the selection jitter in the bound (two servers 3 ms apart, both lost)', () => {
  const { clock, m } = setup();
  const a = new SimSource('NTP:192.0.2.1:123', 'ntp', true, 1, 0);
  const b = new SimSource('NTP:192.0.2.2:123', 'ntp', false, 1, 0.003);
  m.register(a);
  m.register(b);
  run(clock, m, 8, [a, b]);
  assert.equal(m.state, 'LOCKED');
  assert.ok(m.rootDispersionS() >= 0.003);
  a.usable = false;
  b.usable = false;
  run(clock, m, 30, [a, b]);
  assert.equal(m.state, 'HOLDOVER');
  // A client comparing with the other server may see the 3 ms: still covered.
  assert.ok(m.rootDispersionS() >= 0.003, `holdover dispersion ${m.rootDispersionS()}`);
});

test('a correction within the advertised bound does not flap LOCKED → SYNCING; one beyond it does', () => {
  const { clock, m, states } = setup();
  const peer = new SimSource('NTP:192.0.2.1:123', 'ntp', false, 1, 0.002, 0, 2e-6);
  m.register(peer);
  run(clock, m, 8, [peer]);
  assert.equal(m.state, 'LOCKED');
  const bound = m.serverState.rootDelayS / 2 + m.rootDispersionS();
  // A move of 0.8 × the bound (but > 4 × the 100 µs lock threshold), confirmed by two samples.
  const move = Math.max(0.8 * bound, 0.00045);
  assert.ok(move < bound, `bound ${bound} too small for the test`);
  peer.x0 += move;
  run(clock, m, 6, [peer]);
  assert.deepEqual(states(), ['SYNCING', 'LOCKED'], 'no flap for a sub-bound correction');
  peer.x0 += 0.02;
  run(clock, m, 6, [peer]);
  assert.deepEqual(states().slice(2, 3), ['SYNCING'], 'a 20 ms move leaves LOCKED');
});

test("a followed sample is one event: the new correction and the new reply fields together ('advertised')", () => {
  // The served clock hands the native threads a new piece at every event (io/service.ts): one per sample,
  // not one for the correction and another for the reply fields (docs/performance.md "Fourth pass").
  const { clock, m, events } = setup(STEPOUT_OFF);
  const gps = new SimSource('GPSDO:Dummy', 'gpsdo', false, 0, 0.0002, 1e-6, 1e-6);
  m.register(gps);
  m.tick();
  run(clock, m, 60, [gps]);
  assert.equal(m.state, 'LOCKED');
  for (let s = 0; s < 20; s++) {
    clock.advance(1000);
    const before = m.correction;
    const stateBefore = m.serverState;
    events.length = 0;
    gps.sample(m, clock);
    assert.notEqual(m.correction, before, 'the sample replanned the correction');
    assert.notEqual(m.serverState, stateBefore, 'and replaced the reply fields');
    assert.deepEqual(events, [{ type: 'advertised' }]);
    events.length = 0;
    m.tick();
    assert.deepEqual(events, [], 'the tick right after the sample repeats nothing');
  }
});
