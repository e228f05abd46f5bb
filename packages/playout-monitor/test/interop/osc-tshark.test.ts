/**
 * tshark's OSC dissector (an independent decoder) reads the captured CasparCG datagrams and both simulator
 * layouts as src/protocol/osc.ts does (the pure codec tests are in test/protocol/osc.test.ts).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { expectDecoded, requireTool, tempDir } from '@broadcast-ops/core/testing';
import { decodeOsc, oscMessages } from '../../src/protocol/osc.ts';
import { CASPAR_LAYOUTS, CasparcgSimulator } from '@broadcast-ops/simulators/playout';
import { OSC_FIXTURES as FIXTURES, oscArgText as argText, readHex } from '../pure-helpers.ts';

/** Decode datagrams with tshark's OSC dissector (heuristic osc_udp), one line per datagram. */
function tsharkDecode(datagrams: Uint8Array[]): string[] {
  requireTool('tshark');
  requireTool('text2pcap');
  const dir = tempDir('pm-osc-');
  try {
    let dump = '';
    for (const d of datagrams) {
      for (let i = 0; i < d.length; i += 16) {
        dump += `${i.toString(16).padStart(6, '0')} ${Buffer.from(d.subarray(i, i + 16))
          .toString('hex')
          .replace(/(..)/g, '$1 ')}\n`;
      }
      dump += '\n';
    }
    const txt = join(dir.path, 'osc.txt');
    const pcap = join(dir.path, 'osc.pcap');
    writeFileSync(txt, dump);
    execFileSync('text2pcap', ['-q', '-u', '40000,6250', txt, pcap]);
    const out = execFileSync(
      'tshark',
      [
        '-r',
        pcap,
        '--enable-heuristic',
        'osc_udp',
        '-T',
        'fields',
        '-E',
        'occurrence=a',
        '-E',
        'separator=|',
        '-e',
        'osc.message.header.path',
        '-e',
        'osc.message.header.format',
        '-e',
        'osc.message.int32',
        '-e',
        'osc.message.int64',
        '-e',
        'osc.message.string',
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    return out.trim().split('\n');
  } finally {
    dir.remove();
  }
}

function ourFields(d: Uint8Array): string {
  const msgs = oscMessages(expectDecoded(decodeOsc(d)).packet);
  const all = (t: string): string =>
    msgs.flatMap((m) => m.args.filter((a) => a.type === t).map(argText)).join(',');
  return [
    msgs.map((m) => m.address).join(','),
    msgs.map((m) => ',' + m.args.map((a) => a.type).join('')).join(','),
    all('i'),
    all('h'),
    all('s'),
  ].join('|');
}

test('tshark (independent decoder) agrees on the fixtures and on both simulator layouts', () => {
  const sims = CASPAR_LAYOUTS.map((layout) => {
    const sim = new CasparcgSimulator({ targetHost: '127.0.0.1', targetPort: 9, layout, fps: 50 });
    sim.play('GO1080P25.mp4', { durationSec: 10, startFrame: 42 });
    return sim.datagramsForFrame();
  });
  const datagrams = [...FIXTURES.map(readHex), ...sims.flat()];
  const lines = tsharkDecode(datagrams);
  assert.equal(lines.length, datagrams.length);
  datagrams.forEach((d, i) => {
    // tshark prints a type-tag string per message with its own separators; compare addresses, ints, strings.
    const [paths, , ints, longs, strings] = (lines[i] ?? '').split('|');
    const [oPaths, , oInts, oLongs, oStrings] = ourFields(d).split('|');
    assert.equal(paths, oPaths, `datagram ${i} paths`);
    assert.equal(ints, oInts, `datagram ${i} int32`);
    assert.equal(longs, oLongs, `datagram ${i} int64`);
    assert.equal(strings, oStrings, `datagram ${i} strings`);
  });
});
