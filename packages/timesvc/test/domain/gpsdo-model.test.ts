import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decoded } from '@broadcast-ops/core';
import { GpsReceiverModel, gpsdoApiBody, type GpsdoEvent, type GpsSample } from '../../src/domain/gpsdo.ts';
import { buildNmea, parseNmea } from '../../src/protocol/nmea.ts';
import { parsePpsAssert, ppsSysfsPath, formatPpsAssert } from '../../src/protocol/pps.ts';

/** A simulated receiver second: PPS at edge (mono ms), its RMC/GGA/GSA `lagMs` later. */
function harness(ppsTimeoutMs = 2000) {
  const samples: GpsSample[] = [];
  const events: GpsdoEvent[] = [];
  const m = new GpsReceiverModel({
    type: 'serialpps',
    ppsTimeoutMs,
    onSample: (s) => samples.push(s),
    onEvent: (e) => events.push(e),
  });
  m.setConnected(true);
  const hhmmss = (unixS: number): string =>
    new Date(unixS * 1000).toISOString().slice(11, 19).replace(/:/g, '');
  const ddmmyy = (unixS: number): string => {
    const d = new Date(unixS * 1000).toISOString();
    return d.slice(8, 10) + d.slice(5, 7) + d.slice(2, 4);
  };
  const send = (body: string, mono: number): void => {
    const p = parseNmea(buildNmea(body));
    assert.ok(p.ok, body);
    m.sentence(p.value, mono);
  };
  const fix = (unixS: number, mono: number, status = 'A', quality = 1): void => {
    const t = hhmmss(unixS);
    send(`GPRMC,${t}.00,${status},5130.0000,N,00005.0000,W,0.0,0.0,${ddmmyy(unixS)},,,A`, mono);
    send(`GPGGA,${t}.00,5130.0000,N,00005.0000,W,${quality},07,0.9,45.0,M,47.0,M,,`, mono);
    send('GPGSA,A,3,02,05,07,09,13,15,18,,,,,,1.6,0.9,1.3', mono);
  };
  const pps = (sec: number, nsec: number, seq: number, edgeMono: number): void => {
    m.pps({ sec, nsec, sequence: seq, edgeMonoMs: edgeMono }, edgeMono + 100);
  };
  return { m, samples, events, fix, pps, send };
}

const T0 = 1_790_000_000;

test('each PPS edge pairs with the sentence naming its second: offset = label - assert', () => {
  const h = harness();
  h.fix(T0 - 1, -900); // the receiver's previous second: fix known before the first edge
  for (let i = 0; i < 5; i++) {
    // The host clock runs 250 µs fast: the kernel stamps the edge of second T0+i at T0+i+0.00025.
    h.pps(T0 + i, 250_000, i + 1, 1000 * i);
    h.fix(T0 + i, 1000 * i + 150);
  }
  assert.equal(h.m.locked, true);
  assert.equal(h.samples.length, 5);
  for (const s of h.samples) assert.ok(Math.abs(s.offsetS - -250e-6) < 1e-9, String(s.offsetS));
  assert.equal(h.samples[2]?.atMonoMs, 2000);
  const st = h.m.status(4200);
  assert.equal(st.ppsCount, 5);
  assert.equal(st.offsetNs, -250_000);
  assert.equal(st.lastPpsSequence, 5);
  assert.equal(st.satellitesUsed, 7);
  assert.deepEqual(
    h.events.map((e) => e.type).filter((t) => t === 'locked'),
    ['locked'],
  );
});

test('a sentence later than 900 ms after its edge is not paired; a PPS without a fix gives no sample', () => {
  const h = harness();
  h.pps(T0, 0, 1, 0);
  h.fix(T0, 950); // late
  assert.equal(h.samples.length, 0);
  assert.equal(h.m.status(1000).counters.errors['pps_late_sentence'], 1);
  h.pps(T0 + 1, 0, 2, 1000);
  h.fix(T0 + 1, 1100, 'V', 0); // receiver has no fix
  assert.equal(h.samples.length, 0);
  assert.equal(h.m.status(1200).counters.errors['pps_without_fix'], 1);
  assert.equal(h.m.locked, false);
});

test('a label that disagrees with the edge spacing is rejected (a late sentence of the previous second)', () => {
  const h = harness();
  h.fix(T0 - 1, -900);
  h.pps(T0, 0, 1, 0);
  h.fix(T0, 100);
  h.pps(T0 + 1, 0, 2, 1000);
  h.fix(T0, 1050); // the same second again: ignored as a duplicate label
  h.pps(T0 + 2, 0, 3, 2000);
  h.fix(T0 + 5, 2100); // wrong label
  assert.equal(h.samples.length, 1);
  assert.equal(h.m.status(2200).counters.errors['pps_label_mismatch'], 1);
});

test('labels that jump by a whole second: the first is held back, a persisting jump is logged and counted', () => {
  const h = harness();
  h.fix(T0 - 1, -900);
  const second = (i: number, lateS: number): void => {
    h.pps(T0 + i, 0, i + 1, 1000 * i);
    h.fix(T0 + i - lateS, 1000 * i + 120);
  };
  for (let i = 0; i < 4; i++) second(i, 0);
  assert.equal(h.samples.length, 4);
  // The receiver labels its seconds 1 s late for 20 s.
  for (let i = 4; i < 24; i++) second(i, 1);
  const st = h.m.status(24_000).counters.errors;
  assert.equal(st['pps_label_mismatch'], 1, 'the first late label is held back');
  assert.equal(st['pps_label_jump'], 1, 'the second confirms the jump');
  assert.deepEqual(
    h.events.filter((e) => e.type === 'label_jump'),
    [{ type: 'label_jump', deltaS: -1 }],
  );
  // The first late label repeats the previous second (ignored as a duplicate), the next is held back; from
  // then on the receiver's labelling is passed on (the clock manager holds the level back).
  assert.equal(h.samples.length, 4 + 18);
  assert.ok(h.samples.slice(4).every((s) => Math.abs(s.offsetS + 1) < 1e-9));
  for (let i = 24; i < 28; i++) second(i, 0);
  assert.deepEqual(
    h.events.filter((e) => e.type === 'label_jump').map((e) => (e.type === 'label_jump' ? e.deltaS : 0)),
    [-1, 1],
  );
  assert.equal(h.m.status(28_000).counters.errors['pps_label_mismatch'], 2);
  assert.equal(h.samples.length, 4 + 18 + 3);
  assert.ok(Math.abs(h.samples[h.samples.length - 1]!.offsetS) < 1e-9);
});

test('a jump is seen within 2 s whether the poll reads the edge before or after its sentence', () => {
  // The assert file is polled (every 250 ms): a sentence 120 ms after its edge often arrives before the
  // poll has read that edge. After the first late label (a duplicate second) leaves an edge unlabelled,
  // each sentence must still wait for its own edge, not be spent against the unlabelled one (docs/gpsdo.md
  // "PPS and NMEA").
  for (const order of ['edge read first', 'sentence first'] as const) {
    const h = harness();
    h.fix(T0 - 1, -900);
    const second = (i: number, lateS: number): void => {
      const read = (): void =>
        h.m.pps({ sec: T0 + i, nsec: 0, sequence: i + 1, edgeMonoMs: 1000 * i }, 1000 * i + 240);
      if (order === 'edge read first') read();
      h.fix(T0 + i - lateS, 1000 * i + 120);
      if (order === 'sentence first') read();
    };
    for (let i = 0; i < 4; i++) second(i, 0);
    assert.equal(h.samples.length, 4, order);
    for (let i = 4; i < 24; i++) second(i, 1);
    for (let i = 24; i < 28; i++) second(i, 0);
    const errors = h.m.status(28_000).counters.errors;
    assert.deepEqual(
      h.events.filter((e) => e.type === 'label_jump').map((e) => (e.type === 'label_jump' ? e.deltaS : 0)),
      [-1, 1],
      order,
    );
    assert.equal(errors['pps_label_mismatch'], 2, order);
    // The edge of the duplicate second is the only one without a label.
    assert.equal(errors['pps_late_sentence'] ?? 0, order === 'sentence first' ? 1 : 0, order);
    const late = h.samples.filter((s) => Math.abs(s.offsetS + 1) < 1e-9);
    assert.equal(late.length, 18, order);
    assert.equal(late[0]?.atMonoMs, 6000, `${order}: the new level is sampled 2 s after the receiver moved`);
    assert.equal(h.samples.length, 4 + 18 + 3, order);
  }
});

test('a sentence later than 900 ms is spent by the next edge, whichever is read first', () => {
  const h = harness();
  h.fix(T0 - 1, -900);
  h.pps(T0, 0, 1, 0);
  h.fix(T0, 100);
  h.pps(T0 + 1, 0, 2, 1000);
  h.fix(T0 + 1, 1950); // 950 ms after its edge; the next edge (2000) is read after it
  h.m.pps({ sec: T0 + 2, nsec: 0, sequence: 3, edgeMonoMs: 2000 }, 2200);
  assert.equal(h.samples.length, 1, 'the late sentence labels neither its edge nor the next');
  assert.equal(h.m.status(2300).counters.errors['pps_late_sentence'], 1);
  h.fix(T0 + 2, 2250); // the next edge's own sentence, read after the edge
  assert.equal(h.samples.length, 2);
  assert.equal(h.samples[1]?.atMonoMs, 2000);
});

test('a fix without PPS loses the lock after 2 s (pps_lost), and a fix loss is reported', () => {
  const h = harness();
  for (let i = 0; i < 3; i++) {
    h.pps(T0 + i, 0, i + 1, 1000 * i);
    h.fix(T0 + i, 1000 * i + 100);
  }
  assert.equal(h.m.locked, true);
  // NMEA continues, PPS stops.
  h.fix(T0 + 3, 3100);
  h.fix(T0 + 4, 4100);
  h.m.tick(4500);
  assert.equal(h.m.locked, false);
  assert.ok(h.events.some((e) => e.type === 'pps_lost'));
  assert.ok(h.events.some((e) => e.type === 'lock_lost' && e.reason === 'no PPS'));
  // PPS back, then the fix goes.
  h.pps(T0 + 5, 0, 6, 5000);
  h.fix(T0 + 5, 5100);
  assert.equal(h.m.locked, true);
  assert.equal(gpsdoApiBody(h.m.status(5200), 5200)['fix_mode'], 3, 'a valid 3D fix');
  h.m.tick(9000);
  assert.equal(h.m.locked, false);
  assert.ok(h.events.some((e) => e.type === 'fix_lost'));
  // The last GSA said 3D; without a valid fix the API says "fix not available" (NMEA GSA mode 1), so the
  // dashboard never shows "fix mode 3" beside "fix false".
  const body = gpsdoApiBody(h.m.status(9000), 9000);
  assert.equal(h.m.status(9000).fix.valid, false);
  assert.equal(body['fix_mode'], 1);
});

test('GSV cycles: satellites that left view are pruned on the next complete cycle; used from GSA', () => {
  const h = harness();
  h.send('GPGSV,2,1,05,02,40,045,38,05,30,300,32,07,20,135,30,09,15,270,', 0);
  h.send('GPGSV,2,2,05,13,10,090,28', 0);
  h.send('GPGSA,A,3,02,05,07,,,,,,,,,,1.6,0.9,1.3', 0);
  let sats = h.m.satellites();
  assert.deepEqual(
    sats.map((s) => [s.prn, s.used, s.snr ?? null]),
    [
      [2, true, 38],
      [5, true, 32],
      [7, true, 30],
      [9, false, null],
      [13, false, 28],
    ],
  );
  h.send('GPGSV,1,1,02,02,41,046,39,13,11,091,29', 1000);
  sats = h.m.satellites();
  assert.deepEqual(
    sats.map((s) => s.prn),
    [2, 13],
  );
  // An incomplete cycle does not replace the view.
  h.send('GPGSV,2,2,05,13,10,090,28', 2000);
  assert.equal(h.m.satellites().length, 2);
  // After 10 s without any GSV the view is dropped.
  h.m.tick(12_000);
  assert.equal(h.m.satellites().length, 0);
});

test('PPS sysfs assert format (Linux drivers/pps/sysfs.c "%lld.%09d#%d")', () => {
  assert.deepEqual(
    parsePpsAssert('1790000000.000250000#42\n'),
    decoded({
      sec: 1790000000,
      nsec: 250000,
      sequence: 42,
    }),
  );
  assert.deepEqual(parsePpsAssert('0.000000000#0\n'), decoded({ sec: 0, nsec: 0, sequence: 0 }));
  assert.equal(parsePpsAssert('1790000000.25#42\n').ok, false);
  assert.equal(parsePpsAssert('garbage').ok, false);
  assert.equal(parsePpsAssert('1'.repeat(100)).ok, false);
  assert.equal(formatPpsAssert({ sec: 5, nsec: 7, sequence: 1 }), '5.000000007#1\n');
  assert.equal(ppsSysfsPath('/dev/pps0'), '/sys/class/pps/pps0/assert');
  assert.equal(ppsSysfsPath('/tmp/x/assert'), '/tmp/x/assert');
});
