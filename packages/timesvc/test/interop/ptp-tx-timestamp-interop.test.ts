import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, startProcess, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import { createNetnsPair } from '../helpers/netns.ts';
import { startTxRig, txStampCounts } from '../helpers/ptp-tx-rig.ts';

/**
 * Transmit timestamps (docs/ptp-timestamps.md): the time a Follow_Up (Pdelay_Resp_Follow_Up) says its Sync
 * (Pdelay_Resp) left, against when tshark saw that Sync leave on the grandmaster's own interface.
 *
 * tshark's capture time of an outgoing frame is the kernel's software stamp taken as the frame is handed to
 * the packet taps (dev_queue_xmit_nit), just before the driver's transmit routine, where the transmit stamp
 * is taken (skb_tx_timestamp): the two are the same kind of clock reading a few instructions apart. The
 * grandmaster's dummy GPSDO is at offset 0, so its served clock is the host clock: the difference is
 * preciseOriginTimestamp − 37 s (TAI − UTC, currentUtcOffset) − frame.time_epoch.
 *
 * Measured on the loaded 2-core test machine (docs/ptp-timestamps.md): kernel stamps +3 … +10 µs after the
 * capture, also with two CPU hogs beside the suite; the userspace reading before send() 75 … 140 µs early.
 * The bound, 50 µs, leaves a fivefold margin and lies below the userspace reading's lateness, which the
 * test prints beside it.
 */
const BOUND_NS = 50_000n;
const TAI_UTC_NS = 37_000_000_000n;

/** "1764375803.123456789" → ns (exact: no float). */
function epochNs(text: string): bigint {
  const [s = '0', f = ''] = text.split('.');
  return BigInt(s) * 1_000_000_000n + BigInt(f.padEnd(9, '0').slice(0, 9));
}

const median = (xs: bigint[]): bigint =>
  [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[xs.length >> 1]!;
const abs = (v: bigint): bigint => (v < 0n ? -v : v);
const us = (v: bigint): string => `${(Number(v) / 1000).toFixed(1)} µs`;

interface Run {
  /** follow-up's origin timestamp − capture time of its event message, ns, per pair. */
  diffs: bigint[];
  log: string;
}

async function measure(mode: 'E2E' | 'P2P', tx: 'kernel' | 'userspace'): Promise<Run> {
  const ip = requireTool('ip');
  const tshark = requireTool('tshark');
  requireTool('ptp4l');
  const dir = tempDir('timesvc-ptptx-');
  const net = createNetnsPair();
  const procs: RunningProcess[] = [];
  try {
    const rig = startTxRig({ net, dir: dir.path, name: tx, mode, tx, logSyncInterval: -1 });
    const pcap = join(dir.path, 'gm.pcap');
    const gm = rig.gm;
    procs.push(gm);
    await gm.waitForOutput(new RegExp(`"txTimestamps":"${tx}"`), 30_000);
    const cap = startProcess(ip, [
      'netns',
      'exec',
      net.a,
      tshark,
      '-i',
      net.ifA,
      '-w',
      pcap,
      '-a',
      'duration:12',
      'udp port 319 or udp port 320',
    ]);
    procs.push(cap);
    // A slave (free_running: it never touches a clock) so that P2P has Pdelay_Req to answer.
    const slave = rig.startSlave();
    procs.push(slave);
    await cap.exited;
    await gm.stop();
    const [event, follow, sec, ns] =
      mode === 'E2E'
        ? [
            '0x00',
            '0x08',
            'ptp.v2.fu.preciseorigintimestamp.seconds',
            'ptp.v2.fu.preciseorigintimestamp.nanoseconds',
          ]
        : [
            '0x03',
            '0x0a',
            'ptp.v2.pdfu.responseorigintimestamp.seconds',
            'ptp.v2.pdfu.responseorigintimestamp.nanoseconds',
          ];
    const rows = execFileSync(
      tshark,
      [
        '-r',
        pcap,
        '-Y',
        `ip.src == ${net.addrA}`,
        '-T',
        'fields',
        '-e',
        'frame.time_epoch',
        '-e',
        'ptp.v2.messagetype',
        '-e',
        'ptp.v2.sequenceid',
        '-e',
        sec,
        '-e',
        ns,
      ],
      { encoding: 'utf8', maxBuffer: 16 << 20 },
    );
    const sent = new Map<string, bigint>();
    const diffs: bigint[] = [];
    for (const line of rows.trim().split('\n')) {
      const [time, type, seq, s, n] = line.split('\t');
      if (!time || !seq) continue;
      if (type === event) sent.set(seq, epochNs(time));
      else if (type === follow && s && n) {
        const at = sent.get(seq);
        if (at !== undefined) diffs.push(BigInt(s) * 1_000_000_000n + BigInt(n) - TAI_UTC_NS - at);
      }
    }
    return { diffs, log: gm.output() };
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    net.remove();
    dir.remove();
  }
}

/**
 * The kernel stamp is within the bound at the median and for at least 90 % of the messages. A single message
 * beyond it was seen once with npm installs running beside the suite (t3 +246 µs among 12 with a median of
 * +5 µs): docs/ptp-timestamps.md "Known limits".
 */
function assertWithinBound(diffs: bigint[], what: string): void {
  assert.ok(abs(median(diffs)) <= BOUND_NS, `${what} by ${us(median(diffs))} at the median`);
  const beyond = diffs.filter((d) => abs(d) > BOUND_NS);
  assert.ok(beyond.length <= Math.floor(diffs.length / 10), `${what} by ${beyond.map(us).join(', ')}`);
}

function fallbacks(log: string): { kernel: number; fallbacks: number } {
  const counts = txStampCounts(log);
  assert.ok(counts, 'the announcer logs its transmit-stamp counts when it stops');
  return counts;
}

test(
  "E2E: Follow_Up's preciseOriginTimestamp is within 50 µs of its Sync's capture time (median and 90 %, kernel stamp); the userspace reading before send() is further",
  { timeout: 180_000 },
  async () => {
    const kernel = await measure('E2E', 'kernel');
    const user = await measure('E2E', 'userspace');
    process.stdout.write(
      `# Follow_Up − Sync capture: kernel stamp median ${us(median(kernel.diffs))}, ` +
        `worst ${us(kernel.diffs.reduce((w, d) => (abs(d) > abs(w) ? d : w), 0n))} (${kernel.diffs.length} Syncs); ` +
        `userspace reading median ${us(median(user.diffs))}, ` +
        `worst ${us(user.diffs.reduce((w, d) => (abs(d) > abs(w) ? d : w), 0n))} (${user.diffs.length} Syncs)\n`,
    );
    assert.ok(kernel.diffs.length >= 10, `Syncs with a Follow_Up captured: ${kernel.diffs.length}`);
    assert.ok(user.diffs.length >= 10, `Syncs with a Follow_Up captured: ${user.diffs.length}`);
    const k = fallbacks(kernel.log);
    assert.ok(k.kernel >= kernel.diffs.length, `kernel stamps ${k.kernel}`);
    assertWithinBound(kernel.diffs, 'Follow_Up off its Sync');
    // The userspace reading is taken before send(): early, never after the frame left.
    assert.ok(median(user.diffs) < 0n, `userspace median ${us(median(user.diffs))}`);
    assert.ok(abs(median(user.diffs)) > abs(median(kernel.diffs)));
    assert.deepEqual(fallbacks(user.log), { kernel: 0, fallbacks: 0 });
  },
);

test(
  "P2P: Pdelay_Resp_Follow_Up's responseOriginTimestamp (t3) is within 50 µs of its Pdelay_Resp's capture time (median and 90 %)",
  { timeout: 120_000 },
  async () => {
    const kernel = await measure('P2P', 'kernel');
    process.stdout.write(
      `# Pdelay_Resp_Follow_Up − Pdelay_Resp capture: median ${us(median(kernel.diffs))} (${kernel.diffs.length})\n`,
    );
    assert.ok(kernel.diffs.length >= 5, `Pdelay_Resp with a follow-up captured: ${kernel.diffs.length}`);
    assert.ok(fallbacks(kernel.log).kernel >= kernel.diffs.length);
    assertWithinBound(kernel.diffs, 't3 off its Pdelay_Resp');
  },
);
