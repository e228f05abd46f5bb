// gpsd's JSON (docs/gpsdo.md): the objects of a recorded session parse; malformed ones are refused. The
// network GPSDO driven by a fake and by the real gpsd: test/io/gpsdo-gpsd.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGpsdLine } from '../../src/protocol/gpsd.ts';
import { capture } from '../helpers/gpsd-capture.ts';

test('gpsd JSON: the recorded objects parse (TPV, SKY with used flags, TOFF, VERSION, DEVICE)', () => {
  const results = capture.lines.map(parseGpsdLine);
  assert.ok(results.every((p) => p.ok));
  const parsed = results.map((p) => (p.ok ? p.value : undefined));
  const sky = parsed.find((p) => p?.class === 'SKY');
  assert.ok(sky?.class === 'SKY');
  assert.equal(sky.satellites?.length, 8);
  assert.equal(sky.satellites?.filter((s) => s.used).length, 7);
  assert.equal(sky.hdop, 0.92);
  const toff = parsed.find((p) => p?.class === 'TOFF');
  assert.ok(toff?.class === 'TOFF' && toff.clockNsec > 100e6);
  assert.equal(parseGpsdLine('{"class":"TPV","mode":"x"}').ok, false);
  assert.equal(parseGpsdLine('not json').ok, false);
  assert.equal(parseGpsdLine('[1,2]').ok, false);
  assert.equal(parseGpsdLine('{"class":"PPS","real_sec":-1}').ok, false);
});
