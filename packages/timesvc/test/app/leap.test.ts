import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { createLogger } from '@broadcast-ops/core';
import {
  leapTerm,
  nextListedLeap,
  nextMonthStartUnixMs,
  parseLeapSecondsList,
  voteLeap,
} from '../../src/domain/leap.ts';
import { LeapListFile } from '../../src/io/leap-list.ts';

/** Debian's tzdata copy of the IERS list (provenance: /usr/share/zoneinfo/leap-seconds.list, tzdata). */
const DEBIAN_LIST = '/usr/share/zoneinfo/leap-seconds.list';

test("Debian's leap-seconds.list parses: 28 entries ending at 2017-01-01 with TAI−UTC 37, and an expiry", () => {
  const list = parseLeapSecondsList(readFileSync(DEBIAN_LIST, 'utf8'));
  const last = list.entries[list.entries.length - 1]!;
  assert.equal(new Date(last.atUnixMs).toISOString(), '2017-01-01T00:00:00.000Z');
  assert.equal(last.taiUtc, 37);
  assert.equal(list.entries[0]?.taiUtc, 10);
  assert.ok(list.expiresUnixMs > last.atUnixMs);
  // The 2016-12-31 insertion, seen from the day before it.
  const next = nextListedLeap(list, Date.UTC(2016, 11, 30));
  assert.deepEqual(next, { epochUnixMs: Date.UTC(2017, 0, 1), deltaS: -1, source: 'list' });
  assert.equal(nextListedLeap(list, Date.UTC(2017, 0, 1)), undefined);
});

test('a list with a deletion, and malformed lists are refused with a clear error', () => {
  const ntp = (unixMs: number): number => unixMs / 1000 + 2_208_988_800;
  const text = [
    `#$\t${ntp(Date.UTC(2026, 0, 1))}`,
    `#@\t${ntp(Date.UTC(2028, 0, 1))}`,
    `${ntp(Date.UTC(2017, 0, 1))}\t37\t# 1 Jan 2017`,
    `${ntp(Date.UTC(2027, 6, 1))}\t36\t# 1 Jul 2027 (a deletion)`,
  ].join('\n');
  const list = parseLeapSecondsList(text);
  assert.deepEqual(nextListedLeap(list, Date.UTC(2027, 5, 30, 12)), {
    epochUnixMs: Date.UTC(2027, 6, 1),
    deltaS: 1,
    source: 'list',
  });
  assert.throws(() => parseLeapSecondsList('3692217600 37\n'), /no expiry/);
  assert.throws(() => parseLeapSecondsList('#@ 3991593600\nnot a line\n'), /line 2/);
  assert.throws(() => parseLeapSecondsList('#@ 3991593600\n3692217600 37\n3644697600 36\n'), /ascending/);
  assert.throws(() => parseLeapSecondsList('#@ 1\n'.repeat(60_000)), /too large/);
});

test('the parser never throws anything but an Error on arbitrary input (fuzz)', () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 400 }), (s) => {
      try {
        parseLeapSecondsList(s);
      } catch (e) {
        assert.ok(e instanceof Error);
      }
    }),
    { numRuns: 300, interruptAfterTimeLimit: 5000 },
  );
});

test('majority vote, month ends and the leap term', () => {
  assert.equal(voteLeap([]), 0);
  assert.equal(voteLeap([1]), -1);
  assert.equal(voteLeap([2, 2, 0]), 1);
  assert.equal(voteLeap([1, 0]), 0, 'half is not a majority');
  assert.equal(voteLeap([1, 1, 3]), -1);
  assert.equal(nextMonthStartUnixMs(Date.UTC(2026, 11, 31, 23, 59, 59)), Date.UTC(2027, 0, 1));
  assert.equal(nextMonthStartUnixMs(Date.UTC(2027, 5, 30)), Date.UTC(2027, 6, 1));
  assert.equal(leapTerm(999, 1000, -1, 0), 0);
  assert.equal(leapTerm(1000, 1000, -1, 0), -1);
  assert.equal(leapTerm(1000, 1000, -1, 10_000), -0.5);
  assert.equal(leapTerm(-4000, 1000, -1, 10_000) + 0, 0);
  assert.equal(leapTerm(6000, 1000, -1, 10_000), -1);
});

test('an expired list is ignored with a warning (logged once a day); a broken file is an error, not a crash', () => {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'timesvc-test',
    level: 'warn',
    destination: { write: (s: string) => lines.push(s) },
  });
  const dir = mkdtempSync(join(tmpdir(), 'leap-list-'));
  const expired = join(dir, 'expired.list');
  writeFileSync(expired, '#@ 3991593600\n3692217600 37\n'); // expires 2026-06-28
  let now = Date.UTC(2026, 10, 26);
  const f = new LeapListFile(expired, logger, () => now);
  f.load();
  assert.equal(f.current(), undefined);
  assert.equal(f.current(), undefined);
  assert.equal(lines.filter((l) => l.includes('expired')).length, 1, 'warned once');
  now += 25 * 3600_000;
  f.current();
  assert.equal(lines.filter((l) => l.includes('expired')).length, 2, 'and again a day later');
  now = Date.UTC(2026, 0, 1);
  assert.ok(f.current(), 'valid before its expiry');
  const broken = new LeapListFile(join(dir, 'missing.list'), logger, () => now);
  broken.load();
  assert.equal(broken.current(), undefined);
  assert.ok(lines.some((l) => l.includes('cannot use the leap-seconds list')));
});
