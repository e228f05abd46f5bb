import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  requireTool,
  startProcess,
  tempDir,
  waitFor,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import { timesvcBin } from '../helpers/cli.ts';
import { createNetnsPair } from '../helpers/netns.ts';
import { startSerialReceiver } from '../helpers/nmea-receiver.ts';
import { field, pmcAsync, startPtp4l, writePtpConfig } from '../helpers/ptp.ts';

/**
 * clockClass from the clock's truth, as a PTP slave sees it (docs/ptp.md "Clock quality"): timesvc with a
 * serial GPS receiver (NMEA on a pty, a PPS assert file) announces on a veth pair to ptp4l (`-S -s`,
 * `--free_running=1`). Locked to the GPSDO: class 6, time and frequency traceable. The pty closed (the
 * receiver pulled out): HOLDOVER, class 7, frequency traceable only. The holdover timeout (12 s here): FAULT,
 * the free-running class 248, nothing traceable, time source internal oscillator. Each read through pmc.
 */
test(
  'ptp4l through pmc: GPSDO locked → class 6, pty closed → 7, holdover expired → 248',
  { timeout: 240_000 },
  async () => {
    const ip = requireTool('ip');
    const dir = tempDir('timesvc-ptp-class-');
    const net = createNetnsPair();
    const procs: RunningProcess[] = [];
    const receiver = await startSerialReceiver(dir.path);
    try {
      const cfg = join(dir.path, 'timesvc.yaml');
      writePtpConfig(cfg, net.ifA, {
        ntp: ['  discipline:', '    holdover_timeout: 12s'],
        gpsdoType: 'serialpps',
        gpsdo: [
          `  serial_device: ${receiver.device}`,
          '  serial_baud: 9600',
          `  pps_device: ${receiver.ppsFile}`,
          // No NTP peer to fall back to: HOLDOVER lasts until holdover_timeout.
          '  fallback_after: 1h',
        ],
        ptp: ['  log_announce_interval: 0', '  log_sync_interval: 0'],
      });
      const gm = startProcess(ip, ['netns', 'exec', net.a, process.execPath, timesvcBin, '--config', cfg]);
      procs.push(gm);
      await gm.waitForOutput(/PTP announcer/, 30_000);
      const sock = join(dir.path, 'ptp4l.sock');
      const slave = startPtp4l(net.b, net.ifB, sock, ['-s', '-E']);
      procs.push(slave);
      const at = { ns: net.b, sock, client: join(dir.path, 'pmc.sock') };
      // pmc runs asynchronously: the simulated receiver's PPS edges and sentences are timers of this process.
      const classes: string[] = [];
      const seen = async (): Promise<{ cls: string | undefined; tp: string }> => {
        const out = await pmcAsync(at, 'GET PARENT_DATA_SET', 'GET TIME_PROPERTIES_DATA_SET');
        const cls = field(out, 'gm.ClockClass');
        if (classes.at(-1) !== cls) classes.push(cls ?? '?');
        return { cls, tp: out };
      };
      const waitClass = async (cls: string, what: string): Promise<string> =>
        (
          await waitFor(
            async () => {
              const s = await seen();
              return s.cls === cls ? s : undefined;
            },
            {
              timeoutMs: 90_000,
              intervalMs: 1000,
              what: () => `${what} (classes seen: ${classes.join(' → ')})`,
            },
          )
        ).tp;

      const locked = await waitClass('6', 'class 6: locked to the serial GPSDO');
      assert.deepEqual(
        [field(locked, 'timeTraceable'), field(locked, 'frequencyTraceable'), field(locked, 'timeSource')],
        ['1', '1', '0x20'],
        locked,
      );
      await receiver.unplug();
      const holdover = await waitClass('7', 'class 7: holdover after the pty closed');
      assert.deepEqual(
        [field(holdover, 'timeTraceable'), field(holdover, 'frequencyTraceable')],
        ['0', '1'],
        holdover,
      );
      const free = await waitClass('248', 'class 248: holdover expired');
      assert.deepEqual(
        [field(free, 'timeTraceable'), field(free, 'frequencyTraceable'), field(free, 'timeSource')],
        ['0', '0', '0xa0'],
        free,
      );
      // The announce with class 248 can be read before this process has read the line logged with it.
      await gm.waitForOutput(/"to":"FAULT","reason":"holdover expired"/, 10_000);
    } finally {
      for (const p of procs.reverse()) await p.stop().catch(() => undefined);
      await receiver.stop();
      net.remove();
      dir.remove();
    }
  },
);
