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
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { repoRoot } from '@broadcast-ops/core/testing';
import { loadTimesvcConfig } from '../../src/config.ts';
import { LAB_PASSWORD, LAB_USERNAME } from '../../src/io/web/lab-credential.ts';
import { clockIdentityText, decodePtp } from '../../src/protocol/ptp.ts';
import { timesvcBin } from '../helpers/cli.ts';
import { createNetnsBridge, type NetnsPort } from '../helpers/netns.ts';
import { field, pmc as pmcIn, startPtp4l, writePtpConfig } from '../helpers/ptp.ts';

/**
 * The BMCA against linuxptp on a switch (docs/ptp.md "BMCA"): three network namespaces on one Linux bridge,
 * timesvc (dummy GPSDO), a ptp4l master and a ptp4l slave (software timestamps, `free_running 1`: neither
 * touches a clock). Announce interval 1 s and announceReceiptTimeout 3 everywhere.
 *
 * 1. timesvc alone: it listens, then is master; the slave's parent is timesvc.
 * 2. A ptp4l master with priority1 120 appears: timesvc stops announcing within 3 announce intervals of its
 *    first Announce (capture), its port is PASSIVE, the slave's parent is ptp4l.
 * 3. That master stops: timesvc is master again within announceReceiptTimeout intervals (capture), the
 *    slave follows it back.
 * The dashboard's PTP panel, in chromium inside timesvc's namespace, shows each state with its grandmaster
 * and profile (screenshots under packages/timesvc/.tmp/test-output/dashboard/).
 * 4. A ptp4l master that timesvc beats (priority1 130, clockClass 6, so Figure 26 gives it PASSIVE rather
 *    than SLAVE): ptp4l's port goes PASSIVE and the slave stays on timesvc.
 */

function pmc(port: NetnsPort, sock: string, dir: string, ...commands: string[]): string {
  return pmcIn({ ns: port.ns, sock, client: join(dir, `pmc-${port.ns}.sock`) }, ...commands);
}

const SHOTS = fileURLToPath(new URL('../../.tmp/test-output/dashboard/', import.meta.url));
const WEB_PORT = 8080; // inside timesvc's own namespace: nothing else listens there

/** The dashboard logged in with the demo's lab credential, at wall size. */
async function dashboard(browser: Browser, problems: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await watchPage(page, problems, { label: 'dashboard' });
  await page.goto(`http://127.0.0.1:${WEB_PORT}/`);
  await page.waitForSelector('#login:not([hidden])', { timeout: 20_000 });
  await page.fill('#user', LAB_USERNAME);
  await page.fill('#password', LAB_PASSWORD);
  await page.click('#signin');
  await page.waitForSelector('#app:not([hidden])', { timeout: 20_000 });
  return page;
}

function ptp4l(port: NetnsPort, sock: string, extra: string[]): RunningProcess {
  return startPtp4l(port.ns, port.iface, sock, [
    '-E',
    '--logAnnounceInterval=0',
    '--announceReceiptTimeout=3',
    ...extra,
  ]);
}

/** ptp4l's own clock identity, from its PORT_DATA_SET (`xxxxxx.fffe.xxxxxx`). */
async function identityOf(port: NetnsPort, sock: string, dir: string): Promise<string> {
  return waitFor(
    () => /portIdentity\s+([0-9a-f.]+)-\d+/.exec(pmc(port, sock, dir, 'GET PORT_DATA_SET'))?.[1],
    {
      timeoutMs: 20_000,
      intervalMs: 500,
      what: `ptp4l identity in ${port.ns}`,
    },
  );
}

test(
  'BMCA on a switch with two ptp4l: timesvc steps aside for a better master, returns when it leaves, and wins against a worse one',
  { timeout: 240_000 },
  async () => {
    const tshark = requireTool('tshark');
    const dir = tempDir('timesvc-bmca-');
    const br = createNetnsBridge(3);
    const [tsPort, masterPort, slavePort] = br.ports as [NetnsPort, NetnsPort, NetnsPort];
    const procs: RunningProcess[] = [];
    const demo = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {});
    const problems: string[] = [];
    let browser: Browser | undefined;
    mkdirSync(SHOTS, { recursive: true });
    try {
      const cfg = join(dir.path, 'timesvc.yaml');
      writePtpConfig(cfg, tsPort.iface, {
        ptp: ['  log_announce_interval: 0', '  announce_receipt_timeout: 3'],
        web: [
          `  port: ${WEB_PORT}`,
          '  bind_address: 127.0.0.1',
          `  jwt_secret: ${JSON.stringify(demo.web.jwt_secret)}`,
          `  users: ${JSON.stringify(demo.web.users)}`,
        ],
      });
      const slaveSock = join(dir.path, 'slave.sock');
      const masterSock = join(dir.path, 'master.sock');
      const gm = startProcess(requireTool('ip'), [
        'netns',
        'exec',
        tsPort.ns,
        process.execPath,
        timesvcBin,
        '--config',
        cfg,
      ]);
      procs.push(gm);
      await gm.waitForOutput(/PTP announcer/, 30_000);
      const pcap = join(dir.path, 'bmca.pcap');
      const cap = startProcess(requireTool('ip'), [
        'netns',
        'exec',
        slavePort.ns,
        tshark,
        '-i',
        slavePort.iface,
        '-w',
        pcap,
        'udp port 320',
      ]);
      procs.push(cap);
      await cap.waitForOutput(/Capturing on/, 20_000);
      const slave = ptp4l(slavePort, slaveSock, ['-s']);
      procs.push(slave);

      // 1. timesvc listens first (no master before announceReceiptTimeout), then is master.
      await gm.waitForOutput(/PTP port MASTER/, 20_000);
      const tsId = /"clockIdentity":"([0-9a-f.]+)"/.exec(gm.output())?.[1] ?? '';
      assert.match(tsId, /^[0-9a-f]{6}\.fffe\.[0-9a-f]{6}$/);
      const parentOfSlave = (): string | undefined =>
        field(pmc(slavePort, slaveSock, dir.path, 'GET PARENT_DATA_SET'), 'grandmasterIdentity');
      await waitFor(() => parentOfSlave() === tsId, {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: 'slave on timesvc',
      });

      // 2. A better master (priority1 120) appears.
      const master = ptp4l(masterPort, masterSock, ['--priority1=120']);
      procs.push(master);
      const masterId = await identityOf(masterPort, masterSock, dir.path);
      await gm.waitForOutput(
        /PTP port PASSIVE: better grandmaster [0-9a-f.]+ \(priority1 120 vs ours 128\)/,
        30_000,
      );
      await waitFor(() => parentOfSlave() === masterId, {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: 'slave on the better ptp4l master',
      });
      // The dashboard, from inside timesvc's namespace: PASSIVE, the better grandmaster named, the profile.
      browser = await launchChromium({ netns: tsPort.ns });
      const page = await dashboard(browser, problems);
      const ptpText = (): Promise<string> => page.textContent('#ptp').then((t) => t ?? '');
      await waitFor(
        async () => {
          const t = await ptpText();
          return t.includes('PASSIVE') && t.includes(masterId) && t.includes('IEEE 1588-2008 default');
        },
        {
          timeoutMs: 20_000,
          intervalMs: 250,
          what: 'the PTP panel: PASSIVE, the better grandmaster, the profile',
        },
      );
      assert.match((await page.textContent('#ptp')) ?? '', /better grandmaster .*priority1 120 vs ours 128/);
      await page.locator('#ptp').scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, 'ptp-passive.png') });
      // Hold the better master for a few intervals, then stop it.
      await new Promise((r) => setTimeout(r, 3000));
      await master.stop('SIGTERM');
      procs.splice(procs.indexOf(master), 1);

      // 3. timesvc takes over again; the slave follows.
      await gm.waitForOutput(/PTP port MASTER: no other master heard/, 20_000);
      await waitFor(() => parentOfSlave() === tsId, {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: 'slave back on timesvc',
      });
      // The same page, updated in place: MASTER, this server the grandmaster.
      await waitFor(async () => /MASTER[\s\S]*\(this server\)/.test(await ptpText()), {
        timeoutMs: 20_000,
        intervalMs: 250,
        what: 'the PTP panel: MASTER, this server the grandmaster',
      });
      await page.screenshot({ path: join(SHOTS, 'ptp-master.png') });
      await page.setViewportSize({ width: 390, height: 844 });
      await page.locator('#ptp').scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, 'ptp-master-phone.png') });
      assert.deepEqual(problems, []);
      await new Promise((r) => setTimeout(r, 3000));
      await cap.stop('SIGINT');
      procs.splice(procs.indexOf(cap), 1);

      // The capture: Announce times by sender.
      const rows = execFileSync(
        tshark,
        ['-r', pcap, '-T', 'fields', '-e', 'frame.time_epoch', '-e', 'udp.payload'],
        {
          encoding: 'utf8',
          maxBuffer: 64 << 20,
        },
      );
      const announces: { t: number; from: string }[] = [];
      for (const line of rows.trim().split('\n')) {
        const [t, hex] = line.split('\t');
        if (!t || !hex) continue;
        const d = decodePtp(Buffer.from(hex.replace(/:/g, ''), 'hex'));
        if (d.ok && d.value.type === 'announce')
          announces.push({
            t: Number(t),
            from: clockIdentityText(d.value.header.sourcePortIdentity.clockIdentity),
          });
      }
      const fromMaster = announces.filter((a) => a.from === masterId).map((a) => a.t);
      const fromTs = announces.filter((a) => a.from === tsId).map((a) => a.t);
      const first = Math.min(...fromMaster);
      const last = Math.max(...fromMaster);
      assert.ok(fromMaster.length >= 4, `${fromMaster.length} Announces from the ptp4l master`);
      const during = fromTs.filter((t) => t > first + 3 && t < last);
      assert.deepEqual(
        during,
        [],
        'no Announce from timesvc from 3 intervals after the better master appeared',
      );
      const resumed = fromTs.find((t) => t > last);
      assert.ok(resumed !== undefined, 'timesvc announces again');
      const gap = resumed - last;
      process.stdout.write(
        `# BMCA: timesvc's last Announce ${(Math.max(...fromTs.filter((t) => t < last)) - first).toFixed(2)} s after the better master's first; ` +
          `its first Announce ${gap.toFixed(2)} s after the master's last\n`,
      );
      assert.ok(
        gap <= 3 + 0.5,
        `master again ${gap.toFixed(2)} s after the last better Announce (timeout 3 s)`,
      );

      // 4. A worse ptp4l master (priority1 130) that could be a grandmaster (clockClass 6): its port is PASSIVE.
      const worse = ptp4l(masterPort, masterSock, ['--priority1=130', '--clockClass=6']);
      procs.push(worse);
      await waitFor(
        () => field(pmc(masterPort, masterSock, dir.path, 'GET PORT_DATA_SET'), 'portState') === 'PASSIVE',
        { timeoutMs: 30_000, intervalMs: 500, what: "ptp4l's port PASSIVE against timesvc" },
      );
      assert.equal(parentOfSlave(), tsId, 'the slave stays on timesvc');
      assert.doesNotMatch(
        gm
          .output()
          .split(/PTP port MASTER: no other master heard/)
          .at(-1) ?? '',
        /PTP port PASSIVE/,
      );
    } finally {
      await browser?.close();
      for (const p of procs.reverse()) await p.stop().catch(() => undefined);
      br.remove();
      dir.remove();
    }
  },
);
