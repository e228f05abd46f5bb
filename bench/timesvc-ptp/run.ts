/**
 * timesvc PTP transmit-timestamp benchmark: what ptp4l measures against the announcer with the kernel's
 * transmit timestamps in Follow_Up (the default) and with the userspace reading taken right before send()
 * (`TIMESVC_PTP_TX_TIMESTAMPS=userspace`, an environment switch for this bench only), at the same time on
 * the same machine.
 *
 *   npm run bench:timesvc-ptp -- [--minutes 5] [--log-sync-interval 0]
 *   (or BENCH_PTP_MINUTES=1)
 *
 * Two network namespace pairs joined by veth (packages/timesvc/test/helpers/netns.ts), each with a timesvc
 * grandmaster (dummy GPSDO at offset 0: served clock = system clock) in one namespace and Debian's ptp4l as
 * a slave-only E2E clock in the other, `-S` software timestamps and `--free_running=1` (it never touches a
 * clock). Both ptp4l follow grandmasters whose served time is the host's own clock, so every `master offset`
 * it prints is the measurement's bias, not a clock difference: with t1 early by e, the offset reads +e/2.
 * Printed side by side: median, mean, p99 of |offset| and of the offset, and the path delay median, with
 * each timesvc's kernel-stamp and fallback counts and the load average (the anchor: the userspace row,
 * measured in the same run). Goal (docs/ptp-timestamps.md): median bias below 10 µs on veth.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { requireTool, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import { startTxRig, txStampCounts, createNetnsPair, type NetnsPair } from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: { minutes: { type: 'string' }, 'log-sync-interval': { type: 'string' } },
});
const MINUTES = Number(values.minutes ?? process.env['BENCH_PTP_MINUTES'] ?? 5);
const LOG_SYNC = Number(values['log-sync-interval'] ?? 0);
if (!(MINUTES > 0 && MINUTES <= 120)) throw new Error('--minutes must be in (0, 120]');
if (!Number.isInteger(LOG_SYNC) || LOG_SYNC < 0 || LOG_SYNC > 1)
  throw new Error(
    '--log-sync-interval must be 0 or 1 (the default profile; ptp4l prints at most one line a second)',
  );

requireTool('ip');
requireTool('ptp4l');
const dir = tempDir('timesvc-ptp-bench-');

interface Rig {
  mode: 'kernel' | 'userspace';
  net: NetnsPair;
  gm: RunningProcess;
  slave: RunningProcess;
}

function startRig(mode: Rig['mode']): Rig {
  const net = createNetnsPair();
  const rig = startTxRig({
    net,
    dir: dir.path,
    name: mode,
    mode: 'E2E',
    tx: mode,
    logSyncInterval: LOG_SYNC,
    // One `master offset` line per Sync: free_running prints once per frequency-estimation interval (whose
    // least is 1 s) and summary interval (linuxptp clock.c clock_no_adjust).
    slaveArgs: [
      '--tx_timestamp_timeout=50',
      `--summary_interval=${LOG_SYNC}`,
      `--freq_est_interval=${LOG_SYNC}`,
    ],
  });
  return { mode, net, gm: rig.gm, slave: rig.startSlave() };
}

const quantile = (sorted: number[], q: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

function figures(rig: Rig, fromChar: number): Record<string, string> {
  const lines = [
    ...rig.slave
      .output()
      .slice(fromChar)
      .matchAll(/master offset\s+(-?\d+) s\d freq\s+[-+]?\d+ path delay\s+(-?\d+)/g),
  ];
  // With free_running ptp4l's servo never locks (s0 throughout): every sample counts.
  const off = lines.map((m) => Number(m[1]) / 1000);
  const delay = lines.map((m) => Number(m[2]) / 1000).sort((a, b) => a - b);
  const sorted = [...off].sort((a, b) => a - b);
  const abs = off.map(Math.abs).sort((a, b) => a - b);
  const mean = off.reduce((a, b) => a + b, 0) / (off.length || 1);
  const stopped = txStampCounts(rig.gm.output());
  const us = (v: number): string => `${v.toFixed(1)} µs`;
  return {
    samples: String(off.length),
    'offset median': us(quantile(sorted, 0.5)),
    'offset mean (bias)': us(mean),
    'offset p1 … p99': `${us(quantile(sorted, 0.01))} … ${us(quantile(sorted, 0.99))}`,
    '|offset| median': us(quantile(abs, 0.5)),
    '|offset| p99': us(quantile(abs, 0.99)),
    'path delay median': us(quantile(delay, 0.5)),
    'kernel stamps / fallbacks': stopped ? `${stopped.kernel} / ${stopped.fallbacks}` : 'n/a',
  };
}

const rigs: Rig[] = [];
try {
  const load0 = loadavg();
  rigs.push(startRig('kernel'), startRig('userspace'));
  const died = (p: RunningProcess, what: string): Promise<never> =>
    p.exited.then(() => {
      throw new Error(`${what} exited:\n${p.output().slice(-2000)}`);
    });
  for (const r of rigs) {
    const dead = Promise.race([died(r.gm, 'timesvc'), died(r.slave, 'ptp4l')]);
    dead.catch(() => undefined);
    await Promise.race([dead, r.gm.waitForOutput(new RegExp(`"txTimestamps":"${r.mode}"`), 60_000)]);
    await Promise.race([
      dead,
      r.slave.waitForOutput(/master offset\s+-?\d+ s\d freq\s+[-+]?\d+ path delay/, 60_000),
    ]);
  }
  // A few seconds more: the path delay's first Delay_Req exchanges are behind.
  await new Promise((r) => setTimeout(r, 5000));
  const started = rigs.map((r) => r.slave.output().length);
  process.stdout.write(
    `timesvc-ptp: ${MINUTES} min of E2E Syncs at 2^${LOG_SYNC} s, kernel and userspace transmit stamps side by side ` +
      `(load average ${load0.map((l) => l.toFixed(2)).join(' ')})\n`,
  );
  const end = Date.now() + MINUTES * 60_000;
  while (Date.now() < end) await new Promise((r) => setTimeout(r, Math.min(30_000, end - Date.now())));
  const load1 = loadavg();
  for (const r of rigs) await r.gm.stop();
  const table = rigs.map((r, i) => ({ r, f: figures(r, started[i]!) }));
  const keys = Object.keys(table[0]!.f);
  const w = Math.max(...keys.map((k) => k.length));
  process.stdout.write(`${''.padEnd(w)}  ${'kernel TX stamp'.padEnd(24)}userspace (anchor)\n`);
  for (const k of keys)
    process.stdout.write(`${k.padEnd(w)}  ${table[0]!.f[k]!.padEnd(24)}${table[1]!.f[k]!}\n`);
  process.stdout.write(
    `load average at the end ${load1.map((l) => l.toFixed(2)).join(' ')}; goal: kernel median bias < 10 µs\n`,
  );
} finally {
  for (const r of rigs) {
    await r.slave.stop().catch(() => undefined);
    await r.gm.stop().catch(() => undefined);
    r.net.remove();
  }
  dir.remove();
}
