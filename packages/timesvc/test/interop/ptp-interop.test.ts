import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  requireTool,
  startProcess,
  tempDir,
  waitFor,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import { decodePtp, encodePtp } from '../../src/protocol/ptp.ts';
import { timesvcBin } from '../helpers/cli.ts';
import { createNetnsPair } from '../helpers/netns.ts';
import { field, pmc as pmcIn, startPtp4l, writePtpConfig } from '../helpers/ptp.ts';

/**
 * Interop with Debian's linuxptp: ptp4l as a slave-only clock with software timestamps and
 * `free_running 1` (it never touches a clock), in its own network namespace, against the announcer in
 * another, over a veth pair. pmc reads ptp4l's data sets over its Unix socket.
 */

function pmc(ns: string, dir: string, ...commands: string[]): string {
  return pmcIn({ ns, sock: join(dir, 'ptp4l.sock'), client: join(dir, 'pmc.sock') }, ...commands);
}

async function runInterop(mode: 'E2E' | 'P2P'): Promise<void> {
  const ip = requireTool('ip');
  requireTool('ptp4l');
  requireTool('pmc');
  const tshark = requireTool('tshark');
  const dir = tempDir('timesvc-ptp-');
  const net = createNetnsPair();
  const procs: RunningProcess[] = [];
  try {
    const cfg = join(dir.path, 'timesvc.yaml');
    writePtpConfig(cfg, net.ifA, {
      // HOLDOVER ends in FAULT 12 s after the loss: the free-running class
      ntp: ['  discipline:', '    holdover_timeout: 12s'],
      // the antenna is "lost" 30 s after start: HOLDOVER, clock class 7
      gpsdo: ['  dummy:', '    lose_lock_after: 30s'],
      ptp: [
        '  domain: 0',
        '  log_announce_interval: 0',
        '  log_sync_interval: 0',
        `  delay_mechanism: ${mode}`,
      ],
    });
    const gm = startProcess(ip, ['netns', 'exec', net.a, process.execPath, timesvcBin, '--config', cfg]);
    procs.push(gm);
    await gm.waitForOutput(/PTP announcer/, 30_000);
    const pcap = join(dir.path, 'ptp.pcap');
    const cap = startProcess(ip, [
      'netns',
      'exec',
      net.b,
      tshark,
      '-i',
      net.ifB,
      '-w',
      pcap,
      '-a',
      'duration:12',
      'udp',
    ]);
    procs.push(cap);
    const slave = startPtp4l(net.b, net.ifB, join(dir.path, 'ptp4l.sock'), [
      '-s',
      mode === 'E2E' ? '-E' : '-P',
    ]);
    procs.push(slave);
    await slave.waitForOutput(/selected best master clock/, 30_000);
    await slave.waitForOutput(
      mode === 'E2E'
        ? /master offset\s+-?\d+ s\d freq\s+[-+]?\d+ path delay\s+-?\d+/
        : /master offset\s+-?\d+/,
      40_000,
    );
    const out = pmc(net.b, dir.path, 'GET PARENT_DATA_SET', 'GET TIME_PROPERTIES_DATA_SET');
    assert.equal(field(out, 'gm.ClockClass'), '6', out);
    assert.equal(field(out, 'gm.ClockAccuracy'), '0x28', out);
    assert.equal(field(out, 'gm.OffsetScaledLogVariance'), '0xffff', out);
    assert.equal(field(out, 'grandmasterPriority1'), '128', out);
    assert.equal(field(out, 'currentUtcOffset'), '37', out);
    assert.equal(field(out, 'currentUtcOffsetValid'), '1', out);
    assert.equal(field(out, 'ptpTimescale'), '1', out);
    assert.equal(field(out, 'timeTraceable'), '1', out);
    assert.equal(field(out, 'frequencyTraceable'), '1', out);
    assert.equal(field(out, 'timeSource'), '0x20', out);
    const gmId = field(out, 'grandmasterIdentity') ?? '';
    assert.match(gmId, /^[0-9a-f]{6}\.fffe\.[0-9a-f]{6}$/);
    assert.match(slave.output(), /updating UTC offset to 37/);
    assert.doesNotMatch(slave.output(), /not using PTP timescale|bad message|msg_post_recv/i);
    // The GPSDO goes to holdover: the class seen by the slave changes to 7.
    await waitFor(() => field(pmc(net.b, dir.path, 'GET PARENT_DATA_SET'), 'gm.ClockClass') === '7', {
      timeoutMs: 45_000,
      intervalMs: 1000,
      what: 'clock class 7 (holdover)',
    });
    const tp = pmc(net.b, dir.path, 'GET TIME_PROPERTIES_DATA_SET');
    assert.equal(field(tp, 'timeTraceable'), '0', tp);
    // The holdover times out: FAULT, the free-running class 248 (IEEE 1588-2008 Table 5 default).
    await waitFor(() => field(pmc(net.b, dir.path, 'GET PARENT_DATA_SET'), 'gm.ClockClass') === '248', {
      timeoutMs: 45_000,
      intervalMs: 1000,
      what: 'clock class 248 (holdover expired)',
    });
    const free = pmc(net.b, dir.path, 'GET TIME_PROPERTIES_DATA_SET');
    assert.equal(field(free, 'frequencyTraceable'), '0', free);
    assert.equal(field(free, 'timeSource'), '0xa0', free);
    const offsets = [
      ...slave.output().matchAll(/master offset\s+(-?\d+) s\d freq\s+[-+]?\d+ path delay\s+(-?\d+)/g),
    ].map((m) => [Number(m[1]), Number(m[2])]);
    process.stdout.write(
      `# ptp4l ${mode}: ${offsets.length} lines; offset/path delay ns: ${JSON.stringify(offsets.slice(0, 12))}\n`,
    );
    await cap.exited;
    // tshark's PTP dissector: no malformed field in any message; every message type of this mode present.
    const verbose = execFileSync(tshark, ['-r', pcap, '-V'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    assert.doesNotMatch(verbose, /Malformed|Expert Info \(Error/);
    const types = execFileSync(
      tshark,
      ['-r', pcap, '-T', 'fields', '-e', 'ptp.v2.messagetype', '-e', 'udp.payload'],
      {
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      },
    );
    const seen = new Set<string>();
    for (const line of types.trim().split('\n')) {
      const [t, hex] = line.split('\t');
      if (!t || !hex) continue;
      seen.add(t);
      // Every datagram on the wire — ours and ptp4l's — decodes and re-encodes byte for byte.
      const buf = Buffer.from(hex.replace(/:/g, ''), 'hex');
      const d = decodePtp(buf);
      assert.ok(d.ok, `type ${t}: ${hex}`);
      if (d.value.header.messageLength === buf.length)
        assert.equal(encodePtp(d.value).toString('hex'), buf.toString('hex'));
    }
    const want =
      mode === 'E2E'
        ? ['0x00', '0x01', '0x08', '0x09', '0x0b']
        : ['0x00', '0x02', '0x03', '0x08', '0x0a', '0x0b'];
    for (const t of want) assert.ok(seen.has(t), `message type ${t} on the wire (${[...seen].join(',')})`);
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    net.remove();
    dir.remove();
  }
}

test(
  'ptp4l (slave only, -S, free_running) selects the announcer as grandmaster in E2E; pmc shows its data sets; holdover → class 7, expired → 248',
  { timeout: 180_000 },
  async () => {
    await runInterop('E2E');
  },
);

test(
  'ptp4l in P2P: Pdelay_Resp + Pdelay_Resp_Follow_Up answered; grandmaster selected; holdover → class 7, expired → 248',
  { timeout: 180_000 },
  async () => {
    await runInterop('P2P');
  },
);
