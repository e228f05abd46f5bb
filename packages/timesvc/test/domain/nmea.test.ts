import assert from 'node:assert/strict';
import { test } from 'node:test';
import { refusal } from '@broadcast-ops/core/testing';
import fc from 'fast-check';
import { GpsReceiverModel } from '../../src/domain/gpsdo.ts';
import {
  MAX_LINE,
  NmeaLineBuffer,
  buildNmea,
  frameNmea,
  fullYear,
  parseNmea,
} from '../../src/protocol/nmea.ts';
import { CASIC, CLASSIC, QUECTEL_ZDA } from '../fixtures/nmea-captures.ts';

test('captured sentences from real receivers all verify and parse', () => {
  for (const line of [...CASIC, ...QUECTEL_ZDA, ...CLASSIC]) {
    const p = parseNmea(line);
    assert.ok(p.ok, `${line}: ${p.ok ? '' : p.error.code}`);
  }
});

test('RMC, GGA, GSA, GSV, ZDA fields from the captures', () => {
  const rmc = parseNmea(CASIC[0] ?? '');
  assert.ok(rmc.ok && rmc.value.kind === 'RMC');
  assert.equal(rmc.value.talker, 'GN');
  assert.equal(rmc.value.valid, true);
  assert.equal(rmc.value.unixMs, Date.UTC(2021, 5, 7, 1, 8, 31));
  assert.ok(Math.abs((rmc.value.latitude ?? 0) - (32 + 1.76436 / 60)) < 1e-9);
  assert.ok(Math.abs((rmc.value.longitude ?? 0) - (118 + 55.00793 / 60)) < 1e-9);
  const gga = parseNmea(CASIC[1] ?? '');
  assert.ok(gga.ok && gga.value.kind === 'GGA');
  assert.equal(gga.value.quality, 1);
  assert.equal(gga.value.satellitesUsed, 6);
  assert.equal(gga.value.hdop, 4.1);
  assert.equal(gga.value.altitudeM, -29.1);
  const gsa = parseNmea(CASIC[2] ?? '');
  assert.ok(gsa.ok && gsa.value.kind === 'GSA');
  assert.deepEqual(gsa.value.prns, [14, 30, 8, 9]);
  assert.equal(gsa.value.systemId, 1);
  const gsv = parseNmea(CASIC[4] ?? '');
  assert.ok(gsv.ok && gsv.value.kind === 'GSV');
  assert.equal(gsv.value.inView, 11);
  assert.equal(gsv.value.signalId, '0');
  assert.deepEqual(gsv.value.satellites[0], { prn: 1, elevation: 31, azimuth: 177, snr: undefined });
  assert.deepEqual(gsv.value.satellites[2], { prn: 7, elevation: 59, azimuth: 300, snr: 32 });
  const bd = parseNmea(CASIC[7] ?? '');
  assert.ok(bd.ok && bd.value.kind === 'GSV');
  assert.deepEqual(bd.value.satellites[0], { prn: 5, elevation: undefined, azimuth: undefined, snr: 36 });
  const zda = parseNmea(QUECTEL_ZDA[5] ?? '');
  assert.ok(zda.ok && zda.value.kind === 'ZDA');
  assert.equal(zda.value.unixMs, Date.UTC(2020, 7, 29, 11, 0, 52));
  const classic = parseNmea(CLASSIC[0] ?? '');
  assert.ok(classic.ok && classic.value.kind === 'RMC');
  assert.equal(classic.value.unixMs, Date.UTC(1994, 2, 23, 12, 35, 19));
  const other = parseNmea(QUECTEL_ZDA[1] ?? '');
  assert.ok(other.ok && other.value.kind === 'OTHER');
});

test('two-digit years: 80-99 are 19xx, 00-79 are 20xx', () => {
  assert.equal(fullYear(94), 1994);
  assert.equal(fullYear(80), 1980);
  assert.equal(fullYear(0), 2000);
  assert.equal(fullYear(79), 2079);
});

test('malformed sentences are rejected with their error kind, never thrown', () => {
  const good = CLASSIC[0] ?? '';
  assert.equal(refusal(frameNmea(good.replace('*6A', '*6B'))), 'bad_checksum');
  assert.equal(refusal(frameNmea(good.slice(0, 30))), 'no_checksum');
  assert.equal(refusal(frameNmea(good.slice(1))), 'no_start');
  assert.equal(refusal(frameNmea('$GP\u0001RMC*00')), 'bad_chars');
  assert.equal(refusal(frameNmea('$' + 'A'.repeat(MAX_LINE) + '*00')), 'overlong');
  // Valid checksum, nonsense fields.
  assert.equal(refusal(parseNmea(buildNmea('GPRMC,256199,A,,,,,,,230394,,'))), 'bad_field');
  assert.equal(refusal(parseNmea(buildNmea('GPZDA,201530.00,31,02,2002,00,00'))), 'bad_field');
  assert.equal(refusal(parseNmea(buildNmea('GPGSV,3,4,11'))), 'bad_field');
  assert.equal(refusal(parseNmea(buildNmea('GPGGA,123519,4807.038,N'))), 'bad_field');
});

test('line buffer: CR/LF split across chunks, garbage and overlong lines bounded and counted', () => {
  const b = new NmeaLineBuffer();
  const all = CASIC.join('\r\n') + '\r\n';
  const got: string[] = [];
  for (let i = 0; i < all.length; i += 7) got.push(...b.push(Buffer.from(all.slice(i, i + 7), 'latin1')));
  assert.deepEqual(got, CASIC);
  const lines = b.push('x'.repeat(5000) + '\n' + (CLASSIC[0] ?? '') + '\n');
  assert.deepEqual(lines, [CLASSIC[0]]);
  assert.equal(b.overlong, 1);
  // An endless line without a newline never grows the buffer beyond the bound.
  for (let i = 0; i < 100; i++) assert.deepEqual(b.push('y'.repeat(1000)), []);
  assert.equal(b.overlong, 2);
});

test('fuzz: random bytes and mutated captures never throw, errors are counted', () => {
  const model = new GpsReceiverModel({ type: 'serialpps', ppsTimeoutMs: 2000 });
  model.setConnected(true);
  const feed = (buf: Buffer): void => {
    const lb = new NmeaLineBuffer();
    for (const line of lb.push(buf)) {
      const p = parseNmea(line);
      if (p.ok) model.sentence(p.value, 0);
      else model.error(p.error.code);
    }
  };
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
      feed(Buffer.from(bytes));
    }),
    { numRuns: 3000, interruptAfterTimeLimit: 20_000 },
  );
  const captures = [...CASIC, ...QUECTEL_ZDA, ...CLASSIC];
  fc.assert(
    fc.property(
      fc.constantFrom(...captures),
      fc.nat(),
      fc.integer({ min: 0x20, max: 0x7e }),
      (line, pos, ch) => {
        const i = pos % line.length;
        const mutated = line.slice(0, i) + String.fromCharCode(ch) + line.slice(i + 1);
        const p = parseNmea(mutated);
        if (mutated !== line && !p.ok)
          assert.ok(typeof p.error.code === 'string' && p.error.message.length > 0);
        // A body change with the checksum kept is caught by the checksum (one-byte changes always are).
        if (i > 0 && i < line.lastIndexOf('*') && mutated !== line) assert.equal(p.ok, false);
        feed(Buffer.from(mutated + '\r\n', 'latin1'));
      },
    ),
    { numRuns: 3000, interruptAfterTimeLimit: 20_000 },
  );
  const s = model.status(0);
  assert.ok(Object.values(s.counters.errors).reduce((a, b) => a + b, 0) > 0);
});
