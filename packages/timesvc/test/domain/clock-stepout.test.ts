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
} from '../../src/domain/clock-manager.ts';
import { asciiRefId } from '../../src/protocol/ntp-packet.ts';

/**
 * "No single reference decides whole seconds" (docs/clock-discipline.md): a reference whose level moves
 * beyond the step threshold is held back until its stepout or an independent confirmation, and a GPSDO
 * takes part in the intersection with the NTP peers. True time here is the raw clock + 0 (every source
 * measures `level` + a little deterministic noise).
 */
class Src implements ReferenceSource {
  level = 0;
  usable = true;
  #n = 0;
  constructor(
    readonly id: string,
    readonly kind: SourceKind,
    readonly prefer = false,
  ) {}
  status(): ReferenceStatus {
    const gps = this.kind === 'gpsdo';
    return {
      usable: this.usable,
      stratum: gps ? 0 : 2,
      referenceId: gps ? asciiRefId('GPS') : ipv4RefId('192.0.2.1'),
      leap: 0,
      rootDelayS: gps ? 0 : 0.001,
      rootDispersionS: gps ? 0 : 0.001,
      pollLog2: 0,
    };
  }
  sample(m: ClockManager, clock: ManualClock): void {
    this.#n++;
    const gps = this.kind === 'gpsdo';
    const noise = (gps ? 1e-6 : 20e-6) * Math.sin(this.#n * 1.7);
    m.addSample(this.id, {
      offsetS: this.level + noise,
      delayS: gps ? 0 : 0.0005,
      dispersionS: gps ? 1e-6 : 0.0001,
      jitterS: gps ? 1e-6 : 20e-6,
      atMs: clock.monotonicMs(),
    });
  }
}

interface Reply {
  li: number;
  /** Served − true time, seconds. */
  errorS: number;
  boundS: number;
}

function setup(stepoutMs?: number) {
  const clock = new ManualClock();
  const m = new ClockManager({ clock, precision: -23, ...(stepoutMs === undefined ? {} : { stepoutMs }) });
  const events: ClockManagerEvent[] = [];
  m.on((e) => events.push(e));
  const replies: Reply[] = [];
  /** Advance `seconds`, sampling the usable sources every second; records what a client would get. */
  const run = (seconds: number, sources: Src[], truth = 0): void => {
    for (let i = 0; i < seconds; i++) {
      clock.advance(1000);
      for (const s of sources) if (s.usable) s.sample(m, clock);
      m.tick();
      const st = m.serverState;
      replies.push({
        li: st.leap,
        errorS: m.correctionAt(clock.monotonicMs()) - truth,
        boundS: st.rootDelayS / 2 + m.rootDispersionS(),
      });
    }
  };
  return { clock, m, events, replies, run };
}

/** Replies served as synchronised whose error exceeds their bound or `limitS`. */
function bad(replies: readonly Reply[], limitS = Number.POSITIVE_INFINITY): Reply[] {
  return replies.filter((r) => r.li !== 3 && (Math.abs(r.errorS) > r.boundS || Math.abs(r.errorS) > limitS));
}

test('a GPSDO alone 1 s off for 20 s: held back, served time holds its course, the bound covers it, no step', () => {
  const { m, events, replies, run } = setup();
  const gps = new Src('GPSDO:SerialPPS', 'gpsdo');
  m.register(gps);
  run(8, [gps]);
  assert.equal(m.state, 'LOCKED');
  const steps = m.snapshot().steps;
  replies.length = 0;
  gps.level = -1;
  run(2, [gps]);
  const during = m.snapshot();
  assert.equal(during.stepSuspects, 1);
  assert.equal(during.disagreements.length, 1);
  assert.equal(during.disagreements[0]?.source, gps.id);
  assert.ok(Math.abs((during.disagreements[0]?.offsetS ?? 0) + 1) < 1e-3);
  assert.equal(during.sources.find((s) => s.id === gps.id)?.verdict, 'held');
  assert.ok(m.rootDispersionS() >= 1, `the bound includes the disagreement: ${m.rootDispersionS()}`);
  run(18, [gps]);
  gps.level = 0;
  run(10, [gps]);
  assert.equal(m.snapshot().steps, steps, 'no served step');
  assert.deepEqual(bad(replies, 1e-3), [], 'every synchronised reply within 1 ms and within its bound');
  assert.ok(replies.every((r) => r.li === 0));
  assert.equal(m.snapshot().selected, gps.id);
  assert.equal(m.state, 'LOCKED');
  assert.deepEqual(m.snapshot().disagreements, []);
  const suspects = events
    .filter((e) => e.type === 'suspect')
    .map((e) => (e.type === 'suspect' ? e.phase : ''));
  assert.deepEqual(suspects, ['held', 'returned']);
});

test('a GPSDO 1 s off beside one true NTP peer: the GPSDO is rejected, the peer keeps the time, then the GPSDO returns', () => {
  const { m, replies, run } = setup();
  const gps = new Src('GPSDO:SerialPPS', 'gpsdo');
  const peer = new Src('NTP:192.0.2.1:123', 'ntp');
  m.register(gps);
  m.register(peer);
  run(8, [gps, peer]);
  assert.equal(m.snapshot().selected, gps.id, 'a GPSDO agreeing with the peer wins');
  const steps = m.snapshot().steps;
  replies.length = 0;
  gps.level = -1;
  run(20, [gps, peer]);
  const snap = m.snapshot();
  assert.equal(snap.selected, peer.id);
  assert.equal(snap.sources.find((s) => s.id === gps.id)?.verdict, 'falseticker');
  assert.equal(snap.disagreements[0]?.source, gps.id);
  gps.level = 0;
  run(10, [gps, peer]);
  assert.equal(m.snapshot().selected, gps.id, 'back at the served level, selected again');
  assert.equal(m.snapshot().steps, steps);
  assert.deepEqual(bad(replies, 1e-3), []);
  assert.ok(replies.every((r) => r.li === 0));
});

test('a genuine level change persisting beyond the stepout is followed; the bound covers the wait', () => {
  const { m, events, replies, run } = setup(30_000);
  const gps = new Src('GPSDO:SerialPPS', 'gpsdo');
  m.register(gps);
  run(8, [gps]);
  replies.length = 0;
  // The true time moves with the receiver: the served clock is 0.5 s wrong until the level is followed.
  gps.level = -0.5;
  run(29, [gps], -0.5);
  assert.equal(m.snapshot().steps, 1, 'not followed before the stepout');
  assert.deepEqual(bad(replies), [], 'the bound covers the wait');
  assert.ok(replies.every((r) => r.li === 0));
  run(10, [gps], -0.5);
  const followed = events.find((e) => e.type === 'suspect' && e.phase === 'followed');
  assert.ok(followed && followed.type === 'suspect' && followed.by === 'stepout');
  assert.ok(Math.abs(replies[replies.length - 1]?.errorS ?? 1) < 1e-3, 'on the new level');
  assert.deepEqual(bad(replies), [], 'backwards: LI 3 before the step, never a reply outside its bound');
  assert.ok(replies.some((r) => r.li === 3));
  assert.equal(m.state, 'LOCKED');
});

test('a level change confirmed by an independent source is followed before the stepout', () => {
  const { m, replies, run } = setup();
  const a = new Src('NTP:192.0.2.1:123', 'ntp');
  const b = new Src('NTP:192.0.2.2:123', 'ntp');
  m.register(a);
  m.register(b);
  run(8, [a, b]);
  replies.length = 0;
  a.level = 0.3;
  run(3, [a, b]);
  assert.ok(Math.abs(replies[replies.length - 1]?.errorS ?? 1) < 1e-3, 'one source alone is held back');
  assert.equal(m.snapshot().disagreements[0]?.source, a.id);
  b.level = 0.3;
  run(10, [a, b], 0.3);
  assert.ok(Math.abs(replies[replies.length - 1]?.errorS ?? 1) < 1e-3, 'followed at once when confirmed');
  assert.deepEqual(m.snapshot().disagreements, []);
});

test('a GPSDO outside the NTP truechimers’ intersection is a falseticker even within the step threshold', () => {
  const { clock, m, run } = setup();
  const gps = new Src('GPSDO:SerialPPS', 'gpsdo');
  const peer = new Src('NTP:192.0.2.1:123', 'ntp');
  gps.level = 0.05;
  m.register(gps);
  m.register(peer);
  run(8, [gps, peer]);
  const snap = m.snapshot();
  assert.equal(snap.sources.find((s) => s.id === gps.id)?.verdict, 'falseticker');
  assert.equal(snap.selected, peer.id);
  assert.ok(Math.abs(m.correctionAt(clock.monotonicMs())) < 1e-3);
});
