import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { refusal, requireTool, tempDir } from '@broadcast-ops/core/testing';
import { clockAccuracyFor, clockQuality } from '../../src/domain/clock-quality.ts';
import {
  FLAG0,
  FLAG1,
  clockIdentityFromMac,
  clockIdentityText,
  decodePtp,
  encodePtp,
  type PtpMessageInput,
} from '../../src/protocol/ptp.ts';

const fixtures = JSON.parse(
  readFileSync(join(import.meta.dirname, '../fixtures/linuxptp-packets.json'), 'utf8'),
) as {
  packets: Record<string, Record<string, string>>;
};

test('captured linuxptp packets (every type, E2E and P2P) decode and re-encode byte for byte', () => {
  let n = 0;
  for (const [mode, byType] of Object.entries(fixtures.packets)) {
    for (const [type, hex] of Object.entries(byType)) {
      const d = decodePtp(Buffer.from(hex, 'hex'));
      assert.ok(d.ok, `${mode} ${type}`);
      assert.equal(d.value.header.messageType, Number(type));
      assert.equal(d.value.header.messageLength, hex.length / 2);
      assert.equal(encodePtp(d.value).toString('hex'), hex, `${mode} ${type}`);
      n++;
    }
  }
  assert.equal(n, 11);
  const ann = decodePtp(Buffer.from(fixtures.packets['E2E']?.['0x0b'] ?? '', 'hex'));
  assert.ok(ann.ok && ann.value.type === 'announce');
  assert.equal(ann.value.announce.currentUtcOffset, 37);
  assert.equal(ann.value.announce.clockClass, 248);
  assert.equal(ann.value.announce.timeSource, 0xa0);
  const resp = decodePtp(Buffer.from(fixtures.packets['P2P']?.['0x03'] ?? '', 'hex'));
  assert.ok(resp.ok && resp.value.type === 'pdelay_resp');
  assert.equal(resp.value.header.flags[0] & FLAG0.TWO_STEP, FLAG0.TWO_STEP);
  assert.equal(resp.value.header.logMessageInterval, 0x7f);
});

const port = { clockIdentity: '020000fffe000001', portNumber: 1 };
const req = { clockIdentity: '9eab8ffffe336da6', portNumber: 1 };
const ts = { seconds: 0x1_0000_0005, nanoseconds: 999_999_999 };
const hdr = (flags0: number, seq: number, log: number, correction = 0n): PtpMessageInput['header'] => ({
  domainNumber: 0,
  flags: [flags0, FLAG1.PTP_TIMESCALE | FLAG1.UTC_OFFSET_VALID],
  correction,
  sourcePortIdentity: port,
  sequenceId: seq,
  logMessageInterval: log,
});
const ours: { msg: PtpMessageInput; port: number; len: number; control: number }[] = [
  { msg: { type: 'sync', header: hdr(FLAG0.TWO_STEP, 1, 0), timestamp: ts }, port: 319, len: 44, control: 0 },
  { msg: { type: 'delay_req', header: hdr(0, 2, 0x7f), timestamp: ts }, port: 319, len: 44, control: 1 },
  { msg: { type: 'pdelay_req', header: hdr(0, 3, 0x7f), timestamp: ts }, port: 319, len: 54, control: 5 },
  {
    msg: {
      type: 'pdelay_resp',
      header: hdr(FLAG0.TWO_STEP, 4, 0x7f),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 319,
    len: 54,
    control: 5,
  },
  { msg: { type: 'follow_up', header: hdr(0, 1, 0), timestamp: ts }, port: 320, len: 44, control: 2 },
  {
    msg: {
      type: 'delay_resp',
      header: hdr(0, 2, 0, -123456789n),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 320,
    len: 54,
    control: 3,
  },
  {
    msg: {
      type: 'pdelay_resp_follow_up',
      header: hdr(0, 4, 0x7f, 65536n),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 320,
    len: 54,
    control: 5,
  },
  {
    msg: {
      type: 'announce',
      header: hdr(0, 5, 1),
      announce: {
        originTimestamp: ts,
        currentUtcOffset: 37,
        grandmasterPriority1: 128,
        clockClass: 6,
        clockAccuracy: 0x28,
        offsetScaledLogVariance: 0xffff,
        grandmasterPriority2: 128,
        grandmasterIdentity: port.clockIdentity,
        stepsRemoved: 0,
        timeSource: 0x20,
      },
    },
    port: 320,
    len: 64,
    control: 5,
  },
];

test('every message type: versionPTP 2, exact messageLength, controlField, round trip', () => {
  for (const o of ours) {
    const buf = encodePtp(o.msg);
    assert.equal(buf.length, o.len, o.msg.type);
    assert.equal(buf.readUInt16BE(2), o.len);
    assert.equal(buf[1], 2);
    assert.equal(buf[32], o.control, o.msg.type);
    const d = decodePtp(buf);
    assert.ok(d.ok);
    assert.equal(d.value.type, o.msg.type);
    assert.equal(encodePtp(d.value).toString('hex'), buf.toString('hex'));
  }
});

test("tshark's PTP dissector decodes every message type without a malformed field", () => {
  const tshark = requireTool('tshark');
  const text2pcap = requireTool('text2pcap');
  const dir = tempDir('timesvc-ptpcodec-');
  try {
    // One capture holding every message type (text2pcap wraps each dump in Ethernet/IPv4/UDP 320).
    const lines: string[] = [];
    for (const o of ours) {
      const buf = encodePtp(o.msg);
      for (let i = 0; i < buf.length; i += 16) {
        const bytes = [...buf.subarray(i, i + 16)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
        lines.push(`${i.toString(16).padStart(6, '0')} ${bytes}`);
      }
    }
    const dump = join(dir.path, 'ptp.txt');
    writeFileSync(dump, lines.join('\n') + '\n');
    const pcap = join(dir.path, 'ptp.pcap');
    execFileSync(text2pcap, ['-q', '-4', '10.99.7.1,224.0.1.129', '-u', '320,320', dump, pcap], {
      stdio: 'pipe',
    });
    const run = (args: string[]): string =>
      execFileSync(tshark, ['-r', pcap, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const v = run(['-V']);
    assert.equal(v.match(/Precision Time Protocol \(IEEE1588\)/g)?.length, ours.length);
    assert.doesNotMatch(v, /Malformed|Expert Info \(Error/, v);
    const rows = run(
      [
        'messagelength',
        'sequenceid',
        'flags.twostep',
        'an.origincurrentutcoffset',
        'an.grandmasterclockclass',
      ]
        .concat(['timesource', 'flags.timescale', 'flags.utcreasonable'])
        .flatMap((f) => ['-e', `ptp.v2.${f}`])
        .concat(['-T', 'fields']),
    )
      .trim()
      .split('\n');
    assert.equal(rows.length, ours.length);
    const yes = (x: string | undefined): boolean => x === '1' || x === 'True';
    ours.forEach((o, i) => {
      const [len, seq, twoStep, utcOffset, cls, src, tscale, utcValid] = (rows[i] ?? '').split('\t');
      assert.equal(Number(len), o.len, o.msg.type);
      assert.equal(Number(seq), o.msg.header.sequenceId, o.msg.type);
      assert.equal(yes(twoStep), (o.msg.header.flags[0] & FLAG0.TWO_STEP) !== 0, o.msg.type);
      assert.ok(yes(tscale) && yes(utcValid), o.msg.type);
      if (o.msg.type === 'announce') {
        assert.equal(utcOffset, '37');
        assert.equal(cls, '6');
        assert.equal(Number(src), 0x20);
      }
    });
  } finally {
    dir.remove();
  }
});

test('malformed input: short, wrong version, wrong length, unknown type, bad ns — an error, never a throw', () => {
  const good = encodePtp(ours[0]?.msg ?? ({} as PtpMessageInput));
  assert.equal(refusal(decodePtp(good.subarray(0, 20))), 'short');
  const v1 = Buffer.from(good);
  v1[1] = 1;
  assert.equal(refusal(decodePtp(v1)), 'version');
  const long = Buffer.from(good);
  long.writeUInt16BE(50, 2);
  assert.equal(refusal(decodePtp(long)), 'length');
  const short = Buffer.from(good);
  short.writeUInt16BE(40, 2);
  assert.equal(refusal(decodePtp(short)), 'length');
  const signalling = Buffer.from(good);
  signalling[0] = 0x0c;
  assert.equal(refusal(decodePtp(signalling)), 'unsupported');
  const mgmt = Buffer.from(good);
  mgmt[0] = 0x0d; // a Management message needs 48 octets and one TLV (test/io/ptp-sync-metadata.test.ts)
  assert.equal(refusal(decodePtp(mgmt)), 'length');
  const ns = Buffer.from(good);
  ns.writeUInt32BE(1e9, 40);
  assert.equal(refusal(decodePtp(ns)), 'bad_field');
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 128 }), (bytes) => {
      decodePtp(Buffer.from(bytes));
    }),
    { numRuns: 5000, interruptAfterTimeLimit: 10_000 },
  );
});

test('clock identity: EUI-64 from the MAC without the U/L flip; linuxptp notation', () => {
  assert.equal(clockIdentityFromMac('02:00:00:00:00:01'), '020000fffe000001');
  assert.equal(clockIdentityText('020000fffe000001'), '020000.fffe.000001');
  assert.throws(() => clockIdentityFromMac('nope'), RangeError);
});

test('one clock-quality model: class 6 locked to GPS, 7 in holdover within spec, 52 past it, ptp.clock_class otherwise', () => {
  const base = {
    estimatedErrorS: 1e-6,
    leap: 0,
    freeRunningClass: 248,
    freeRunningAccuracy: 0xfe,
    holdoverMaxErrorS: 0.01,
  };
  const locked = clockQuality({ ...base, state: 'LOCKED', referenceKind: 'gpsdo' });
  assert.equal(locked.clockClass, 6);
  assert.equal(locked.timeSource, 0x20);
  assert.equal(locked.clockAccuracy, 0x28, 'software timestamps: never better than 250 µs');
  assert.equal(locked.flags1 & FLAG1.TIME_TRACEABLE, FLAG1.TIME_TRACEABLE);
  assert.equal(locked.currentUtcOffset, 37);
  const hold = clockQuality({ ...base, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.equal(hold.clockClass, 7);
  assert.equal(hold.flags1 & FLAG1.TIME_TRACEABLE, 0);
  assert.equal(hold.flags1 & FLAG1.FREQUENCY_TRACEABLE, FLAG1.FREQUENCY_TRACEABLE);
  // Holdover past its specification (holdover_max_error): degradation alternative A, nothing traceable.
  const atSpec = clockQuality({ ...base, estimatedErrorS: 0.01, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.equal(atSpec.clockClass, 7);
  const past = clockQuality({ ...base, estimatedErrorS: 0.0101, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.deepEqual([past.clockClass, past.clockAccuracy, past.timeSource], [52, 0x2c, 0x20]);
  assert.equal(past.flags1 & (FLAG1.TIME_TRACEABLE | FLAG1.FREQUENCY_TRACEABLE), 0);
  const ntp = clockQuality({ ...base, state: 'LOCKED', referenceKind: 'ntp' });
  assert.equal(ntp.clockClass, 248);
  assert.equal(ntp.timeSource, 0x50);
  const free = clockQuality({ ...base, state: 'FAULT', referenceKind: undefined });
  assert.deepEqual([free.clockClass, free.clockAccuracy, free.timeSource], [248, 0xfe, 0xa0]);
  assert.equal(
    clockQuality({ ...base, leap: 1, state: 'LOCKED', referenceKind: 'gpsdo' }).flags1 & FLAG1.LEAP_61,
    FLAG1.LEAP_61,
  );
  assert.equal(clockAccuracyFor(3e-3), 0x2b);
  assert.equal(clockAccuracyFor(Infinity), 0xfe);
});
