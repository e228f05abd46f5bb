import { join } from 'node:path';
import { requireTool, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';
import { timesvcBin } from './cli.ts';
import type { NetnsPair } from './netns.ts';
import { startPtp4l, writePtpConfig } from './ptp.ts';

/**
 * A timesvc grandmaster in `net.a` (dummy GPSDO at offset 0: served clock = host clock) and a linuxptp ptp4l
 * slave in `net.b` (slave only, `-S` software timestamps, `--free_running=1`: it never touches a clock), for
 * the transmit-timestamp test and bench/timesvc-ptp. `tx: 'userspace'` sets TIMESVC_PTP_TX_TIMESTAMPS, the
 * bench-only switch to the reading before send() (docs/ptp-timestamps.md).
 */
export function startTxRig(o: {
  net: NetnsPair;
  dir: string;
  name: string;
  mode: 'E2E' | 'P2P';
  tx: 'kernel' | 'userspace';
  logSyncInterval: number;
  /** Extra ptp4l options. */
  slaveArgs?: string[];
}): { gm: RunningProcess; startSlave: () => RunningProcess } {
  const ip = requireTool('ip');
  const cfg = join(o.dir, `timesvc-${o.name}.yaml`);
  writePtpConfig(cfg, o.net.ifA, {
    ptp: [
      '  log_announce_interval: 0',
      `  log_sync_interval: ${o.logSyncInterval}`,
      `  delay_mechanism: ${o.mode}`,
    ],
  });
  const gm = startProcess(ip, ['netns', 'exec', o.net.a, process.execPath, timesvcBin, '--config', cfg], {
    env: o.tx === 'userspace' ? { TIMESVC_PTP_TX_TIMESTAMPS: 'userspace' } : {},
  });
  const startSlave = (): RunningProcess =>
    startPtp4l(o.net.b, o.net.ifB, join(o.dir, `ptp4l-${o.name}.sock`), [
      '-s',
      o.mode === 'E2E' ? '-E' : '-P',
      ...(o.slaveArgs ?? []),
    ]);
  return { gm, startSlave };
}

/** The announcer's transmit-stamp counts from its "PTP announcer stopped" log line, if it logged one. */
export function txStampCounts(log: string): { kernel: number; fallbacks: number } | undefined {
  const m = /"txKernelStamps":(\d+),"txStampFallbacks":(\d+)/.exec(log);
  return m ? { kernel: Number(m[1]), fallbacks: Number(m[2]) } : undefined;
}
