import { closeSync, existsSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { requireTool, startProcess, waitFor, type RunningProcess } from '@broadcast-ops/core/testing';
import { buildNmea } from '../../src/protocol/nmea.ts';
import { formatPpsAssert } from '../../src/protocol/pps.ts';

/**
 * One second of a u-blox-like receiver: RMC, GGA, GSA and a GSV cycle naming the second `unixS` (the
 * sentence set of a NEO-M8T at 1 Hz; docs/gpsdo.md "NMEA 0183").
 */
export function nmeaSecond(unixS: number): string {
  const iso = new Date(unixS * 1000).toISOString();
  const t = iso.slice(11, 19).replace(/:/g, '') + '.00';
  const date = iso.slice(8, 10) + iso.slice(5, 7) + iso.slice(2, 4);
  return [
    `GPRMC,${t},A,5128.6740,N,00000.0900,W,0.01,,${date},,,A`,
    `GPGGA,${t},5128.6740,N,00000.0900,W,1,07,0.92,45.3,M,47.0,M,,`,
    'GPGSA,A,3,02,05,07,09,13,15,18,,,,,,1.61,0.92,1.32',
    'GPGSV,2,1,08,02,61,297,44,05,52,075,46,07,40,126,41,09,33,236,39',
    'GPGSV,2,2,08,13,25,018,36,15,22,119,40,18,14,307,33,20,06,243,',
  ]
    .map((b) => buildNmea(b) + '\r\n')
    .join('');
}

/** The `gpsdo` config of a serialpps receiver on pty `device` with the PPS fixture `ppsFile`. */
export function serialPpsConfig(device: string, ppsFile: string) {
  return {
    enabled: true,
    type: 'serialpps',
    serial_device: device,
    serial_baud: 9600,
    pps_device: ppsFile,
    fallback_after: '10s',
  } as const;
}

/**
 * A serial GPS receiver for tests: a socat pty pair (`device` is timesvc's serial_device), u-blox-like
 * sentences each second and a sysfs-style PPS assert file (`ppsFile`). At each second edge (+5 ms) the
 * "kernel" records the assert edge of that second (host clock 500 ns behind the receiver), and 120 ms later
 * the receiver sends the sentences naming that second. `unplug()` stops the PPS and removes the pty pair
 * (a receiver pulled out); `plug()` brings it back on the same paths.
 */
export interface SerialReceiver {
  device: string;
  ppsFile: string;
  unplug(): Promise<void>;
  plug(): Promise<void>;
  stop(): Promise<void>;
}

/** A second whose edge this process would record later than this past the second is skipped (ms). */
const LATE_EDGE_MS = 300;
/**
 * Sentences later than this after their edge are not sent (ms): the model pairs a sentence up to 900 ms
 * after its edge (domain/gpsdo.ts pairWindowMs); a later one could be taken for the next edge's label.
 */
const LATE_SENTENCE_MS = 700;

export async function startSerialReceiver(
  dir: string,
  o: {
    /** ns past the second of the recorded assert edge (the host clock behind the receiver); default 500. */
    assertNsec?: number;
    /** The second the sentences name for the edge of `sec` (a receiver labelling late names an earlier one). */
    label?: (sec: number) => number;
  } = {},
): Promise<SerialReceiver> {
  const socat = requireTool('socat');
  const ttyA = join(dir, 'ttyA'); // the receiver's side (written here)
  const device = join(dir, 'ttyB');
  const ppsFile = join(dir, 'pps0-assert');
  writeFileSync(ppsFile, '0.000000000#0\n');
  let pty: RunningProcess | undefined;
  let timer: NodeJS.Timeout | undefined;
  let fd: number | undefined;
  let seq = 0;
  const schedule = (): void => {
    timer = setTimeout(
      () => {
        const sec = Math.floor(Date.now() / 1000);
        // A timer this process ran late (a loaded machine) must not make the receiver lie: an edge recorded
        // long after its second, or its sentences after the next edge, would be paired a second off (a
        // label jump no real receiver makes). Such a second is left out: no pulse, no sentences.
        if (Date.now() - sec * 1000 > LATE_EDGE_MS) {
          schedule();
          return;
        }
        seq++;
        writeFileSync(ppsFile, formatPpsAssert({ sec, nsec: o.assertNsec ?? 500, sequence: seq }));
        timer = setTimeout(() => {
          try {
            if (fd !== undefined && Date.now() - sec * 1000 < LATE_SENTENCE_MS) {
              writeSync(fd, nmeaSecond(o.label ? o.label(sec) : sec));
            }
          } catch {
            /* pty gone */
          }
          schedule();
        }, 120);
      },
      1005 - (Date.now() % 1000),
    );
  };
  const plug = async (): Promise<void> => {
    pty = startProcess(socat, ['-d', '-d', `pty,raw,echo=0,link=${ttyA}`, `pty,raw,echo=0,link=${device}`]);
    await waitFor(() => existsSync(ttyA) && existsSync(device), { timeoutMs: 10_000, what: 'socat ptys' });
    fd = openSync(ttyA, 'w');
    schedule();
  };
  const unplug = async (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    await pty?.stop();
    pty = undefined;
    if (fd !== undefined) closeSync(fd);
    fd = undefined;
  };
  await plug();
  return { device, ppsFile, unplug, plug, stop: unplug };
}
