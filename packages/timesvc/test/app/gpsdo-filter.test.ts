import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { ClockManager, type ClockManagerEvent } from '../../src/domain/clock-manager.ts';
import { configSchema } from '../../src/config.ts';
import { GpsdoSource } from '../../src/io/gpsdo.ts';
import { asciiRefId } from '../../src/protocol/ntp-packet.ts';

/**
 * The GPSDO's samples through the median filter into the clock manager, on a manual clock (docs/gpsdo.md
 * "Samples: a median filter per poll", docs/clock-discipline.md "Per second and per sample"): a receiver
 * sample a second, the filter's default 16 s poll, the manager's tick every second as the service runs it.
 * True time is the raw clock: the receiver measures `level` plus a little deterministic noise.
 */
interface Reply {
  atS: number;
  li: number;
  errorS: number;
  boundS: number;
}

function setup(options: { stepoutMs?: number; filterPoll?: number } = {}) {
  const clock = new ManualClock();
  const m = new ClockManager({
    clock,
    precision: -23,
    ...(options.stepoutMs === undefined ? {} : { stepoutMs: options.stepoutMs }),
  });
  const config = configSchema.parse({
    gpsdo: {
      enabled: true,
      type: 'dummy',
      ...(options.filterPoll ? { filter_poll: options.filterPoll } : {}),
    },
  }).gpsdo;
  const handed: { atS: number; offsetS: number }[] = [];
  const gps = new GpsdoSource({
    config,
    referenceId: asciiRefId('GPS'),
    logger: silentLogger(),
    monoMs: () => clock.monotonicMs(),
    wallMs: () => clock.now(),
    onSample: (id, s) => {
      handed.push({ atS: clock.monotonicMs() / 1000, offsetS: s.offsetS });
      m.addSample(id, {
        offsetS: s.offsetS,
        delayS: 0,
        dispersionS: s.dispersionS,
        jitterS: s.jitterS,
        atMs: s.atMonoMs,
      });
    },
  });
  m.register(gps);
  gps.model.setConnected(true);
  const events: { atS: number; e: ClockManagerEvent }[] = [];
  m.on((e) => events.push({ atS: clock.monotonicMs() / 1000, e }));
  const replies: Reply[] = [];
  const sats = [2, 5, 7, 9, 13].map((prn) => ({ prn, elevation: 40, azimuth: 90, snr: 40, used: true }));
  const rx = { level: 0, locked: true, outlierAt: -1 };
  let n = 0;
  /** `seconds` of the service's tick: the receiver's second (fix, satellites, PPS sample), then the manager's. */
  const run = (seconds: number): void => {
    for (let i = 0; i < seconds; i++) {
      clock.advance(1000);
      const now = clock.monotonicMs();
      n++;
      if (rx.locked) {
        gps.model.satellitesSeen(sats, now);
        gps.model.fix({ mode: 3, timeUnixMs: Math.floor(clock.now() / 1000) * 1000 }, now);
        const offsetS = n === rx.outlierAt ? rx.level + 0.5 : rx.level + 1e-6 * Math.sin(n * 1.7);
        gps.model.timeSample(offsetS, now, 1e-6, true);
      } else {
        gps.model.tick(now);
      }
      m.tick();
      const st = m.serverState;
      replies.push({
        atS: now / 1000,
        li: st.leap,
        errorS: m.correctionAt(now),
        boundS: st.rootDelayS / 2 + m.rootDispersionS(),
      });
    }
  };
  /** Run until `k` receiver samples of the current poll have been stored (0: right after a hand-over). */
  const toPoll = (k: number): void => {
    const last = handed[handed.length - 1]?.atS ?? 0;
    let wait = last + k - clock.monotonicMs() / 1000;
    if (wait < 0) wait += 16;
    run(Math.round(wait));
  };
  return { clock, m, gps, rx, run, toPoll, events, replies, handed, sampleNo: () => n };
}

function bad(replies: readonly Reply[], limitS = Number.POSITIVE_INFINITY): Reply[] {
  return replies.filter((r) => r.li !== 3 && (Math.abs(r.errorS) > r.boundS || Math.abs(r.errorS) > limitS));
}

function suspects(events: readonly { atS: number; e: ClockManagerEvent }[]) {
  return events.flatMap(({ atS, e }) =>
    e.type === 'suspect' ? [{ atS, phase: e.phase, offsetS: e.offsetS }] : [],
  );
}

test('one sample a poll reaches the manager once the burst after the lock is over; LOCKED within seconds', () => {
  const { m, run, handed } = setup();
  run(6);
  assert.equal(m.state, 'LOCKED');
  run(100);
  // The burst's four, then one per 16 s poll.
  const gaps = handed.slice(4).map((h, i) => h.atS - (handed[i + 3]?.atS ?? 0));
  assert.ok(gaps.length >= 5);
  assert.ok(
    gaps.every((g) => g === 16),
    `hand-overs ${gaps.join(', ')} s apart`,
  );
});

test('an outlier inside a poll is rejected by the median: no suspect level, no held verdict', () => {
  const { m, rx, run, events, sampleNo } = setup();
  run(40);
  assert.equal(m.state, 'LOCKED');
  // A single receiver sample 0.5 s off (beyond the step threshold), in the middle of a poll. Handed on
  // alone (every sample, as before the filter) it made the GPSDO a step suspect, held back from selection.
  rx.outlierAt = sampleNo() + 7;
  run(40);
  assert.deepEqual(suspects(events), []);
  assert.equal(m.snapshot().stepSuspects, 0);
  assert.equal(m.state, 'LOCKED');
});

test('quiet seconds: between the polls the reply fields are kept and the manager tells nothing', () => {
  const { m, run, toPoll, events, handed } = setup();
  run(60);
  assert.equal(m.state, 'LOCKED');
  toPoll(1);
  const before = events.length;
  const handedBefore = handed.length;
  const fields = m.serverState;
  // The 14 seconds up to the poll's last: nothing changes but time.
  run(14);
  assert.equal(handed.length, handedBefore);
  assert.equal(
    events.length,
    before,
    'no clock-manager event on a quiet second (the old code: advertised each second)',
  );
  assert.equal(m.serverState, fields, 'the reply fields are the same object: not replaced');
  // What a reply carries still grows with the time since the fields' update.
  assert.ok(m.rootDispersionS() > fields.rootDispersionS);
  run(1);
  assert.equal(handed.length, handedBefore + 1, 'the poll closes');
  assert.ok(events.length > before, 'and the manager tells its new correction');
});

test('lock loss does not wait for the poll: HOLDOVER at the tick that sees it; back LOCKED by the next burst', () => {
  const { m, rx, run, events } = setup();
  run(50);
  assert.equal(m.state, 'LOCKED');
  rx.locked = false;
  const lostAt = events.length;
  run(3);
  const states = events
    .slice(lostAt)
    .flatMap(({ atS, e }) => (e.type === 'state' ? [{ atS, to: e.to }] : []));
  // The receiver's PPS times out 2 s after the last edge (docs/gpsdo.md "Lock"); the manager follows at once.
  assert.equal(states[0]?.to, 'HOLDOVER', JSON.stringify(states));
  assert.equal(m.state, 'HOLDOVER');
  run(20);
  rx.locked = true;
  run(6);
  assert.equal(m.state, 'LOCKED', 'the burst after the new lock selects it again within seconds');
});

for (const k of [0, 5, 8, 12]) {
  test(`a GPSDO 1 s off for 20 s through the filter, ${k} samples into a poll: held back, no step, every reply within 1 ms and its bound`, () => {
    const { m, rx, run, toPoll, events, replies } = setup();
    run(60);
    assert.equal(m.state, 'LOCKED');
    const steps = m.snapshot().steps;
    toPoll(k);
    replies.length = 0;
    rx.level = -1;
    run(20);
    const firstNewS = replies[0]?.atS ?? 0;
    rx.level = 0;
    run(80);
    assert.equal(m.snapshot().steps, steps, 'no served step');
    assert.deepEqual(bad(replies, 1e-3), [], 'every synchronised reply within 1 ms and within its bound');
    assert.ok(replies.every((r) => r.li === 0));
    assert.equal(m.state, 'LOCKED');
    const s = suspects(events);
    assert.ok(!s.some((x) => x.phase === 'followed'), 'never followed alone');
    // Either the filter dropped every poll that straddled the jump (no level reached the manager), or the
    // level was held back and returned.
    assert.ok(
      s.length === 0 || (s[0]?.phase === 'held' && s.at(-1)?.phase === 'returned'),
      JSON.stringify(s),
    );
    const reachedS = s.length ? (s[0]?.atS ?? 0) - firstNewS : Number.NaN;
    assert.ok(!(reachedS < 0 || reachedS > 32), `reached the manager ${reachedS} s after the jump`);
    console.log(
      `# jump of 1 s for 20 s, ${k} samples into a poll: ` +
        (s.length
          ? s
              .map((x) => `${x.phase} ${(x.atS - firstNewS).toFixed(0)} s ${x.offsetS.toFixed(3)} s`)
              .join(', ')
          : 'no level reached the manager (both polls straddled the jump)'),
    );
  });
}

for (const k of [0, 8]) {
  test(`a lasting level change through the filter, ${k} samples into a poll, is followed after its stepout (30 s), not before`, () => {
    const { m, rx, run, toPoll, events, replies } = setup({ stepoutMs: 30_000 });
    run(60);
    assert.equal(m.state, 'LOCKED');
    toPoll(k);
    replies.length = 0;
    rx.level = -0.5;
    run(120);
    const firstNewS = replies[0]?.atS ?? 0;
    const s = suspects(events);
    const held = s.find((x) => x.phase === 'held');
    const followed = s.find((x) => x.phase === 'followed');
    assert.ok(held && followed, JSON.stringify(s));
    const heldAfter = held.atS - firstNewS;
    const followedAfter = followed.atS - firstNewS;
    assert.ok(heldAfter <= 32, `held ${heldAfter} s after the jump`);
    // The stepout counts from the level's first filtered sample, whose time is its poll's mean sample time:
    // never before 30 s after the receiver moved, and on the tick it runs out (not at a poll).
    assert.ok(followedAfter >= 30, `followed ${followedAfter} s after the jump: not before the stepout`);
    assert.ok(followedAfter <= 30 + 32, `followed ${followedAfter} s after the jump`);
    console.log(
      `# level change of −0.5 s, ${k} samples into a poll: ` +
        s.map((x) => `${x.phase} ${(x.atS - firstNewS).toFixed(0)} s ${x.offsetS.toFixed(3)} s`).join(', '),
    );
  });
}

for (const ppm of [0, 5, 20]) {
  test(`a raw clock ${ppm} ppm off the receiver, through the filter: served within 1 µs, every reply within its bound`, () => {
    const { m, rx, run, replies } = setup();
    // The receiver measures the raw clock's frequency error: its level moves by `ppm` a second.
    const step = (seconds: number): void => {
      for (let i = 0; i < seconds; i++) {
        rx.level = ppm * 1e-6 * (replies.length + 1);
        run(1);
      }
    };
    step(600);
    const from = replies.length;
    step(600);
    const window = replies
      .slice(from)
      .map((r, i) => ({ ...r, errorS: r.errorS - ppm * 1e-6 * (from + i + 1) }));
    assert.equal(m.state, 'LOCKED');
    assert.deepEqual(bad(window, 1e-6), [], 'within 1 µs and within the advertised bound');
    const bounds = window.map((r) => r.boundS).sort((a, b) => a - b);
    const errs = window.map((r) => Math.abs(r.errorS)).sort((a, b) => a - b);
    console.log(
      `# ${ppm} ppm, 600-1200 s: error p50 ${(errs[errs.length >> 1]! * 1e6).toFixed(2)} µs, ` +
        `advertised bound p50 ${(bounds[bounds.length >> 1]! * 1e6).toFixed(1)} µs, max ${(bounds.at(-1)! * 1e6).toFixed(1)} µs`,
    );
  });
}
