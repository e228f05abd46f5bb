// tshark's dissector on the SMPTE ST 2059-2 synchronization metadata message (docs/ptp-profiles.md
// "Synchronization metadata"); the codec itself: test/protocol/ptp-sync-metadata.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, tempDir } from '@broadcast-ops/core/testing';
import { encodePtp, LOCKING, syncMetadataMessage, type SmpteSyncMetadata } from '../../src/protocol/ptp.ts';
import { SM_HEADER, SM_SAMPLE } from '../helpers/ptp-sync-metadata.ts';

test("tshark's dissector decodes every SM field of our message without a malformed field", () => {
  const tshark = requireTool('tshark');
  const text2pcap = requireTool('text2pcap');
  const dir = tempDir('timesvc-ptpsm-');
  try {
    const sm: SmpteSyncMetadata = {
      ...SM_SAMPLE,
      defaultSystemFrameRate: { numerator: 30000, denominator: 1001 },
      masterLockingStatus: LOCKING.LOCKED,
      timeAddressFlags: 1,
      currentLocalOffset: -37,
      jumpSeconds: -1,
      timeOfNextJump: 1_798_761_637,
      leapSecondJump: 1,
    };
    const buf = encodePtp(syncMetadataMessage(SM_HEADER, sm));
    const lines: string[] = [];
    for (let i = 0; i < buf.length; i += 16) {
      const bytes = [...buf.subarray(i, i + 16)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
      lines.push(`${i.toString(16).padStart(6, '0')} ${bytes}`);
    }
    writeFileSync(join(dir.path, 'sm.txt'), lines.join('\n') + '\n');
    const pcap = join(dir.path, 'sm.pcap');
    execFileSync(
      text2pcap,
      ['-q', '-4', '10.99.7.1,224.0.1.129', '-u', '320,320', join(dir.path, 'sm.txt'), pcap],
      {
        stdio: 'pipe',
      },
    );
    const v = execFileSync(tshark, ['-r', pcap, '-V'], { encoding: 'utf8' });
    assert.doesNotMatch(v, /Malformed|Expert Info \(Error/, v);
    const fields = [
      'numerator',
      'denominator',
      'masterlockingstatus',
      'timeaddressflags.drop',
      'currentlocaloffset',
      'jumpseconds',
      'timeofnextjump',
      'leapsecondjump.change',
    ];
    const row = execFileSync(
      tshark,
      [
        '-r',
        pcap,
        '-T',
        'fields',
        ...fields.flatMap((f) => [
          '-e',
          `ptp.v2.oe.smpte.${f.replace(/^(numerator|denominator)$/, 'defaultsystemframerate.$1')}`,
        ]),
      ],
      { encoding: 'utf8' },
    )
      .trim()
      .split('\t');
    const yes = (x: string | undefined): boolean => x === '1' || x === 'True';
    assert.deepEqual(row.slice(0, 3), ['30000', '1001', '4']);
    assert.ok(yes(row[3]), 'drop frame');
    assert.deepEqual(row.slice(4, 7), ['-37', '-1', '1798761637']);
    assert.ok(yes(row[7]), 'leap second jump');
  } finally {
    dir.remove();
  }
});
