/** tshark's PTP dissector (an independent decoder) reads every message type timesvc encodes. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, tempDir } from '@broadcast-ops/core/testing';
import { FLAG0, encodePtp } from '../../src/protocol/ptp.ts';
import { ours } from '../helpers/ptp-messages.ts';

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
