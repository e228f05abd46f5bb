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
import { PTP_PROFILES, resolveProfile, type PtpProfileName } from '../../src/domain/ptp-profiles.ts';
import { timesvcBin } from '../helpers/cli.ts';
import { createNetnsPair, type NetnsPair } from '../helpers/netns.ts';
import { field, pmc, startPtp4l, writePtpConfig } from '../helpers/ptp.ts';

/**
 * Each PTP profile against linuxptp (docs/ptp-profiles.md "What a receiver sees"): timesvc (dummy GPSDO,
 * locked) in one network namespace, ptp4l configured with the profile's own values in another (slave only,
 * software timestamps, `free_running 1`: it never touches a clock, so its servo stays in s0, see the doc),
 * one veth pair for all four profiles, timesvc restarted per profile.
 *
 * For each profile: ptp4l selects timesvc as best master (log line, pmc PARENT_DATA_SET), offset samples
 * arrive, and a capture of timesvc's datagrams shows the profile's domainNumber, logMessageInterval fields,
 * Announce/Sync/Follow_Up rates (median inter-arrival against 2^logInterval) and DSCP on ports 319 and 320.
 * In the SMPTE profiles tshark decodes the ST 2059-2 synchronization metadata TLV (ptp4l, which does not
 * know it, answers each with a management error and keeps timesvc as master); elsewhere it is absent.
 */

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

const CAPTURE_FIELDS = [
  'frame.time_epoch',
  'ip.src',
  'udp.dstport',
  'ip.dsfield.dscp',
  'ptp.v2.messagetype',
  'ptp.v2.domainnumber',
  'ptp.v2.logmessageperiod',
  'ptp.v2.an.oe.organizationId',
  'ptp.v2.oe.smpte.defaultsystemframerate.numerator',
  'ptp.v2.oe.smpte.defaultsystemframerate.denominator',
  'ptp.v2.oe.smpte.masterlockingstatus',
  'ptp.v2.oe.smpte.timeaddressflags',
  'ptp.v2.oe.smpte.currentlocaloffset',
  'ptp.v2.oe.smpte.jumpseconds',
  'ptp.v2.oe.smpte.leapsecondjump',
  'ptp.v2.oe.smpte.SubType',
];

interface Row {
  t: number;
  src: string;
  port: number;
  dscp: number;
  type: string;
  domain: number;
  log: number;
  sm: string[];
}

/** One profile phase; returns a line of figures for the test output. */
async function runProfile(net: NetnsPair, name: PtpProfileName): Promise<string> {
  const ip = requireTool('ip');
  const tshark = requireTool('tshark');
  const r = resolveProfile(name, {});
  assert.ok(r.ok);
  const p = r.values;
  const dir = tempDir(`timesvc-ptpprof-${name}-`);
  const procs: RunningProcess[] = [];
  try {
    const cfg = join(dir.path, 'timesvc.yaml');
    writePtpConfig(cfg, net.ifA, { ptp: [`  profile: ${name}`] });
    const pcap = join(dir.path, 'ptp.pcap');
    const cap = startProcess(ip, ['netns', 'exec', net.b, tshark, '-i', net.ifB, '-w', pcap, 'udp']);
    procs.push(cap);
    await cap.waitForOutput(/Capturing on/, 20_000);
    const gm = startProcess(ip, ['netns', 'exec', net.a, process.execPath, timesvcBin, '--config', cfg]);
    procs.push(gm);
    await gm.waitForOutput(/PTP announcer/, 30_000);
    const gmId = /"clockIdentity":"([0-9a-f.]+)"/.exec(gm.output())?.[1] ?? '';
    assert.match(gmId, /^[0-9a-f]{6}\.fffe\.[0-9a-f]{6}$/);
    // ptp4l with the profile's values. freq_est_interval 0 and summary_interval = logSyncInterval make its
    // free-running path print one "master offset" line per offset sample (linuxptp clock.c
    // clock_sync_interval): one a second at the most, whatever the Sync rate.
    const slave = startPtp4l(net.b, net.ifB, join(dir.path, 'ptp4l.sock'), [
      '-E',
      '-s',
      `--domainNumber=${p.domain}`,
      `--logAnnounceInterval=${p.log_announce_interval}`,
      `--logSyncInterval=${p.log_sync_interval}`,
      `--logMinDelayReqInterval=${p.log_min_delay_req_interval}`,
      `--announceReceiptTimeout=${p.announce_receipt_timeout}`,
      `--dscp_event=${p.dscp_event}`,
      `--dscp_general=${p.dscp_general}`,
      '--freq_est_interval=0',
      `--summary_interval=${p.log_sync_interval}`,
    ]);
    procs.push(slave);
    await gm.waitForOutput(/PTP port MASTER/, 30_000);
    const masterAt = Date.now();
    await slave.waitForOutput(/selected best master clock/, 30_000);
    const offsetLine = /master offset\s+-?\d+ s\d freq\s+[-+]?\d+ path delay\s+-?\d+/g;
    await waitFor(() => (slave.output().match(offsetLine)?.length ?? 0) >= 3, {
      timeoutMs: 30_000,
      intervalMs: 250,
      what: `${name}: three offset samples from ptp4l`,
    });
    const at = {
      ns: net.b,
      sock: join(dir.path, 'ptp4l.sock'),
      client: join(dir.path, 'pmc.sock'),
      domain: p.domain,
    };
    const parent = pmc(at, 'GET PARENT_DATA_SET', 'GET CURRENT_DATA_SET');
    assert.equal(field(parent, 'grandmasterIdentity'), gmId, parent);
    assert.equal(field(parent, 'gm.ClockClass'), '6', parent);
    assert.equal(field(parent, 'stepsRemoved'), '1', parent);
    assert.match(slave.output(), new RegExp(`selected best master clock ${gmId.replace(/\./g, '\\.')}`));
    assert.doesNotMatch(slave.output(), /bad message|msg_post_recv|failed to parse/i);
    // Capture at least six Announce intervals (and 12 s) of timesvc as master, then stop it.
    const hold = Math.max(12_000, 6 * 1000 * 2 ** p.log_announce_interval);
    await new Promise((res) => setTimeout(res, Math.max(0, masterAt + hold - Date.now())));
    const offsetLines = slave.output().match(offsetLine) ?? [];
    const offsets = offsetLines.length;
    // free_running: linuxptp's clock_no_adjust() never leaves SERVO_UNLOCKED (docs/ptp-profiles.md).
    assert.ok(
      offsetLines.every((l) => / s0 /.test(l)),
      `${name}: servo state other than s0: ${offsetLines.join('|')}`,
    );
    const slaveLog = slave.output();
    await cap.stop('SIGINT');
    procs.splice(procs.indexOf(cap), 1);

    const verbose = execFileSync(tshark, ['-r', pcap, '-V'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    assert.ok(!/Malformed|Expert Info \(Error/.test(verbose), `${name}: a malformed field in the capture`);
    const rows: Row[] = execFileSync(
      tshark,
      ['-r', pcap, '-Y', `ptp && ip.src == ${net.addrA}`, '-T', 'fields', '-E', 'occurrence=f'].concat(
        CAPTURE_FIELDS.flatMap((f) => ['-e', f]),
      ),
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    )
      .trim()
      .split('\n')
      .map((line) => line.split('\t'))
      .map(([t, src, port, dscp, type, domain, log, ...sm]) => ({
        t: Number(t),
        src: src ?? '',
        port: Number(port),
        dscp: Number(dscp),
        type: type ?? '',
        domain: Number(domain),
        log: Number(log),
        sm,
      }));
    const from = (type: string): Row[] => rows.filter((x) => x.type === type);
    // ptp4l's answers to management messages: ACKNOWLEDGE with MANAGEMENT_ERROR_STATUS NO_SUCH_ID (it reads
    // the SM COMMAND as a management TLV it does not know), multicast.
    const answers = execFileSync(
      tshark,
      ['-r', pcap, '-Y', `ptp.v2.messagetype == 0x0d && ip.src == ${net.addrB}`, '-T', 'fields'].concat(
        ['ptp.v2.mm.action', 'ptp.v2.mm.tlvType', 'ptp.v2.mm.managementErrorId'].flatMap((f) => ['-e', f]),
      ),
      { encoding: 'utf8' },
    )
      .trim()
      .split('\n')
      .filter(Boolean);
    const figures: string[] = [];
    for (const [type, label, log] of [
      ['0x0b', 'Announce', p.log_announce_interval],
      ['0x00', 'Sync', p.log_sync_interval],
      ['0x08', 'Follow_Up', p.log_sync_interval],
    ] as const) {
      const msgs = from(type);
      assert.ok(msgs.length >= 6, `${name}: ${msgs.length} ${label} from timesvc`);
      const gaps = msgs.slice(1).map((m, i) => m.t - (msgs[i]?.t ?? m.t));
      const med = median(gaps);
      const want = 2 ** log;
      assert.ok(
        Math.abs(med - want) <= want * 0.25,
        `${name} ${label}: median interval ${med} s, want ${want} s`,
      );
      for (const m of msgs) {
        assert.equal(m.log, log, `${name} ${label} logMessageInterval`);
        assert.equal(m.domain, p.domain, `${name} ${label} domainNumber`);
      }
      figures.push(`${label} ${med.toFixed(4)} s (2^${log} = ${want} s, n=${msgs.length})`);
    }
    // DSCP: event messages (319) carry dscp_event, general ones (320) dscp_general.
    const dscpSeen = { event: new Set<number>(), general: new Set<number>() };
    for (const m of rows) (m.port === 319 ? dscpSeen.event : dscpSeen.general).add(m.dscp);
    assert.deepEqual([...dscpSeen.event], [p.dscp_event], `${name}: DSCP on 319`);
    assert.deepEqual([...dscpSeen.general], [p.dscp_general], `${name}: DSCP on 320`);
    figures.push(`DSCP 319=${[...dscpSeen.event].join()} 320=${[...dscpSeen.general].join()}`);
    // The ST 2059-2 synchronization metadata: in the SMPTE profiles only, decoded field by field by tshark.
    const sm = from('0x0d');
    if (name === 'smpte-2059-2' || name === 'aes67-smpte') {
      assert.ok(sm.length >= 5, `${name}: ${sm.length} SM messages`);
      const gaps = sm.slice(1).map((m, i) => m.t - (sm[i]?.t ?? m.t));
      assert.ok(Math.abs(median(gaps) - 1) <= 0.25, `${name}: SM every ${median(gaps)} s`);
      // masterLockingStatus follows the clock: FREE_RUN (1) until the dummy GPSDO locks, then LOCKED (4).
      const locking = sm.map((m) => Number(m.sm[3]));
      assert.equal(locking.at(-1), 4, `${name}: LOCKED at the end (${locking.join()})`);
      assert.ok(
        locking.every((x, i) => x === 4 || (x === 1 && locking.slice(0, i).every((y) => y === 1))),
        `${name}: FREE_RUN then LOCKED (${locking.join()})`,
      );
      for (const m of sm) {
        const [org, num, den, , flags, localOffset, jump, leapJump] = m.sm;
        assert.equal(Number(org), 0x6897e8, `${name} organizationId`);
        assert.deepEqual([num, den, localOffset, jump], ['30000', '1001', '-37', '0'], `${name} SM fields`);
        assert.equal(Number(flags) & 1, 1, 'drop frame');
        assert.equal(Number(leapJump ?? 0), 0, 'no leap pending');
        assert.equal(m.domain, p.domain);
        assert.equal(m.port, 320);
      }
      assert.ok(
        answers.length <= sm.length,
        `${name}: ${answers.length} answers to ${sm.length} SM messages`,
      );
      for (const a of answers) assert.equal(a, '4\t2\t2', `${name}: ptp4l's answer (action, tlvType, error)`);
      figures.push(`SM ${median(gaps).toFixed(2)} s, n=${sm.length}, locking ${locking.join('')}`);
      figures.push(`ptp4l answered ${answers.length} with NO_SUCH_ID`);
      assert.ok(/SMPTE SubType: Version \(0x000001\)/.test(verbose), 'tshark names the SM TLV');
      assert.ok(/masterLockingStatus: Locked \(4\)/.test(verbose), 'tshark shows LOCKED');
    } else {
      assert.equal(sm.length, 0, `${name}: no SM messages`);
      assert.deepEqual(answers, [], `${name}: no management traffic from ptp4l`);
    }
    assert.doesNotMatch(slaveLog, /bad message|msg_post_recv/i);
    return `${name}: domain ${p.domain}; ${figures.join('; ')}; ${offsets} offset samples`;
  } finally {
    for (const x of procs.reverse()) await x.stop().catch(() => undefined);
    dir.remove();
  }
}

test(
  'every profile: ptp4l with the profile values selects timesvc; capture shows domain, intervals, rates, DSCP; SM TLV in SMPTE profiles',
  { timeout: 360_000 },
  async () => {
    const net = createNetnsPair();
    const started = Date.now();
    try {
      for (const name of PTP_PROFILES) {
        const t0 = Date.now();
        const line = await runProfile(net, name);
        process.stdout.write(`# ${line} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
      }
    } finally {
      net.remove();
    }
    process.stdout.write(`# all profiles ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  },
);
